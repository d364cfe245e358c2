//! `ferry serve`: the broker behind its gRPC and HTTP APIs, its Amazon SQS and SNS
//! endpoint, its Kafka endpoint and its Google Cloud Pub/Sub endpoint, durable in a
//! directory, until Ctrl-C or SIGTERM — then every listener stops accepting, finishes the
//! calls in progress (SQS long polls end at once, empty; Kafka connections close), gives
//! unsettled deliveries of open consume streams back, and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ferry_broker::{Broker, BrokerConfig};

use crate::remote::output::parse_duration;
use crate::{config, test_clock};

/// The flags of `ferry serve`. Each value can also come from a `FERRY_*` variable or the
/// config file (see [`crate::config`]); a flag wins over both.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Where the broker keeps its data, created if missing [env FERRY_DATA_DIR; file
    /// data.dir; default ./ferry-data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address of the gRPC listener; port 0 picks a free port [env FERRY_GRPC_ADDR; file
    /// grpc.addr; default 127.0.0.1:7070].
    #[arg(long, value_name = "ADDR")]
    pub grpc: Option<SocketAddr>,
    /// Address of the HTTP/JSON listener, with /healthz, /readyz and /metrics [env
    /// FERRY_HTTP_ADDR; file http.addr; default 127.0.0.1:7071].
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// Serve gRPC only [env FERRY_HTTP_ENABLED=false; file http.enabled = false].
    #[arg(long)]
    pub no_http: bool,
    /// Address of the Amazon SQS and SNS endpoint (AWS JSON 1.0 and query protocols) [env
    /// FERRY_AWS_ADDR; file aws.addr; default 127.0.0.1:4566].
    #[arg(long, value_name = "ADDR")]
    pub aws_addr: Option<SocketAddr>,
    /// Do not serve the SQS/SNS endpoint [env FERRY_AWS_ENABLED=false; file aws.enabled =
    /// false].
    #[arg(long)]
    pub no_aws: bool,
    /// Address of the Kafka endpoint (the Kafka protocol over Ferry's topics) [env
    /// FERRY_KAFKA_ADDR; file kafka.addr; default 127.0.0.1:9092].
    #[arg(long, value_name = "ADDR")]
    pub kafka_addr: Option<SocketAddr>,
    /// Do not serve the Kafka endpoint [env FERRY_KAFKA_ENABLED=false; file kafka.enabled =
    /// false].
    #[arg(long)]
    pub no_kafka: bool,
    /// Address of the Google Cloud Pub/Sub endpoint, for clients' PUBSUB_EMULATOR_HOST
    /// (unauthenticated, as Google's emulator: loopback only, and off by default with
    /// [tls] or [auth]) [env FERRY_PUBSUB_ADDR; file pubsub.addr; default 127.0.0.1:8085].
    #[arg(long, value_name = "ADDR")]
    pub pubsub_addr: Option<SocketAddr>,
    /// Do not serve the Pub/Sub endpoint [env FERRY_PUBSUB_ENABLED=false; file
    /// pubsub.enabled = false].
    #[arg(long)]
    pub no_pubsub: bool,
    /// A config file: listeners, data, limits, TLS and API tokens (see `ferry config
    /// check`).
    #[arg(long, value_name = "FILE", env = "FERRY_CONFIG")]
    pub config: Option<PathBuf>,
    /// Serve both listeners over TLS only, with this certificate chain (PEM) [env
    /// FERRY_TLS_CERT; file tls.cert].
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of the TLS certificate [env FERRY_TLS_KEY; file tls.key].
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// A header whose value dead-letter peeks show as `***` (any case; repeat, or separate
    /// with commas; `none` shows every value). Replaces the whole list [env
    /// FERRY_REDACTION_HEADERS; file redaction.headers; default authorization,
    /// proxy-authorization, cookie, set-cookie, x-api-key].
    #[arg(long = "redact-header", value_name = "NAME")]
    pub redact_headers: Vec<String>,
    /// How often the web console samples every queue's and topic's stats for its charts
    /// and rates, e.g. 10s or 500ms; it keeps one hour of samples [default 10s].
    #[arg(long, value_name = "DURATION", value_parser = parse_sample_interval)]
    pub console_sample_interval: Option<Duration>,
    /// The age of a queue's oldest ready message at which the console marks the queue
    /// `old_messages`, e.g. 5m [default 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub console_age_alert: Option<Duration>,
    /// The lag of a consumer group at which the console marks its topic `group_lag`,
    /// e.g. 5m [default 5m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub console_lag_alert: Option<Duration>,
    /// Test only: the SQS endpoint also serves `POST /moto-api/reset`, which deletes every
    /// queue of the broker, for test suites that reset a mock SQS server between tests.
    /// Hidden: never for a real deployment.
    #[arg(long, hide = true, env = "FERRY_AWS_TEST_RESET")]
    pub aws_test_reset: bool,
    /// Test only: the broker's clock is the system clock plus the offset (ms) in FILE,
    /// read again on SIGUSR1 (see `test_clock`). Hidden: never for a real deployment.
    #[arg(long, value_name = "FILE", hide = true, env = "FERRY_TEST_CLOCK")]
    pub test_clock: Option<PathBuf>,
}

