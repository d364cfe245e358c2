use super::*;

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// The file's text alone, checked, as [`resolve`] with no environment and no flags.
fn parse(text: &str) -> anyhow::Result<Effective> {
    resolve(parse_file(text)?, &|_| None, &Flags::default())
}

#[test]
fn a_full_config_is_read_and_described_without_secrets() {
    let text = format!(
        "[limits]\nmax_batch = 10\nmax_connections = 5\n\n[[auth.tokens]]\nname = \"svc\"\nsha256 = \"{HASH}\"\npermissions = [\"publish:orders.*\", \"admin:#\"]\npublish_rate = 50\n"
    );
    let effective = parse(&text).unwrap();
    assert_eq!(effective.max_batch.value, Some(10));
    assert_eq!(effective.max_batch.source, Source::File);
    let auth = effective.auth.as_ref().unwrap();
    assert_eq!(auth.tokens[0].permissions.len(), 2);
    assert_eq!(auth.tokens[0].publish_rate, Some(50));
    let text = describe(&effective);
    assert!(
        text.contains("svc: publish:orders.*, admin:#, publish_rate 50/s"),
        "{text}"
    );
    assert!(!text.contains(HASH));
}

#[test]
fn mistakes_are_refused_with_where_they_are() {
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    assert!(e("[limits]\nmax_bath = 1\n").contains("max_bath"));
    assert!(
        e("[[auth.tokens]]\nname = \"a\"\nsha256 = \"xyz\"\npermissions = []\n").contains("sha256")
    );
    let bad_perm = format!(
        "[[auth.tokens]]\nname = \"a\"\nsha256 = \"{HASH}\"\npermissions = [\"write:x\"]\n"
    );
    assert!(e(&bad_perm).contains("write:x"));
    let twice = format!(
        "[[auth.tokens]]\nname = \"a\"\nsha256 = \"{HASH}\"\npermissions = []\n[[auth.tokens]]\nname = \"a\"\nsha256 = \"{HASH}\"\npermissions = []\n"
    );
    assert!(e(&twice).contains("twice"));
    assert!(parse("").unwrap().auth.is_none());
    assert!(e("[tls]\ncert = \"c.pem\"\n").contains("needs its key"));
    assert!(e("[limits]\nmax_batch = 0\n").contains("at least 1"));
    assert!(e("[grpc]\naddr = \"nowhere\"\n").contains("addr"));
}

#[test]
fn metrics_need_a_token_by_default_once_there_are_tokens_and_only_then() {
    let tokens = format!(
        "[[auth.tokens]]\nname = \"scraper\"\nsha256 = \"{HASH}\"\npermissions = [\"metrics:#\"]\n"
    );
    let guarded = parse(&tokens).unwrap();
    assert_eq!(
        guarded.metrics_auth,
        Setting {
            value: true,
            source: Source::Default
        }
    );
    assert!(
        describe(&guarded).contains("http.metrics_auth = true  (default)"),
        "{}",
        describe(&guarded)
    );
    let open = parse(&format!("[http]\nmetrics_auth = false\n{tokens}")).unwrap();
    assert!(!open.metrics_auth.value);
    assert_eq!(open.metrics_auth.source, Source::File);
    let vars = [("FERRY_HTTP_METRICS_AUTH", "false")];
    let by_env = resolve(parse_file(&tokens).unwrap(), &env(&vars), &Flags::default());
    assert!(!by_env.unwrap().metrics_auth.value);
    assert!(!parse("").unwrap().metrics_auth.value, "no tokens: open");
    let refused = format!("{:#}", parse("[http]\nmetrics_auth = true\n").unwrap_err());
    assert!(refused.contains("needs tokens"), "{refused}");
}

