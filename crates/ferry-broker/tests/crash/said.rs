//! The parent's record of a directory: what each child said it published and acked (and
//! what was under way at the kill), round after round.

use std::collections::HashSet;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use ferry_testkit::killed_child::{Kill, Killed, run_and_kill};

use crate::scenario::Id;
use crate::{
    CHILD_ACKED_FILE_ENV, CHILD_CONSUMERS_ENV, CHILD_DIR_ENV, CHILD_PRODUCERS_ENV, CHILD_ROUND_ENV,
    CHILD_SEED_ENV, CHILD_TEST_NAME,
};

pub struct ChildRun {
    pub round: u32,
    pub seed: u64,
    pub producers: u32,
    pub consumers: u32,
    pub kill: Kill,
}

#[derive(Debug, Default)]
pub struct Said {
    pub ready: bool,
    pub published: Vec<Id>,
    pub acked: Vec<Id>,
    pub dead_letters_acked: usize,
    /// Acks started and not answered when the kill came: durable or not, either is right.
    pub acks_in_flight: Vec<Id>,
    /// How late (ms after its lease had ended) each delivery that came back late came.
    pub late_ms: Vec<i64>,
}

/// Runs one child on `dir` until the kill; returns what it said and the time of the kill.
pub fn run_child(dir: &Path, acked_file: &Path, run: &ChildRun) -> (Said, i64) {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, run.round.to_string()),
        (CHILD_SEED_ENV, run.seed.to_string()),
        (CHILD_PRODUCERS_ENV, run.producers.to_string()),
        (CHILD_CONSUMERS_ENV, run.consumers.to_string()),
        (CHILD_ACKED_FILE_ENV, acked_file.display().to_string()),
    ];
    let Killed {
        lines,
        stderr,
        status,
        killed_at_ms: killed_at,
    } = run_and_kill(CHILD_TEST_NAME, &envs, run.kill);
    let mut said = Said::default();
    let mut open_acks: HashSet<(Id, u32)> = HashSet::new();
    for line in &lines {
        let mut words = line.split_whitespace();
        let word = words.next();
        let mut id = || {
            let _queue = words.next();
            let id = words
                .next()
                .and_then(Id::parse)
                .unwrap_or_else(|| panic!("child said a garbled line {line:?}"));
            let delivery: u32 = words.next().and_then(|d| d.parse().ok()).unwrap_or(0);
            (id, delivery)
        };
        match word {
            Some("READY") => said.ready = true,
            Some("PUB") => said.published.push(id().0),
            Some("LATE") => {
                let late = line.rsplit(' ').next().and_then(|ms| ms.parse().ok());
                said.late_ms.push(late.unwrap_or(0));
            }
            Some("TRY") => {
                open_acks.insert(id());
            }
            Some("NOTACK") => {
                open_acks.remove(&id());
            }
            Some(tag @ ("ACK" | "DACK")) => {
                let (id, delivery) = id();
                open_acks.remove(&(id, delivery));
                said.acked.push(id);
                said.dead_letters_acked += usize::from(tag == "DACK");
            }
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
    said.acks_in_flight = open_acks.into_iter().map(|(id, _)| id).collect();
    (said, killed_at)
}

/// What the parent knows about one directory.
#[derive(Default)]
pub struct DirState {
    /// Published and not acknowledged, since the last verification.
    pub outstanding: HashSet<Id>,
    /// Every id ever acknowledged — by a child, or by the parent after a drain.
    pub gone: HashSet<Id>,
    /// Ids whose ack was under way at a kill since the last verification: they may be gone.
    pub maybe_acked: HashSet<Id>,
    /// Rounds run on the directory since the last verification.
    pub rounds: Vec<u32>,
    /// The parent's clock at its last verification: a later child must not start before
    /// the real clock has passed it.
    pub verified_at_ms: i64,
}

impl DirState {
    pub fn absorb(&mut self, round: u32, said: &Said) {
        self.rounds.push(round);
        // A consumer may ack a message before its producer gets to print PUB.
        self.outstanding.extend(said.published.iter().copied());
        self.maybe_acked.extend(said.acks_in_flight.iter().copied());
        for id in &said.acked {
            self.outstanding.remove(id);
            self.gone.insert(*id);
        }
    }

    pub fn write_gone(&self, path: &Path) {
        let text: String = self.gone.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(path, text).unwrap();
    }
}
