//! The Pub/Sub endpoint's settings. It speaks Pub/Sub's gRPC API without authentication,
//! as Google's emulator does (the clients send no credentials to an emulator host), so:
//! it is served only when asked for — an address from any layer, or `pubsub.enabled =
//! true` for the default one — never beside `[tls]` or `[auth]`, where it would be an open
//! door beside protected listeners, and only on the loopback interface.

use std::net::SocketAddr;

use anyhow::bail;

use super::resolve::layer;
use super::{Env, Flags, Setting, Source, file};

pub const DEFAULT_PUBSUB: &str = ferry_pubsub::DEFAULT_ADDR;

/// The endpoint's address and whether it is served.
pub fn resolve(
    env: Env,
    flags: &Flags,
    file: &file::PubSub,
    guarded: bool,
) -> anyhow::Result<(Setting<SocketAddr>, Setting<bool>)> {
    let addr = layer(
        env,
        "FERRY_PUBSUB_ADDR",
        flags.pubsub.map(|a| (a, "--pubsub-addr")),
        file.addr,
    )?;
    let enabled = layer(env, "FERRY_PUBSUB_ENABLED", None, file.enabled)?;
    let enabled = enabled.unwrap_or(Setting {
        value: addr.is_some(),
        source: addr.as_ref().map_or(Source::Default, |a| a.source),
    });
    let addr = Setting::or_default(addr, DEFAULT_PUBSUB.parse().expect("a socket address"));
    if enabled.value && guarded {
        bail!(
            "the Pub/Sub endpoint is asked for (from {}) beside [tls] or [auth], but it has no \
             authentication (as Google's emulator has none): it would be open beside protected \
             listeners; leave it off",
            enabled.source
        );
    }
    if enabled.value && !addr.value.ip().is_loopback() {
        bail!(
            "pubsub.addr = {} (from {}) is beyond the loopback interface, and the Pub/Sub \
             endpoint is open to whoever reaches it: listen on 127.0.0.1",
            addr.value,
            addr.source
        );
    }
    Ok((addr, enabled))
}
