//! API tokens, what each may do, and the limits every call passes before the broker sees
//! it: the [`Gate`]. What a token may do, call by call, is written on [`AuthConfig`], which
//! the crate exports.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use std::fmt;

pub use ferry_access::{AccessError, Action, NamePattern, Permission};
use ferry_broker::Broker;
use sha2::{Digest, Sha256};

/// A malformed permission, pattern or token hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(transparent)]
    Access(#[from] AccessError),
    #[error("a token's SHA-256 is 64 hex digits; got {len} characters")]
    BadHash { len: usize },
}

/// One API token: its name (shown in refusals and logs), its hash, what it may do, and
/// how many messages per second it may publish (`None`: no quota).
#[derive(Debug, Clone)]
pub struct TokenGrant {
    pub name: String,
    /// SHA-256 of the token. A fast hash is right here, unlike for passwords: tokens are
    /// long random strings, so there is no dictionary to try and a slow hash would only
    /// slow every call down.
    pub sha256: [u8; 32],
    pub permissions: Vec<Permission>,
    pub publish_rate: Option<u32>,
}

impl TokenGrant {
    /// A grant for `token`, keeping only its hash.
    pub fn new(name: impl Into<String>, token: &str, permissions: Vec<Permission>) -> TokenGrant {
        TokenGrant {
            name: name.into(),
            sha256: sha256(token),
            permissions,
            publish_rate: None,
        }
    }

    /// At most `messages_per_second` published, in bursts of up to one second's worth (a
    /// larger batch is refused as too large).
    pub fn publish_rate(mut self, messages_per_second: u32) -> TokenGrant {
        self.publish_rate = Some(messages_per_second);
        self
    }

    pub fn allows(&self, action: Action, name: &str) -> bool {
        self.permissions.iter().any(|p| p.allows(action, name))
    }
}

/// The tokens the server accepts ([`Server::auth`](crate::Server::auth)). With none, no
/// call is allowed.
///
/// A [`TokenGrant`] names a token, holds its SHA-256 (never the token), the
/// [`Permission`]s it carries — an [`Action`] on the names a [`NamePattern`] matches, written
/// `publish:orders.*`, `consume:orders.#`, `dead_letters:orders.dlq` (or `dlq:orders.dlq`),
/// `admin:#` — and an optional publish quota in messages per second. Without an
/// `AuthConfig` the server is open: every call is allowed, and only the batch limit
/// ([`Server::max_batch`](crate::Server::max_batch)) applies.
///
/// Clients send `authorization: Bearer <token>` (gRPC metadata or HTTP header). The token
/// is hashed and looked up; it never appears in a log line or an error message — refusals
/// name the grant (`name`), which is not a secret.
///
/// | call | needs |
/// | --- | --- |
/// | publish, publish stream (each batch), publish to topic, cancel | `publish` on the queue or topic |
/// | receive, ack, nack, reject, extend, consume stream — on an ordinary queue | `consume` on the queue |
/// | the same on a dead-letter queue | `dead_letters` on the dead-letter queue |
/// | park, unpark, list parked keys | as receiving: `consume` on the queue (`dead_letters` on a dead-letter queue) — the worker that meets a poison message parks its key |
/// | dead-letter peek (list, peek) | `dead_letters` on the dead-letter queue (`consume`, should the queue peeked be an ordinary one) |
/// | redrive, redrive job (start, describe; lists show the jobs of the queues the token may read) | `dead_letters` on the dead-letter queue, and `publish` on the target when one is named |
/// | browse a queue's messages (HTTP) | as receiving: `consume` on the queue (`dead_letters` on a dead-letter queue) |
/// | purge a queue (HTTP) | `admin` on the queue, as deleting it |
/// | group join, heartbeat, leave, poll, commit; read topic | `consume` on the topic |
/// | create temporary queue (gRPC and HTTP) | `consume` on temporary queue names, `tmp.<ulid>` (e.g. `consume:tmp.*`); the server picks the name |
/// | create, describe, delete (queues, topics, subscriptions); describe group, reset offsets, add partitions | `admin` on the name (the topic, for groups) |
/// | list queues, list topics; the console's overview and topology | a valid token; only names it has `admin` on are listed |
/// | the console's history of a queue or topic | `admin` on the name |
/// | the console's event stream | a valid token; a redrive job's events only with `dead_letters` on its queue |
/// | `/metrics` | `metrics` on some name; only the series of names it has `metrics` on are shown (nothing, with [`Server::open_metrics`](crate::Server::open_metrics)) |
/// | `/healthz`, `/readyz` | nothing |
///
/// **The token comes first.** A call without a valid token is refused before its body
/// (HTTP) or message (gRPC) is read, so an unknown client cannot make the server buffer
/// a request of up to the body or message limit.
///
/// **Dead letters are guarded apart.** Dead-letter queues gather what failed from many
/// places and are read by fewer people than the queues they serve, so reading them is
/// its own action: `consume` never reads a dead-letter queue (not even through a
/// pattern such as `consume:orders.#`, which matches `orders.dlq`), and `dead_letters`
/// never consumes an ordinary queue. A queue is a dead-letter queue when its name ends in
/// `.dlq` (the suffix is reserved for them) or some queue names it as its dead-letter queue
/// ([`ferry_broker::Broker::is_dead_letter_queue`]). A redrive without a target sends each
/// letter back to the queue it came from, which `dead_letters` covers; a named target is
/// written to, so it needs `publish` there as a publish would. `admin` grants none of
/// this.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    pub tokens: Vec<TokenGrant>,
}

