//! Who may use the Kafka endpoint: the users SASL authenticates, made from Ferry's API
//! tokens, and the endpoint's [`Security`] (SASL users, TLS).
//!
//! **Tokens as Kafka users.** A Kafka user is a `[[auth.tokens]]` entry: the user name is
//! the token's `name`, the password the token itself, and what the user may do the token's
//! permissions (`authz.rs` maps each API onto them). PLAIN checks the password against the
//! token's SHA-256 — the same check as a bearer token on the other front ends, so PLAIN
//! works for every token. SCRAM needs keys derived from the password itself, which a hash
//! does not give: a token is offered to SCRAM only when its secret is given at start
//! ([`User::scram_secret`]); the keys are derived then (`scram.rs` says how and why) and
//! the secret is not kept.

pub mod plain;
pub mod scram;

use std::sync::Arc;

use ferry_access::{Action, Permission};
use sha2::{Digest, Sha256};

use scram::{Hash, OsRandom, Random, StoredCredential, same_bytes};

/// One user as the configuration gives it.
#[derive(Clone)]
pub struct User {
    /// The token's name: the SASL user name.
    pub name: String,
    /// The SHA-256 of the token, the PLAIN password.
    pub sha256: [u8; 32],
    pub permissions: Vec<Permission>,
    /// The token itself, when the user may authenticate with SCRAM; checked against
    /// `sha256` and dropped once SCRAM's keys are derived.
    pub scram_secret: Option<String>,
}

// By hand, so that printing a user never prints its secret.
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("permissions", &self.permissions)
            .field("scram", &self.scram_secret.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the users could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    #[error("the Kafka user name {name:?} is used twice: token names must be unique")]
    DuplicateUser { name: String },
    #[error(
        "token {name:?}: the secret given for SCRAM is not the token whose sha256 is \
         configured; give the token itself (`ferry token hash` of it is the sha256)"
    )]
    SecretMismatch { name: String },
    #[error("token {name:?}: the name is empty; a Kafka user name is the token's name")]
    EmptyName { name: String },
}

/// An authenticated user: its name and what it may do.
#[derive(Debug)]
pub struct Principal {
    pub name: String,
    permissions: Vec<Permission>,
}

impl Principal {
    pub fn new(name: impl Into<String>, permissions: Vec<Permission>) -> Principal {
        Principal {
            name: name.into(),
            permissions,
        }
    }

    pub fn may(&self, action: Action, name: &str) -> bool {
        self.permissions.iter().any(|p| p.allows(action, name))
    }

    /// Whether some permission of `action` matches every name (`admin:#`).
    pub fn may_everywhere(&self, action: Action) -> bool {
        self.permissions
            .iter()
            .any(|p| p.action == action && p.pattern.matches_every_name())
    }

    /// Whether the principal holds `action` on some name.
    pub fn holds(&self, action: Action) -> bool {
        self.permissions.iter().any(|p| p.action == action)
    }
}

struct Entry {
    principal: Arc<Principal>,
    sha256: [u8; 32],
    scram_sha256: Option<StoredCredential>,
    scram_sha512: Option<StoredCredential>,
}

/// The users SASL checks against.
pub struct Users {
    entries: Vec<Entry>,
    /// Salts for unknown SCRAM users (`scram::decoy_salt`), random per start.
    decoy_secret: [u8; 32],
    random: Arc<dyn Random>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.principal.name))
            .finish()
    }
}

impl Users {
    /// The users, with SCRAM keys derived for those whose secret is given.
    pub fn new(users: Vec<User>) -> Result<Users, SecurityError> {
        Users::with_random(users, Arc::new(OsRandom))
    }

