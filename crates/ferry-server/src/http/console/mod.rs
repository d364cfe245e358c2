//! The web console's API: what the page at `/ui` reads beyond the plain API — an overview
//! of every queue and topic with rates and alerts, the recent history behind its charts,
//! a stream of events to refresh on, redrive jobs with progress, and the topology.
//!
//! Rates and histories come from a sampler (`history.rs`) that reads the broker's stats
//! every sample interval into a fixed-size ring per queue and topic, so a page opened
//! now already has the last hour to draw. Everything else is read live, from stats only:
//! the overview never reads a message.

pub mod events;
pub mod history;
pub mod overview;
pub mod redrive_jobs;
pub mod topology;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use ferry_broker::{DeadLetter, QueueInfo};
use tokio::sync::{broadcast, watch};

pub use topology::ConsoleAliases;

/// The default time between two samples.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);
/// The default age of the oldest ready message, and lag of a consumer group, that raise an
/// alert: the thresholds of the alerts `docs/metrics.md` suggests.
pub const DEFAULT_ALERT_AFTER: Duration = Duration::from_secs(300);

/// What the console's endpoints are set up with ([`Server`](crate::Server)'s `console_*`
/// builder methods).
#[derive(Debug, Clone)]
pub struct ConsoleSettings {
    pub sample_interval: Duration,
    pub age_alert: Duration,
    pub lag_alert: Duration,
    pub aliases: ConsoleAliases,
}

impl Default for ConsoleSettings {
    fn default() -> ConsoleSettings {
        ConsoleSettings {
            sample_interval: DEFAULT_SAMPLE_INTERVAL,
            age_alert: DEFAULT_ALERT_AFTER,
            lag_alert: DEFAULT_ALERT_AFTER,
            aliases: ConsoleAliases::default(),
        }
    }
}

/// The console's state, shared by its handlers and the sampler.
pub struct Console {
    pub settings: ConsoleSettings,
    pub history: Mutex<history::History>,
    pub jobs: Mutex<redrive_jobs::Jobs>,
    /// What `/v1/console/events` streams; sending with no listener is not an error.
    pub events: broadcast::Sender<events::ConsoleEvent>,
}

/// Events a slow listener may fall behind by before it misses some (it is told to re-read).
const EVENT_BACKLOG: usize = 256;

impl Console {
    pub fn new(settings: ConsoleSettings) -> Console {
        Console {
            history: Mutex::new(history::History::new(settings.sample_interval)),
            jobs: Mutex::default(),
            events: broadcast::channel(EVENT_BACKLOG).0,
            settings,
        }
    }

    pub(crate) fn history(&self) -> std::sync::MutexGuard<'_, history::History> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn jobs(&self) -> std::sync::MutexGuard<'_, redrive_jobs::Jobs> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The names among `queues` that are dead-letter queues, as
/// [`Broker::is_dead_letter_queue`](ferry_broker::Broker::is_dead_letter_queue) decides
/// (the `.dlq` suffix, or named as some queue's dead-letter queue), from specs already
/// read: asking the broker per name would read every spec once per name.
pub(crate) fn dead_letter_queues(queues: &[QueueInfo]) -> HashSet<String> {
    let mut out: HashSet<String> = queues
        .iter()
        .filter(|q| q.name.is_dead_letter())
        .map(|q| q.name.to_string())
        .collect();
    out.extend(queues.iter().filter_map(|q| match &q.spec.dead_letter {
        DeadLetter::Named(target) => Some(target.to_string()),
        _ => None,
    }));
    out
}

/// The queue `q` dead-letters into, if any.
pub(crate) fn dead_letter_queue_of(q: &QueueInfo) -> Option<String> {
    q.spec
        .dead_letter_target(&q.name)
        .ok()
        .flatten()
        .map(|n| n.to_string())
}

/// Milliseconds of a duration, as JSON numbers carry them.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits until `stop` says stop; forever without one (a router a program serves itself).
pub(crate) async fn stopped(stop: &mut Option<watch::Receiver<bool>>) {
    match stop {
        Some(rx) => {
            let _ = rx.wait_for(|stop| *stop).await;
        }
        None => std::future::pending().await,
    }
}
