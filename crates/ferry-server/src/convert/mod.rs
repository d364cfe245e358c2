//! Between the wire (`ferry.v1`) and the broker's types. Each direction is total for what
//! the broker produces; from the wire, anything the broker would not accept as the client
//! meant it is a [`ConvertError`] naming the field, and nothing reaches the broker.

mod message;
mod spec;

use std::time::Duration;

pub use message::*;
pub use spec::*;

/// A request the server cannot turn into a broker call.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("{field}: unknown value {value} (a newer client? this server does not know it)")]
    UnknownEnum { field: &'static str, value: i32 },
    #[error("{field} is missing: {why}")]
    Missing {
        field: &'static str,
        why: &'static str,
    },
    #[error("{field}: {value} is out of range")]
    OutOfRange { field: &'static str, value: String },
    #[error("{what} cannot both be set")]
    Conflict { what: &'static str },
    #[error("{what} is not supported by this server")]
    Unsupported { what: &'static str },
    #[error(transparent)]
    Broker(#[from] ferry_broker::BrokerError),
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
