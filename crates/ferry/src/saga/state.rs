//! A saga's persisted state and the pure state machine that moves it: given the state and
//! an event (a reply, the deadline, a command left unanswered), what the next state is and
//! which command, if any, to send once that state is committed.

use std::collections::BTreeMap;

use serde_json::Value;

use super::clock::millis;
use super::command::{Command, Kind, Outcome, Reply, command_id, stable_ulid};
use super::definition::SagaDefinition;
use crate::error::{Error, Result};

/// Where a saga is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Created; the first step's action is pending.
    Started,
    /// A later step's action is pending.
    InProgress,
    /// A step failed or the deadline passed: the compensation of `current_step` is pending.
    Compensating,
    /// Every step succeeded.
    Completed,
    /// Every completed step that had a compensation was compensated.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Started => "STARTED",
            Status::InProgress => "IN_PROGRESS",
            Status::Compensating => "COMPENSATING",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
        }
    }

    pub fn parse(text: &str) -> Result<Status> {
        Ok(match text {
            "STARTED" => Status::Started,
            "IN_PROGRESS" => Status::InProgress,
            "COMPENSATING" => Status::Compensating,
            "COMPLETED" => Status::Completed,
            "FAILED" => Status::Failed,
            other => {
                return Err(Error::invalid(
                    "saga status",
                    format!("`{other}` is unknown"),
                ));
            }
        })
    }

    /// COMPLETED or FAILED: nothing will change any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed)
    }

    /// The kind of command pending in this status.
    fn pending(self) -> Option<Kind> {
        match self {
            Status::Started | Status::InProgress => Some(Kind::Action),
            Status::Compensating => Some(Kind::Compensation),
            Status::Completed | Status::Failed => None,
        }
    }
}

/// One saga as the store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct SagaState {
    pub id: String,
    pub saga_type: String,
    pub status: Status,
    /// The step whose command is pending (its action, or its compensation when
    /// compensating); in a terminal state, the last step that moved.
    pub current_step: usize,
    pub payload: Value,
    /// The results of the steps whose actions succeeded, by step name.
    pub results: BTreeMap<String, Value>,
    /// The steps compensated, in the order they were.
    pub compensated: Vec<String>,
    /// Why the saga is compensating or failed.
    pub error: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// The deadline: past it, a saga still moving forward is compensated.
    pub timeout_at_ms: i64,
    /// When the pending command was last sent (or was about to be, when its transition was
    /// committed); past it by the step timeout, it is sent again.
    pub sent_at_ms: i64,
    /// Bumped by every write; a write expecting an older version is refused, so two
    /// orchestrators (or the sweeper and a reply) never both move one saga.
    pub version: i64,
}

impl SagaState {
    /// A new saga of `definition`, its first action pending.
    pub fn new(definition: &SagaDefinition, id: String, payload: Value, now_ms: i64) -> SagaState {
        SagaState {
            id,
            saga_type: definition.name.clone(),
            status: Status::Started,
            current_step: 0,
            payload,
            results: BTreeMap::new(),
            compensated: Vec::new(),
            error: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            timeout_at_ms: now_ms.saturating_add(millis(definition.deadline)),
            sent_at_ms: now_ms,
            version: 0,
        }
    }

    /// The command pending in this state, if any.
    pub fn pending_command(
        &self,
        definition: &SagaDefinition,
        reply_to: &str,
        dedup: bool,
    ) -> Option<(String, Command)> {
        let kind = self.status.pending()?;
        let step = definition.steps.get(self.current_step)?;
        let queue = match kind {
            Kind::Action => step.queue.clone(),
            Kind::Compensation => step.compensation.clone()?,
        };
        let command_id = command_id(&self.id, self.current_step, kind);
        let command = Command {
            saga_id: self.id.clone(),
            saga_type: self.saga_type.clone(),
            step: step.name.clone(),
            step_index: self.current_step,
            kind,
            message_id: stable_ulid(self.created_at_ms, &command_id),
            dedup,
            command_id,
            reply_to: reply_to.to_owned(),
            payload: self.payload.clone(),
            results: self.results.clone(),
        };
        Some((queue, command))
    }
}

