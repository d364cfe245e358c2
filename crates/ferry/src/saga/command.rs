//! The wire between the orchestrator and the participants: commands out, replies back.
//!
//! A command carries the saga's payload and the results of the steps done so far as JSON,
//! and its correlation in headers (saga id, step, kind, command id, reply queue). Its
//! command id — `<saga id>.<step index>.<kind>` — is its dedup id, and its message id is a
//! ULID derived from it (transports such as the Ferry broker take ULIDs only): both are the
//! same every time the command is (re)sent. A participant that remembers the command ids
//! it handled answers a duplicate with its first answer instead of acting twice.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::ferry::Ferry;
use crate::message::{Message, Received, header as sdk_header};
use crate::spec::Destination;

/// Header names of saga commands and replies.
pub mod header {
    pub const SAGA_ID: &str = "saga-id";
    pub const SAGA_TYPE: &str = "saga-type";
    pub const STEP: &str = "saga-step";
    pub const STEP_INDEX: &str = "saga-step-index";
    /// `action` or `compensation`.
    pub const KIND: &str = "saga-kind";
    pub const COMMAND_ID: &str = "saga-command-id";
    /// The queue the participant answers on (the well-known `reply-to`).
    pub const REPLY_TO: &str = "reply-to";
    /// `true` when the orchestrator's queues deduplicate: replies then carry a dedup id.
    pub const DEDUP: &str = "saga-dedup";
}

/// Whether a command does a step or undoes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Action,
    Compensation,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Action => "action",
            Kind::Compensation => "compensation",
        }
    }

    fn parse(text: &str) -> Result<Kind> {
        match text {
            "action" => Ok(Kind::Action),
            "compensation" => Ok(Kind::Compensation),
            other => Err(Error::invalid(
                "saga kind",
                format!("`{other}` is neither `action` nor `compensation`"),
            )),
        }
    }
}

/// The id of the command for `step` of saga `saga_id`: stable across re-sends.
pub fn command_id(saga_id: &str, step: usize, kind: Kind) -> String {
    format!("{saga_id}.{step}.{}", kind.as_str())
}

/// A ULID that stands for `key`: time part `time_ms`, random part 80 bits of a stable
/// hash of `key` (FNV-1a, fixed by its spec — an orchestrator restarted on a newer build
/// derives the same ids).
pub(crate) fn stable_ulid(time_ms: i64, key: &str) -> String {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let hash = key
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u128::from(b)).wrapping_mul(PRIME));
    let time = (time_ms.max(0) as u64).min((1 << 48) - 1);
    ulid::Ulid::from_parts(time, hash & ((1 << 80) - 1)).to_string()
}

/// A participant's answer to a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Done; `result` is kept as the step's result and passed to later commands.
    Succeeded { result: Value },
    /// Declined for good (an action: the saga compensates; a compensation must not fail —
    /// it is re-sent after the step timeout).
    Failed { reason: String },
}

impl Outcome {
    pub fn succeeded(result: impl Serialize) -> Result<Outcome> {
        Ok(Outcome::Succeeded {
            result: serde_json::to_value(result)?,
        })
    }

    pub fn failed(reason: impl Into<String>) -> Outcome {
        Outcome::Failed {
            reason: reason.into(),
        }
    }
}

/// The body of a command.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CommandBody {
    payload: Value,
    results: BTreeMap<String, Value>,
}

/// A command as a participant reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub saga_id: String,
    pub saga_type: String,
    pub step: String,
    pub step_index: usize,
    pub kind: Kind,
    /// Stable across re-sends: the key a participant deduplicates by.
    pub command_id: String,
    /// The message id: a ULID derived from the command id, stable across re-sends.
    pub message_id: String,
    /// Whether the saga's queues deduplicate: the command carries its command id as dedup
    /// id, and the reply carries one too.
    pub dedup: bool,
    pub reply_to: String,
    /// The payload the saga was started with.
    pub payload: Value,
    /// The results of the steps completed so far, by step name.
    pub results: BTreeMap<String, Value>,
}

impl Command {
    /// The command `message` carries; an error names the missing or bad part.
    pub fn from_received(message: &Received) -> Result<Command> {
        let required = |name: &str| {
            message
                .header(name)
                .map(str::to_owned)
                .ok_or_else(|| Error::invalid("saga command", format!("no `{name}` header")))
        };
        let body: CommandBody = serde_json::from_slice(&message.payload)?;
        Ok(Command {
            saga_id: required(header::SAGA_ID)?,
            saga_type: required(header::SAGA_TYPE)?,
            step: required(header::STEP)?,
            step_index: parse_index(&required(header::STEP_INDEX)?)?,
            kind: Kind::parse(&required(header::KIND)?)?,
            command_id: required(header::COMMAND_ID)?,
            message_id: message.id.clone(),
            dedup: message.header(header::DEDUP) == Some("true"),
            reply_to: required(header::REPLY_TO)?,
            payload: body.payload,
            results: body.results,
        })
    }

