//! Ferry's public contract, `ferry.v1`: the protobuf messages and the gRPC services
//! (`Admin`, `Publisher`, `Consumer`, `DeadLetters`, `Groups`) generated from
//! `proto/ferry/v1/ferry.proto`, which is the source of truth — other languages generate
//! their stubs from that file.

/// The `ferry.v1` package.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("ferry.v1");
}

/// The `.proto` source, for tools that serve or print it.
pub const PROTO: &str = include_str!("../proto/ferry/v1/ferry.proto");
