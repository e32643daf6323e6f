fn main() {
    let fds = protox::compile(["toolgate/v1/toolgate.proto"], ["../../proto"]).expect("the proto compiles");
    tonic_prost_build::configure().build_client(false).compile_fds(fds).expect("the code is generated");
    println!("cargo:rerun-if-changed=../../proto");
}
