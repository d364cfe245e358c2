//! Engines outside this process (PostgreSQL, Redis, NATS, RabbitMQ): the URL to reach one,
//! from its variable or a default, when something answers at the URL's own host and port —
//! else a skip, or under `CI=true` a failure ([`crate::ci`]).
//!
//! The probe is a plain TCP connect: enough to tell "no engine here" from "engine here",
//! and it leaves the real handshake (and its errors) to the test.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long the probe waits for an engine to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How to start the engines the tests use, from the workspace root.
const HOW_TO_START: &str = "bash -c '. scripts/services.sh && ensure_machine_services'";

/// The URL of `service` (a name for messages, e.g. `"PostgreSQL"`): `$env` if set, else
/// `default_url`, when something answers at its host and port. Otherwise `None` after a loud
/// message; under `CI=true`, a panic that says which service is missing and how to start it.
pub fn url_or_skip(service: &str, env: &str, default_url: &str) -> Option<String> {
    let url = std::env::var(env).unwrap_or_else(|_| default_url.to_owned());
    let Some((host, port)) = host_port(&url) else {
        panic!("{env}={url} is not a URL with a host (scheme://[user@]host[:port][/path])");
    };
    if answers(&host, port) {
        return Some(url);
    }
    crate::ci::skip_or_fail(&missing_message(service, env, &host, port));
    None
}

/// What a test says when `service` does not answer at `host:port`.
pub fn missing_message(service: &str, env: &str, host: &str, port: u16) -> String {
    format!(
        "{service} does not answer at {host}:{port}: start it (`{HOW_TO_START}` starts every \
         engine the tests use) or point {env} at one"
    )
}

/// Whether something accepts a TCP connection at `host:port` (any of its addresses).
pub fn answers(host: &str, port: u16) -> bool {
    let Ok(addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|addr| TcpStream::connect_timeout(&addr, PROBE_TIMEOUT).is_ok())
}

/// The host and port a URL such as `scheme://user:password@host:port/path?query` points at,
/// the port defaulting to the scheme's own (`postgres` 5432, `redis` 6379, `nats` 4222,
/// `amqp` 5672, ...). IPv6 hosts come without their brackets. `None` without a host, or
/// with neither a port nor a known scheme.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if let Some(bracketed) = host_and_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match host_and_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_and_port, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port(scheme?)?,
    };
    Some((host.to_owned(), port))
}

/// The port an engine listens on when its URL names none.
fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "postgres" | "postgresql" => Some(5432),
        "redis" | "rediss" => Some(6379),
        "nats" | "tls" => Some(4222),
        "amqp" => Some(5672),
        "amqps" => Some(5671),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    fn hp(url: &str) -> Option<(String, u16)> {
        host_port(url)
    }

    fn at(host: &str, port: u16) -> Option<(String, u16)> {
        Some((host.to_owned(), port))
    }

    #[test]
    fn the_host_and_port_come_from_the_url_itself() {
        assert_eq!(
            hp("postgres://postgres@127.0.0.1:5432/test"),
            at("127.0.0.1", 5432)
        );
        assert_eq!(
            hp("redis://cache.internal:6380/0"),
            at("cache.internal", 6380)
        );
        assert_eq!(hp("nats://10.1.2.3:4223"), at("10.1.2.3", 4223));
        assert_eq!(hp("amqp://guest:guest@rabbit:5673/%2f"), at("rabbit", 5673));
    }

    #[test]
    fn user_and_password_are_not_the_host() {
        assert_eq!(hp("redis://:secret@db:6379/0"), at("db", 6379));
        assert_eq!(hp("amqp://u:p@ss@mq:5672/%2f"), at("mq", 5672));
        assert_eq!(hp("postgres://u@pg?sslmode=disable"), at("pg", 5432));
    }

    #[test]
    fn a_url_without_a_port_uses_its_schemes_own() {
        assert_eq!(hp("postgres://postgres@db/test"), at("db", 5432));
        assert_eq!(hp("postgresql://db"), at("db", 5432));
        assert_eq!(hp("redis://db/0"), at("db", 6379));
        assert_eq!(hp("nats://db"), at("db", 4222));
        assert_eq!(hp("amqp://guest:guest@db/%2f"), at("db", 5672));
        assert_eq!(hp("amqps://db"), at("db", 5671));
    }

    #[test]
    fn ipv6_hosts_lose_their_brackets() {
        assert_eq!(hp("redis://[::1]:6379/0"), at("::1", 6379));
        assert_eq!(hp("nats://[::1]"), at("::1", 4222));
    }

    #[test]
    fn a_bare_host_and_port_is_enough() {
        assert_eq!(hp("127.0.0.1:4222"), at("127.0.0.1", 4222));
    }

    #[test]
    fn urls_without_a_host_or_a_port_are_refused() {
        assert_eq!(hp("redis:///0"), None);
        assert_eq!(hp("postgres://u@:5432/x"), None);
        assert_eq!(hp("unknown://host"), None);
        assert_eq!(hp("redis://db:notaport/0"), None);
        assert_eq!(hp("db"), None);
    }

    #[test]
    fn the_probe_connects_to_the_given_host() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(answers("127.0.0.1", port));
        drop(listener);
        assert!(!answers("127.0.0.1", port));
        assert!(!answers("host.invalid", port));
    }

    #[test]
    fn the_missing_message_says_which_service_and_how_to_start_it() {
        let message = missing_message("Redis", "FERRY_REDIS_URL", "db", 6379);
        assert!(
            message.starts_with("Redis does not answer at db:6379"),
            "{message}"
        );
        assert!(message.contains("scripts/services.sh"), "{message}");
        assert!(message.contains("FERRY_REDIS_URL"), "{message}");
    }
}
