//! What a Ferry server offers: the embedded broker's features, natively, over gRPC.

use crate::capability::{Capabilities, Feature, Support};

pub fn capabilities() -> Capabilities {
    // The server is the same broker behind a socket: one table, so the two cannot drift;
    // only how a temporary queue is bound to its process differs.
    let mut table = crate::transport::embedded::capabilities().table;
    for (feature, support) in &mut table {
        if *feature == Feature::TemporaryQueues {
            *support = Support::Native(
                "`tmp.` queues only their owner consumes, bound to the owner's consume stream: deleted when it ends (the process closed or died), or after an idle timeout",
            );
        }
    }
    Capabilities {
        transport: "ferry server",
        table,
    }
}