#[test]
fn connections_and_read_bytes_have_finite_defaults_and_can_be_set() {
    let defaults = describe(&parse("").unwrap());
    for line in [
        format!(
            "limits.max_connections = {}  (default)",
            ferry_server::DEFAULT_MAX_CONNECTIONS
        ),
        format!(
            "limits.max_streams_per_connection = {}  (default)",
            ferry_server::DEFAULT_MAX_STREAMS_PER_CONNECTION
        ),
        format!(
            "limits.max_read_bytes = {}  (default)",
            ferry_server::DEFAULT_MAX_READ_BYTES
        ),
    ] {
        assert!(defaults.contains(&line), "{defaults}");
    }
    let vars = [("FERRY_LIMITS_MAX_STREAMS_PER_CONNECTION", "64")];
    let file = parse_file("[limits]\nmax_streams_per_connection = 8\n").unwrap();
    let e = resolve(file, &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.max_streams_per_connection.value, Some(64));
    let file = parse_file("[limits]\nmax_streams_per_connection = 8\n").unwrap();
    let e = resolve(file, &env(&[]), &Flags::default()).unwrap();
    assert_eq!(e.max_streams_per_connection.value, Some(8));
    for bad in ["0", "4294967296"] {
        let text = format!("[limits]\nmax_streams_per_connection = {bad}\n");
        let refused = format!("{:#}", parse(&text).unwrap_err());
        assert!(refused.contains("max_streams_per_connection"), "{refused}");
    }
    let vars = [("FERRY_LIMITS_MAX_READ_BYTES", "65536")];
    let file = parse_file("[limits]\nmax_read_bytes = 1024\n").unwrap();
    let e = resolve(file, &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.max_read_bytes.value, Some(65536));
    let zero = format!("{:#}", parse("[limits]\nmax_read_bytes = 0\n").unwrap_err());
    assert!(zero.contains("at least 1"), "{zero}");
}

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        vars.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn the_disk_reserve_comes_from_the_file_or_its_variable() {
    let file = parse_file("[data]\ndisk_reserve_mib = 16\n").unwrap();
    let e = resolve(file, &env(&[]), &Flags::default()).unwrap();
    assert_eq!(e.disk_reserve_mib.value, Some(16));
    assert!(
        describe(&e).contains("data.disk_reserve_mib = 16  (file)"),
        "{}",
        describe(&e)
    );
    let vars = [("FERRY_DATA_DISK_RESERVE_MIB", "0")];
    let file = parse_file("[data]\ndisk_reserve_mib = 16\n").unwrap();
    let e = resolve(file, &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.disk_reserve_mib.value, Some(0));
    let e = resolve(ConfigFile::default(), &env(&[]), &Flags::default()).unwrap();
    assert!(
        describe(&e).contains("data.disk_reserve_mib = 64  (default)"),
        "{}",
        describe(&e)
    );
    let bad = [("FERRY_DATA_DISK_RESERVE_MIB", "-1")];
    assert!(resolve(ConfigFile::default(), &env(&bad), &Flags::default()).is_err());
}

#[test]
fn a_flag_beats_its_variable_which_beats_the_file_which_beats_the_default() {
    let file = "[grpc]\naddr = \"127.0.0.1:1001\"\n[http]\naddr = \"127.0.0.1:2001\"\n\
                [data]\ndir = \"/from/file\"\n[limits]\nmax_batch = 10\n";
    let vars = [
        ("FERRY_HTTP_ADDR", "127.0.0.1:2002"),
        ("FERRY_DATA_DIR", "/from/env"),
        ("FERRY_LIMITS_MAX_BATCH", "20"),
        ("FERRY_LIMITS_MAX_CONNECTIONS", "30"),
    ];
    let flags = Flags {
        data_dir: Some("/from/flag".into()),
        ..Flags::default()
    };
    let e = resolve(parse_file(file).unwrap(), &env(&vars), &flags).unwrap();
    assert_eq!(e.grpc.value, "127.0.0.1:1001".parse().unwrap());
    assert_eq!(e.grpc.source, Source::File);
    assert_eq!(e.http.value, "127.0.0.1:2002".parse().unwrap());
    assert_eq!(e.http.source, Source::Env("FERRY_HTTP_ADDR"));
    assert_eq!(e.data_dir.value, PathBuf::from("/from/flag"));
    assert_eq!(e.data_dir.source, Source::Flag("--data-dir"));
    assert_eq!(e.max_batch.value, Some(20));
    assert_eq!(e.max_connections.value, Some(30));
    assert!(e.http_enabled.value);
    assert_eq!(e.http_enabled.source, Source::Default);
    assert_eq!(e.tls_cert.value, None);
    let text = describe(&e);
    assert!(
        text.contains("http.addr = 127.0.0.1:2002  (env FERRY_HTTP_ADDR)"),
        "{text}"
    );
    assert!(
        text.contains("data.dir = /from/flag  (flag --data-dir)"),
        "{text}"
    );
    assert!(
        text.contains("grpc.addr = 127.0.0.1:1001  (file)"),
        "{text}"
    );

    let no_http = Flags {
        no_http: true,
        ..Flags::default()
    };
    let off = [("FERRY_HTTP_ENABLED", "true")];
    let e = resolve(ConfigFile::default(), &env(&off), &no_http).unwrap();
    assert!(!e.http_enabled.value, "--no-http beats the variable");
    let e = resolve(ConfigFile::default(), &env(&[]), &Flags::default()).unwrap();
    assert_eq!(e.grpc.value, DEFAULT_GRPC.parse().unwrap());
    assert_eq!(e.data_dir.source, Source::Default);
}