    /// The same with salts and nonces from `random` (fixed in tests).
    pub fn with_random(users: Vec<User>, random: Arc<dyn Random>) -> Result<Users, SecurityError> {
        let mut names = std::collections::BTreeSet::new();
        let mut entries = Vec::with_capacity(users.len());
        for user in users {
            if user.name.is_empty() {
                return Err(SecurityError::EmptyName { name: user.name });
            }
            if !names.insert(user.name.clone()) {
                return Err(SecurityError::DuplicateUser { name: user.name });
            }
            let (scram_sha256, scram_sha512) = match &user.scram_secret {
                None => (None, None),
                Some(secret) => {
                    if !same_bytes(&token_hash(secret), &user.sha256) {
                        return Err(SecurityError::SecretMismatch { name: user.name });
                    }
                    let derive = |hash| StoredCredential::new(hash, secret.as_bytes(), &*random);
                    (Some(derive(Hash::Sha256)), Some(derive(Hash::Sha512)))
                }
            };
            entries.push(Entry {
                principal: Arc::new(Principal::new(user.name, user.permissions)),
                sha256: user.sha256,
                scram_sha256,
                scram_sha512,
            });
        }
        let mut decoy_secret = [0u8; 32];
        random.fill(&mut decoy_secret);
        Ok(Users {
            entries,
            decoy_secret,
            random,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The mechanisms offered: PLAIN always, SCRAM when some user can use it.
    pub fn mechanisms(&self) -> Vec<&'static str> {
        let mut offered = vec![PLAIN];
        if self.entries.iter().any(|e| e.scram_sha256.is_some()) {
            offered.extend([Hash::Sha256.mechanism(), Hash::Sha512.mechanism()]);
        }
        offered
    }

    /// The user `name` if `password` is its token.
    pub fn check_plain(&self, name: &str, password: &str) -> Option<Arc<Principal>> {
        let hash = token_hash(password);
        // Every entry is compared, not only up to the match: the time taken says nothing
        // about which user (if any) matched.
        let mut found = None;
        for entry in &self.entries {
            let same = same_bytes(&entry.sha256, &hash);
            if same && entry.principal.name == name && found.is_none() {
                found = Some(Arc::clone(&entry.principal));
            }
        }
        found
    }

    /// The user `name` and its SCRAM keys for `hash`, if it has them.
    pub fn scram(&self, hash: Hash, name: &str) -> Option<(Arc<Principal>, StoredCredential)> {
        let entry = self.entries.iter().find(|e| e.principal.name == name)?;
        let credential = match hash {
            Hash::Sha256 => entry.scram_sha256.clone(),
            Hash::Sha512 => entry.scram_sha512.clone(),
        }?;
        Some((Arc::clone(&entry.principal), credential))
    }

    pub fn principal(&self, name: &str) -> Option<Arc<Principal>> {
        self.entries
            .iter()
            .find(|e| e.principal.name == name)
            .map(|e| Arc::clone(&e.principal))
    }

    pub(crate) fn decoy_secret(&self) -> &[u8] {
        &self.decoy_secret
    }

    pub(crate) fn random(&self) -> &dyn Random {
        &*self.random
    }
}

pub const PLAIN: &str = "PLAIN";

/// The SHA-256 of a token, as `[[auth.tokens]]` holds it.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// How the endpoint is secured: SASL users (required when set) and TLS.
#[derive(Clone, Default)]
pub struct Security {
    /// With users, every API but ApiVersions, SaslHandshake and SaslAuthenticate needs a
    /// successful SASL authentication first, and each is authorized against the user's
    /// permissions. `None`: the endpoint is open.
    pub users: Option<Arc<Users>>,
    /// With a server configuration, the listener speaks TLS only (Kafka's SSL, or SASL_SSL
    /// with users). Its ALPN list is cleared: Kafka clients offer none.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("users", &self.users)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Security {
    /// Kafka's name for the listener's security protocol.
    pub fn protocol(&self) -> &'static str {
        match (self.users.is_some(), self.tls.is_some()) {
            (false, false) => "PLAINTEXT",
            (false, true) => "SSL",
            (true, false) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, token: &str, scram: bool) -> User {
        User {
            name: name.into(),
            sha256: token_hash(token),
            permissions: vec!["publish:orders.#".parse().unwrap()],
            scram_secret: scram.then(|| token.to_owned()),
        }
    }

    #[test]
    fn plain_needs_the_name_and_the_token_of_one_user() {
        let users = Users::new(vec![
            user("orders", "tok-1", false),
            user("audit", "tok-2", false),
        ])
        .unwrap();
        assert_eq!(users.check_plain("orders", "tok-1").unwrap().name, "orders");
        assert!(users.check_plain("orders", "tok-2").is_none());
        assert!(users.check_plain("nobody", "tok-1").is_none());
        assert_eq!(users.mechanisms(), vec!["PLAIN"]);
    }

    #[test]
    fn scram_is_offered_only_for_tokens_whose_secret_is_given_and_matches() {
        let users = Users::new(vec![
            user("orders", "tok-1", true),
            user("audit", "tok-2", false),
        ])
        .unwrap();
        assert_eq!(
            users.mechanisms(),
            vec!["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        );
        assert!(users.scram(Hash::Sha256, "orders").is_some());
        assert!(users.scram(Hash::Sha512, "audit").is_none());
        let mut wrong = user("orders", "tok-1", true);
        wrong.scram_secret = Some("another".into());
        assert_eq!(
            Users::new(vec![wrong]).err(),
            Some(SecurityError::SecretMismatch {
                name: "orders".into()
            })
        );
        assert_eq!(
            Users::new(vec![user("a", "x", false), user("a", "y", false)]).err(),
            Some(SecurityError::DuplicateUser { name: "a".into() })
        );
    }
}
