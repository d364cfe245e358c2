//! The checker: from the histories of every process of a run (after the final drain,
//! which leaves both queues empty), what went wrong. It knows only what clients saw and
//! what the dead-letter queues held at the end, and holds the broker to its promises:
//!
//! - **Nothing acknowledged is lost.** Every message whose publish returned OK was acked
//!   by a consumer, or is in its dead-letter queue for a reason the histories explain. An
//!   ack counts as done only if it returned OK or its answer never came (the consumer was
//!   killed, the connection cut) — the latter only when the message was not delivered
//!   again: the drain emptied the queues, so the broker took it as acked. An ack the broker
//!   refused did not take, so a message whose only ack was refused is lost.
//! - **An acked message never comes back.** An ack that returned OK is the only one for
//!   its message, and the message is never delivered again after that delivery (a
//!   delivery with a higher attempt number) nor dead-lettered.
//! - **Per-key order** (`chaos.orders`, key-shared): by the shared monotonic clock, a key's
//!   deliveries never go back to an earlier message, and never skip one that was
//!   acknowledged-published (unless it is a dead letter). Delivering the head again
//!   (nacked, lease expired, consumer killed) is allowed.
//! - **Dead letters match what consumers did.** A rejected message (the reject returned
//!   OK) is a dead letter with reason `rejected`; a `rejected` letter had a reject that was
//!   sent and not refused; a `max_deliveries` letter had at least that many deliveries in
//!   the histories — seen by consumers (handed out, or received and dropped with a stream
//!   that failed), or ended unseen before one that was seen. Attempts after the last one
//!   seen are explained only by faults that end consume streams (a proxy drop or reset, a
//!   server or consumer kill) between the message's last recorded event and the letter's
//!   last failure: one fault for each such attempt. Every poison message (always nacked)
//!   is one; no message is a dead letter twice. A dead letter nobody caused is a
//!   mismatch, and its message counts as lost.
//! - **Deduplication holds across restarts.** Each message is stored once (one seq per
//!   id); a publish under a used dedup id answers the first message's id and the new id is
//!   never delivered.
//! - **There was traffic.** A run in which no publish returned OK is not clean.
//!
//! Redeliveries that break none of these are counted as explained duplicates.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::history::{Answer, Event, Fate, Settle};
use crate::scenario::{ORDERS_QUEUE, Scenario, WORK_QUEUE};

/// What the client's settle says of a delivery handed out from a consume stream that had
/// already failed (see `ferry_client::Consumer`).
const STALE_STREAM: &str = "the connection was lost after this delivery";

/// Violations listed in the report beyond the counts (the first ones of each run).
const MAX_LISTED: usize = 50;

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// Acknowledged publishes.
    pub acked_publishes: u64,
    /// Deliveries seen, and how many distinct messages they were.
    pub deliveries: u64,
    pub delivered_messages: u64,
    /// Acks that returned OK.
    pub acks_confirmed: u64,
    /// Messages whose only ack never got its answer, and that were not delivered again.
    pub acks_unconfirmed: u64,
    /// Dead letters found after the drain, by reason.
    pub dead_letters: BTreeMap<String, u64>,
    /// Re-publishes under a used dedup id.
    pub republished: u64,
    /// Messages delivered whose publish never returned OK (the producer stopped while
    /// retrying): allowed, not counted as acknowledged.
    pub unacknowledged_delivered: u64,
    /// Deliveries beyond the first of each message that break nothing.
    pub explained_duplicates: u64,
    /// Deliveries the client handed out from a consume stream that had already failed
    /// (their settle said so): the broker made them before the stream died, at a time the
    /// history does not know, so the key-order check leaves them out.
    pub stale_handed_out: u64,
    pub lost: u64,
    pub acked_twice: u64,
    pub acked_came_back: u64,
    pub order_violations: u64,
    pub dead_letter_mismatches: u64,
    /// Deliveries the client received on a stream that then failed, and dropped.
    #[serde(default)]
    pub dropped_on_stream_failure: u64,
    /// `max_deliveries` dead letters whose attempts after the last one seen are each
    /// explained by a fault that ended consume streams in time.
    #[serde(default)]
    pub dead_letters_explained_by_faults: u64,
    pub dedup_violations: u64,
    /// Acknowledged publishes and deliveries after the last fault had ended.
    pub published_after_faults: u64,
    pub delivered_after_faults: u64,
    /// The first violations, in words.
    pub violations: Vec<String>,
}

