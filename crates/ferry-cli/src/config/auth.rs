//! The `[auth]` section turned into the tokens the server checks calls against.

use anyhow::{Context, bail};
use ferry_server::{AuthConfig, Permission, TokenGrant, parse_sha256_hex};

use super::Auth;

/// The `[auth]` section, checked: names unique, hashes and permissions well-formed.
pub(super) fn auth_config(auth: Auth) -> anyhow::Result<AuthConfig> {
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
