//! The generated protobuf and gRPC code of `proto/toolgate/v1/toolgate.proto`,
//! and its encoded descriptor set for server reflection. A leaf: the
//! generated code uses only `codec`.

pub(crate) mod codec;

#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
pub mod v1 {
    tonic::include_proto!("toolgate.v1");
}

/// The encoded `FileDescriptorSet` of the contract, served by reflection.
pub(crate) const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/toolgate_descriptor.bin"));

/// The fully qualified gRPC service name, as health checks name it.
pub const SERVICE_NAME: &str = "toolgate.v1.ToolGatewayService";
