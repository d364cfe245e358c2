//! `GET /v1/console/events`: server-sent events a page re-reads on — `sample` after each
//! sample is taken, `redrive` with a redrive job's status when its progress changes — and
//! a `: keep-alive` comment every [`KEEP_ALIVE`], so proxies and the page can tell a quiet
//! stream from a dead one.
//!
//! A stream ends when serving stops: graceful shutdown waits for responses in progress,
//! and an endless one would hold it forever.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::redrive_jobs::JobStatus;
use super::stopped;
use crate::auth::Action;
use crate::http::Shared;
use crate::http::error::ApiError;

/// How often a quiet stream says it is alive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub enum ConsoleEvent {
    Sample { at_ms: i64 },
    Redrive(JobStatus),
}

type Events = Sse<ReceiverStream<Result<Event, Infallible>>>;

/// Any valid token may listen; a redrive job's events go only to tokens that may see the
/// job (`dead_letters` on its dead-letter queue). A sample event names nothing.
pub async fn events(State(s): State<Shared>, headers: HeaderMap) -> Result<Events, ApiError> {
    let who = s.caller(&headers)?;
    let mut events = s.console.events.subscribe();
    let stop = s.stop.clone();
    let gate = std::sync::Arc::clone(&s.gate);
    let broker = s.broker.clone();
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut stop = stop;
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        loop {
            let event = tokio::select! {
                got = events.recv() => match got {
                    Ok(ConsoleEvent::Sample { at_ms }) => Event::default()
                        .event("sample")
                        .data(serde_json::json!({ "at_ms": at_ms }).to_string()),
                    Ok(ConsoleEvent::Redrive(job)) => {
                        if !gate.may(who, Action::DeadLetters, &job.dead_letter_queue) {
                            continue;
                        }
                        let data = serde_json::to_string(&job).unwrap_or_default();
                        Event::default().event("redrive").data(data)
                    }
                    // Fell behind: a sample event makes the page re-read everything.
                    Err(broadcast::error::RecvError::Lagged(_)) => Event::default()
                        .event("sample")
                        .data(serde_json::json!({ "at_ms": broker.now_ms() }).to_string()),
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                _ = keep_alive.tick() => Event::default().comment("keep-alive"),
                () = tx.closed() => break,
                () = stopped(&mut stop) => break,
            };
            if tx.send(Ok(event)).await.is_err() {
                break;
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx)))
}
