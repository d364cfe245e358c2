//! The Pub/Sub endpoint's settings. It speaks Pub/Sub's gRPC API without authentication,
//! as Google's emulator does (the clients send no credentials to an emulator host), so it
//! is served on the loopback interface only, and never beside `[tls]` or `[auth]`, where
//! it would be an open door beside protected listeners. It is on by default, at the
//! emulator's own address, so that `PUBSUB_EMULATOR_HOST=127.0.0.1:8085` reaches a plain
//! `ferry serve` — except beside `[tls]` or `[auth]`, where the default is off; asking for
//! it there (an address from any layer, or `pubsub.enabled = true`) is refused.

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
    let no_pubsub = flags.no_pubsub.then_some((false, "--no-pubsub"));
    let enabled = layer(env, "FERRY_PUBSUB_ENABLED", no_pubsub, file.enabled)?;
    // An address asks for the endpoint as `enabled = true` does, so beside [tls] or
    // [auth] it is refused too rather than quietly left off; only the default gives way.
    let enabled = enabled.unwrap_or(match &addr {
        Some(addr) => Setting {
            value: true,
            source: addr.source,
        },
        None => Setting {
            value: !guarded,
            source: Source::Default,
        },
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