/// The SHA-256 of a token, as [`TokenGrant::sha256`] holds it.
pub fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A token hash from 64 hex digits (what `sha256sum` prints), as a config file holds it.
pub fn parse_sha256_hex(hex: &str) -> Result<[u8; 32], AuthError> {
    let hex = hex.trim();
    // The length the message reports is what the user sees: characters, not UTF-8 bytes.
    let bad = AuthError::BadHash {
        len: hex.chars().count(),
    };
    if hex.len() != 64 || !hex.is_ascii() {
        return Err(bad);
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad.clone())?;
    }
    Ok(out)
}

/// Equal hashes, in a time that does not depend on where they differ: an early exit would
/// tell an attacker timing the answers how many leading bytes of a hash they had right.
/// (The hash of a guess is not the guess, but the comparison costs nothing to harden.)
fn same_hash(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Why a call was refused before it reached the broker. The messages never contain the
/// token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No `authorization: Bearer <token>` at all (or another scheme, or an empty token):
    /// the client was not set up to send one, which is a different fix from a wrong one.
    #[error(
        "no token: send `authorization: Bearer <token>` (gRPC metadata or HTTP header) \
         with a token the server knows"
    )]
    NoToken,
    /// A bearer token whose hash no grant holds: a typo, a revoked or another server's one.
    #[error(
        "the token is not one this server knows: check the token sent against the \
         `sha256` of the server's [[auth.tokens]] (`ferry token hash`)"
    )]
    UnknownToken,
    #[error(
        "token {token:?} may not {action} on {name:?}: grant it a permission like \
         `{action}:{name}`{}",
        hint(*.action)
    )]
    Forbidden {
        token: String,
        action: Action,
        name: String,
    },
    #[error("a batch of {messages} messages is over the limit of {max}: send smaller batches")]
    BatchTooLarge { messages: usize, max: usize },
    #[error(
        "token {token:?} may not read /metrics: grant it a permission like `metrics:#` \
         (or `metrics:orders.#` for those names' series only)"
    )]
    NoMetrics { token: String },
    #[error(
        "token {token:?} may publish {rate} messages per second and has used them: \
         slow down and retry"
    )]
    OverQuota { token: String, rate: u32 },
}

impl Refusal {
    /// The grant's name the refusal is about, when the token matched one.
    fn token_name(&self) -> Option<&str> {
        match self {
            Refusal::Forbidden { token, .. }
            | Refusal::NoMetrics { token }
            | Refusal::OverQuota { token, .. } => Some(token),
            Refusal::NoToken | Refusal::UnknownToken | Refusal::BatchTooLarge { .. } => None,
        }
    }