impl Findings {
    /// No violation, and traffic to judge: a run in which nothing was published shows
    /// nothing about the broker.
    pub fn clean(&self) -> bool {
        self.acked_publishes > 0
            && self.lost == 0
            && self.acked_twice == 0
            && self.acked_came_back == 0
            && self.order_violations == 0
            && self.dead_letter_mismatches == 0
            && self.dedup_violations == 0
    }

    fn violation(&mut self, counter: fn(&mut Findings) -> &mut u64, text: String) {
        *counter(self) += 1;
        if self.violations.len() < MAX_LISTED {
            self.violations.push(text);
        }
    }
}

struct Published {
    queue: String,
    key: Option<String>,
    kseq: Option<u64>,
    fate: Fate,
}

#[derive(Clone)]
struct Seen {
    t: u64,
    seq: u64,
    attempt: u32,
    key: Option<String>,
    kseq: Option<u64>,
}

struct Letter {
    origin_queue: String,
    origin_seq: u64,
    reason: String,
    deliveries: u32,
    last_error: Option<String>,
    last_failure_t: Option<u64>,
}

/// What the dead-letter check knows of each message beyond its deliveries.
#[derive(Default)]
struct Traces<'a> {
    /// The attempts of each message a consumer received and dropped with a failed stream.
    dropped: HashMap<&'a str, Vec<u32>>,
    /// The time of each message's last recorded event (publish, delivery, drop, settle).
    last_event: HashMap<&'a str, u64>,
    /// When each fault that ends consume streams was injected.
    stream_faults: Vec<u64>,
}

impl<'a> Traces<'a> {
    fn saw(&mut self, id: &'a str, t: u64) {
        let last = self.last_event.entry(id).or_default();
        *last = (*last).max(t);
    }

    /// Faults that end consume streams, injected after `after` and by `until`.
    fn faults_between(&self, after: u64, until: u64) -> u32 {
        self.stream_faults
            .iter()
            .filter(|&&t| t > after && t <= until)
            .count() as u32
    }
}

/// Whether a fault ends the consume streams it touches: the ones that cut deliveries in
/// flight (bytes the proxy discards, a lease a killed server never sent, a killed
/// consumer's unread deliveries). A pause, a delay or a clock jump ends none.
fn ends_streams(kind: &str, detail: &str) -> bool {
    match kind {
        "server_kill" | "consumer_kill" => true,
        "proxy" => detail.starts_with("drop_all") || detail.starts_with("reset_all"),
        _ => false,
    }
}

#[derive(Default)]
struct Settles {
    /// (op, attempt) of each settle sent.
    sent: Vec<(Settle, u32)>,
    /// (op, attempt) of each settle that returned OK.
    ok: Vec<(Settle, u32)>,
    /// (op, attempt) of each settle the broker (or the client) answered was not done.
    refused: Vec<(Settle, u32)>,
}

impl Settles {
    /// The attempts whose `op` may have taken: sent, and not refused — it returned OK, or
    /// its answer never came (the consumer was killed, the connection cut).
    fn done(&self, op: Settle) -> impl Iterator<Item = u32> + '_ {
        self.sent
            .iter()
            .filter(move |sent| sent.0 == op && !self.refused.contains(sent))
            .map(|(_, attempt)| *attempt)
    }
}

