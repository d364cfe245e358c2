//! Redrive jobs: a redrive that runs in the background at a rate, with progress an
//! operator can watch, instead of one call that holds its client until the last message.
//!
//! **Start.** The letters that match when the job starts are its letters: their seqs are
//! collected first (a peek through the dead-letter queue, stats and stored messages only)
//! and `matched` is their count. The job moves those and no others, so letters that fail
//! again and come back while it runs (with new seqs) are not moved round in a loop.
//!
//! **Run.** A task calls [`Broker::redrive`] on [`CHUNK`] of those seqs at a time at the
//! job's rate, adding each chunk's moves to `moved` and sending a `redrive` event after
//! each. The broker re-checks every letter as it moves it: one settled or leased meanwhile
//! is passed over. The job ends `done` after its last chunk, or `failed` with the first
//! error (a full target, storage): what moved before stays moved (see the broker's
//! redrive). The task owns the redrive, so a client that goes away stops nothing.
//!
//! **Kept.** The last [`KEPT`] jobs, newest first, in memory: a restart forgets them (a
//! running one stops; its letters not yet moved stay in the dead-letter queue).

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use ferry_broker::{Broker, BrokerError, ReadLimit, RedriveFilter, RedriveRequest, Seq};
use serde::{Deserialize, Serialize};

use super::Console;
use super::events::ConsoleEvent;
use crate::auth::Action;
use crate::http::dead_letters::Filter;
use crate::http::error::ApiError;
use crate::http::path::ApiPath;
use crate::http::{Shared, parse};

/// Letters one redrive call is given: small enough that progress shows often.
pub const CHUNK: usize = 100;
/// Jobs remembered.
pub const KEPT: usize = 50;
/// The rate a job runs at unless it names one (letters per second).
pub const DEFAULT_RATE: u32 = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Done,
    Failed,
}

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    pub id: String,
    pub dead_letter_queue: String,
    /// `None`: each letter back to the queue it came from.
    pub target: Option<String>,
    pub state: JobState,
    pub matched: usize,
    pub moved: usize,
    pub error: Option<String>,
    pub started_at_ms: i64,
    pub finished_at_ms: Option<i64>,
}

type Job = Arc<Mutex<JobStatus>>;

/// The jobs remembered, newest first.
#[derive(Debug, Default)]
pub struct Jobs {
    jobs: VecDeque<Job>,
}

impl Jobs {
    fn add(&mut self, job: Job) {
        self.jobs.push_front(job);
        self.jobs.truncate(KEPT);
    }

    fn find(&self, id: &str) -> Option<JobStatus> {
        self.jobs.iter().map(status).find(|j| j.id == id)
    }

    fn all(&self) -> Vec<JobStatus> {
        self.jobs.iter().map(status).collect()
    }
}

fn status(job: &Job) -> JobStatus {
    job.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartJob {
    seqs: Option<Vec<Seq>>,
    filter: Option<Filter>,
    target: Option<String>,
    rate_per_sec: Option<u32>,
}

/// A fresh job id: a ULID of the broker's time, so ids sort by start.
fn job_id(now_ms: i64) -> String {
    let random = (u128::from(fastrand::u64(..)) << 64 | u128::from(fastrand::u64(..)))
        & ((1u128 << ulid::Ulid::RAND_BITS) - 1);
    ulid::Ulid::from_parts(u64::try_from(now_ms).unwrap_or(0), random).to_string()
}

/// The seqs of the letters of `dlq` that `filter` takes now, paging through the queue.
fn matching(
    broker: &Broker,
    dlq: &str,
    filter: &RedriveFilter,
    max_read_bytes: usize,
) -> Result<BTreeSet<Seq>, BrokerError> {
    let limit = ReadLimit {
        messages: ferry_broker::MAX_PEEK,
        bytes: max_read_bytes,
    };
    let mut seqs = BTreeSet::new();
    let mut after = None;
    loop {
        let page = broker.peek_within(dlq, after, limit, filter)?;
        seqs.extend(page.messages.iter().map(|m| m.seq));
        after = page.messages.last().map(|m| m.seq).or(after);
        if !page.more {
            return Ok(seqs);
        }
    }
}

fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("{what}: {e}"),
    )
}