    /// Logs the refusal at info level, as each protocol answers it: an operator sees who
    /// was turned away and why. The message and the grant's name only, never the token,
    /// which is a secret and a refusal never holds.
    pub(crate) fn log(&self, protocol: &'static str) {
        match self.token_name() {
            Some(token) => tracing::info!(protocol, token, refusal = %self, "call refused"),
            None => tracing::info!(protocol, refusal = %self, "call refused"),
        }
    }
}

/// What a refusal adds for an action that surprises: `consume` does not read dead letters.
fn hint(action: Action) -> &'static str {
    match action {
        Action::DeadLetters => " (a dead-letter queue is read with `dead_letters`, not `consume`)",
        _ => "",
    }
}

/// Who is calling: the grant its token matched, or anyone on an open server.
#[derive(Debug, Clone, Copy)]
pub struct Caller(Option<usize>);

/// The default most messages in one publish.
pub const DEFAULT_MAX_BATCH: usize = 1000;

/// The time quotas count by, in ms since the Unix epoch.
type NowMs = Arc<dyn Fn() -> i64 + Send + Sync>;

fn system_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What every call passes first: the token, its permission, the batch size and the
/// publish quota.
pub struct Gate {
    auth: Option<AuthConfig>,
    /// One per grant, in the same order.
    buckets: Vec<Mutex<Bucket>>,
    max_batch: usize,
    now_ms: NowMs,
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("auth", &self.auth)
            .field("buckets", &self.buckets)
            .field("max_batch", &self.max_batch)
            .finish_non_exhaustive()
    }
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new(None, DEFAULT_MAX_BATCH)
    }
}

impl Gate {
    /// A gate whose quotas count by the system's clock.
    pub fn new(auth: Option<AuthConfig>, max_batch: usize) -> Gate {
        Gate::timed_by(auth, max_batch, Arc::new(system_now_ms))
    }

    /// A gate whose quotas count by `now_ms` — the broker's clock, so that a test moves
    /// the time of both with one manual clock instead of sleeping.
    pub fn timed_by(auth: Option<AuthConfig>, max_batch: usize, now_ms: NowMs) -> Gate {
        let now = now_ms();
        let buckets = auth
            .iter()
            .flat_map(|a| &a.tokens)
            .map(|g| Mutex::new(Bucket::full(g.publish_rate.unwrap_or(0), now)))
            .collect();
        Gate {
            auth,
            buckets,
            max_batch,
            now_ms,
        }
    }

