use std::path::PathBuf;

use super::{Effective, Source};

/// The effective configuration as text, for `ferry config check`: each value with where it
/// came from; token names and permissions, never hashes; access key ids and permissions,
/// never secrets.
pub fn describe(effective: &Effective) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: String, source: Source| {
        out.push_str(&format!("{key} = {value}  ({source})\n"));
    };
    let e = effective;
    line("grpc.addr", e.grpc.value.to_string(), e.grpc.source);
    line("http.addr", e.http.value.to_string(), e.http.source);
    line(
        "http.enabled",
        e.http_enabled.value.to_string(),
        e.http_enabled.source,
    );
    line(
        "http.metrics_auth",
        e.metrics_auth.value.to_string(),
        e.metrics_auth.source,
    );
    line("aws.addr", e.aws.value.to_string(), e.aws.source);
    line(
        "aws.enabled",
        e.aws_enabled.value.to_string(),
        e.aws_enabled.source,
    );
    line(
        "aws.account_id",
        e.aws_account_id.value.clone(),
        e.aws_account_id.source,
    );
    line(
        "aws.region",
        e.aws_region.value.clone(),
        e.aws_region.source,
    );
    line("pubsub.addr", e.pubsub.value.to_string(), e.pubsub.source);
    line(
        "pubsub.enabled",
        e.pubsub_enabled.value.to_string(),
        e.pubsub_enabled.source,
    );
    line("kafka.addr", e.kafka.value.to_string(), e.kafka.source);
    line(
        "kafka.enabled",
        e.kafka_enabled.value.to_string(),
        e.kafka_enabled.source,
    );
    line(
        "kafka.advertised",
        e.kafka_advertised
            .value
            .as_ref()
            .map_or("(the listener's address)".to_owned(), |a| a.to_string()),
        e.kafka_advertised.source,
    );
    line(
        "kafka.default_partitions",
        e.kafka_default_partitions.value.to_string(),
        e.kafka_default_partitions.source,
    );
    line(
        "kafka.auto_create_topics",
        e.kafka_auto_create_topics.value.to_string(),
        e.kafka_auto_create_topics.source,
    );
    line(
        "kafka.max_frame_bytes",
        e.kafka_max_frame_bytes.value.to_string(),
        e.kafka_max_frame_bytes.source,
    );
    line(
        "kafka.group_min_session_timeout_ms",
        e.kafka_group_min_session_timeout_ms.value.to_string(),
        e.kafka_group_min_session_timeout_ms.source,
    );
    line(
        "kafka.group_max_session_timeout_ms",
        e.kafka_group_max_session_timeout_ms.value.to_string(),
        e.kafka_group_max_session_timeout_ms.source,
    );
    line(
        "kafka.group_initial_rebalance_delay_ms",
        e.kafka_group_initial_rebalance_delay_ms.value.to_string(),
        e.kafka_group_initial_rebalance_delay_ms.source,
    );
    line(
        "kafka.tls",
        e.kafka_tls.value.to_string(),
        e.kafka_tls.source,
    );
    line(
        "kafka.allow_plaintext_sasl",
        e.kafka_allow_plaintext_sasl.value.to_string(),
        e.kafka_allow_plaintext_sasl.source,
    );
    if let Some(users) = &e.kafka_users {
        // From [auth]: the mechanisms offered and how many users, never a secret.
        line(
            "kafka.sasl",
            format!(
                "required: {} ({} user(s) from [auth])",
                users.mechanisms().join(", "),
                users.len()
            ),
            Source::File,
        );
    }
    line(
        "data.dir",
        e.data_dir.value.display().to_string(),
        e.data_dir.source,
    );
    line(
        "data.disk_reserve_mib",
        e.disk_reserve_mib
            .value
            .unwrap_or(ferry_broker::BrokerConfig::default().disk_reserve_bytes >> 20)
            .to_string(),
        e.disk_reserve_mib.source,
    );
    let or = |v: Option<usize>, d: &str| v.map_or(d.to_owned(), |v| v.to_string());
    line(
        "limits.max_batch",
        or(e.max_batch.value, "1000"),
        e.max_batch.source,
    );
    line(
        "limits.max_connections",
        or(
            e.max_connections.value,
            &ferry_server::DEFAULT_MAX_CONNECTIONS.to_string(),
        ),
        e.max_connections.source,
    );
    line(
        "limits.max_streams_per_connection",
        or(
            e.max_streams_per_connection.value,
            &ferry_server::DEFAULT_MAX_STREAMS_PER_CONNECTION.to_string(),
        ),
        e.max_streams_per_connection.source,
    );
    line(
        "limits.max_read_bytes",
        or(
            e.max_read_bytes.value,
            &ferry_server::DEFAULT_MAX_READ_BYTES.to_string(),
        ),
        e.max_read_bytes.source,
    );
    let path = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or("none".into(), |p| p.display().to_string())
    };
    line("tls.cert", path(&e.tls_cert.value), e.tls_cert.source);
    line("tls.key", path(&e.tls_key.value), e.tls_key.source);
    line(
        "redaction.headers",
        e.redaction.value.to_string(),
        e.redaction.source,
    );
    match &e.auth {
        None => out.push_str("auth: none (open; listen on the loopback interface only)\n"),
        Some(auth) => {
            out.push_str(&format!("auth: {} token(s)\n", auth.tokens.len()));
            for t in &auth.tokens {
                let perms: Vec<String> = t.permissions.iter().map(ToString::to_string).collect();
                let rate = t
                    .publish_rate
                    .map_or(String::new(), |r| format!(", publish_rate {r}/s"));
                out.push_str(&format!("  {}: {}{rate}\n", t.name, perms.join(", ")));
            }
        }
    }
    if e.aws_access_keys.is_empty() {
        out.push_str("aws.credentials: none (open; signatures are not checked)\n");
    } else {
        out.push_str(&format!(
            "aws.credentials: {} access key(s)\n",
            e.aws_access_keys.len()
        ));
        for key in &e.aws_access_keys {
            let perms: Vec<String> = key.permissions.iter().map(ToString::to_string).collect();
            let user = key
                .name
                .as_ref()
                .map_or("root".to_owned(), |n| format!("user {n}"));
            // A key of another account reaches this one's only as resource policies allow.
            let user = match &key.account_id {
                Some(account) if *account != e.aws_account_id.value => {
                    format!("{user} of account {account}, cross-account")
                }
                _ => user,
            };
            out.push_str(&format!("  {} ({user}): {}\n", key.id, perms.join(", ")));
        }
    }
    out
}