#[test]
fn redacted_headers_come_from_the_flag_the_variable_the_file_or_the_default() {
    let e = parse("").unwrap();
    assert_eq!(e.redaction.value, Redaction::default());
    assert_eq!(e.redaction.source, Source::Default);
    assert!(
        describe(&e).contains(
            "redaction.headers = authorization, cookie, proxy-authorization, set-cookie, \
             x-api-key  (default)"
        ),
        "{}",
        describe(&e)
    );
    let file = parse_file("[redaction]\nheaders = [\"X-Secret\"]\n").unwrap();
    let e = resolve(file, &env(&[]), &Flags::default()).unwrap();
    assert!(e.redaction.value.covers("x-secret") && !e.redaction.value.covers("cookie"));
    assert_eq!(e.redaction.source, Source::File);
    assert_eq!(
        parse("[redaction]\nheaders = []\n")
            .unwrap()
            .redaction
            .value,
        Redaction::none()
    );

    let vars = [("FERRY_REDACTION_HEADERS", "x-a, X-B")];
    let file = parse_file("[redaction]\nheaders = [\"x-secret\"]\n").unwrap();
    let e = resolve(file, &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.redaction.value, Redaction::new(["x-a", "x-b"]).unwrap());
    assert_eq!(e.redaction.source, Source::Env("FERRY_REDACTION_HEADERS"));
    let none = [("FERRY_REDACTION_HEADERS", "none")];
    let e = resolve(ConfigFile::default(), &env(&none), &Flags::default()).unwrap();
    assert!(e.redaction.value.is_empty());
    assert!(describe(&e).contains("redaction.headers = none  (env FERRY_REDACTION_HEADERS)"));

    let flags = Flags {
        redact_headers: vec!["x-flag".into(), "x-other".into()],
        ..Flags::default()
    };
    let e = resolve(ConfigFile::default(), &env(&vars), &flags).unwrap();
    assert_eq!(
        e.redaction.value,
        Redaction::new(["x-flag", "x-other"]).unwrap()
    );
    assert_eq!(e.redaction.source, Source::Flag("--redact-header"));

    let e = |r: anyhow::Result<Effective>| format!("{:#}", r.unwrap_err());
    assert!(e(parse("[redaction]\nheaders = [\"\"]\n")).contains("redaction.headers"));
    let bad = [("FERRY_REDACTION_HEADERS", "a,,b")];
    assert!(
        e(resolve(
            ConfigFile::default(),
            &env(&bad),
            &Flags::default()
        ))
        .contains("FERRY_REDACTION_HEADERS")
    );
}

#[test]
fn a_bad_variable_is_named_with_its_value() {
    let vars = [("FERRY_LIMITS_MAX_BATCH", "lots")];
    let e = resolve(ConfigFile::default(), &env(&vars), &Flags::default()).unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains("FERRY_LIMITS_MAX_BATCH=\"lots\""), "{e}");
    let vars = [("FERRY_TLS_CERT", "/c.pem")];
    let e = resolve(ConfigFile::default(), &env(&vars), &Flags::default()).unwrap_err();
    assert!(format!("{e:#}").contains("env FERRY_TLS_CERT"), "{e:#}");
}

