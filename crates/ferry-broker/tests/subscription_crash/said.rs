//! The parent's record of a directory: what each child said it published, acked and
//! committed (and what was under way at the kill), round after round.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use ferry_broker::ReceivedMessage;
use ferry_testkit::killed_child::{Kill, Killed, run_and_kill};

use crate::scenario::{GROUP, Id, SUBS, identify_delivery};
use crate::{CHILD_DIR_ENV, CHILD_ROUND_ENV, CHILD_SEED_ENV, CHILD_TEST_NAME};

/// What the parent knows about one subscription on one directory.
#[derive(Default)]
pub struct SubState {
    /// Messages whose ack was acknowledged.
    pub acked: HashSet<Id>,
    /// Messages whose ack was under way at a kill: settled or not.
    pub acking: HashSet<Id>,
    /// Acknowledged acks in the order they were made (their `ACKING` line), across rounds:
    /// the order the broker settled them in. Not the order of their `ACK` lines: the broker
    /// hands out a key's next message once the previous one is settled, before that ack is
    /// durable and its call returns, so the next message's ack may run concurrently with it
    /// and return first (its journal entry still comes after, so it is durable after).
    pub ack_order: Vec<Id>,
    pub deliveries: usize,
    /// What happened to each message here: (round, line of the round's output, event), for
    /// the messages of a failure.
    pub history: HashMap<Id, Vec<(u32, usize, &'static str)>>,
}

/// What the parent knows about one directory.
pub struct DirState {
    /// Every message ever acknowledged on the directory, and where: (partition, offset).
    pub published: HashMap<Id, (u32, u64)>,
    pub rounds: Vec<u32>,
    pub subs: Vec<SubState>,
    /// Per partition, the group's last acknowledged commit.
    pub committed: BTreeMap<u32, u64>,
    /// Per partition, commits said to be under way and not acknowledged: durable or not.
    pub committing: BTreeMap<u32, BTreeSet<u64>>,
    /// Per partition, the ids read at the last verification, in offset order.
    pub logs: BTreeMap<u32, Vec<Id>>,
    /// Times a child resumed a partition of the group.
    pub resumes: usize,
}

impl DirState {
    pub fn new() -> DirState {
        DirState {
            published: HashMap::new(),
            rounds: Vec::new(),
            subs: SUBS.iter().map(|_| SubState::default()).collect(),
            committed: BTreeMap::new(),
            committing: BTreeMap::new(),
            logs: BTreeMap::new(),
            resumes: 0,
        }
    }

    /// Deliveries to the parent's probe after a reopen (never settled: their leases end).
    pub fn note_probe(&mut self, sub: usize, got: &[ReceivedMessage]) {
        let round = self.rounds.last().copied().unwrap_or(0);
        for m in got {
            if let Ok(id) = identify_delivery(&SUBS[sub], m) {
                self.subs[sub]
                    .history
                    .entry(id)
                    .or_default()
                    .push((round, 0, "PROBE"));
            }
        }
    }

    /// The group's offset for `p` may be any of these after a kill.
    pub fn possible_commits(&self, p: u32) -> BTreeSet<u64> {
        let mut possible = self.committing.get(&p).cloned().unwrap_or_default();
        possible.insert(self.committed.get(&p).copied().unwrap_or(0));
        possible
    }

    /// The group's offset for `p` is `offset`, as a reopen found it.
    pub fn resolve_commit(&mut self, p: u32, offset: u64, label: &str) {
        let possible = self.possible_commits(p);
        assert!(
            possible.contains(&offset),
            "{label}: BROKER BUG: group {GROUP} resumes partition {p} at {offset}; its last \
             acknowledged commit is {:?} and commits under way at the kill were {:?}",
            self.committed.get(&p),
            self.committing.get(&p)
        );
        self.committed.insert(p, offset);
        self.committing.remove(&p);
    }

