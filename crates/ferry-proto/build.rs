//! Compiles `proto/ferry/v1/ferry.proto` with protox (pure Rust: no system `protoc`) and
//! generates the messages (prost) and the gRPC clients and servers (tonic).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/ferry/v1/ferry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        // Transport-neutral stubs: the server and the client crates pick their transports.
        .build_transport(false)
        // Payloads and keys as `bytes::Bytes`: the broker keeps them that way, so a publish
        // or a delivery passes them on without a copy.
        .bytes(".")
        // A published message's headers in the broker's own map type (a proto `map` is
        // the same on the wire whatever the Rust collection): the server hands them to
        // the broker as they were decoded, with no per-message rebuild or hasher set-up.
        .btree_map(".ferry.v1.OutgoingMessage.headers")
        .compile_fds(descriptors)?;
    Ok(())
}