#[test]
fn the_sqs_endpoint_is_on_by_default_and_off_where_it_would_be_an_open_door() {
    let open = parse("").unwrap();
    assert!(open.aws_enabled.value);
    assert_eq!(open.aws.value, ferry_aws::DEFAULT_ADDR.parse().unwrap());
    assert_eq!(open.aws_account_id.value, "000000000000");
    assert_eq!(open.aws_region.value, "us-east-1");
    let file =
        "[aws]\naddr = \"127.0.0.1:9324\"\naccount_id = \"123456789012\"\nregion = \"eu-west-1\"\n";
    let vars = [("FERRY_AWS_ADDR", "127.0.0.1:4000")];
    let e = resolve(parse_file(file).unwrap(), &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.aws.value, "127.0.0.1:4000".parse().unwrap());
    assert_eq!(e.aws.source, Source::Env("FERRY_AWS_ADDR"));
    assert_eq!(e.aws_account_id.value, "123456789012");
    assert!(
        describe(&e).contains("aws.region = eu-west-1  (file)"),
        "{}",
        describe(&e)
    );
    let flags = Flags {
        aws: Some("127.0.0.1:5000".parse().unwrap()),
        no_aws: true,
        ..Flags::default()
    };
    let e = resolve(parse_file(file).unwrap(), &env(&vars), &flags).unwrap();
    assert_eq!(e.aws.source, Source::Flag("--aws-addr"));
    assert!(!e.aws_enabled.value);
    // Tokens protect the other listeners; an unverified SQS endpoint beside them would not.
    let tokens = format!(
        "[[auth.tokens]]\nname = \"a\"\nsha256 = \"{HASH}\"\npermissions = [\"admin:#\"]\n"
    );
    assert!(!parse(&tokens).unwrap().aws_enabled.value);
    let refused = format!(
        "{:#}",
        parse(&format!("[aws]\nenabled = true\n{tokens}")).unwrap_err()
    );
    assert!(refused.contains("no [[aws.credentials]]"), "{refused}");
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    assert!(e("[aws]\naccount_id = \"12\"\n").contains("12 digits"));
    assert!(e("[aws]\nregion = \"US East\"\n").contains("region"));
    assert!(e("[aws]\nport = 1\n").contains("port"));
}

const KEY: &str = "[[aws.credentials]]\naccess_key_id = \"AKIAORDERS0000000001\"\n";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

