//! Ferry's public contract, `ferry.v1`: the protobuf messages and the gRPC services
//! (`Admin`, `Publisher`, `Consumer`, `DeadLetters`, `Groups`) generated from
//! `proto/ferry/v1/ferry.proto`, which is the source of truth — other languages generate
//! their stubs from that file.

/// The `ferry.v1` package.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("ferry.v1");
}

/// The most deliveries one receive (`Consumer.Receive`, or the HTTP API's receive) returns.
/// A larger `max` is refused — INVALID_ARGUMENT, HTTP 400 `out_of_range` — rather than cut,
/// so a caller never waits for messages it was never going to get in one reply. It bounds
/// one reply's size, not a consumer's rate: receive again for more.
pub const MAX_RECEIVE: u32 = 1000;

/// The `.proto` source, for tools that serve or print it.
pub const PROTO: &str = include_str!("../proto/ferry/v1/ferry.proto");
