//! A [`DedupStore`] in Redis: `SET key NX PX hold` claims, `SET key done PX window`
//! records, and a claim is deleted only by the store that made it.

use std::time::Duration;

use ::redis::Script;
use ::redis::aio::ConnectionManager;

use super::{Claim, DedupStore};
use crate::error::{Error, Result};

const TRANSPORT: &str = "redis dedup store";
const DONE: &str = "done";

/// Claims, or says what holds the key — in one step, so no expiry can fall between the
/// `SET NX` and the read.
const BEGIN: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 'fresh' end
if redis.call('GET', KEYS[1]) == 'done' then return 'done' end
return 'busy'
";

/// Deletes the claim only while it is still this store's: after our claim lapsed another
/// consumer may hold the key, or have recorded it done.
const ABANDON: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Dedup records shared by every consumer that reaches one Redis; survives restarts of the
/// consumers (and of Redis, as far as its persistence goes).
///
/// Keys are `<prefix><key>` (prefix `ferry:dedup:` unless set). A claim's value names the
/// store that made it, so [`abandon`](DedupStore::abandon) never deletes another
/// consumer's claim or a finished record.
#[derive(Clone)]
pub struct RedisDedupStore {
    connection: ConnectionManager,
    prefix: String,
    /// This store's claim value: `claim:` and a ULID.
    token: String,
    begin: Script,
    abandon: Script,
}

impl std::fmt::Debug for RedisDedupStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDedupStore")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl RedisDedupStore {
    pub const DEFAULT_PREFIX: &'static str = "ferry:dedup:";

    /// Connects to `url` (`redis://host:port/db`).
    pub async fn connect(url: &str) -> Result<RedisDedupStore> {
        let client = ::redis::Client::open(url).map_err(|e| Error::BadUrl {
            url: url.to_owned(),
            problem: e.to_string(),
        })?;
        let connection = ConnectionManager::new(client).await.map_err(map_error)?;
        Ok(RedisDedupStore::new(connection))
    }

    /// Over a connection the application already holds.
    pub fn new(connection: ConnectionManager) -> RedisDedupStore {
        RedisDedupStore {
            connection,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            token: format!("claim:{}", crate::message::new_id()),
            begin: Script::new(BEGIN),
            abandon: Script::new(ABANDON),
        }
    }

    /// Keys become `<prefix><key>`: one prefix per consumer group, so two services that
    /// both handle a message each process it once.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
}

fn map_error(e: ::redis::RedisError) -> Error {
    Error::transport(TRANSPORT, e)
}

/// Redis expiries are whole milliseconds, at least one.
fn millis(what: &str, d: Duration) -> Result<u64> {
    match d.as_millis() {
        0 => Err(Error::invalid(what, "must be at least 1 ms")),
        ms => Ok(u64::try_from(ms).unwrap_or(u64::MAX)),
    }
}

#[async_trait::async_trait]
impl DedupStore for RedisDedupStore {
    async fn begin(&self, key: &str, hold: Duration) -> Result<Claim> {
        let hold = millis("dedup hold", hold)?;
        let mut connection = self.connection.clone();
        let found: String = self
            .begin
            .key(self.key(key))
            .arg(&self.token)
            .arg(hold)
            .invoke_async(&mut connection)
            .await
            .map_err(map_error)?;
        Ok(match found.as_str() {
            "fresh" => Claim::Fresh,
            "done" => Claim::Done,
            _ => Claim::InProgress,
        })
    }

    async fn complete(&self, key: &str, window: Duration) -> Result<()> {
        let window = millis("dedup window", window)?;
        let mut connection = self.connection.clone();
        ::redis::cmd("SET")
            .arg(self.key(key))
            .arg(DONE)
            .arg("PX")
            .arg(window)
            .query_async::<()>(&mut connection)
            .await
            .map_err(map_error)
    }

    async fn abandon(&self, key: &str) -> Result<()> {
        let mut connection = self.connection.clone();
        self.abandon
            .key(self.key(key))
            .arg(&self.token)
            .invoke_async::<i64>(&mut connection)
            .await
            .map_err(map_error)?;
        Ok(())
    }
}
