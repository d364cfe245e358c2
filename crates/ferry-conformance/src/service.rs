//! Engines outside this process (NATS, RabbitMQ, Redis, PostgreSQL): find them, or skip
//! loudly — and under `CI=true`, where the machine must have them, fail instead.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The URL of the engine `name`: `$env` if set, else `default_url`. `None` (after a loud
/// message) when nothing answers at `addr` outside CI; a panic when that happens under
/// `CI=true`.
pub fn url_or_skip(name: &str, env: &str, default_url: &str, addr: &str) -> Option<String> {
    let url = std::env::var(env).unwrap_or_else(|_| default_url.to_owned());
    let answers = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if answers {
        return Some(url);
    }
    let message = format!(
        "{name} does not answer at {addr}: start it (`.ci/run` shows how) or point {env} at one"
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}; under CI=true every service must be up");
    }
    eprintln!("\n!!! SKIPPED: {message} !!!\n");
    None
}
