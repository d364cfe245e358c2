//! `ferry://host:port` — a Ferry server (`ferry serve`) over gRPC, through `ferry-client`.
//! Every feature is the broker's own, so every feature is native.

mod capabilities;
#[cfg(feature = "server")]
mod consume;
#[cfg(feature = "server")]
mod engine;
#[cfg(feature = "server")]
mod publish_streams;

pub use capabilities::capabilities;
#[cfg(feature = "server")]
pub use engine::Remote;
