//! Names no earlier run, other process or other call used: engines outside this process
//! keep what earlier runs made, and suites run their tests in parallel threads and
//! processes against the same server.
//!
//! A name reads `<prefix>-<ms since the epoch>-<what>-<pid>-<n>`. The time comes right
//! after the prefix because suites clean up by it (the conformance suite removes the `cf-`
//! names made since it started); the process id and the per-process counter make two calls
//! in the same millisecond differ.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static CALLS: AtomicU64 = AtomicU64::new(0);

/// A fresh name for `what`, e.g. `fresh("rt", "retry")` is `rt-1764628800123-retry-4242-0`.
pub fn fresh(prefix: &str, what: &str) -> String {
    fresh_joined(prefix, what, '-')
}

/// [`fresh`] joined with `_`, for names that must be SQL identifiers (tables).
pub fn fresh_ident(prefix: &str, what: &str) -> String {
    fresh_joined(prefix, what, '_')
}

fn fresh_joined(prefix: &str, what: &str, sep: char) -> String {
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis();
    format!("{prefix}{sep}{ms}{sep}{what}{sep}{pid}{sep}{n}")
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_call_gives_a_new_name() {
        let names: HashSet<String> = (0..1000).map(|_| fresh("t", "same")).collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn calls_from_many_threads_never_collide() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| (0..250).map(|_| fresh("t", "x")).collect::<Vec<_>>()))
            .collect();
        let names: HashSet<String> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn a_name_starts_with_its_prefix_then_the_time() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let name = fresh("cf", "ack_twice");
        let mut parts = name.split('-');
        assert_eq!(parts.next(), Some("cf"));
        let ms: u128 = parts.next().unwrap().parse().unwrap();
        assert!(ms >= before, "{name}");
        assert_eq!(parts.next(), Some("ack_twice"));
        assert_eq!(parts.next(), Some(std::process::id().to_string().as_str()));
    }

    #[test]
    fn an_ident_name_has_only_identifier_characters() {
        let name = fresh_ident("obx", "relay");
        assert!(name.starts_with("obx_"), "{name}");
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name}"
        );
    }
}
