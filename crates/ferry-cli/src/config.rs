//! The server's configuration (`ferry serve`): listeners, data directory, limits, TLS,
//! header redaction and API tokens, from a TOML file (`--config FILE`, FERRY_CONFIG), `FERRY_<SECTION>_<KEY>`
//! environment variables and flags. Each value is the first found of: its flag, its
//! variable, the file, the default. Tokens come from the file only.
//!
//! ```toml
//! [grpc]
//! addr = "127.0.0.1:7070"   # FERRY_GRPC_ADDR, --grpc
//!
//! [http]
//! addr = "127.0.0.1:7071"   # FERRY_HTTP_ADDR, --http
//! enabled = true            # FERRY_HTTP_ENABLED, --no-http
//! metrics_auth = true       # FERRY_HTTP_METRICS_AUTH: /metrics needs a token with a
//!                           # `metrics` permission; default true with [auth], and only
//!                           # settable with it (without tokens everything is open)
//!
//! [data]
//! dir = "./ferry-data"      # FERRY_DATA_DIR, --data-dir
//! disk_reserve_mib = 64     # FERRY_DATA_DISK_RESERVE_MIB: free space publishes leave for
//!                           # acks and housekeeping; below it publishes are refused
//!
//! [limits]
//! max_batch = 1000          # FERRY_LIMITS_MAX_BATCH: messages per publish, default 1000
//! max_connections = 256     # FERRY_LIMITS_MAX_CONNECTIONS: per listener, default 256
//! max_read_bytes = 2097152  # FERRY_LIMITS_MAX_READ_BYTES: message bytes one dead-letter
//!                           # peek, topic read or group poll answers with, default 2 MiB
//!
//! [tls]                     # both listeners over TLS only
//! cert = "/etc/ferry/cert.pem"  # FERRY_TLS_CERT, --tls-cert: the server's certificate,
//!                               # then intermediates (PEM)
//! key = "/etc/ferry/key.pem"    # FERRY_TLS_KEY, --tls-key: PKCS#8, PKCS#1 or SEC1 (PEM)
//!
//! [redaction]               # FERRY_REDACTION_HEADERS (comma-separated), --redact-header
//! headers = ["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"]
//!
//! [[auth.tokens]]
//! name = "orders-service"
//! sha256 = "9f86d0…"        # `ferry token hash TOKEN`; the token itself never goes here
//! permissions = ["publish:orders.*", "consume:orders.#", "dlq:orders.dlq"]
//! publish_rate = 500        # messages per second, optional
//! ```
//!
//! `redaction.headers` names the headers (any case) whose values dead-letter peeks show as
//! `***`, over gRPC (so in `ferry dlq list/peek`) and HTTP; the default is the list above.
//! `headers = []`, or `none` in the variable or the flag, shows every value. Consumers and
//! redrives always get the real headers.
//!
//! A permission is `<action>:<pattern>`: `publish`, `consume` (ordinary queues, topics),
//! `dead_letters` or `dlq` (peek, receive from and redrive dead-letter queues; `consume`
//! does not read them), `admin`; see `ferry_server::AuthConfig` for what each call needs.
//!
//! With an `[auth]` section every call needs `authorization: Bearer <token>` (except
//! `/healthz` and `/readyz`; `/metrics` too unless `http.metrics_auth = false`); without one the server is open and should listen
//! on the loopback interface only. Relative paths are taken from the working directory.
//! A variable set to the empty string counts as unset.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, bail};
use ferry_server::{AuthConfig, Permission, Redaction, TlsConfig, TokenGrant, parse_sha256_hex};
use serde::Deserialize;