/// What can move a saga.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Reply(ReplyEvent),
    /// The saga's deadline passed.
    Deadline,
}

/// A reply's correlation and outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyEvent {
    pub step_index: usize,
    pub kind: Kind,
    pub outcome: Outcome,
}

impl From<Reply> for ReplyEvent {
    fn from(reply: Reply) -> ReplyEvent {
        ReplyEvent {
            step_index: reply.step_index,
            kind: reply.kind,
            outcome: reply.outcome,
        }
    }
}

/// What an event does to a saga.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing: a duplicate or late reply, a reply for a finished saga, a deadline while
    /// compensating. Says why, for the debug log.
    Ignore(&'static str),
    /// A failed compensation: nothing changes, and the command is sent again after the
    /// step timeout (compensations must succeed eventually).
    Retry(String),
    /// Commit this state, then send its pending command (if it has one).
    Move(SagaState),
}

/// The state machine. `now_ms` stamps the new state; the version is bumped by the store.
pub fn decide(
    definition: &SagaDefinition,
    state: &SagaState,
    event: &Event,
    now_ms: i64,
) -> Decision {
    let Some(pending) = state.status.pending() else {
        return Decision::Ignore("the saga has finished");
    };
    let mut next = state.clone();
    next.updated_at_ms = now_ms;
    next.sent_at_ms = now_ms;
    match event {
        Event::Deadline => {
            if pending == Kind::Compensation {
                return Decision::Ignore("the saga is compensating already");
            }
            // The pending action may have been applied without an answer yet, so it is
            // undone too: compensations tolerate undoing what never happened.
            next.error = Some("the saga's deadline passed".into());
            compensate_from(definition, &mut next, Some(state.current_step));
            Decision::Move(next)
        }
        Event::Reply(reply) => {
            if reply.kind != pending || reply.step_index != state.current_step {
                return Decision::Ignore("the reply is for a command no longer pending");
            }
            match (&reply.outcome, pending) {
                (Outcome::Succeeded { result }, Kind::Action) => {
                    let step = &definition.steps[state.current_step];
                    next.results.insert(step.name.clone(), result.clone());
                    if state.current_step + 1 == definition.steps.len() {
                        next.status = Status::Completed;
                    } else {
                        next.status = Status::InProgress;
                        next.current_step += 1;
                    }
                    Decision::Move(next)
                }
                (Outcome::Failed { reason }, Kind::Action) => {
                    // The participant declined: its step has no effect to undo.
                    let step = &definition.steps[state.current_step];
                    next.error = Some(format!("step `{}` failed: {reason}", step.name));
                    compensate_from(definition, &mut next, state.current_step.checked_sub(1));
                    Decision::Move(next)
                }
                (Outcome::Succeeded { .. }, Kind::Compensation) => {
                    let step = &definition.steps[state.current_step];
                    next.compensated.push(step.name.clone());
                    compensate_from(definition, &mut next, state.current_step.checked_sub(1));
                    Decision::Move(next)
                }
                (Outcome::Failed { reason }, Kind::Compensation) => Decision::Retry(format!(
                    "the compensation of step `{}` failed: {reason}",
                    definition.steps[state.current_step].name
                )),
            }
        }
    }
}

