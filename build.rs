//! Compiles `proto/registry.proto` (operator-registry's `api.Registry`) with protox, a pure-Rust
//! protobuf compiler, so building olm-rs needs no system `protoc`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/registry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;

    // The encoded descriptor set feeds gRPC server reflection (`grpcurl list` works like with opm).
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("registry_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;

    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
