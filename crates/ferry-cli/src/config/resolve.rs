//! Layering: each value from the first of its flag, its variable, the file and the
//! default; then the checks that need the values together.

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, bail};
use ferry_server::Redaction;

use super::auth::auth_config;
use super::aws_credentials::access_keys;
use super::kafka_security::kafka_users;
use super::{
    ConfigFile, DEFAULT_AWS, DEFAULT_DATA_DIR, DEFAULT_GRPC, DEFAULT_HTTP, DEFAULT_KAFKA,
    Effective, Env, Flags, Setting, Source,
};

/// The smallest `kafka.max_frame_bytes`: room for any request header and a small batch.
const MIN_KAFKA_FRAME: usize = 1024;

/// The value of the first of `flag`, the variable `name` and `file`; `None` if none is
/// set.
pub(super) fn layer<T: FromStr>(
    env: Env,
    name: &'static str,
    flag: Option<(T, &'static str)>,
    file: Option<T>,
) -> anyhow::Result<Option<Setting<T>>>
where
    T::Err: fmt::Display,
{
    if let Some((value, flag)) = flag {
        let source = Source::Flag(flag);
        return Ok(Some(Setting { value, source }));
    }
    if let Some(text) = env(name) {
        let value = text
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={text:?} cannot be used: {e}"))?;
        let source = Source::Env(name);
        return Ok(Some(Setting { value, source }));
    }
    Ok(file.map(|value| Setting {
        value,
        source: Source::File,
    }))
}

impl<T> Setting<T> {
    pub(super) fn or_default(setting: Option<Setting<T>>, default: T) -> Setting<T> {
        setting.unwrap_or(Setting {
            value: default,
            source: Source::Default,
        })
    }

    fn optional(setting: Option<Setting<T>>) -> Setting<Option<T>> {
        match setting {
            Some(Setting { value, source }) => Setting {
                value: Some(value),
                source,
            },
            None => Setting {
                value: None,
                source: Source::Default,
            },
        }
    }
}

/// `file` with `env` and `flags` over it, checked.
pub fn resolve(file: ConfigFile, env: Env, flags: &Flags) -> anyhow::Result<Effective> {
    let flag = |value, name| Option::map(value, |v| (v, name));
    let grpc = layer(
        env,
        "FERRY_GRPC_ADDR",
        flag(flags.grpc, "--grpc"),
        file.grpc.addr,
    )?;
    let http = layer(
        env,
        "FERRY_HTTP_ADDR",
        flag(flags.http, "--http"),
        file.http.addr,
    )?;
    let no_http = flags.no_http.then_some((false, "--no-http"));
    let http_enabled = layer(env, "FERRY_HTTP_ENABLED", no_http, file.http.enabled)?;
    let aws = layer(
        env,
        "FERRY_AWS_ADDR",
        flag(flags.aws, "--aws-addr"),
        file.aws.addr,
    )?;
    let no_aws = flags.no_aws.then_some((false, "--no-aws"));
    let aws_enabled = layer(env, "FERRY_AWS_ENABLED", no_aws, file.aws.enabled)?;
    let aws_account_id = layer(env, "FERRY_AWS_ACCOUNT_ID", None, file.aws.account_id)?;
    let aws_region = layer(env, "FERRY_AWS_REGION", None, file.aws.region)?;
    if let Some(account) = &aws_account_id
        && (account.value.len() != 12 || !account.value.bytes().all(|b| b.is_ascii_digit()))
    {
        bail!(
            "aws.account_id must be 12 digits, got {:?} (from {})",
            account.value,
            account.source
        );
    }
    if let Some(region) = &aws_region
        && (region.value.is_empty()
            || !region
                .value
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'))
    {
        bail!(
            "aws.region must be a region name such as us-east-1, got {:?} (from {})",
            region.value,
            region.source
        );
    }
    let kafka = layer(
        env,
        "FERRY_KAFKA_ADDR",
        flag(flags.kafka, "--kafka-addr"),
        file.kafka.addr,
    )?;
    let no_kafka = flags.no_kafka.then_some((false, "--no-kafka"));
    let kafka_enabled = layer(env, "FERRY_KAFKA_ENABLED", no_kafka, file.kafka.enabled)?;
    let kafka_advertised_file = file
        .kafka
        .advertised
        .map(|text| text.parse::<ferry_kafka::Advertised>())
        .transpose()
        .context("kafka.advertised")?;
    let kafka_advertised = layer(env, "FERRY_KAFKA_ADVERTISED", None, kafka_advertised_file)?;
    let kafka_default_partitions = layer(
        env,
        "FERRY_KAFKA_DEFAULT_PARTITIONS",
        None,
        file.kafka.default_partitions,
    )?;
    if let Some(partitions) = &kafka_default_partitions
        && !(1..=ferry_broker::TopicSpec::MAX_PARTITIONS).contains(&partitions.value)
    {
        bail!(
            "kafka.default_partitions must be from 1 to {}, got {} (from {})",
            ferry_broker::TopicSpec::MAX_PARTITIONS,
            partitions.value,
            partitions.source
        );
    }
    let kafka_auto_create_topics = layer(
        env,
        "FERRY_KAFKA_AUTO_CREATE_TOPICS",
        None,
        file.kafka.auto_create_topics,
    )?;
    let kafka_max_frame_bytes = layer(
        env,
        "FERRY_KAFKA_MAX_FRAME_BYTES",
        None,
        file.kafka.max_frame_bytes,
    )?;
    if let Some(max) = &kafka_max_frame_bytes
        && !(MIN_KAFKA_FRAME..=i32::MAX as usize).contains(&max.value)
    {
        bail!(
            "kafka.max_frame_bytes must be from {MIN_KAFKA_FRAME} to {}, got {} (from {})",
            i32::MAX,
            max.value,
            max.source
        );
    }
    let kafka_group_min_session_timeout_ms = layer(
        env,
        "FERRY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS",
        None,
        file.kafka.group_min_session_timeout_ms,
    )?;
    let kafka_group_max_session_timeout_ms = layer(
        env,
        "FERRY_KAFKA_GROUP_MAX_SESSION_TIMEOUT_MS",
        None,
        file.kafka.group_max_session_timeout_ms,
    )?;
    let group_defaults = ferry_kafka::KafkaConfig::default();
    let kafka_group_min_session_timeout_ms = Setting::or_default(
        kafka_group_min_session_timeout_ms,
        group_defaults.group_min_session_timeout_ms,
    );
    let kafka_group_max_session_timeout_ms = Setting::or_default(
        kafka_group_max_session_timeout_ms,
        group_defaults.group_max_session_timeout_ms,
    );
    if kafka_group_min_session_timeout_ms.value < 1
        || kafka_group_min_session_timeout_ms.value > kafka_group_max_session_timeout_ms.value
    {
        bail!(
            "kafka.group_min_session_timeout_ms ({}, from {}) must be at least 1 and at most \
             kafka.group_max_session_timeout_ms ({}, from {})",
            kafka_group_min_session_timeout_ms.value,
            kafka_group_min_session_timeout_ms.source,
            kafka_group_max_session_timeout_ms.value,
            kafka_group_max_session_timeout_ms.source
        );
    }
    let kafka_group_initial_rebalance_delay_ms = Setting::or_default(
        layer(
            env,
            "FERRY_KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS",
            None,
            file.kafka.group_initial_rebalance_delay_ms,
        )?,
        group_defaults.group_initial_rebalance_delay_ms,
    );
    if kafka_group_initial_rebalance_delay_ms.value < 0 {
        bail!(
            "kafka.group_initial_rebalance_delay_ms ({}, from {}) must be 0 or more",
            kafka_group_initial_rebalance_delay_ms.value,
            kafka_group_initial_rebalance_delay_ms.source
        );
    }
    let data_dir = layer(
        env,
        "FERRY_DATA_DIR",
        flags.data_dir.clone().map(|d| (d, "--data-dir")),
        file.data.dir,
    )?;
    let disk_reserve_mib = layer(
        env,
        "FERRY_DATA_DISK_RESERVE_MIB",
        None,
        file.data.disk_reserve_mib,
    )?;
    let max_batch = layer(env, "FERRY_LIMITS_MAX_BATCH", None, file.limits.max_batch)?;
    let max_connections = layer(
        env,
        "FERRY_LIMITS_MAX_CONNECTIONS",
        None,
        file.limits.max_connections,
    )?;
    let max_streams_per_connection = layer(
        env,
        "FERRY_LIMITS_MAX_STREAMS_PER_CONNECTION",
        None,
        file.limits.max_streams_per_connection,
    )?;
    let max_read_bytes = layer(
        env,
        "FERRY_LIMITS_MAX_READ_BYTES",
        None,
        file.limits.max_read_bytes,
    )?;
    let metrics_auth = layer(env, "FERRY_HTTP_METRICS_AUTH", None, file.http.metrics_auth)?;
    let tls_cert = layer(
        env,
        "FERRY_TLS_CERT",
        flags.tls_cert.clone().map(|p| (p, "--tls-cert")),
        file.tls.cert,
    )?;
    let tls_key = layer(
        env,
        "FERRY_TLS_KEY",
        flags.tls_key.clone().map(|p| (p, "--tls-key")),
        file.tls.key,
    )?;
    let redaction_flag = if flags.redact_headers.is_empty() {
        None
    } else {
        let joined = flags.redact_headers.join(",");
        let value: Redaction = joined
            .parse()
            .with_context(|| format!("--redact-header {joined:?}"))?;
        Some((value, "--redact-header"))
    };
    let redaction_file = file
        .redaction
        .headers
        .map(Redaction::new)
        .transpose()
        .context("redaction.headers")?;
    let redaction = layer(
        env,
        "FERRY_REDACTION_HEADERS",
        redaction_flag,
        redaction_file,
    )?;
    for limit in [
        &max_batch,
        &max_connections,
        &max_streams_per_connection,
        &max_read_bytes,
    ]
    .into_iter()
    .flatten()
    {
        if limit.value == 0 {
            bail!(
                "limits: max_batch, max_connections, max_streams_per_connection and \
                 max_read_bytes must be at least 1 (from {})",
                limit.source
            );
        }
    }
    if let Some(limit) = &max_streams_per_connection
        && u32::try_from(limit.value).is_err()
    {
        bail!(
            "limits: max_streams_per_connection is at most {} (HTTP/2 counts streams in 32 \
             bits), not {} (from {})",
            u32::MAX,
            limit.value,
            limit.source
        );
    }
    let tokens = file.auth.is_some();
    let metrics_auth = match metrics_auth {
        // Without tokens there is nothing a scrape could present: asking for one would
        // only look like protection.
        Some(on) if on.value && !tokens => bail!(
            "http.metrics_auth = true needs tokens: add an [auth] section with a token \
             holding a `metrics` permission (from {})",
            on.source
        ),
        Some(set) => set,
        None => Setting {
            value: tokens,
            source: Source::Default,
        },
    };
    match (&tls_cert, &tls_key) {
        (Some(_), Some(_)) | (None, None) => {}
        (Some(only), None) | (None, Some(only)) => bail!(
            "tls: a certificate needs its key and a key its certificate; only one is set \
             (from {})",
            only.source
        ),
    }
    // The AWS endpoint speaks plain HTTP; it checks signatures only with credentials. So
    // without them it stays off beside TLS or tokens (asking for it then is refused) and
    // on the loopback interface; with them it is served beside tokens, and beside TLS
    // only when asked for (see the module head).
    let aws_access_keys = access_keys(file.aws.credentials, env)?;
    let credentials = !aws_access_keys.is_empty();
    let tls = tls_cert.is_some();
    let guarded = tls || file.auth.is_some();
    let aws_enabled = match aws_enabled {
        Some(on) if on.value && guarded && !credentials => bail!(
            "aws.enabled = true (from {}) with [tls] or [auth] but no [[aws.credentials]]: \
             the SQS endpoint would be open beside protected listeners; add credentials or \
             leave it off",
            on.source
        ),
        Some(set) => set,
        None => Setting {
            value: if credentials { !tls } else { !guarded },
            source: Source::Default,
        },
    };
    if let Some(addr) = &aws
        && aws_enabled.value
        && !credentials
        && !addr.value.ip().is_loopback()
    {
        bail!(
            "aws.addr = {} (from {}) is beyond the loopback interface, and without \
             [[aws.credentials]] the SQS endpoint is open to whoever reaches it: add \
             credentials or listen on 127.0.0.1",
            addr.value,
            addr.source
        );
    }
    // The Kafka endpoint authenticates with SASL when there are tokens, and speaks TLS
    // with [tls]'s certificate (by default when there is one). What it must not be is
    // open, or tokens in the clear, beyond the loopback interface unless asked for.
    let sasl = file.auth.is_some();
    let kafka_tls = layer(env, "FERRY_KAFKA_TLS", None, file.kafka.tls)?;
    let kafka_tls = match kafka_tls {
        Some(on) if on.value && !tls => bail!(
            "kafka.tls = true (from {}) needs [tls] (cert and key): the Kafka listener uses \
             the same certificate as the others",
            on.source
        ),
        Some(set) => set,
        None => Setting {
            value: tls,
            source: Source::Default,
        },
    };
    let kafka_allow_plaintext_sasl = layer(
        env,
        "FERRY_KAFKA_ALLOW_PLAINTEXT_SASL",
        None,
        file.kafka.allow_plaintext_sasl,
    )?;
    let kafka_allow_plaintext_sasl = match kafka_allow_plaintext_sasl {
        Some(on) if on.value && !sasl => bail!(
            "kafka.allow_plaintext_sasl = true (from {}) without [auth]: there is no SASL \
             to allow; add [[auth.tokens]] or remove the key",
            on.source
        ),
        Some(set) => set,
        None => Setting {
            value: false,
            source: Source::Default,
        },
    };
    let kafka_enabled = Setting::or_default(kafka_enabled, true);
    if let Some(addr) = &kafka
        && kafka_enabled.value
        && !addr.value.ip().is_loopback()
    {
        if !sasl {
            bail!(
                "kafka.addr = {} (from {}) is beyond the loopback interface, and without \
                 [auth] the Kafka endpoint is open to whoever reaches it: add \
                 [[auth.tokens]] (clients then authenticate with SASL) or listen on 127.0.0.1",
                addr.value,
                addr.source
            );
        }
        if !kafka_tls.value && !kafka_allow_plaintext_sasl.value {
            bail!(
                "kafka.addr = {} (from {}) is beyond the loopback interface without TLS: \
                 SASL tokens would cross the network in the clear; configure [tls] (and \
                 kafka.tls = true), or set kafka.allow_plaintext_sasl = true to accept that",
                addr.value,
                addr.source
            );
        }
    }
    // The tokens' own checks speak first (their errors name the key at fault); then the
    // Kafka users made from them, which add the SCRAM secrets' checks.
    let kafka_users = kafka_users(file.auth.as_ref().map(|a| &a.tokens[..]), env);
    let auth = file.auth.map(auth_config).transpose()?;
    let kafka_users = kafka_users?;
    let kafka_defaults = ferry_kafka::KafkaConfig::default();
    let (pubsub, pubsub_enabled) = super::pubsub::resolve(env, flags, &file.pubsub, guarded)?;
    Ok(Effective {
        grpc: Setting::or_default(grpc, DEFAULT_GRPC.parse().expect("a socket address")),
        http: Setting::or_default(http, DEFAULT_HTTP.parse().expect("a socket address")),
        http_enabled: Setting::or_default(http_enabled, true),
        aws: Setting::or_default(aws, DEFAULT_AWS.parse().expect("a socket address")),
        aws_enabled,
        aws_account_id: Setting::or_default(
            aws_account_id,
            ferry_aws::SqsConfig::default().account_id,
        ),
        aws_region: Setting::or_default(aws_region, ferry_aws::SqsConfig::default().region),
        aws_access_keys,
        kafka: Setting::or_default(kafka, DEFAULT_KAFKA.parse().expect("a socket address")),
        kafka_enabled,
        kafka_advertised: Setting::optional(kafka_advertised),
        kafka_default_partitions: Setting::or_default(
            kafka_default_partitions,
            kafka_defaults.default_partitions,
        ),
        kafka_auto_create_topics: Setting::or_default(
            kafka_auto_create_topics,
            kafka_defaults.auto_create_topics,
        ),
        kafka_max_frame_bytes: Setting::or_default(
            kafka_max_frame_bytes,
            kafka_defaults.max_frame_bytes,
        ),
        kafka_group_min_session_timeout_ms,
        kafka_group_max_session_timeout_ms,
        kafka_group_initial_rebalance_delay_ms,
        kafka_tls,
        kafka_allow_plaintext_sasl,
        kafka_users,
        pubsub,
        pubsub_enabled,
        metrics_auth,
        data_dir: Setting::or_default(data_dir, DEFAULT_DATA_DIR.into()),
        disk_reserve_mib: Setting::optional(disk_reserve_mib),
        max_batch: Setting::optional(max_batch),
        max_connections: Setting::optional(max_connections),
        max_streams_per_connection: Setting::optional(max_streams_per_connection),
        max_read_bytes: Setting::optional(max_read_bytes),
        tls_cert: Setting::optional(tls_cert),
        tls_key: Setting::optional(tls_key),
        redaction: Setting::or_default(redaction, Redaction::default()),
        auth,
    })
}