/// `POST /v1/queues/{dlq}/redrive-jobs`: what a redrive needs — `dead_letters` on the
/// dead-letter queue, and `publish` on a named target.
pub async fn start_job(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(dlq): ApiPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<JobStatus>), ApiError> {
    let who = s.allow(&headers, Action::DeadLetters, &dlq)?;
    let r: StartJob = parse(&body?)?;
    if let Some(target) = &r.target {
        s.gate.allow(who, Action::Publish, target)?;
    }
    if r.seqs.as_ref().is_some_and(Vec::is_empty) {
        return Err(ApiError::bad_request(
            "missing_field",
            "seqs is empty: list the letters to redrive, or leave seqs out to redrive \
             every letter the filter takes",
        ));
    }
    let mut filter = r.filter.unwrap_or_default().into_broker(&s.redaction)?;
    filter.seqs = r.seqs.map(|seqs| seqs.into_iter().collect());
    // Checked now, so a job that cannot start is refused rather than failing at once.
    let queue = s.broker.describe_queue(&dlq)?;
    if !s.broker.is_dead_letter_queue(&dlq) {
        return Err(BrokerError::NotADeadLetterQueue { queue: queue.name }.into());
    }
    if let Some(target) = &r.target {
        s.broker.describe_queue(target)?;
    }
    let (broker, max_read_bytes) = (s.broker.clone(), s.max_read_bytes);
    let (name, peek_filter) = (dlq.clone(), filter.clone());
    // Off the async workers: on a large dead-letter queue this reads every stored letter.
    let seqs =
        tokio::task::spawn_blocking(move || matching(&broker, &name, &peek_filter, max_read_bytes))
            .await
            .map_err(|e| internal("collecting the letters to redrive failed", e))??;
    let now_ms = s.broker.now_ms();
    let status = JobStatus {
        id: job_id(now_ms),
        dead_letter_queue: dlq.clone(),
        target: r.target.clone(),
        state: JobState::Running,
        matched: seqs.len(),
        moved: 0,
        error: None,
        started_at_ms: now_ms,
        finished_at_ms: None,
    };
    let job: Job = Arc::new(Mutex::new(status.clone()));
    s.console.jobs().add(Arc::clone(&job));
    let _ = s.console.events.send(ConsoleEvent::Redrive(status.clone()));
    let rate = r.rate_per_sec.unwrap_or(DEFAULT_RATE);
    tokio::spawn(run(
        s.broker.clone(),
        Arc::clone(&s.console),
        job,
        Letters {
            dlq,
            target: r.target,
            filter,
            seqs: seqs.into_iter().collect(),
            rate,
        },
    ));
    Ok((StatusCode::ACCEPTED, Json(status)))
}

/// What a job moves, and how fast.
struct Letters {
    dlq: String,
    target: Option<String>,
    /// The conditions, re-checked as each letter moves.
    filter: RedriveFilter,
    /// The letters that matched at the start, in order.
    seqs: Vec<Seq>,
    /// Per second; 0 for no limit.
    rate: u32,
}

async fn run(broker: Broker, console: Arc<Console>, job: Job, letters: Letters) {
    let pause = (letters.rate > 0).then(|| Duration::from_secs_f64(1.0 / f64::from(letters.rate)));
    let mut failure = None;
    for (i, chunk) in letters.seqs.chunks(CHUNK).enumerate() {
        // The broker paces within a call; this paces from one call to the next.
        if let Some(pause) = pause
            && i > 0
        {
            tokio::time::sleep(pause).await;
        }
        let request = RedriveRequest {
            target: letters.target.clone(),
            filter: RedriveFilter {
                seqs: Some(chunk.iter().copied().collect()),
                ..letters.filter.clone()
            },
            max_messages: None,
            rate_per_sec: Some(letters.rate),
        };
        match broker.redrive(&letters.dlq, request).await {
            Ok(report) => {
                if report.moved > 0 {
                    let status = {
                        let mut j = job.lock().unwrap_or_else(|e| e.into_inner());
                        j.moved += report.moved;
                        j.clone()
                    };
                    let _ = console.events.send(ConsoleEvent::Redrive(status));
                }
            }
            Err(error) => {
                failure = Some(error.to_string());
                break;
            }
        }
    }
    let status = {
        let mut j = job.lock().unwrap_or_else(|e| e.into_inner());
        j.state = if failure.is_some() {
            JobState::Failed
        } else {
            JobState::Done
        };
        j.error = failure;
        j.finished_at_ms = Some(broker.now_ms());
        j.clone()
    };
    if let Some(error) = &status.error {
        tracing::warn!(job = %status.id, dlq = %status.dead_letter_queue, %error, "redrive job failed");
    }
    let _ = console.events.send(ConsoleEvent::Redrive(status));
}

/// `GET /v1/redrive-jobs/{id}`: as starting it needs, `dead_letters` on its queue.
pub async fn get_job(
    State(s): State<Shared>,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobStatus>, ApiError> {
    let who = s.caller(&headers)?;
    let found = s.console.jobs().find(&id);
    let Some(job) = found else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "redrive_job_not_found",
            format!(
                "no redrive job {id:?}: the server keeps the last {KEPT} since it started; \
                 GET /v1/redrive-jobs lists them"
            ),
        ));
    };
    s.gate
        .allow(who, Action::DeadLetters, &job.dead_letter_queue)?;
    Ok(Json(job))
}

#[derive(Serialize)]
pub struct JobList {
    jobs: Vec<JobStatus>,
}

/// `GET /v1/redrive-jobs`: the jobs of the dead-letter queues the token may read.
pub async fn list_jobs(
    State(s): State<Shared>,
    headers: HeaderMap,
) -> Result<Json<JobList>, ApiError> {
    let who = s.caller(&headers)?;
    let jobs = s
        .console
        .jobs()
        .all()
        .into_iter()
        .filter(|j| s.gate.may(who, Action::DeadLetters, &j.dead_letter_queue))
        .collect();
    Ok(Json(JobList { jobs }))
}
