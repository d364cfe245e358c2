//! The `kafka://` URL: `kafka://host:port[,host:port…][?partitions=N]`.
//!
//! The hosts are the bootstrap servers. `partitions` is how many partitions a queue's topic
//! is created with (8 by default): the most consumers of one queue that get messages at
//! once. A query parameter this transport does not know is refused rather than ignored.

use crate::error::{Error, Result};

/// Partitions of a queue's topic unless the URL says otherwise.
pub(super) const DEFAULT_PARTITIONS: i32 = 8;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Endpoint {
    /// `host:port,host:port`, as librdkafka's `bootstrap.servers` takes it.
    pub bootstrap: String,
    pub partitions: i32,
}

pub(super) fn parse(url: &str) -> Result<Endpoint> {
    let bad = |problem: String| Error::BadUrl {
        url: url.to_owned(),
        problem,
    };
    let rest = url
        .strip_prefix("kafka://")
        .ok_or_else(|| bad("expected kafka://host:port[,host:port]".into()))?;
    let (hosts, query) = rest.split_once('?').unwrap_or((rest, ""));
    let hosts = hosts.strip_suffix('/').unwrap_or(hosts);
    let mut servers = Vec::new();
    for server in hosts.split(',') {
        let (host, port) = server
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("`{server}` has no port, e.g. localhost:9092")))?;
        if host.is_empty() || host.contains(['/', '@']) {
            return Err(bad(format!("`{server}` is not host:port")));
        }
        port.parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| bad(format!("`{port}` is not a port from 1 to 65535")))?;
        servers.push(server);
    }
    let mut partitions = DEFAULT_PARTITIONS;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("partitions", n)) => {
                partitions = n
                    .parse::<i32>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        bad(format!("partitions `{n}` is not a number from 1 to 1000"))
                    })?;
            }
            _ => {
                return Err(bad(format!(
                    "unknown parameter `{pair}`; known: partitions"
                )));
            }
        }
    }
    Ok(Endpoint {
        bootstrap: servers.join(","),
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_partitions_are_read() {
        let e = parse("kafka://a:9092,b:9093?partitions=3").unwrap();
        assert_eq!(e.bootstrap, "a:9092,b:9093");
        assert_eq!(e.partitions, 3);
        assert_eq!(
            parse("kafka://a:1/").unwrap().partitions,
            DEFAULT_PARTITIONS
        );
    }

    #[test]
    fn what_is_not_understood_is_a_bad_url() {
        for url in [
            "kafka://",
            "kafka://host",
            "kafka://host:0",
            "kafka://host:1?partitions=0",
            "kafka://host:1?tls=true",
            "kafka://u@host:1",
        ] {
            assert!(matches!(parse(url), Err(Error::BadUrl { .. })), "{url}");
        }
    }
}