    /// The saga payload decoded as `T`.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        Ok(serde_json::from_value(self.payload.clone())?)
    }

    /// Publishes `outcome` to the reply queue, correlated with this command. Its message
    /// id (and dedup id, when the saga's queues deduplicate) is derived from the command
    /// id, so answering a duplicate again stores the reply once on a deduplicating queue;
    /// elsewhere the orchestrator ignores the second.
    pub async fn reply(&self, ferry: &Ferry, outcome: &Outcome) -> Result<()> {
        let dedup_id = format!("{}.reply", self.command_id);
        let time_ms = ulid::Ulid::from_string(&self.message_id)
            .map(|id| id.timestamp_ms() as i64)
            .unwrap_or(0);
        let mut message = self
            .with_step_headers(
                Message::new(serde_json::to_vec(outcome)?).with_id(stable_ulid(time_ms, &dedup_id)),
            )
            .with_header(sdk_header::CORRELATION_ID, &self.command_id);
        if self.dedup {
            message = message.with_dedup_id(dedup_id);
        }
        ferry
            .publisher(Destination::queue(&self.reply_to))
            .send(message)
            .await?;
        Ok(())
    }

    /// `message` with the headers naming the saga, the step and the command: a command and
    /// the reply to it carry the same ones.
    fn with_step_headers(&self, message: Message) -> Message {
        message
            .with_header(header::SAGA_ID, &self.saga_id)
            .with_header(header::SAGA_TYPE, &self.saga_type)
            .with_header(header::STEP, &self.step)
            .with_header(header::STEP_INDEX, self.step_index.to_string())
            .with_header(header::KIND, self.kind.as_str())
            .with_header(header::COMMAND_ID, &self.command_id)
    }

    /// The message that carries this command to its participant.
    pub(crate) fn to_message(&self) -> Result<Message> {
        let body = CommandBody {
            payload: self.payload.clone(),
            results: self.results.clone(),
        };
        let mut message = self
            .with_step_headers(
                Message::new(serde_json::to_vec(&body)?)
                    .with_id(&self.message_id)
                    .with_key(self.saga_id.clone()),
            )
            .with_header(header::REPLY_TO, &self.reply_to)
            .with_header(sdk_header::CORRELATION_ID, &self.command_id);
        if self.dedup {
            message = message
                .with_dedup_id(&self.command_id)
                .with_header(header::DEDUP, "true");
        }
        Ok(message)
    }
}

/// Answers the command `delivery` carries with `outcome` (see [`Command::reply`]). The
/// caller still settles the delivery — ack it once the reply is sent.
pub async fn reply_to(ferry: &Ferry, delivery: &Delivery, outcome: Outcome) -> Result<()> {
    Command::from_received(delivery.message())?
        .reply(ferry, &outcome)
        .await
}

/// A participant's reply as the orchestrator reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub saga_id: String,
    pub saga_type: String,
    pub step_index: usize,
    pub kind: Kind,
    pub outcome: Outcome,
}

impl Reply {
    pub fn from_received(message: &Received) -> Result<Reply> {
        let required = |name: &str| {
            message
                .header(name)
                .ok_or_else(|| Error::invalid("saga reply", format!("no `{name}` header")))
        };
        Ok(Reply {
            saga_id: required(header::SAGA_ID)?.to_owned(),
            saga_type: required(header::SAGA_TYPE)?.to_owned(),
            step_index: parse_index(required(header::STEP_INDEX)?)?,
            kind: Kind::parse(required(header::KIND)?)?,
            outcome: serde_json::from_slice(&message.payload)?,
        })
    }
}

fn parse_index(text: &str) -> Result<usize> {
    text.parse()
        .map_err(|_| Error::invalid("saga step index", format!("`{text}` is not a number")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_survives_the_trip_through_a_message() {
        let command = Command {
            saga_id: "s1".into(),
            saga_type: "order".into(),
            step: "charge".into(),
            step_index: 1,
            kind: Kind::Compensation,
            command_id: command_id("s1", 1, Kind::Compensation),
            message_id: stable_ulid(1_700_000_000_000, "s1.1.compensation"),
            dedup: true,
            reply_to: "order.replies".into(),
            payload: serde_json::json!({"order": 7}),
            results: [("reserve".to_owned(), serde_json::json!("r-1"))].into(),
        };
        let message = command.to_message().unwrap();
        assert_eq!(
            message.id,
            Some(stable_ulid(1_700_000_000_000, "s1.1.compensation"))
        );
        assert_eq!(message.dedup_id.as_deref(), Some("s1.1.compensation"));
        assert_eq!(
            Command::from_received(&Received::first_delivery_of(message)).unwrap(),
            command
        );
    }

    #[test]
    fn stable_ids_are_ulids_that_differ_by_key() {
        let a = stable_ulid(5, "s1.0.action");
        assert_eq!(a, stable_ulid(5, "s1.0.action"));
        assert_ne!(a, stable_ulid(5, "s1.0.compensation"));
        assert_eq!(ulid::Ulid::from_string(&a).unwrap().timestamp_ms(), 5);
    }

    #[test]
    fn outcomes_are_tagged_json() {
        let text = serde_json::to_string(&Outcome::failed("no stock")).unwrap();
        assert_eq!(text, r#"{"outcome":"failed","reason":"no stock"}"#);
        let ok = Outcome::succeeded(5).unwrap();
        assert_eq!(
            serde_json::from_str::<Outcome>(&serde_json::to_string(&ok).unwrap()).unwrap(),
            ok
        );
    }
}
