//! What every process of a run saw, as append-only JSON lines: one file per process
//! (per incarnation of a worker), each line written with one `write` call straight to the
//! file, so a process killed with SIGKILL leaves every line it finished (the kernel has
//! them) and at worst one partial last line, which [`read_dir`] skips.
//!
//! Times are `CLOCK_MONOTONIC` nanoseconds: one clock for every process on the machine, not
//! moved by the broker's test clock, so events of different processes can be ordered.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ChaosError, Result};

/// Nanoseconds of `CLOCK_MONOTONIC`, comparable between processes of one machine.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a consumer is told to do with a message, chosen by its producer and carried in
/// the `chaos-fate` header, so the checker knows what each message should have become.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fate {
    /// Acked at its first delivery.
    Ack,
    /// Nacked at its first delivery, acked at the next.
    NackOnce,
    /// Rejected: it must end in the dead-letter queue with reason `rejected`.
    Reject,
    /// Nacked at every delivery: it must end in the dead-letter queue with reason
    /// `max_deliveries`.
    Poison,
}

impl Fate {
    pub fn as_str(self) -> &'static str {
        match self {
            Fate::Ack => "ack",
            Fate::NackOnce => "nack_once",
            Fate::Reject => "reject",
            Fate::Poison => "poison",
        }
    }
    pub fn parse(text: &str) -> Option<Fate> {
        [Fate::Ack, Fate::NackOnce, Fate::Reject, Fate::Poison]
            .into_iter()
            .find(|f| f.as_str() == text)
    }
}

/// How a consumer settled a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Settle {
    Ack,
    Nack,
    Reject,
}

/// What came back for a settle a consumer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// It returned OK: the broker did it.
    Ok,
    /// The broker (or the client, for a delivery of a stream that had failed) answered
    /// that it was not done: the lease had ended, the message was settled elsewhere.
    Refused,
    /// No answer the consumer can go by: the connection broke before it, or the client
    /// closed. The settle may or may not have reached the broker, as when the consumer is
    /// killed between `Settling` and `Settled`.
    NeverCame,
}

/// One line of a history file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// A publish returned OK for this message: the broker has it (an acknowledged
    /// publish). `sent_id` is the id the producer chose; `id` the one the broker answered.
    Published {
        t: u64,
        queue: String,
        sent_id: String,
        id: String,
        key: Option<String>,
        kseq: Option<u64>,
        fate: Fate,
        dedup: Option<String>,
    },
    /// A message published again under a dedup id already used, with a new message id:
    /// the broker must answer with the first message's id and store nothing.
    Republished {
        t: u64,
        queue: String,
        sent_id: String,
        returned_id: String,
        dedup: String,
    },
    /// A consumer got this delivery (written before it is settled).
    Delivered {
        t: u64,
        queue: String,
        id: String,
        seq: u64,
        attempt: u32,
        key: Option<String>,
        kseq: Option<u64>,
    },
    /// The client received this delivery on a consume stream that then failed, and dropped
    /// it instead of handing it out ("received, dropped: stream failed"): it reached the
    /// consumer, and the broker counted the attempt.
    Dropped {
        t: u64,
        queue: String,
        id: String,
        seq: u64,
        attempt: u32,
    },
    /// A consumer is about to send this settle; with no `Settled` after it, its outcome
    /// is unknown (the process was killed, or the answer was lost).
    Settling {
        t: u64,
        queue: String,
        id: String,
        seq: u64,
        attempt: u32,
        op: Settle,
    },
    /// The settle's answer, and the error's text when it was not OK.
    Settled {
        t: u64,
        queue: String,
        id: String,
        seq: u64,
        attempt: u32,
        op: Settle,
        answer: Answer,
        error: Option<String>,
    },
    /// The harness injected a fault.
    Fault {
        t: u64,
        kind: String,
        detail: String,
    },
    /// The harness's phases: `faults_over` (the last fault has ended), `drained`.
    Phase { t: u64, phase: String },
    /// A dead letter found in a dead-letter queue after the drain.
    DeadLetter {
        origin_queue: String,
        id: String,
        origin_seq: u64,
        reason: String,
        deliveries: u32,
        /// The broker's last error for the message (absent from older histories): what
        /// ended its last attempt, to read beside a mismatch.
        #[serde(default)]
        last_error: Option<String>,
        /// When the broker recorded the message's last failure, on the histories'
        /// monotonic clock (absent when the broker gave no time, and in older histories).
        #[serde(default)]
        last_failure_t: Option<u64>,
    },
}

/// Appends events to one history file.
#[derive(Debug)]
pub struct HistoryWriter {
    file: File,
    path: PathBuf,
}

impl HistoryWriter {
    /// Creates `path` (or appends to it).
    pub fn create(path: &Path) -> Result<HistoryWriter> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| ChaosError::io(path, source))?;
        Ok(HistoryWriter {
            file,
            path: path.to_owned(),
        })
    }

    /// Writes one line with one `write_all` of the whole line: it reaches the kernel
    /// before this returns, so a later SIGKILL does not lose it.
    pub fn append(&mut self, event: &Event) -> Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|source| ChaosError::io(&self.path, source))
    }
}

/// Every event of every `*.jsonl` file in `dir`, file by file. A last line without its
/// newline is the partial write of a killed process and is skipped; any other line that
/// does not parse is an error.
pub fn read_dir(dir: &Path) -> Result<Vec<Event>> {
    let entries = std::fs::read_dir(dir).map_err(|source| ChaosError::io(dir, source))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(ChaosError::NoHistory(dir.to_owned()));
    }
    let mut events = Vec::new();
    for path in paths {
        let text =
            std::fs::read_to_string(&path).map_err(|source| ChaosError::io(&path, source))?;
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let last = n + 1 == lines.len();
            match serde_json::from_str::<Event>(line) {
                Ok(event) => events.push(event),
                Err(_) if last && !complete => {}
                Err(source) => {
                    return Err(ChaosError::BadHistory {
                        path: path.clone(),
                        line: n + 1,
                        source,
                    });
                }
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_last_line_is_skipped_and_complete_lines_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("consumer-0.jsonl");
        let mut writer = HistoryWriter::create(&path).unwrap();
        let event = Event::Phase {
            t: 1,
            phase: "faults_over".into(),
        };
        writer.append(&event).unwrap();
        drop(writer);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"ev\":\"deliv").unwrap();
        assert_eq!(read_dir(dir.path()).unwrap(), vec![event]);
    }

    #[test]
    fn a_corrupt_line_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.jsonl"), "not json\n{}\n").unwrap();
        assert!(matches!(
            read_dir(dir.path()),
            Err(ChaosError::BadHistory { line: 1, .. })
        ));
    }

    #[test]
    fn monotonic_time_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }
}
