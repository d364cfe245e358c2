//! `redis://host:port/db` — Redis Streams. A queue is a stream read by one consumer group;
//! a topic is a stream with one consumer group per subscription. What streams lack
//! (delays, dead letters, deduplication, TTL, a length limit) is done by Lua scripts that
//! run atomically on the server, so several SDK processes can share one queue safely.

mod capabilities;
#[cfg(feature = "redis")]
mod consume;
#[cfg(feature = "redis")]
mod engine;
#[cfg(feature = "redis")]
mod scripts;
#[cfg(feature = "redis")]
mod settle;

pub use capabilities::capabilities;
#[cfg(feature = "redis")]
pub use engine::RedisStreams;
