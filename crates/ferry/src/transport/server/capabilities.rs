//! What a Ferry server offers: the embedded broker's features, natively, over gRPC.

use crate::capability::Capabilities;

pub fn capabilities() -> Capabilities {
    // The server is the same broker behind a socket: one table, so the two cannot drift.
    Capabilities {
        transport: "ferry server",
        ..crate::transport::embedded::capabilities()
    }
}
