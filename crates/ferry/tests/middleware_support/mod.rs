//! What the worker suites share: a dedup store in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use ferry::inbox::{Claim, DedupStore};

/// A dedup store in memory whose claims never expire: a test sees exactly the claims its
/// handler made.
#[derive(Default)]
pub struct MemoryStore(Mutex<HashMap<String, Claim>>);

#[async_trait::async_trait]
impl DedupStore for MemoryStore {
    async fn begin(&self, key: &str, _hold: Duration) -> ferry::Result<Claim> {
        let mut state = self.0.lock().unwrap();
        Ok(match state.get(key) {
            Some(Claim::Done) => Claim::Done,
            Some(_) => Claim::InProgress,
            None => {
                state.insert(key.to_owned(), Claim::InProgress);
                Claim::Fresh
            }
        })
    }
    async fn complete(&self, key: &str, _window: Duration) -> ferry::Result<()> {
        self.0.lock().unwrap().insert(key.to_owned(), Claim::Done);
        Ok(())
    }
    async fn abandon(&self, key: &str) -> ferry::Result<()> {
        self.0.lock().unwrap().remove(key);
        Ok(())
    }
}