    /// The caller presenting `authorization` (the header's or metadata's value).
    pub fn caller(&self, authorization: Option<&str>) -> Result<Caller, Refusal> {
        let Some(auth) = &self.auth else {
            return Ok(Caller(None));
        };
        let token = authorization
            .and_then(|v| {
                // The scheme is case-insensitive (RFC 9110); the token is not.
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(Refusal::NoToken)?;
        let hash = sha256(token);
        // Every grant is compared, not only up to the match: how long the lookup takes
        // says nothing about which grant (if any) matched.
        let mut found = None;
        for (i, grant) in auth.tokens.iter().enumerate() {
            if same_hash(&grant.sha256, &hash) && found.is_none() {
                found = Some(i);
            }
        }
        found.map(|i| Caller(Some(i))).ok_or(Refusal::UnknownToken)
    }

    fn grant(&self, caller: Caller) -> Option<&TokenGrant> {
        let i = caller.0?;
        self.auth.as_ref().map(|a| &a.tokens[i])
    }

    /// Whether `caller` may do `action` on `name` (always, on an open server).
    pub fn may(&self, caller: Caller, action: Action, name: &str) -> bool {
        match (&self.auth, self.grant(caller)) {
            (None, _) => true,
            (Some(_), Some(grant)) => grant.allows(action, name),
            (Some(_), None) => false,
        }
    }

    /// Whether `caller` may do `action` on every name, holding it on a `#` pattern (always,
    /// on an open server): what a call needs whose reach is not one name.
    pub fn may_every(&self, caller: Caller, action: Action) -> bool {
        match (&self.auth, self.grant(caller)) {
            (None, _) => true,
            (Some(_), Some(grant)) => grant
                .permissions
                .iter()
                .any(|p| p.grants(action) && p.pattern.matches_every_name()),
            (Some(_), None) => false,
        }
    }

    /// Whether `caller` may scrape `/metrics` at all: it holds some `metrics` permission
    /// (always, on an open server). Which series it sees is [`Gate::may`] per name.
    pub fn allow_metrics(&self, caller: Caller) -> Result<(), Refusal> {
        match (&self.auth, self.grant(caller)) {
            (None, _) => Ok(()),
            (Some(_), Some(grant))
                if grant
                    .permissions
                    .iter()
                    .any(|p| p.action == Action::Metrics) =>
            {
                Ok(())
            }
            (Some(_), grant) => Err(Refusal::NoMetrics {
                token: grant.map(|g| g.name.clone()).unwrap_or_default(),
            }),
        }
    }

    pub fn allow(&self, caller: Caller, action: Action, name: &str) -> Result<(), Refusal> {
        if self.may(caller, action, name) {
            return Ok(());
        }
        Err(Refusal::Forbidden {
            token: self
                .grant(caller)
                .map(|g| g.name.clone())
                .unwrap_or_default(),
            action,
            name: name.to_owned(),
        })
    }

    /// Whether `caller` may read `queue`: receive from it, settle its deliveries, peek at
    /// it. The action depends on whether `queue` is a dead-letter queue
    /// ([`Action::to_read`]), which `is_dead_letter_queue` answers — asked only when
    /// tokens are configured, as an open server allows everything anyway.
    pub fn allow_read(
        &self,
        caller: Caller,
        queue: &str,
        is_dead_letter_queue: impl FnOnce(&str) -> bool,
    ) -> Result<(), Refusal> {
        if self.auth.is_none() {
            return Ok(());
        }
        self.allow(caller, Action::to_read(is_dead_letter_queue(queue)), queue)
    }

    /// The caller presenting `authorization`, if it may do `action` on `name`: what every
    /// front end asks of a call on one name.
    pub fn authorize(
        &self,
        authorization: Option<&str>,
        action: Action,
        name: &str,
    ) -> Result<Caller, Refusal> {
        let who = self.caller(authorization)?;
        self.allow(who, action, name)?;
        Ok(who)
    }

    /// The caller presenting `authorization`, if it may read `queue` (see
    /// [`Gate::allow_read`]); `broker` tells whether `queue` is a dead-letter queue.
    pub fn authorize_read(
        &self,
        authorization: Option<&str>,
        broker: &Broker,
        queue: &str,
    ) -> Result<Caller, Refusal> {
        let who = self.caller(authorization)?;
        self.allow_read(who, queue, |q| broker.is_dead_letter_queue(q))?;
        Ok(who)
    }

    /// A publish of `messages` to `name`: the permission, the batch limit, then the
    /// quota — last, so a refused call spends none of it.
    pub fn publish(&self, caller: Caller, name: &str, messages: usize) -> Result<(), Refusal> {
        self.allow(caller, Action::Publish, name)?;
        if messages > self.max_batch {
            return Err(Refusal::BatchTooLarge {
                messages,
                max: self.max_batch,
            });
        }
        let Some(grant) = self.grant(caller) else {
            return Ok(());
        };
        let Some(rate) = grant.publish_rate else {
            return Ok(());
        };
        if messages > rate as usize {
            // More than one second's worth never fits the bucket: waiting would not help.
            return Err(Refusal::BatchTooLarge {
                messages,
                max: rate as usize,
            });
        }
        let i = caller.0.expect("a grant has an index");
        let mut bucket = self.buckets[i].lock().unwrap_or_else(|e| e.into_inner());
        if bucket.take(messages, rate, (self.now_ms)()) {
            Ok(())
        } else {
            Err(Refusal::OverQuota {
                token: grant.name.clone(),
                rate,
            })
        }
    }
}

/// A token bucket: `rate` tokens a second, holding at most one second's worth. Written
/// here rather than taken from a rate-limiting crate: it is a dozen lines, and one bucket
/// per grant behind a mutex is all the server needs.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    /// When it was last filled, in ms since the Unix epoch.
    at_ms: i64,
}

impl Bucket {
    fn full(rate: u32, now_ms: i64) -> Bucket {
        Bucket {
            tokens: f64::from(rate),
            at_ms: now_ms,
        }
    }