    /// Takes in what a child said, in order.
    pub fn absorb(&mut self, round: u32, lines: &[String], label: &str) -> Said {
        self.rounds.push(round);
        let mut said = Said::default();
        // Acks under way in this child: one whose answer was not seen may be durable.
        let mut acking: Vec<HashSet<Id>> = SUBS.iter().map(|_| HashSet::new()).collect();
        // Where each ack of this child was made (its `ACKING` line), and the acknowledged
        // ones by that line: the child is single-threaded and settles an ack right after
        // saying `ACKING`, so this is the order the broker settled (and journaled) them in.
        let mut acking_line: Vec<HashMap<Id, usize>> =
            SUBS.iter().map(|_| HashMap::new()).collect();
        let mut acked_here: Vec<Vec<(usize, Id)>> = SUBS.iter().map(|_| Vec::new()).collect();
        for (line_no, line) in lines.iter().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let garbled = || -> ! { panic!("{label}: child said a garbled line {line:?}") };
            let n = |i: usize| -> u64 {
                words
                    .get(i)
                    .and_then(|w| w.parse().ok())
                    .unwrap_or_else(|| garbled())
            };
            let id = |i: usize| -> Id {
                words
                    .get(i)
                    .and_then(|w| Id::parse(w))
                    .unwrap_or_else(|| garbled())
            };
            let sub = || -> usize {
                words
                    .get(1)
                    .and_then(|w| SUBS.iter().position(|s| s.name == *w))
                    .unwrap_or_else(|| garbled())
            };
            if let Some(&word) = words.first()
                && let Some(event) = ["RECV", "ACKING", "ACK", "STALE"]
                    .into_iter()
                    .find(|&e| e == word)
            {
                self.subs[sub()]
                    .history
                    .entry(id(2))
                    .or_default()
                    .push((round, line_no, event));
            }
            match words.first().copied() {
                Some("READY") => said.ready = true,
                Some("FAIL") => said.failed = Some(line.clone()),
                Some("PUB") => {
                    self.published.insert(id(3), (n(1) as u32, n(2)));
                    said.published += 1;
                }
                Some("RECV") => {
                    let (s, id) = (sub(), id(2));
                    assert!(
                        !self.subs[s].acked.contains(&id),
                        "{label}: BROKER BUG: {} delivered {id} again after its ack was \
                         acknowledged",
                        SUBS[s].name
                    );
                    self.subs[s].deliveries += 1;
                    said.deliveries += 1;
                }
                Some("ACKING") => {
                    acking[sub()].insert(id(2));
                    acking_line[sub()].insert(id(2), line_no);
                }
                Some("ACK") => {
                    let (s, id) = (sub(), id(2));
                    acking[s].remove(&id);
                    let made = acking_line[s].get(&id).copied().unwrap_or(line_no);
                    acked_here[s].push((made, id));
                    let state = &mut self.subs[s];
                    assert!(
                        state.acked.insert(id),
                        "{label}: BROKER BUG: {} settled {id} twice",
                        SUBS[s].name
                    );
                    state.acking.remove(&id);
                    said.acks += 1;
                }
                Some("STALE") => {
                    acking[sub()].remove(&id(2));
                }
                Some("COMMITTING") => {
                    self.committing.entry(n(1) as u32).or_default().insert(n(2));
                }
                Some("COMMIT") => {
                    let (p, offset) = (n(1) as u32, n(2));
                    self.committed.insert(p, offset);
                    // Earlier commits under way are behind this one now.
                    if let Some(under_way) = self.committing.get_mut(&p) {
                        under_way.retain(|&o| o > offset);
                    }
                    said.commits += 1;
                }
                Some("MAINT") => {
                    said.checkpoints += n(1) as usize;
                    said.deleted_segments += n(2) as usize;
                }
                Some("GSTART") => {
                    self.resolve_commit(n(1) as u32, n(2), label);
                    self.resumes += 1;
                }
                _ => {}
            }
        }
        for (s, under_way) in acking.into_iter().enumerate() {
            self.subs[s].acking.extend(under_way);
        }
        for (s, mut acked) in acked_here.into_iter().enumerate() {
            acked.sort_unstable_by_key(|&(line, _)| line);
            self.subs[s]
                .ack_order
                .extend(acked.into_iter().map(|(_, id)| id));
        }
        said
    }
}

#[derive(Debug, Default)]
pub struct Said {
    pub ready: bool,
    pub failed: Option<String>,
    pub published: usize,
    pub deliveries: usize,
    pub acks: usize,
    pub commits: usize,
    pub checkpoints: usize,
    pub deleted_segments: usize,
}

/// Runs one child on `dir` until the kill and takes in what it said.
pub fn run_child(dir: &Path, round: u32, seed: u64, kill: Kill, state: &mut DirState) -> Said {
    let envs = [
        (CHILD_DIR_ENV, dir.display().to_string()),
        (CHILD_ROUND_ENV, round.to_string()),
        (CHILD_SEED_ENV, seed.to_string()),
    ];
    let Killed {
        lines,
        stderr,
        status,
        ..
    } = run_and_kill(CHILD_TEST_NAME, &envs, kill);
    let label = format!("round {round} ({kill:?})");
    let said = state.absorb(round, &lines, &label);
    if let Some(failed) = &said.failed {
        panic!("{label}: child failed: {failed}\nstderr: {stderr}");
    }
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "{label}: child exited on its own ({status:?}) before the kill\nstderr: {stderr}"
    );
    if let Kill::AfterReady(_) = kill {
        assert!(
            said.ready,
            "{label}: child never got ready\nstdout: {lines:?}\nstderr: {stderr}"
        );
    }
    said
}
