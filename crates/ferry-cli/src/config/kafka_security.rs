//! The Kafka endpoint's SASL users, made from `[[auth.tokens]]`: the user name is the
//! token's name and the password the token (see `ferry_kafka::auth`).
//!
//! PLAIN checks a password against the token's SHA-256, so every token works with it.
//! SCRAM needs keys derived from the token itself, which its hash cannot give, so a token
//! is offered to SCRAM only when the server is given the token at start, from an
//! environment variable (`scram_secret_env`) or a file (`scram_secret_file`) — never the
//! config file, which holds hashes only. The secret is checked against the `sha256` (a
//! typo would otherwise only show as failed logins) and dropped once the keys are derived.

use std::sync::Arc;

use anyhow::{Context, bail};
use ferry_server::{Permission, parse_sha256_hex};

use super::{Env, Token};

/// The users, `None` without `[auth]` (an open endpoint).
pub(super) fn kafka_users(
    tokens: Option<&[Token]>,
    env: Env,
) -> anyhow::Result<Option<Arc<ferry_kafka::Users>>> {
    let Some(tokens) = tokens else {
        return Ok(None);
    };
    let users = tokens
        .iter()
        .map(|t| {
            let context = || format!("auth.tokens {:?}", t.name);
            let permissions = t
                .permissions
                .iter()
                .map(|p| p.parse::<Permission>())
                .collect::<Result<Vec<_>, _>>()
                .with_context(context)?;
            Ok(ferry_kafka::User {
                name: t.name.clone(),
                sha256: parse_sha256_hex(&t.sha256).with_context(context)?,
                permissions,
                scram_secret: scram_secret(t, env).with_context(context)?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let users = ferry_kafka::Users::new(users).context("the Kafka endpoint's SASL users")?;
    Ok(Some(Arc::new(users)))
}

fn scram_secret(token: &Token, env: Env) -> anyhow::Result<Option<String>> {
    let secret = match (&token.scram_secret_env, &token.scram_secret_file) {
        (None, None) => return Ok(None),
        (Some(variable), None) => env(variable)
            .with_context(|| format!("scram_secret_env names {variable:?}, which is not set"))?,
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading scram_secret_file {}", path.display()))?;
            // A file written by `echo` ends in a newline that is not part of the token.
            text.trim_end_matches(['\r', '\n']).to_owned()
        }
        (Some(_), Some(_)) => {
            bail!("both scram_secret_env and scram_secret_file are set: keep one")
        }
    };
    if secret.is_empty() {
        bail!("the SCRAM secret is empty");
    }
    Ok(Some(secret))
}