    fn take(&mut self, n: usize, rate: u32, now_ms: i64) -> bool {
        let rate = f64::from(rate);
        // A clock stepped back refills nothing rather than emptying the bucket.
        let elapsed = now_ms.saturating_sub(self.at_ms).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.at_ms = self.at_ms.max(now_ms);
        let n = n as f64;
        if n <= self.tokens {
            self.tokens -= n;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_dead_letter_queue_needs_dead_letters_and_nothing_else_does() {
        let grant = TokenGrant::new(
            "ops",
            "tok",
            vec![
                "consume:orders.#".parse().unwrap(),
                "dlq:billing.dlq".parse().unwrap(),
                "admin:#".parse().unwrap(),
            ],
        );
        let gate = Gate::new(
            Some(AuthConfig {
                tokens: vec![grant],
            }),
            10,
        );
        let who = gate.caller(Some("Bearer tok")).unwrap();
        let is_dlq = |q: &str| q.ends_with(".dlq");
        assert!(gate.allow_read(who, "orders", is_dlq).is_ok());
        let refused = gate.allow_read(who, "orders.dlq", is_dlq).unwrap_err();
        assert_eq!(
            refused,
            Refusal::Forbidden {
                token: "ops".into(),
                action: Action::DeadLetters,
                name: "orders.dlq".into()
            }
        );
        assert!(refused.to_string().contains("`dead_letters:orders.dlq`"));
        assert!(gate.allow_read(who, "billing.dlq", is_dlq).is_ok());
        assert!(gate.allow_read(who, "billing", is_dlq).is_err());
        let open = Gate::default();
        let anyone = open.caller(None).unwrap();
        assert!(
            open.allow_read(anyone, "x.dlq", |_| panic!("not asked when open"))
                .is_ok()
        );
    }

    #[test]
    fn hashes_parse_from_hex_and_compare_whole() {
        let hash = sha256("secret");
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_sha256_hex(&hex), Ok(hash));
        assert_eq!(parse_sha256_hex("abc"), Err(AuthError::BadHash { len: 3 }));
        // 32 characters of two bytes each: 64 bytes, but not 64 hex digits.
        let wide = "é".repeat(32);
        assert_eq!(parse_sha256_hex(&wide), Err(AuthError::BadHash { len: 32 }));
        assert!(same_hash(&hash, &hash));
        let mut other = hash;
        other[31] ^= 1;
        assert!(!same_hash(&hash, &other));
    }

    #[test]
    fn unknown_and_missing_tokens_are_unauthenticated_and_refusals_omit_the_token() {
        let grant = TokenGrant::new("ci", "s3cret-token", vec!["consume:jobs".parse().unwrap()]);
        let gate = Gate::new(
            Some(AuthConfig {
                tokens: vec![grant],
            }),
            10,
        );
        assert_eq!(gate.caller(None).unwrap_err(), Refusal::NoToken);
        assert_eq!(gate.caller(Some("Bearer ")).unwrap_err(), Refusal::NoToken);
        assert_eq!(
            gate.caller(Some("Bearer nope")).unwrap_err(),
            Refusal::UnknownToken
        );
        assert_eq!(
            gate.caller(Some("s3cret-token")).unwrap_err(),
            Refusal::NoToken
        );
        assert!(gate.caller(Some("BEARER s3cret-token")).is_ok());
        assert!(gate.caller(Some("Bearer S3CRET-TOKEN")).is_err());
        let caller = gate.caller(Some("Bearer s3cret-token")).unwrap();
        assert!(gate.allow(caller, Action::Consume, "jobs").is_ok());
        let refused = gate.allow(caller, Action::Publish, "jobs").unwrap_err();
        assert!(!refused.to_string().contains("s3cret"), "{refused}");
    }

    #[test]
    fn the_bucket_refills_at_its_rate_up_to_one_second() {
        let t0 = 1_700_000_000_000;
        let mut bucket = Bucket::full(10, t0);
        assert!(bucket.take(10, 10, t0));
        assert!(!bucket.take(1, 10, t0));
        assert!(bucket.take(5, 10, t0 + 500));
        assert!(!bucket.take(11, 10, t0 + 60_000));
        assert!(bucket.take(10, 10, t0 + 60_000));
        assert!(
            !bucket.take(1, 10, t0),
            "a clock stepped back refills nothing"
        );
    }
}
