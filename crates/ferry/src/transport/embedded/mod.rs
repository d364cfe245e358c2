//! `embedded:./dir` — the Ferry broker in this process. Every feature is native.

mod capabilities;
#[cfg(feature = "embedded")]
mod engine;

pub use capabilities::capabilities;
#[cfg(feature = "embedded")]
pub use engine::Embedded;