/// A sample interval: a duration of at least 10 ms (the server's floor, refused here
/// rather than raised silently).
fn parse_sample_interval(text: &str) -> Result<Duration, String> {
    let interval = parse_duration(text)?;
    if interval < Duration::from_millis(10) {
        return Err(format!("{text:?} is under the shortest interval, 10ms"));
    }
    Ok(interval)
}

impl ServeArgs {
    fn flags(&self) -> config::Flags {
        config::Flags {
            grpc: self.grpc,
            http: self.http,
            no_http: self.no_http,
            aws: self.aws_addr,
            no_aws: self.no_aws,
            kafka: self.kafka_addr,
            no_kafka: self.no_kafka,
            pubsub: self.pubsub_addr,
            no_pubsub: self.no_pubsub,
            data_dir: self.data_dir.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            redact_headers: self.redact_headers.clone(),
        }
    }
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    // A bad config (file, variables or flags) stops the server before it opens anything.
    let config = config::load(args.config.as_deref(), &config::process_env, &args.flags())?;
    let tls = config::tls(&config)?;
    let data_dir = &config.data_dir.value;
    let mut broker_config = BrokerConfig::default();
    // SNS subscriptions are broker links filtered by the SNS front end's evaluator, which
    // the broker needs from the open on (catch-up after a restart).
    ferry_aws::register_filter_evaluators(&mut broker_config.filter_evaluators);
    if let Some(mib) = config.disk_reserve_mib.value {
        broker_config.disk_reserve_bytes = mib
            .checked_mul(1 << 20)
            .context("data.disk_reserve_mib is too large")?;
    }
    let test_clock = match &args.test_clock {
        Some(file) => {
            let clock = test_clock::OffsetClock::default();
            clock.set_offset_ms(test_clock::read_offset(file)?);
            broker_config.clock = Arc::new(clock.clone());
            Some((file.clone(), clock))
        }
        None => None,
    };
    // Opened before the broker, which checks publishes to queues and topics that require a
    // schema subject against it (from the open on: a link's catch-up publishes nothing a
    // producer sent, so no check is missed); served over HTTP below when HTTP is on.
    // Beside the broker's own directories, as the SQS endpoint's state is.
    let registry_dir = data_dir.join("schema-registry");
    let registry = Arc::new(
        ferry_schema_registry::SchemaRegistry::open(&registry_dir).with_context(|| {
            format!("opening the schema registry in {}", registry_dir.display())
        })?,
    );
    broker_config.payload_validator = Some(Arc::new(ferry_server::RegistryPayloadValidator::new(
        Arc::clone(&registry),
    )));
    let broker = Broker::open(data_dir, broker_config)
        .await
        .with_context(|| format!("opening the broker in {}", data_dir.display()))?;
    let usr1 = test_clock::usr1()?;
    match test_clock {
        Some((file, clock)) => {
            println!(
                "ferry: TEST CLOCK ON: the clock follows {} (test only)",
                file.display()
            );
            tokio::spawn(test_clock::follow(usr1, file, clock, broker.clone()));
        }
        None => {
            tokio::spawn(test_clock::refuse(usr1));
        }
    }
    let grpc = ferry_server::bind(config.grpc.value).await?;
    let grpc_addr = grpc
        .local_addr()
        .context("reading the gRPC listener's address")?;
    let aws_keys = config.aws_access_keys.len();
    if args.aws_test_reset && aws_keys > 0 {
        // The reset route takes no signature: it would let anyone delete every queue.
        anyhow::bail!(
            "--aws-test-reset (FERRY_AWS_TEST_RESET) cannot be combined with \
             [[aws.credentials]]: its route is unauthenticated"
        );
    }
    let sqs = if config.aws_enabled.value {
        let listener = ferry_server::bind(config.aws.value).await?;
        let sqs_config = ferry_aws::SqsConfig {
            account_id: config.aws_account_id.value.clone(),
            region: config.aws_region.value.clone(),
            access_keys: config.aws_access_keys.clone(),
        };
        // Beside the broker's own directories, which it leaves alone.
        let sqs = ferry_aws::Sqs::open(broker.clone(), &data_dir.join("aws"), sqs_config)
            .with_context(|| format!("opening the SQS endpoint's state in {}", data_dir.display()))?
            .with_test_reset(args.aws_test_reset);
        Some((listener, sqs))
    } else {
        if config.aws_enabled.source == config::Source::Default {
            if config.tls_cert.value.is_some() {
                println!(
                    "ferry: the SQS endpoint is off: it does not serve TLS (aws.enabled = true \
                     serves it over plain HTTP, with [[aws.credentials]])"
                );
            } else if config.auth.is_some() {
                println!(
                    "ferry: the SQS endpoint is off: [auth] is configured and no \
                     [[aws.credentials]], so it would be open"
                );
            }
        }
        None
    };
    let kafka = if config.kafka_enabled.value {
        let listener = ferry_server::bind(config.kafka.value).await?;
        let security = ferry_kafka::Security {
            users: config.kafka_users.clone(),
            // The config refuses kafka.tls = true without [tls].
            tls: tls
                .as_ref()
                .filter(|_| config.kafka_tls.value)
                .map(|tls| tls.server_config()),
        };
        let kafka_config = ferry_kafka::KafkaConfig {
            advertised: config.kafka_advertised.value.clone(),
            default_partitions: config.kafka_default_partitions.value,
            auto_create_topics: config.kafka_auto_create_topics.value,
            max_frame_bytes: config.kafka_max_frame_bytes.value,
            group_min_session_timeout_ms: config.kafka_group_min_session_timeout_ms.value,
            group_max_session_timeout_ms: config.kafka_group_max_session_timeout_ms.value,
            group_initial_rebalance_delay_ms: config.kafka_group_initial_rebalance_delay_ms.value,
            security,
        };
        Some((
            listener,
            ferry_kafka::Kafka::new(broker.clone(), kafka_config),
        ))
    } else {
        None
    };
    let pubsub = if config.pubsub_enabled.value {
        // On by default at a fixed port, which a second server on the same machine finds
        // taken: say which endpoint it is and the way out.
        let listener = ferry_server::bind(config.pubsub.value)
            .await
            .context("the Pub/Sub endpoint (--pubsub-addr moves it, --no-pubsub turns it off)")?;
        // Beside the broker's own directories, which it leaves alone.
        let pubsub = ferry_pubsub::PubSub::open(broker.clone(), &data_dir.join("pubsub"))
            .with_context(|| {
                format!(
                    "opening the Pub/Sub endpoint's state in {}",
                    data_dir.display()
                )
            })?
            // Pub/Sub schemas are the registry's subjects, visible through its REST API.
            .with_schema_registry(Arc::clone(&registry));
        Some((listener, pubsub))
    } else {
        if config.pubsub_enabled.source == config::Source::Default {
            // Off by default only beside [tls] or [auth] (see the config's head): say so,
            // as a client's PUBSUB_EMULATOR_HOST would otherwise find nothing at 8085.
            let beside = if config.tls_cert.value.is_some() {
                "[tls]"
            } else {
                "[auth]"
            };
            println!(
                "ferry: the Pub/Sub endpoint is off: it has no authentication and {beside} is \
                 configured (to serve it, run a server without [tls] and [auth])"
            );
        }
        None
    };
    let mut server = ferry_server::Server::new(broker)
        .grpc(grpc)
        .redact_headers(config.redaction.value.clone());
    let secure = tls.is_some();
    if let Some(tls) = tls {
        server = server.tls(tls);
    }
    if let Some(n) = config.max_batch.value {
        server = server.max_batch(n);
    }
    if let Some(n) = config.max_connections.value {
        server = server.max_connections(n);
    }
    if let Some(n) = config.max_streams_per_connection.value {
        // Checked to fit when the configuration was resolved.
        server = server.max_streams_per_connection(u32::try_from(n).unwrap_or(u32::MAX));
    }
    if let Some(n) = config.max_read_bytes.value {
        server = server.max_read_bytes(n);
    }
    if let Some(interval) = args.console_sample_interval {
        server = server.console_sample_interval(interval);
    }
    if let Some(age) = args.console_age_alert {
        server = server.console_age_alert(age);
    }
    if let Some(lag) = args.console_lag_alert {
        server = server.console_lag_alert(lag);
    }
    server = server.console_aliases(console_aliases(&config, &sqs, kafka.is_some())?);
    if config.auth.is_some() && !config.metrics_auth.value {
        println!("ferry: /metrics is open: it needs no token (http.metrics_auth = false)");
        server = server.open_metrics();
    }
    let authenticated = config.auth.is_some();
    if let Some(auth) = config.auth {
        println!("ferry: authentication on: {} token(s)", auth.tokens.len());
        server = server.auth(auth);
    }
    let mut loopback = grpc_addr.ip().is_loopback();
    // Tests and scripts read these lines to find the ports when they asked for port 0.
    let over = if secure { " over TLS" } else { "" };
    println!(
        "ferry: serving gRPC (ferry.v1){over} on {grpc_addr}, data in {}",
        data_dir.display()
    );
    if config.http_enabled.value {
        let http = ferry_server::bind(config.http.value).await?;
        let http_addr = http
            .local_addr()
            .context("reading the HTTP listener's address")?;
        loopback &= http_addr.ip().is_loopback();
        let scheme = if secure { "https" } else { "http" };
        println!("ferry: serving HTTP on {scheme}://{http_addr}");
        println!("ferry: serving the schema registry on {scheme}://{http_addr}/schema-registry");
        server = server.http(http).schema_registry(Arc::clone(&registry));
    }
    if let Some((listener, _)) = &sqs {
        let aws_addr = listener
            .local_addr()
            .context("reading the SQS listener's address")?;
        let checked = if aws_keys > 0 {
            format!("SigV4 signatures required, {aws_keys} access key(s)")
        } else {
            // An open endpoint is one more reason to stay on loopback.
            loopback &= aws_addr.ip().is_loopback();
            "open: no access keys, signatures not checked".to_owned()
        };
        println!(
            "ferry: serving Amazon SQS on http://{aws_addr} (and Amazon SNS and STS on the \
             same endpoint; {checked})"
        );
        if secure {
            // Asked for with aws.enabled = true (see the config's head).
            println!(
                "ferry: note: the SQS endpoint speaks plain HTTP beside the TLS listeners: \
                 requests are signed, their bodies are not encrypted"
            );
        }
        if args.aws_test_reset {
            println!(
                "ferry: TEST RESET ON: POST http://{aws_addr}/moto-api/reset deletes every queue \
                 (test only)"
            );
        }
    }
    if let Some((listener, kafka)) = &kafka {
        let kafka_addr = listener
            .local_addr()
            .context("reading the Kafka listener's address")?;
        let security = kafka.security();
        let checked = match &security.users {
            Some(users) => format!(
                "{}: SASL {} required, {} user(s)",
                security.protocol(),
                users.mechanisms().join("/"),
                users.len()
            ),
            None => {
                // Open, so one more reason to stay on loopback; the config refuses
                // anything else.
                loopback &= kafka_addr.ip().is_loopback();
                format!("{}: open, no SASL", security.protocol())
            }
        };
        let advertised = match &config.kafka_advertised.value {
            Some(advertised) => format!("advertised as {advertised}"),
            None => "advertised as itself".to_owned(),
        };
        println!(
            "ferry: serving Kafka on {kafka_addr} ({advertised}; {checked}; auto-create {}, \
             {} partition(s) by default)",
            if config.kafka_auto_create_topics.value {
                "on"
            } else {
                "off"
            },
            config.kafka_default_partitions.value
        );
        if security.users.is_some() && security.tls.is_none() && !kafka_addr.ip().is_loopback() {
            // Asked for with kafka.allow_plaintext_sasl = true.
            println!(
                "ferry: note: Kafka SASL tokens cross the network in the clear (no TLS on \
                 the Kafka listener)"
            );
        }
    }
    if let Some((listener, _)) = &pubsub {
        let pubsub_addr = listener
            .local_addr()
            .context("reading the Pub/Sub listener's address")?;
        // The config keeps it on loopback and away from [auth] and [tls].
        println!(
            "ferry: serving Google Cloud Pub/Sub on {pubsub_addr} (open, as Google's emulator: \
             PUBSUB_EMULATOR_HOST={pubsub_addr})"
        );
    }
    // With access keys the SQS endpoint is authenticated (said above) and left out of
    // `loopback`; what is open then is gRPC and HTTP.
    let unauthenticated = if aws_keys > 0 {
        "no [auth] tokens configured for gRPC and HTTP"
    } else {
        "no authentication configured"
    };
    if authenticated {
        // Said above.
    } else if loopback {
        println!("ferry: {unauthenticated}: listening on the loopback interface only");
    } else {
        println!("ferry: WARNING: {unauthenticated} and listening beyond loopback");
    }
    println!("ferry: Ctrl-C stops");
    // One signal stops every listener, and a listener that fails stops the others: one
    // process, one fate.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_tx = Arc::new(stop_tx);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let on_signal = Arc::clone(&stop_tx);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = on_signal.send(true);
    });
    let grpc_and_http = async {
        let served = server.serve(stopped()).await;
        let _ = stop_tx.send(true);
        served
    };
    let sqs = async {
        let Some((listener, sqs)) = sqs else {
            return Ok(());
        };
        let served = sqs
            .serve(listener, stopped())
            .await
            .context("serving the SQS endpoint");
        let _ = stop_tx.send(true);
        served
    };
    let kafka = async {
        let Some((listener, kafka)) = kafka else {
            return Ok(());
        };
        let served = kafka
            .serve(listener, stopped())
            .await
            .context("serving the Kafka endpoint");
        let _ = stop_tx.send(true);
        served
    };
    let pubsub = async {
        let Some((listener, pubsub)) = pubsub else {
            return Ok(());
        };
        let served = pubsub
            .serve(listener, stopped())
            .await
            .context("serving the Pub/Sub endpoint");
        let _ = stop_tx.send(true);
        served
    };
    let (served, sqs_served, kafka_served, pubsub_served) =
        tokio::join!(grpc_and_http, sqs, kafka, pubsub);
    served?;
    sqs_served?;
    kafka_served?;
    pubsub_served?;
    println!("ferry: stopped");
    Ok(())
}

/// How the front ends this server runs name queues and topics, for the console's
/// topology: a queue URL on the SQS listener's address (any host reaches the endpoint;
/// an unspecified address is shown as `localhost`), SNS ARNs of the configured account
/// and region, and Kafka topics by their own names.
fn console_aliases(
    config: &config::Effective,
    sqs: &Option<(tokio::net::TcpListener, ferry_aws::Sqs)>,
    kafka: bool,
) -> anyhow::Result<ferry_server::ConsoleAliases> {
    let aws = match sqs {
        Some((listener, _)) => {
            let addr = listener
                .local_addr()
                .context("reading the SQS listener's address")?;
            let host = if addr.ip().is_unspecified() {
                format!("localhost:{}", addr.port())
            } else {
                addr.to_string()
            };
            Some(ferry_server::AwsNames {
                queue_url_base: format!("http://{host}"),
                account_id: config.aws_account_id.value.clone(),
                region: config.aws_region.value.clone(),
            })
        }
        None => None,
    };
    Ok(ferry_server::ConsoleAliases { kafka, aws })
}

/// Ctrl-C, or SIGTERM (what service managers and container runtimes send).
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