/// Points `state` at the next compensation at or below `from`, or FAILED when none is left.
fn compensate_from(definition: &SagaDefinition, state: &mut SagaState, from: Option<usize>) {
    match from.and_then(|from| definition.compensable_at_or_below(from)) {
        Some(step) => {
            state.status = Status::Compensating;
            state.current_step = step;
        }
        None => state.status = Status::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saga::Step;

    fn order() -> SagaDefinition {
        SagaDefinition::new("order")
            .step(Step::new("reserve", "inventory").compensate_with("inventory"))
            .step(Step::new("charge", "payment").compensate_with("payment"))
            .step(Step::new("confirm", "orders"))
    }

    fn reply(step_index: usize, kind: Kind, outcome: Outcome) -> Event {
        Event::Reply(ReplyEvent {
            step_index,
            kind,
            outcome,
        })
    }

    fn ok() -> Outcome {
        Outcome::succeeded("done").unwrap()
    }

    fn moved(decision: Decision) -> SagaState {
        match decision {
            Decision::Move(state) => state,
            other => panic!("expected a move, got {other:?}"),
        }
    }

    #[test]
    fn a_deadline_too_long_for_milliseconds_is_never_already_past() {
        let saga = order().deadline(std::time::Duration::MAX);
        let state = SagaState::new(&saga, "s".into(), Value::Null, 1_000);
        assert_eq!(state.timeout_at_ms, i64::MAX);
        assert!(matches!(
            decide(&saga, &state, &reply(0, Kind::Action, ok()), 2_000),
            Decision::Move(_)
        ));
    }

    #[test]
    fn every_step_succeeding_completes_the_saga() {
        let saga = order();
        let mut state = SagaState::new(&saga, "s".into(), Value::Null, 0);
        for step in 0..3 {
            state = moved(decide(&saga, &state, &reply(step, Kind::Action, ok()), 1));
        }
        assert_eq!(state.status, Status::Completed);
        assert_eq!(state.results.len(), 3);
        assert!(state.pending_command(&saga, "r", true).is_none());
    }

    #[test]
    fn a_failed_step_compensates_the_completed_ones_in_reverse() {
        let saga = order();
        let mut state = SagaState::new(&saga, "s".into(), Value::Null, 0);
        state = moved(decide(&saga, &state, &reply(0, Kind::Action, ok()), 1));
        state = moved(decide(&saga, &state, &reply(1, Kind::Action, ok()), 1));
        state = moved(decide(
            &saga,
            &state,
            &reply(2, Kind::Action, Outcome::failed("no")),
            1,
        ));
        assert_eq!(
            (state.status, state.current_step),
            (Status::Compensating, 1)
        );
        let (queue, command) = state.pending_command(&saga, "r", true).unwrap();
        assert_eq!(
            (queue.as_str(), command.kind),
            ("payment", Kind::Compensation)
        );
        let failed = Outcome::failed("later");
        assert!(matches!(
            decide(&saga, &state, &reply(1, Kind::Compensation, failed), 1),
            Decision::Retry(_)
        ));
        state = moved(decide(
            &saga,
            &state,
            &reply(1, Kind::Compensation, ok()),
            1,
        ));
        assert_eq!(
            (state.status, state.current_step),
            (Status::Compensating, 0)
        );
        state = moved(decide(
            &saga,
            &state,
            &reply(0, Kind::Compensation, ok()),
            1,
        ));
        assert_eq!(state.status, Status::Failed);
        assert_eq!(state.compensated, ["charge", "reserve"]);
    }

    #[test]
    fn the_first_step_failing_fails_at_once() {
        let saga = order();
        let state = SagaState::new(&saga, "s".into(), Value::Null, 0);
        let state = moved(decide(
            &saga,
            &state,
            &reply(0, Kind::Action, Outcome::failed("no")),
            1,
        ));
        assert_eq!(state.status, Status::Failed);
        assert!(state.compensated.is_empty());
    }

    #[test]
    fn the_deadline_compensates_the_pending_step_too() {
        let saga = order();
        let state = SagaState::new(&saga, "s".into(), Value::Null, 0);
        let state = moved(decide(&saga, &state, &reply(0, Kind::Action, ok()), 1));
        let state = moved(decide(&saga, &state, &Event::Deadline, 2));
        assert_eq!(
            (state.status, state.current_step),
            (Status::Compensating, 1)
        );
        assert!(matches!(
            decide(&saga, &state, &Event::Deadline, 3),
            Decision::Ignore(_)
        ));
    }

    #[test]
    fn duplicate_late_and_finished_replies_change_nothing() {
        let saga = order();
        let start = SagaState::new(&saga, "s".into(), Value::Null, 0);
        let after = moved(decide(&saga, &start, &reply(0, Kind::Action, ok()), 1));
        for event in [
            reply(0, Kind::Action, ok()),
            reply(0, Kind::Action, Outcome::failed("late")),
            reply(2, Kind::Action, ok()),
            reply(1, Kind::Compensation, ok()),
        ] {
            assert!(
                matches!(decide(&saga, &after, &event, 2), Decision::Ignore(_)),
                "{event:?}"
            );
        }
        let mut done = after.clone();
        done.status = Status::Completed;
        assert!(matches!(
            decide(&saga, &done, &Event::Deadline, 2),
            Decision::Ignore(_)
        ));
    }

    /// Random sagas driven by random participants, with noise (replies for commands not
    /// pending) and a deadline at a random moment, against a reference: the first decline
    /// or the deadline decides which steps are undone, in reverse; noise changes nothing.
    #[test]
    fn random_runs_agree_with_the_reference_model() {
        let mut rng = fastrand::Rng::with_seed(0x5a6a);
        for run in 0..3000 {
            let n = rng.usize(1..=5);
            let mut saga = SagaDefinition::new("random");
            let mut compensable = Vec::new();
            for i in 0..n {
                let mut step = Step::new(format!("s{i}"), "q");
                if rng.f32() < 0.6 {
                    step = step.compensate_with("q");
                }
                compensable.push(step.compensation.is_some());
                saga = saga.step(step);
            }
            let declines: Vec<bool> = (0..n).map(|_| rng.f32() < 0.2).collect();
            let deadline_at = if rng.bool() {
                Some(rng.usize(0..3 * n))
            } else {
                None
            };
            let mut state = SagaState::new(&saga, format!("r{run}"), Value::Null, 0);
            // Steps below this are undone: the declined step, or one past the step pending
            // at the deadline.
            let mut undo_below: Option<usize> = None;
            let mut events = 0;
            while !state.status.is_terminal() {
                assert!(events < 200, "run {run} does not end");
                events += 1;
                let before = state.clone();
                if rng.f32() < 0.4 {
                    let kind = if rng.bool() {
                        Kind::Action
                    } else {
                        Kind::Compensation
                    };
                    let step = rng.usize(0..=n);
                    let pending =
                        state.status.pending() == Some(kind) && step == state.current_step;
                    if !pending {
                        let outcome = if rng.bool() {
                            ok()
                        } else {
                            Outcome::failed("noise")
                        };
                        let decision = decide(&saga, &state, &reply(step, kind, outcome), 1);
                        assert!(
                            matches!(decision, Decision::Ignore(_)),
                            "run {run}: {decision:?}"
                        );
                    }
                    continue;
                }
                if deadline_at == Some(events) {
                    match decide(&saga, &state, &Event::Deadline, 1) {
                        Decision::Move(next) => {
                            assert_ne!(before.status, Status::Compensating);
                            undo_below = Some(before.current_step + 1);
                            state = next;
                        }
                        Decision::Ignore(_) => assert_eq!(before.status, Status::Compensating),
                        Decision::Retry(why) => panic!("run {run}: {why}"),
                    }
                    continue;
                }
                let step = state.current_step;
                match state.status {
                    Status::Compensating if rng.f32() < 0.2 => {
                        let failed = Outcome::failed("not yet");
                        let decision =
                            decide(&saga, &state, &reply(step, Kind::Compensation, failed), 1);
                        assert!(
                            matches!(decision, Decision::Retry(_)),
                            "run {run}: {decision:?}"
                        );
                    }
                    Status::Compensating => {
                        state = moved(decide(
                            &saga,
                            &state,
                            &reply(step, Kind::Compensation, ok()),
                            1,
                        ));
                    }
                    _ if declines[step] => {
                        undo_below = Some(step);
                        let declined = reply(step, Kind::Action, Outcome::failed("no"));
                        state = moved(decide(&saga, &state, &declined, 1));
                    }
                    _ => state = moved(decide(&saga, &state, &reply(step, Kind::Action, ok()), 1)),
                }
                assert!(state.current_step < n, "run {run}: {state:?}");
            }
            match undo_below {
                None => {
                    assert_eq!(state.status, Status::Completed, "run {run}");
                    assert_eq!(state.results.len(), n);
                    assert!(state.compensated.is_empty());
                }
                Some(below) => {
                    assert_eq!(state.status, Status::Failed, "run {run}");
                    let expected: Vec<String> = (0..below)
                        .rev()
                        .filter(|&i| compensable[i])
                        .map(|i| format!("s{i}"))
                        .collect();
                    assert_eq!(state.compensated, expected, "run {run}");
                    assert!(state.error.is_some());
                }
            }
        }
    }
}