#[test]
fn aws_credentials_take_their_secret_from_the_file_a_variable_or_a_file_and_never_show_it() {
    let inline = format!(
        "{KEY}secret_access_key = \"{SECRET}\"\nname = \"orders-service\"\n\
         permissions = [\"publish:orders.*\", \"dlq:orders.dlq\"]\n"
    );
    let e = parse(&inline).unwrap();
    let key = &e.aws_access_keys[0];
    assert_eq!(key.id, "AKIAORDERS0000000001");
    assert_eq!(key.secret, SECRET);
    assert_eq!(key.name.as_deref(), Some("orders-service"));
    assert_eq!(key.permissions.len(), 2);
    let described = describe(&e);
    assert!(
        described.contains(
            "AKIAORDERS0000000001 (user orders-service): publish:orders.*, dead_letters:orders.dlq"
        ),
        "{described}"
    );
    assert!(!described.contains(SECRET));
    assert!(!format!("{e:?}").contains(SECRET));
    assert!(!format!("{:?}", parse_file(&inline).unwrap()).contains(SECRET));

    let from_env = format!("{KEY}secret_access_key_env = \"ORDERS_SECRET\"\npermissions = []\n");
    let vars = [("ORDERS_SECRET", SECRET)];
    let e = resolve(
        parse_file(&from_env).unwrap(),
        &env(&vars),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(e.aws_access_keys[0].secret, SECRET);
    let unset = format!("{:#}", parse(&from_env).unwrap_err());
    assert!(
        unset.contains("ORDERS_SECRET") && unset.contains("not set"),
        "{unset}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secret");
    std::fs::write(&path, format!("{SECRET}\n")).unwrap();
    let from_file = format!(
        "{KEY}secret_access_key_file = {:?}\npermissions = []\n",
        path.display().to_string()
    );
    assert_eq!(parse(&from_file).unwrap().aws_access_keys[0].secret, SECRET);
}

#[test]
fn aws_credentials_mistakes_are_refused() {
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    let both = format!(
        "{KEY}secret_access_key = \"a\"\nsecret_access_key_env = \"B\"\npermissions = []\n"
    );
    assert!(e(&both).contains("more than one"), "{}", e(&both));
    let none = format!("{KEY}permissions = []\n");
    assert!(e(&none).contains("no secret"), "{}", e(&none));
    let bad_permission = format!("{KEY}secret_access_key = \"s\"\npermissions = [\"write:x\"]\n");
    assert!(
        e(&bad_permission).contains("write:x"),
        "{}",
        e(&bad_permission)
    );
    let twice = format!(
        "{KEY}secret_access_key = \"s\"\npermissions = []\n{KEY}secret_access_key = \"t\"\npermissions = []\n"
    );
    assert!(e(&twice).contains("used twice"), "{}", e(&twice));
    let bad_id = "[[aws.credentials]]\naccess_key_id = \"AK/ID\"\nsecret_access_key = \"s\"\npermissions = []\n";
    assert!(e(bad_id).contains("letters and digits"), "{}", e(bad_id));
    let bad_name = format!("{KEY}secret_access_key = \"s\"\nname = \"a b\"\npermissions = []\n");
    assert!(e(&bad_name).contains("IAM user name"), "{}", e(&bad_name));
    let bad_account =
        format!("{KEY}secret_access_key = \"s\"\naccount_id = \"1111\"\npermissions = []\n");
    assert!(e(&bad_account).contains("12 digits"), "{}", e(&bad_account));
}

#[test]
fn aws_credentials_of_another_account_are_kept_and_shown_as_cross_account() {
    let foreign = format!(
        "[aws]\naccount_id = \"123456789012\"\n{KEY}secret_access_key = \"s\"\n\
         account_id = \"111111111111\"\npermissions = [\"publish:#\"]\n\
         [[aws.credentials]]\naccess_key_id = \"AKIAOWN\"\nsecret_access_key = \"t\"\n\
         account_id = \"123456789012\"\npermissions = []\n"
    );
    let e = parse(&foreign).unwrap();
    assert_eq!(
        e.aws_access_keys[0].account_id.as_deref(),
        Some("111111111111")
    );
    let described = describe(&e);
    assert!(
        described.contains("AKIAORDERS0000000001 (root of account 111111111111, cross-account)"),
        "{described}"
    );
    assert!(described.contains("AKIAOWN (root): "), "{described}");
    let plain = format!("{KEY}secret_access_key = \"s\"\npermissions = []\n");
    assert_eq!(parse(&plain).unwrap().aws_access_keys[0].account_id, None);
}

#[test]
fn with_credentials_the_aws_endpoint_is_served_beside_tokens_and_beyond_loopback() {
    let key = format!("{KEY}secret_access_key = \"s\"\npermissions = [\"admin:#\"]\n");
    let tokens = format!(
        "[[auth.tokens]]\nname = \"a\"\nsha256 = \"{HASH}\"\npermissions = [\"admin:#\"]\n"
    );
    let e = parse(&format!("{tokens}{key}")).unwrap();
    assert!(e.aws_enabled.value);
    assert_eq!(e.aws_enabled.source, Source::Default);
    let wide = "[aws]\naddr = \"0.0.0.0:4566\"\n";
    let refused = format!("{:#}", parse(wide).unwrap_err());
    assert!(refused.contains("beyond the loopback"), "{refused}");
    assert!(parse(&format!("{wide}{key}")).unwrap().aws_enabled.value);
    // Switched off, an open endpoint may name any address: nothing listens there.
    assert!(
        !parse(&format!("{wide}enabled = false\n"))
            .unwrap()
            .aws_enabled
            .value
    );
    // With TLS it is off unless asked for: it speaks plain HTTP.
    let tls = "[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\n";
    let file = parse_file(&format!("{tls}{key}")).unwrap();
    let e = resolve(file, &|_| None, &Flags::default()).unwrap();
    assert!(!e.aws_enabled.value);
    let asked = parse_file(&format!("{tls}[aws]\nenabled = true\n{key}")).unwrap();
    assert!(
        resolve(asked, &|_| None, &Flags::default())
            .unwrap()
            .aws_enabled
            .value
    );
}

#[test]
fn the_kafka_endpoint_is_on_by_default_on_loopback_and_off_where_it_would_be_open() {
    let open = parse("").unwrap();
    assert!(open.kafka_enabled.value);
    assert_eq!(open.kafka.value, ferry_kafka::DEFAULT_ADDR.parse().unwrap());
    assert_eq!(open.kafka_advertised.value, None);
    assert_eq!(open.kafka_default_partitions.value, 1);
    assert!(open.kafka_auto_create_topics.value);
    let file = "[kafka]\naddr = \"127.0.0.1:19092\"\nadvertised = \"kafka.local:19092\"\n\
                default_partitions = 6\nauto_create_topics = false\nmax_frame_bytes = 4096\n";
    let vars = [
        ("FERRY_KAFKA_ADDR", "127.0.0.1:29092"),
        ("FERRY_KAFKA_DEFAULT_PARTITIONS", "3"),
    ];
    let e = resolve(parse_file(file).unwrap(), &env(&vars), &Flags::default()).unwrap();
    assert_eq!(e.kafka.value, "127.0.0.1:29092".parse().unwrap());
    assert_eq!(e.kafka.source, Source::Env("FERRY_KAFKA_ADDR"));
    assert_eq!(e.kafka_default_partitions.value, 3);
    assert!(!e.kafka_auto_create_topics.value);
    assert_eq!(e.kafka_max_frame_bytes.value, 4096);
    let described = describe(&e);
    assert!(
        described.contains("kafka.advertised = kafka.local:19092  (file)"),
        "{described}"
    );
    assert!(
        described.contains("kafka.default_partitions = 3  (env FERRY_KAFKA_DEFAULT_PARTITIONS)"),
        "{described}"
    );
    let flags = Flags {
        kafka: Some("127.0.0.1:39092".parse().unwrap()),
        no_kafka: true,
        ..Flags::default()
    };
    let e = resolve(parse_file(file).unwrap(), &env(&vars), &flags).unwrap();
    assert_eq!(e.kafka.source, Source::Flag("--kafka-addr"));
    assert!(!e.kafka_enabled.value);
    assert_eq!(e.kafka_enabled.source, Source::Flag("--no-kafka"));

    // Without [auth] the endpoint is open: loopback only.
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    assert!(e("[kafka]\naddr = \"0.0.0.0:9092\"\n").contains("loopback"));
    assert!(
        parse("[kafka]\naddr = \"0.0.0.0:9092\"\nenabled = false\n").is_ok(),
        "an address beyond loopback is fine while the endpoint is off"
    );
    assert!(e("[kafka]\nadvertised = \"nohost\"\n").contains("kafka.advertised"));
    assert!(e("[kafka]\ndefault_partitions = 0\n").contains("default_partitions"));
    assert!(e("[kafka]\nmax_frame_bytes = 10\n").contains("max_frame_bytes"));
    assert!(e("[kafka]\nport = 1\n").contains("port"));

    // The group session timeouts: Kafka's defaults, set by the file or the environment,
    // the minimum at least 1 and at most the maximum.
    assert_eq!(open.kafka_group_min_session_timeout_ms.value, 6_000);
    assert_eq!(open.kafka_group_max_session_timeout_ms.value, 1_800_000);
    let e2 = resolve(
        parse_file("[kafka]\ngroup_max_session_timeout_ms = 60000\n").unwrap(),
        &env(&[("FERRY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS", "1000")]),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(e2.kafka_group_min_session_timeout_ms.value, 1_000);
    assert_eq!(e2.kafka_group_max_session_timeout_ms.value, 60_000);
    assert!(
        describe(&e2).contains(
            "kafka.group_min_session_timeout_ms = 1000  (env FERRY_KAFKA_GROUP_MIN_SESSION_TIMEOUT_MS)"
        ),
        "{}",
        describe(&e2)
    );
    assert!(e("[kafka]\ngroup_min_session_timeout_ms = 0\n").contains("group_min_session"));

    // The initial rebalance delay: Kafka's 3 s, set by the file or the environment, never
    // negative.
    assert_eq!(open.kafka_group_initial_rebalance_delay_ms.value, 3_000);
    let delay = |file: &str, vars: &[(&str, &str)]| {
        resolve(parse_file(file).unwrap(), &env(vars), &Flags::default())
            .unwrap()
            .kafka_group_initial_rebalance_delay_ms
            .value
    };
    assert_eq!(
        delay("[kafka]\ngroup_initial_rebalance_delay_ms = 0\n", &[]),
        0
    );
    assert_eq!(
        delay(
            "[kafka]\ngroup_initial_rebalance_delay_ms = 0\n",
            &[("FERRY_KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "250")]
        ),
        250
    );
    assert!(
        e("[kafka]\ngroup_initial_rebalance_delay_ms = -1\n")
            .contains("group_initial_rebalance_delay_ms")
    );
    assert!(
        e("[kafka]\ngroup_min_session_timeout_ms = 9000\ngroup_max_session_timeout_ms = 8000\n")
            .contains("group_max_session")
    );
}

/// A TLS section naming files (resolving does not read them).
const TLS: &str = "[tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n";

fn tokens() -> String {
    format!(
        "[[auth.tokens]]\nname = \"orders\"\nsha256 = \"{HASH}\"\npermissions = [\"admin:#\"]\n"
    )
}

#[test]
fn beside_tokens_kafka_is_served_with_sasl_required_and_tls_follows_the_tls_section() {
    let e = parse(&tokens()).unwrap();
    assert!(e.kafka_enabled.value);
    assert_eq!(e.kafka_enabled.source, Source::Default);
    let users = e.kafka_users.as_ref().expect("SASL users from [auth]");
    assert_eq!(users.len(), 1);
    assert_eq!(users.mechanisms(), vec!["PLAIN"]);
    assert!(!e.kafka_tls.value);
    let described = describe(&e);
    assert!(
        described.contains("kafka.sasl = required: PLAIN (1 user(s) from [auth])  (file)"),
        "{described}"
    );
    assert!(!described.contains(HASH));

    let e = parse(&format!("{TLS}{}", tokens())).unwrap();
    assert!(e.kafka_enabled.value);
    assert_eq!(
        e.kafka_tls,
        Setting {
            value: true,
            source: Source::Default
        }
    );
    let e = resolve(
        parse_file(&format!("{TLS}{}", tokens())).unwrap(),
        &env(&[("FERRY_KAFKA_TLS", "false")]),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(e.kafka_tls.source, Source::Env("FERRY_KAFKA_TLS"));
    assert!(!e.kafka_tls.value);
    // TLS without tokens: SSL, no SASL.
    let e = parse(TLS).unwrap();
    assert!(e.kafka_enabled.value && e.kafka_tls.value && e.kafka_users.is_none());
}

#[test]
fn kafka_beyond_loopback_needs_sasl_and_tls_or_an_explicit_plaintext_opt_in() {
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    let wide = "[kafka]\naddr = \"0.0.0.0:9092\"\n";
    assert!(e(&format!("{wide}{TLS}")).contains("without [auth]"));
    assert!(e(&format!("{wide}{}", tokens())).contains("in the clear"));
    assert!(parse(&format!("{wide}{TLS}{}", tokens())).is_ok());
    let opted = format!("{wide}allow_plaintext_sasl = true\n{}", tokens());
    assert!(parse(&opted).unwrap().kafka_allow_plaintext_sasl.value);
    let e2 = resolve(
        parse_file(&format!("{wide}{}", tokens())).unwrap(),
        &env(&[("FERRY_KAFKA_ALLOW_PLAINTEXT_SASL", "true")]),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(
        e2.kafka_allow_plaintext_sasl.source,
        Source::Env("FERRY_KAFKA_ALLOW_PLAINTEXT_SASL")
    );
    // Options that would be ignored are refused instead.
    assert!(e("[kafka]\ntls = true\n").contains("needs [tls]"));
    assert!(e("[kafka]\nallow_plaintext_sasl = true\n").contains("without [auth]"));
}

#[test]
fn a_scram_secret_comes_from_the_environment_or_a_file_and_must_be_the_hashed_token() {
    // HASH is the SHA-256 of "test".
    let with = |key: &str| format!("{}{key}\n", tokens());
    let file = with("scram_secret_env = \"ORDERS_TOKEN\"");
    let e = resolve(
        parse_file(&file).unwrap(),
        &env(&[("ORDERS_TOKEN", "test")]),
        &Flags::default(),
    )
    .unwrap();
    let users = e.kafka_users.unwrap();
    assert_eq!(
        users.mechanisms(),
        vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    );

    let wrong = resolve(
        parse_file(&file).unwrap(),
        &env(&[("ORDERS_TOKEN", "not-it")]),
        &Flags::default(),
    )
    .unwrap_err();
    assert!(
        format!("{wrong:#}").contains("is not the token"),
        "{wrong:#}"
    );
    let unset = format!("{:#}", parse(&file).unwrap_err());
    assert!(unset.contains("ORDERS_TOKEN"), "{unset}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, "test\n").unwrap();
    let from_file = with(&format!(
        "scram_secret_file = {:?}",
        path.display().to_string()
    ));
    assert_eq!(
        parse(&from_file)
            .unwrap()
            .kafka_users
            .unwrap()
            .mechanisms()
            .len(),
        3
    );
    let both = format!(
        "{}scram_secret_env = \"X\"\nscram_secret_file = {:?}\n",
        tokens(),
        path.display().to_string()
    );
    assert!(format!("{:#}", parse(&both).unwrap_err()).contains("keep one"));
}

#[test]
fn the_pubsub_endpoint_is_on_by_default_at_the_emulators_address_and_off_where_it_would_be_open() {
    let on = parse("").unwrap();
    assert!(on.pubsub_enabled.value);
    assert_eq!(on.pubsub_enabled.source, Source::Default);
    assert_eq!(on.pubsub.value, "127.0.0.1:8085".parse().unwrap());
    assert!(describe(&on).contains("pubsub.enabled = true  (default)"));

    // An address from any layer moves it and asks for it.
    let flags = Flags {
        pubsub: Some("127.0.0.1:18085".parse().unwrap()),
        ..Flags::default()
    };
    let e = resolve(parse_file("").unwrap(), &|_| None, &flags).unwrap();
    assert!(e.pubsub_enabled.value);
    assert_eq!(e.pubsub_enabled.source, Source::Flag("--pubsub-addr"));
    let vars = [("FERRY_PUBSUB_ADDR", "127.0.0.1:28085")];
    let e = resolve(parse_file("").unwrap(), &env(&vars), &Flags::default()).unwrap();
    assert!(e.pubsub_enabled.value);
    assert_eq!(e.pubsub.value, "127.0.0.1:28085".parse().unwrap());

    // Turned off by --no-pubsub, the variable or the file, over an address.
    let no_pubsub = Flags {
        no_pubsub: true,
        ..flags
    };
    let e = resolve(parse_file("").unwrap(), &|_| None, &no_pubsub).unwrap();
    assert!(!e.pubsub_enabled.value);
    assert_eq!(e.pubsub_enabled.source, Source::Flag("--no-pubsub"));
    let vars = [("FERRY_PUBSUB_ENABLED", "false")];
    let e = resolve(parse_file("").unwrap(), &env(&vars), &Flags::default()).unwrap();
    assert!(!e.pubsub_enabled.value);
    assert!(describe(&e).contains("pubsub.enabled = false  (env FERRY_PUBSUB_ENABLED)"));
    let off = parse("[pubsub]\nenabled = false\naddr = \"0.0.0.0:8085\"\n").unwrap();
    assert!(!off.pubsub_enabled.value);

    // It authenticates no one: never beyond loopback...
    let e = |t: &str| format!("{:#}", parse(t).unwrap_err());
    assert!(e("[pubsub]\naddr = \"0.0.0.0:8085\"\n").contains("beyond the loopback"));
    // ...and beside [auth] or [tls] the default gives way, with the source serve reads
    // to say why it is off.
    for guard in [tokens(), TLS.to_owned()] {
        let e = parse(&guard).unwrap();
        assert!(!e.pubsub_enabled.value, "{guard}");
        assert_eq!(e.pubsub_enabled.source, Source::Default);
        // Asked for there, from any layer, it is refused rather than left off.
        let enabled = format!("[pubsub]\nenabled = true\n\n{guard}");
        assert!(
            format!("{:#}", parse(&enabled).unwrap_err()).contains("no authentication"),
            "{guard}"
        );
        let vars = [("FERRY_PUBSUB_ADDR", "127.0.0.1:18085")];
        let refused = resolve(parse_file(&guard).unwrap(), &env(&vars), &Flags::default());
        let refused = format!("{:#}", refused.unwrap_err());
        assert!(
            refused.contains("no authentication") && refused.contains("FERRY_PUBSUB_ADDR"),
            "{refused}"
        );
        // --no-pubsub beside an address is no request for it.
        let e = resolve(parse_file(&guard).unwrap(), &env(&vars), &no_pubsub).unwrap();
        assert!(!e.pubsub_enabled.value);
    }
}
