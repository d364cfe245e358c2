//! Between the wire (`ferry.v1`) and the broker's types. Each direction is total for what
//! the broker produces; from the wire, anything the broker would not accept as the client
//! meant it is a [`ConvertError`] naming the field, and nothing reaches the broker.

mod message;
mod parked;
mod spec;

use std::time::Duration;

pub use message::*;
pub use parked::*;
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
    /// Answered apart (gRPC `UNIMPLEMENTED`, HTTP 501) for a request valid in `ferry.v1`
    /// that this server does not carry out. Every conversion is supported at present, but
    /// the answers for one are kept, so that adding one is a one-line change.
    #[allow(dead_code)]
    #[error("{what} is not supported by this server")]
    Unsupported { what: &'static str },
    #[error(transparent)]
    Broker(#[from] ferry_broker::BrokerError),
}

/// The longest a receive (gRPC's unary one, or HTTP's) waits for messages; longer asks are
/// cut to it, so that a server that is stopping, which lets calls in progress finish, never
/// waits on a poll for long. The consume stream polls in steps of its own.
pub const MAX_WAIT: Duration = Duration::from_secs(20);

/// How long a receive waits: `wait_ms` as asked, cut to [`MAX_WAIT`]. The wait is cut,
/// never refused: it only bounds how long an empty poll lasts.
pub fn receive_wait(wait_ms: Option<u64>) -> Option<Duration> {
    opt_ms(wait_ms).map(|w| w.min(MAX_WAIT))
}

/// How many deliveries a receive asks for: `None` (unset) takes 1; 0 and more than
/// [`ferry_proto::MAX_RECEIVE`] are refused.
pub fn receive_max(max: Option<u32>) -> Result<usize, ConvertError> {
    match max {
        None => Ok(1),
        Some(n @ 1..=ferry_proto::MAX_RECEIVE) => Ok(n as usize),
        Some(n) => Err(ConvertError::OutOfRange {
            field: "max",
            value: format!(
                "{n} (a receive returns 1 to {} deliveries; receive again for more)",
                ferry_proto::MAX_RECEIVE
            ),
        }),
    }
}

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
