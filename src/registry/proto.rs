//! Generated code for `api.Registry` (proto/registry.proto, compiled by build.rs).

#![allow(clippy::all, clippy::pedantic, missing_docs)]

tonic::include_proto!("api");

/// Encoded descriptor set of `registry.proto`, served through gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/registry_descriptor.bin"));