pub const DEFAULT_GRPC: &str = "127.0.0.1:7070";
pub const DEFAULT_HTTP: &str = "127.0.0.1:7071";
pub const DEFAULT_DATA_DIR: &str = "./ferry-data";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub grpc: Grpc,
    #[serde(default)]
    pub http: Http,
    #[serde(default)]
    pub data: Data,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub tls: Tls,
    #[serde(default)]
    pub redaction: RedactionSection,
    pub auth: Option<Auth>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grpc {
    pub addr: Option<SocketAddr>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http {
    pub addr: Option<SocketAddr>,
    pub enabled: Option<bool>,
    pub metrics_auth: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Data {
    pub dir: Option<PathBuf>,
    pub disk_reserve_mib: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_batch: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_read_bytes: Option<usize>,
}

/// The server's certificate chain and private key, PEM files.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// The headers whose values dead-letter peeks mask.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactionSection {
    pub headers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    #[serde(default)]
    pub tokens: Vec<Token>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    pub name: String,
    pub sha256: String,
    pub permissions: Vec<String>,
    pub publish_rate: Option<u32>,
}

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env(&'static str),
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File => f.write_str("file"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Flag(name) => write!(f, "flag {name}"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// What flags set (`None`, `false`: not given).
#[derive(Debug, Default)]
pub struct Flags {
    pub grpc: Option<SocketAddr>,
    pub http: Option<SocketAddr>,
    pub no_http: bool,
    pub data_dir: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `--redact-header`, repeated (empty: not given).
    pub redact_headers: Vec<String>,
}

/// What the server runs with, checked.
#[derive(Debug)]
pub struct Effective {
    pub grpc: Setting<SocketAddr>,
    pub http: Setting<SocketAddr>,
    pub http_enabled: Setting<bool>,
    /// Whether `/metrics` needs a token; `false` when there are no tokens to need.
    pub metrics_auth: Setting<bool>,
    pub data_dir: Setting<PathBuf>,
    /// `None`: the broker's default.
    pub disk_reserve_mib: Setting<Option<u64>>,
    pub max_batch: Setting<Option<usize>>,
    pub max_connections: Setting<Option<usize>>,
    pub max_read_bytes: Setting<Option<usize>>,
    pub tls_cert: Setting<Option<PathBuf>>,
    pub tls_key: Setting<Option<PathBuf>>,
    pub redaction: Setting<Redaction>,
    pub auth: Option<AuthConfig>,
}

/// The environment, as a function, so that tests need not change the process's own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment; a variable set to the empty string counts as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Reads and checks the config file at `path` (if any) and layers `env` and `flags` over
/// it. TLS files are read and checked too, so that a wrong path or a key that does not
/// fit its certificate is found before anything opens.
pub fn load(path: Option<&Path>, env: Env, flags: &Flags) -> anyhow::Result<Effective> {
    let file = match path {
        None => ConfigFile::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the config file {}", path.display()))?;
            parse_file(&text).with_context(|| format!("in the config file {}", path.display()))?
        }
    };
    let effective = resolve(file, env, flags)?;
    tls(&effective)?;
    Ok(effective)
}

/// The server's TLS configuration, read from the files the effective config names.
pub fn tls(effective: &Effective) -> anyhow::Result<Option<TlsConfig>> {
    match (&effective.tls_cert.value, &effective.tls_key.value) {
        (Some(cert), Some(key)) => {
            TlsConfig::from_pem_files(cert, key)
                .map(Some)
                .with_context(|| {
                    format!(
                        "tls (cert from {}, key from {})",
                        effective.tls_cert.source, effective.tls_key.source
                    )
                })
        }
        _ => Ok(None),
    }
}

pub fn parse_file(text: &str) -> anyhow::Result<ConfigFile> {
    toml::from_str(text).context("not a valid Ferry config")
}

/// The value of the first of `flag`, the variable `name` and `file`; `None` if none is
/// set.
fn layer<T: FromStr>(
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
    fn or_default(setting: Option<Setting<T>>, default: T) -> Setting<T> {
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
    for limit in [&max_batch, &max_connections, &max_read_bytes]
        .into_iter()
        .flatten()
    {
        if limit.value == 0 {
            bail!(
                "limits: max_batch, max_connections and max_read_bytes must be at least 1 \
                 (from {})",
                limit.source
            );
        }
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
    Ok(Effective {
        grpc: Setting::or_default(grpc, DEFAULT_GRPC.parse().expect("a socket address")),
        http: Setting::or_default(http, DEFAULT_HTTP.parse().expect("a socket address")),
        http_enabled: Setting::or_default(http_enabled, true),
        metrics_auth,
        data_dir: Setting::or_default(data_dir, DEFAULT_DATA_DIR.into()),
        disk_reserve_mib: Setting::optional(disk_reserve_mib),
        max_batch: Setting::optional(max_batch),
        max_connections: Setting::optional(max_connections),
        max_read_bytes: Setting::optional(max_read_bytes),
        tls_cert: Setting::optional(tls_cert),
        tls_key: Setting::optional(tls_key),
        redaction: Setting::or_default(redaction, Redaction::default()),
        auth: file.auth.map(auth).transpose()?,
    })
}

/// The `[auth]` section, checked: names unique, hashes and permissions well-formed.
fn auth(auth: Auth) -> anyhow::Result<AuthConfig> {
    let mut names = std::collections::BTreeSet::new();
    let tokens = auth
        .tokens
        .into_iter()
        .map(|t| {
            if !names.insert(t.name.clone()) {
                bail!("auth.tokens: the name {:?} is used twice", t.name);
            }
            let sha256 = parse_sha256_hex(&t.sha256)
                .with_context(|| format!("auth.tokens {:?}: sha256", t.name))?;
            let permissions = t
                .permissions
                .iter()
                .map(|p| {
                    p.parse::<Permission>()
                        .with_context(|| format!("auth.tokens {:?}: permission {p:?}", t.name))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            if t.publish_rate == Some(0) {
                bail!("auth.tokens {:?}: publish_rate must be at least 1", t.name);
            }
            Ok(TokenGrant {
                name: t.name,
                sha256,
                permissions,
                publish_rate: t.publish_rate,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(AuthConfig { tokens })
}

/// The file's text alone, checked, as [`resolve`] with no environment and no flags.
#[cfg(test)]
pub fn parse(text: &str) -> anyhow::Result<Effective> {
    resolve(parse_file(text)?, &|_| None, &Flags::default())
}

/// The effective configuration as text, for `ferry config check`: each value with where it
/// came from; token names and permissions, never hashes.
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
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

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
            e("[[auth.tokens]]\nname = \"a\"\nsha256 = \"xyz\"\npermissions = []\n")
                .contains("sha256")
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
                "limits.max_read_bytes = {}  (default)",
                ferry_server::DEFAULT_MAX_READ_BYTES
            ),
        ] {
            assert!(defaults.contains(&line), "{defaults}");
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
}
