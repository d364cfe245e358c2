//! Temporary queues over the wire: created by a call, bound to the Consume streams their
//! owner opens on them.
//!
//! **The binding.** A temporary queue belongs to an owner, a consumer name; only the owner
//! receives from it. gRPC gives a server no hook for "this client's HTTP/2 connection
//! ended", but it does end every stream of a connection that goes — a crashed process, a
//! dropped socket — and every stream its client closes. So the queue is bound to the
//! Consume streams its owner opens on it: when one of them ends, the owner is taken to be
//! gone and [`Broker::disconnect`] deletes every temporary queue of that owner. A client
//! that wants its queue to last holds one such stream open for as long as it uses the
//! queue (the SDK's consumer does: its settle stream lives as long as the consumer).
//!
//! The broker's idle timeout is the backstop: for an owner that never opens a stream (an
//! HTTP client, which has no connection that outlives a call), for one that dies between
//! creating the queue and opening its stream, and for a connection that hangs half-open.
//! Any operation on the queue (a receive, a publish, a describe) restarts its clock.

use std::time::Duration;

use ferry_broker::{Broker, BrokerError, Name};

use crate::auth::{Action, Caller, Gate, Refusal};

/// The idle timeout of a temporary queue created without one.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The name a permission check sees for a temporary queue that does not exist yet: the
/// broker picks the name (`tmp.` and a ULID), so a grant covers creating temporary queues
/// when it covers consuming from names of that shape (`consume:tmp.*`, `consume:*`, ...).
const NAME_FOR_PERMISSION: &str = "tmp.00000000000000000000000000";

/// Whether `who` may create a temporary queue: consuming from it is what it is for.
pub(crate) fn allow_create(gate: &Gate, who: Caller) -> Result<(), Refusal> {
    gate.allow(who, Action::Consume, NAME_FOR_PERMISSION)
}

/// Creates a temporary queue of `owner`; returns its name and the idle timeout in force.
pub(crate) async fn create(
    broker: &Broker,
    owner: &str,
    idle_timeout_ms: Option<u64>,
) -> Result<(Name, Duration), BrokerError> {
    let idle = idle_timeout_ms.map_or(DEFAULT_IDLE_TIMEOUT, Duration::from_millis);
    let name = broker.create_temporary_queue(owner, idle).await?;
    Ok((name, idle))
}

/// A Consume stream on `queue` opened by `consumer` has ended: when `queue` is a temporary
/// queue and `consumer` its owner, the owner is gone and its temporary queues go too.
/// Failures are logged: the idle timeout deletes what this could not.
pub(crate) async fn stream_ended(broker: &Broker, queue: &str, consumer: &str) {
    // Not temporary, not this consumer's, or already gone: nothing to do.
    let Ok(Some(owner)) = broker.temporary_queue_owner(queue) else {
        return;
    };
    if owner != consumer {
        return;
    }
    match broker.disconnect(&owner).await {
        Ok(deleted) => {
            tracing::debug!(%owner, deleted, "temporary queues of an ended stream deleted");
        }
        Err(error) => {
            tracing::warn!(%owner, %error, "deleting temporary queues failed; their idle timeout will");
        }
    }
}