/// Checks the events of a whole run (every history file, in any order).
pub fn check(events: &[Event], scenario: &Scenario) -> Findings {
    let mut f = Findings::default();
    let mut published: HashMap<&str, Published> = HashMap::new();
    let mut dedup_first: HashMap<&str, &str> = HashMap::new();
    let mut republished: Vec<(&str, &str, &str)> = Vec::new();
    let mut deliveries: HashMap<&str, Vec<Seen>> = HashMap::new();
    let mut settles: HashMap<&str, Settles> = HashMap::new();
    let mut letters: HashMap<&str, Vec<Letter>> = HashMap::new();
    let mut stale: HashSet<(&str, u32)> = HashSet::new();
    let mut faults_over: Option<u64> = None;
    let mut publish_times: Vec<u64> = Vec::new();
    let mut traces = Traces::default();

    for event in events {
        match event {
            Event::Published {
                t,
                queue,
                sent_id,
                id,
                key,
                kseq,
                fate,
                dedup,
            } => {
                f.acked_publishes += 1;
                publish_times.push(*t);
                traces.saw(id, *t);
                if sent_id != id {
                    f.violation(
                        |f| &mut f.dedup_violations,
                        format!(
                            "a new message {sent_id} was answered with another message's id {id}"
                        ),
                    );
                }
                if let Some(dedup) = dedup {
                    dedup_first.insert(dedup, id);
                }
                published.insert(
                    id,
                    Published {
                        queue: queue.clone(),
                        key: key.clone(),
                        kseq: *kseq,
                        fate: *fate,
                    },
                );
            }
            Event::Republished {
                sent_id,
                returned_id,
                dedup,
                ..
            } => {
                f.republished += 1;
                republished.push((dedup, sent_id, returned_id));
            }
            Event::Delivered {
                t,
                id,
                seq,
                attempt,
                key,
                kseq,
                ..
            } => {
                traces.saw(id, *t);
                deliveries.entry(id).or_default().push(Seen {
                    t: *t,
                    seq: *seq,
                    attempt: *attempt,
                    key: key.clone(),
                    kseq: *kseq,
                });
            }
            Event::Dropped { t, id, attempt, .. } => {
                f.dropped_on_stream_failure += 1;
                traces.saw(id, *t);
                traces.dropped.entry(id).or_default().push(*attempt);
            }
            Event::Settling {
                t, id, attempt, op, ..
            } => {
                traces.saw(id, *t);
                settles.entry(id).or_default().sent.push((*op, *attempt));
            }
            Event::Settled {
                t,
                id,
                attempt,
                op,
                answer,
                error,
                ..
            } => {
                traces.saw(id, *t);
                let s = settles.entry(id).or_default();
                match answer {
                    Answer::Ok => s.ok.push((*op, *attempt)),
                    Answer::Refused => s.refused.push((*op, *attempt)),
                    Answer::NeverCame => {}
                }
                if error.as_ref().is_some_and(|e| e.contains(STALE_STREAM)) {
                    stale.insert((id, *attempt));
                }
            }
            Event::Fault { t, kind, detail } => {
                if ends_streams(kind, detail) {
                    traces.stream_faults.push(*t);
                }
            }
            Event::Phase { t, phase } => {
                if phase == "faults_over" {
                    faults_over = Some(*t);
                }
            }
            Event::DeadLetter {
                origin_queue,
                id,
                origin_seq,
                reason,
                deliveries,
                last_error,
                last_failure_t,
            } => {
                *f.dead_letters.entry(reason.clone()).or_default() += 1;
                letters.entry(id).or_default().push(Letter {
                    origin_queue: origin_queue.clone(),
                    origin_seq: *origin_seq,
                    reason: reason.clone(),
                    deliveries: *deliveries,
                    last_error: last_error.clone(),
                    last_failure_t: *last_failure_t,
                });
            }
        }
    }

    if let Some(over) = faults_over {
        f.published_after_faults = publish_times.iter().filter(|&&t| t > over).count() as u64;
        f.delivered_after_faults =
            deliveries.values().flatten().filter(|d| d.t > over).count() as u64;
    }
    f.deliveries = deliveries.values().map(|d| d.len() as u64).sum();
    f.delivered_messages = deliveries.len() as u64;
    f.explained_duplicates = f.deliveries - f.delivered_messages;

    if f.acked_publishes == 0 {
        f.violations.push(
            "no messages published: no publish returned OK, so the run proves nothing".to_owned(),
        );
    }
    check_storage(&mut f, &deliveries, &letters, &published);
    check_dedup(&mut f, &dedup_first, &republished, &deliveries);
    let explained = check_dead_letters(
        &mut f,
        scenario,
        &published,
        &deliveries,
        &settles,
        &letters,
        &traces,
    );
    check_settles(
        &mut f,
        &published,
        &deliveries,
        &settles,
        &letters,
        &explained,
    );
    f.stale_handed_out = stale.len() as u64;
    check_key_order(&mut f, &published, &deliveries, &letters, &stale);
    f
}

