//! The server's configuration file (`ferry serve --config ferry.toml`): authentication and
//! limits. Listeners and the data directory come from flags or `FERRY_*` variables (see
//! `ferry serve --help`); the file holds what does not fit on a command line.
//!
//! ```toml
//! [limits]
//! max_batch = 1000          # messages per publish, default 1000
//! max_connections = 512     # per listener, default unlimited
//!
//! [[auth.tokens]]
//! name = "orders-service"
//! sha256 = "9f86d0…"        # `ferry token hash TOKEN`; the token itself never goes here
//! permissions = ["publish:orders.*", "consume:orders.#"]
//! publish_rate = 500        # messages per second, optional
//! ```
//!
//! With an `[auth]` section every call needs `authorization: Bearer <token>` (except
//! `/healthz`, `/readyz` and `/metrics`); without one the server is open and should listen
//! on the loopback interface only.

use std::path::Path;

use anyhow::{Context, bail};
use ferry_server::auth::{AuthConfig, Permission, TokenGrant, parse_sha256_hex};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub limits: Limits,
    pub auth: Option<Auth>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_batch: Option<usize>,
    pub max_connections: Option<usize>,
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

/// What the server runs with, checked.
#[derive(Debug)]
pub struct Effective {
    pub auth: Option<AuthConfig>,
    pub max_batch: Option<usize>,
    pub max_connections: Option<usize>,
}

pub fn load(path: &Path) -> anyhow::Result<Effective> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the config file {}", path.display()))?;
    parse(&text).with_context(|| format!("in the config file {}", path.display()))
}

pub fn parse(text: &str) -> anyhow::Result<Effective> {
    let file: ConfigFile = toml::from_str(text).context("not a valid Ferry config")?;
    if file.limits.max_batch == Some(0) || file.limits.max_connections == Some(0) {
        bail!("limits: max_batch and max_connections must be at least 1");
    }
    let auth = file
        .auth
        .map(|auth| {
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
                            p.parse::<Permission>().with_context(|| {
                                format!("auth.tokens {:?}: permission {p:?}", t.name)
                            })
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
            anyhow::Ok(AuthConfig { tokens })
        })
        .transpose()?;
    Ok(Effective {
        auth,
        max_batch: file.limits.max_batch,
        max_connections: file.limits.max_connections,
    })
}

/// The effective configuration as text, for `ferry config check`: token names and
/// permissions, never hashes.
pub fn describe(effective: &Effective) -> String {
    let mut out = String::new();
    let or_default = |v: Option<usize>, d: &str| v.map_or(d.to_owned(), |v| v.to_string());
    out.push_str(&format!(
        "limits: max_batch = {}, max_connections = {}\n",
        or_default(effective.max_batch, "1000 (default)"),
        or_default(effective.max_connections, "unlimited (default)")
    ));
    match &effective.auth {
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
        assert_eq!(effective.max_batch, Some(10));
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
    }
}
