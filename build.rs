//! Compiles the contract in `proto/` to Rust without a system `protoc`
//! (protox parses the .proto files), and writes the descriptor set that
//! server reflection serves.

use std::{env, fs, path::PathBuf};

use prost::Message;

#[allow(clippy::disallowed_methods)] // cargo passes OUT_DIR to build scripts in the environment
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["toolgate/v1/toolgate.proto"], ["proto"])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("toolgate_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path("crate::proto::codec::ProtoCodec")
        .compile_fds(fds)?;
    Ok(())
}