/// One message, one seq: a message stored twice shows two.
fn check_storage(
    f: &mut Findings,
    deliveries: &HashMap<&str, Vec<Seen>>,
    letters: &HashMap<&str, Vec<Letter>>,
    published: &HashMap<&str, Published>,
) {
    let mut ids: Vec<&&str> = deliveries.keys().collect();
    ids.sort();
    for id in ids {
        let seqs: HashSet<u64> = deliveries[*id].iter().map(|d| d.seq).collect();
        if seqs.len() > 1 {
            f.violation(
                |f| &mut f.dedup_violations,
                format!("message {id} was stored more than once (seqs {seqs:?})"),
            );
        }
        if !published.contains_key(*id) {
            f.unacknowledged_delivered += 1;
        }
        for letter in letters.get(*id).into_iter().flatten() {
            if !seqs.contains(&letter.origin_seq) {
                f.violation(
                    |f| &mut f.dedup_violations,
                    format!(
                        "message {id}'s dead letter is of seq {} of {}, it was delivered as {seqs:?}",
                        letter.origin_seq, letter.origin_queue
                    ),
                );
            }
        }
    }
}

/// A re-publish under a used dedup id answers the first id, and its own id is never seen.
fn check_dedup(
    f: &mut Findings,
    dedup_first: &HashMap<&str, &str>,
    republished: &[(&str, &str, &str)],
    deliveries: &HashMap<&str, Vec<Seen>>,
) {
    for (dedup, sent, returned) in republished {
        match dedup_first.get(dedup) {
            Some(first) if first == returned => {}
            Some(first) => f.violation(
                |f| &mut f.dedup_violations,
                format!(
                    "a publish under dedup id {dedup} was answered {returned}, not the first message {first}"
                ),
            ),
            None => {} // the first publish's answer was never seen: nothing to compare
        }
        if deliveries.contains_key(sent) {
            f.violation(
                |f| &mut f.dedup_violations,
                format!("a second copy under dedup id {dedup} ({sent}) was delivered"),
            );
        }
    }
}

/// Lost messages, double acks, and acked messages that came back.
fn check_settles(
    f: &mut Findings,
    published: &HashMap<&str, Published>,
    deliveries: &HashMap<&str, Vec<Seen>>,
    settles: &HashMap<&str, Settles>,
    letters: &HashMap<&str, Vec<Letter>>,
    explained: &HashSet<&str>,
) {
    let empty = Settles::default();
    let mut ids: Vec<&&str> = published.keys().collect();
    ids.sort();
    for id in ids {
        let s = settles.get(*id).unwrap_or(&empty);
        let seen = deliveries.get(*id).map(Vec::as_slice).unwrap_or(&[]);
        let acked: Vec<u32> =
            s.ok.iter()
                .filter(|(op, _)| *op == Settle::Ack)
                .map(|(_, attempt)| *attempt)
                .collect();
        f.acks_confirmed += acked.len() as u64;
        if acked.len() > 1 {
            f.violation(
                |f| &mut f.acked_twice,
                format!(
                    "message {id} was acked {} times (attempts {acked:?})",
                    acked.len()
                ),
            );
        }
        if let Some(&first_ack) = acked.iter().min() {
            if let Some(later) = seen.iter().find(|d| d.attempt > first_ack) {
                f.violation(
                    |f| &mut f.acked_came_back,
                    format!(
                        "message {id} was acked at attempt {first_ack} and delivered again (attempt {})",
                        later.attempt
                    ),
                );
            }
            if letters.contains_key(*id) {
                f.violation(
                    |f| &mut f.acked_came_back,
                    format!("message {id} was acked and is also a dead letter"),
                );
            }
            continue;
        }
        if let Some(letter) = letters.get(*id).map(|l| &l[0]) {
            // A dead letter accounts for the message only if the histories explain it.
            if !explained.contains(*id) {
                f.violation(
                    |f| &mut f.lost,
                    format!(
                        "acknowledged publish {id} ({} {:?}) is lost: its dead letter ({}) is explained by no history",
                        published[*id].queue, published[*id].fate, letter.reason
                    ),
                );
            }
            continue;
        }
        // No confirmed ack and no dead letter: only an ack of the last delivery seen whose
        // answer never came accounts for it. A refused ack did not take.
        let last_attempt = seen.iter().map(|d| d.attempt).max();
        let unconfirmed = s
            .done(Settle::Ack)
            .any(|attempt| Some(attempt) >= last_attempt);
        if unconfirmed && last_attempt.is_some() {
            f.acks_unconfirmed += 1;
        } else {
            let what = match last_attempt {
                None => "never delivered".to_owned(),
                Some(a) => format!("last delivered at attempt {a} and never acked"),
            };
            f.violation(
                |f| &mut f.lost,
                format!(
                    "acknowledged publish {id} ({} {:?}) is lost: {what}, and not a dead letter",
                    published[*id].queue, published[*id].fate
                ),
            );
        }
    }
}

