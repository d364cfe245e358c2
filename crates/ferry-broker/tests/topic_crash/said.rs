//! The parent's record of a directory: what each child said it published (and what was
//! under way at the kill), round after round.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use ferry_testkit::killed_child::{Kill, Killed, run_and_kill};

use crate::idempotent::IdempotentState;
use crate::scenario::{IDEMPOTENT_PRODUCERS, Id, TOPICS};
use crate::{
    CHILD_DIR_ENV, CHILD_IDEMPOTENT_FILE_ENV, CHILD_PRODUCERS_ENV, CHILD_ROUND_ENV, CHILD_SEED_ENV,
    CHILD_TEST_NAME,
};

pub struct ChildRun {
    pub round: u32,
    pub seed: u64,
    pub producers: u32,
    pub kill: Kill,
}

/// Where a message is: (topic, partition, offset).
pub type Located = (usize, u32, u64);

#[derive(Debug, Default)]
pub struct Said {
    pub ready: bool,
    /// Acknowledged messages and where the child was told they are, in the order said.
    pub published: Vec<(Id, Located)>,
    /// `TRY` and `PUB` lines, in the order said: what became of each idempotent batch.
    pub lines: Vec<Line>,
    pub retries: usize,
}

#[derive(Debug)]
pub enum Line {
    /// An idempotent batch's first attempt: slot, partition, first sequence, count.
    Try(u32, u32, u64, u64),
    Published(Id),
}

pub fn topic_index(name: &str) -> Option<usize> {
    TOPICS.iter().position(|(n, _, _)| *n == name)
}

/// Runs one child on `dir` until the kill; returns what it said.
pub fn run_child(dir: &Path, idempotent_file: &Path, run: &ChildRun) -> Said {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, run.round.to_string()),
        (CHILD_SEED_ENV, run.seed.to_string()),
        (CHILD_PRODUCERS_ENV, run.producers.to_string()),
        (
            CHILD_IDEMPOTENT_FILE_ENV,
            idempotent_file.display().to_string(),
        ),
    ];
    let Killed {
        lines,
        stderr,
        status,
        ..
    } = run_and_kill(CHILD_TEST_NAME, &envs, run.kill);
    let mut said = Said::default();
    for line in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let garbled = || -> ! { panic!("child said a garbled line {line:?}") };
        let n = |i: usize| -> u64 {
            words
                .get(i)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| garbled())
        };
        match words.first().copied() {
            Some("READY") => said.ready = true,
            Some("PUB") => {
                let topic = words
                    .get(1)
                    .and_then(|t| topic_index(t))
                    .unwrap_or_else(|| garbled());
                let id = words
                    .get(4)
                    .and_then(|w| Id::parse(w))
                    .unwrap_or_else(|| garbled());
                said.published.push((id, (topic, n(2) as u32, n(3))));
                said.lines.push(Line::Published(id));
            }
            Some("TRY") => said
                .lines
                .push(Line::Try(n(1) as u32, n(2) as u32, n(3), n(4))),
            Some("DUP") => said.retries += 1,
            Some("FAIL") => panic!("round {} child failed: {line}\nstderr: {stderr}", run.round),
            _ => {}
        }
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "round {} child exited on its own ({status:?}) before the kill\nstdout: {lines:?}\n\
         stderr: {stderr}",
        run.round
    );
    if let Kill::AfterReady(_) = run.kill {
        assert!(
            said.ready,
            "round {} child never got ready\nstdout: {lines:?}\nstderr: {stderr}",
            run.round
        );
    }
    said
}

/// What the parent knows about one directory.
pub struct DirState {
    /// Every message ever acknowledged on the directory, and where.
    pub acked: HashMap<Id, Located>,
    pub idempotent: Vec<IdempotentState>,
    /// Rounds run on the directory.
    pub rounds: Vec<u32>,
    /// Per topic and partition, the ids read at the last verification, in offset order:
    /// a later look must find them again, at the same offsets.
    pub logs: HashMap<(usize, u32), Vec<Id>>,
}

impl DirState {
    pub fn new() -> DirState {
        DirState {
            acked: HashMap::new(),
            idempotent: vec![IdempotentState::default(); IDEMPOTENT_PRODUCERS as usize],
            rounds: Vec::new(),
            logs: HashMap::new(),
        }
    }

    pub fn absorb(&mut self, round: u32, said: &Said, label: &str) {
        self.rounds.push(round);
        for &(id, at) in &said.published {
            if let Some(before) = self.acked.insert(id, at) {
                // BROKER BUG if it fires: a resent idempotent batch must be answered with
                // the positions its first (partly announced) answer gave.
                assert_eq!(
                    before, at,
                    "{label}: BROKER BUG: {id} acknowledged at {before:?}, then at {at:?}"
                );
            }
        }
        for line in &said.lines {
            match *line {
                Line::Try(slot, partition, first, count) => {
                    let state = &mut self.idempotent[slot as usize];
                    let next = state.next.get(&partition).copied().unwrap_or(0);
                    assert_eq!(
                        first, next,
                        "{label}: test bug: idem-{slot} tried {first} in partition \
                         {partition}, its next sequence is {next}"
                    );
                    state.pending = Some((partition, first, count));
                }
                Line::Published(Id::Idempotent {
                    slot,
                    partition,
                    seq,
                }) => {
                    let state = &mut self.idempotent[slot as usize];
                    // The batch is acknowledged once its last message is (they are said in
                    // order, after the call returned).
                    if let Some((p, first, count)) = state.pending
                        && p == partition
                        && seq == first + count - 1
                    {
                        state.next.insert(partition, first + count);
                        state.pending = None;
                    }
                }
                Line::Published(Id::Plain { .. }) => {}
            }
        }
    }
}