/// Each dead letter against the histories, and what consumers did against the dead
/// letters. Returns the messages whose dead letter the histories explain: only those are
/// accounted for by it in the loss check.
fn check_dead_letters<'a>(
    f: &mut Findings,
    scenario: &Scenario,
    published: &HashMap<&str, Published>,
    deliveries: &HashMap<&str, Vec<Seen>>,
    settles: &HashMap<&str, Settles>,
    letters: &HashMap<&'a str, Vec<Letter>>,
    traces: &Traces,
) -> HashSet<&'a str> {
    let empty = Settles::default();
    let mut explained = HashSet::new();
    let mut ids: Vec<&&str> = letters.keys().collect();
    ids.sort();
    for id in ids {
        let found = &letters[*id];
        let s = settles.get(*id).unwrap_or(&empty);
        let seen = deliveries.get(*id).map(Vec::as_slice).unwrap_or(&[]);
        let letter = &found[0];
        let max = if letter.origin_queue == WORK_QUEUE {
            scenario.work_max_deliveries
        } else {
            scenario.orders_max_deliveries
        };
        let mut why_not = Vec::new();
        let mut by_faults = false;
        if found.len() > 1 {
            why_not.push(format!(
                "message {id} is a dead letter {} times",
                found.len()
            ));
        }
        match letter.reason.as_str() {
            "rejected" => {
                if s.done(Settle::Reject).next().is_none() {
                    why_not.push(
                        if s.sent.iter().any(|(op, _)| *op == Settle::Reject) {
                            format!(
                                "message {id} is dead-lettered as rejected but every reject of it was refused"
                            )
                        } else {
                            format!(
                                "message {id} is dead-lettered as rejected but no consumer rejected it"
                            )
                        },
                    );
                }
            }
            "max_deliveries" => {
                if letter.deliveries < max {
                    why_not.push(format!(
                        "message {id} is dead-lettered for max deliveries after {} of {max}",
                        letter.deliveries
                    ));
                }
                // The broker numbers each delivery of a message, so a consumer's delivery
                // with attempt n shows that the n - 1 before it went out and ended without
                // a settle taking: their leases ran out, or their stream died and the
                // client dropped them unseen. A delivery the client received and dropped
                // with its failed stream reached a consumer, and counts as seen.
                let accounted = seen
                    .iter()
                    .map(|d| d.attempt)
                    .chain(traces.dropped.get(*id).into_iter().flatten().copied())
                    .max()
                    .unwrap_or(0);
                if accounted < max {
                    // Deliveries after the last one seen are in no history: only a fault
                    // that cut them in transit explains them, one fault per attempt, and
                    // only between the last thing a history says of the message and the
                    // broker's last failure of it.
                    let unseen = max - accounted;
                    let after = traces.last_event.get(*id).copied().unwrap_or(0);
                    let faults = letter
                        .last_failure_t
                        .map_or(0, |until| traces.faults_between(after, until));
                    if faults >= unseen {
                        by_faults = true;
                    } else {
                        why_not.push(format!(
                            "message {id} is dead-lettered for max deliveries ({max}), but consumers saw it only up to attempt {accounted}; faults that end streams between its last recorded event and its last failure: {faults}, for {unseen} attempts after it"
                        ));
                    }
                }
                if s.ok.iter().any(|(op, _)| *op == Settle::Reject) {
                    why_not.push(format!(
                        "message {id} was rejected (OK) but its dead letter says max deliveries"
                    ));
                }
            }
            other => why_not.push(format!(
                "message {id} is dead-lettered as {other:?}, which nothing here causes"
            )),
        }
        // One mismatch per letter, however many reasons.
        if why_not.is_empty() {
            explained.insert(*id);
            if by_faults {
                f.dead_letters_explained_by_faults += 1;
            }
        } else {
            let broker_says = letter.last_error.as_ref().map_or(String::new(), |e| {
                format!(" (the broker's last error: {e:?})")
            });
            f.violation(
                |f| &mut f.dead_letter_mismatches,
                format!("{}{broker_says}", why_not.join("; ")),
            );
        }
    }
    // The other way: what consumers did must be in the dead-letter queue.
    let mut ids: Vec<&&str> = published.keys().collect();
    ids.sort();
    for id in ids {
        let p = &published[*id];
        let s = settles.get(*id).unwrap_or(&empty);
        let letter = letters.get(*id).map(|l| &l[0]);
        if s.ok.iter().any(|(op, _)| *op == Settle::Reject) && letter.is_none() {
            f.violation(
                |f| &mut f.dead_letter_mismatches,
                format!(
                    "message {id} was rejected (OK) but is not in {}.dlq",
                    p.queue
                ),
            );
        }
        if p.fate == Fate::Poison && letter.is_some_and(|l| l.reason != "max_deliveries") {
            f.violation(
                |f| &mut f.dead_letter_mismatches,
                format!("poison message {id} is a dead letter for another reason"),
            );
        }
    }
    explained
}

/// Per key, by time: never back to an earlier kseq, never past one not yet delivered.
fn check_key_order(
    f: &mut Findings,
    published: &HashMap<&str, Published>,
    deliveries: &HashMap<&str, Vec<Seen>>,
    letters: &HashMap<&str, Vec<Letter>>,
    stale: &HashSet<(&str, u32)>,
) {
    // The acknowledged-published kseqs of each key, not dead-lettered: none may be skipped.
    let mut required: HashMap<&str, HashSet<u64>> = HashMap::new();
    for (id, p) in published {
        if p.queue != ORDERS_QUEUE || letters.contains_key(id) {
            continue;
        }
        if let (Some(key), Some(kseq)) = (&p.key, p.kseq) {
            required.entry(key).or_default().insert(kseq);
        }
    }
    let mut by_key: BTreeMap<&str, Vec<&Seen>> = BTreeMap::new();
    for (id, seen) in deliveries
        .iter()
        .flat_map(|(id, all)| all.iter().map(move |d| (*id, d)))
    {
        if stale.contains(&(id, seen.attempt)) {
            continue;
        }
        if let (Some(key), Some(_)) = (&seen.key, seen.kseq) {
            by_key.entry(key).or_default().push(seen);
        }
    }
    for (key, mut seen) in by_key {
        seen.sort_by_key(|d| d.t);
        let mut needed: Vec<u64> = required
            .get(key)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default();
        needed.sort_unstable();
        // needed[..next] have all been delivered.
        let mut next = 0;
        let mut highest: Option<u64> = None;
        let mut delivered: HashSet<u64> = HashSet::new();
        for d in seen {
            let kseq = d.kseq.expect("filtered above");
            if let Some(h) = highest
                && kseq < h
            {
                f.violation(
                    |f| &mut f.order_violations,
                    format!("key {key}: message {kseq} delivered after message {h}"),
                );
            }
            if delivered.insert(kseq) {
                while next < needed.len() && delivered.contains(&needed[next]) {
                    next += 1;
                }
                if next < needed.len() && needed[next] < kseq {
                    f.violation(
                        |f| &mut f.order_violations,
                        format!(
                            "key {key}: message {kseq} delivered before message {}",
                            needed[next]
                        ),
                    );
                }
            }
            highest = Some(highest.map_or(kseq, |h| h.max(kseq)));
        }
    }
}
