//! fdatasyncs run off the writer thread, at most two at a time.
//!
//! Why: with the writer issuing each fdatasync itself, a group that arrives while a slow one
//! runs (several ms on a shared virtual disk) waits for that sync to end and then for its
//! own. Handing the sync to a thread of its own frees the writer to write the next group at
//! once and start a second sync for it; the later of the two may finish first, and since it
//! started after both writes returned it covers both.
//!
//! The writer keeps all the bookkeeping: it asks for "sync everything written up to P",
//! and learns of each finished sync from the result channel (it is woken by a
//! [`Command::Synced`] on its command channel, so it never waits on two channels at once).

use std::fs::File;
use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::writer::Command;

/// More would only queue in the device: the point is that one slow sync does not hold up
/// the next group, not to keep many in flight.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

struct Job {
    file: Arc<File>,
    up_to: u64,
}

/// The outcome of one fdatasync that started after every byte below `up_to` was written.
pub(crate) struct Synced {
    pub up_to: u64,
    pub took: Duration,
    pub result: io::Result<()>,
}

pub(crate) struct Syncer {
    jobs: Option<Sender<Job>>,
    results: Receiver<Synced>,
    threads: Vec<JoinHandle<()>>,
    in_flight: usize,
}

impl Syncer {
    /// Starts the sync threads; each wakes the writer through `wake` when a sync ends.
    pub fn start(wake: &Sender<Command>) -> io::Result<Syncer> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let (done, results) = mpsc::channel();
        let mut syncer = Syncer {
            jobs: Some(jobs),
            results,
            threads: Vec::new(),
            in_flight: 0,
        };
        for _ in 0..MAX_IN_FLIGHT {
            let (queue, done, wake) = (queue.clone(), done.clone(), wake.clone());
            let thread = std::thread::Builder::new()
                .name("ferry-log-sync".into())
                .spawn(move || sync_loop(&queue, &done, &wake))?;
            syncer.threads.push(thread);
        }
        Ok(syncer)
    }

    pub fn has_room(&self) -> bool {
        self.in_flight < MAX_IN_FLIGHT
    }

    /// Starts an fdatasync of `file`: the caller's writes below `up_to` have returned.
    pub fn start_sync(&mut self, file: Arc<File>, up_to: u64) {
        debug_assert!(self.has_room());
        let jobs = self.jobs.as_ref().expect("jobs channel lives until drop");
        jobs.send(Job { file, up_to })
            .expect("sync threads live as long as the syncer");
        self.in_flight += 1;
    }

    /// A finished sync, if one is waiting.
    pub fn try_finished(&mut self) -> Option<Synced> {
        let synced = self.results.try_recv().ok()?;
        self.in_flight -= 1;
        Some(synced)
    }

    /// Blocks until a sync in flight finishes; `None` when none is in flight.
    pub fn wait_finished(&mut self) -> Option<Synced> {
        if self.in_flight == 0 {
            return None;
        }
        let synced = self
            .results
            .recv()
            .expect("sync threads live as long as the syncer");
        self.in_flight -= 1;
        Some(synced)
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.jobs.take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn sync_loop(queue: &Mutex<Receiver<Job>>, done: &Sender<Synced>, wake: &Sender<Command>) {
    loop {
        // The lock is held only while waiting for a job, so the other thread can take the
        // next one while this one syncs.
        let job = queue.lock().expect("sync queue lock").recv();
        let Ok(job) = job else { return };
        let started = Instant::now();
        let result = job.file.sync_data();
        let synced = Synced {
            up_to: job.up_to,
            took: started.elapsed(),
            result,
        };
        if done.send(synced).is_err() {
            return;
        }
        // The writer may be gone already (closing); its results are then of no use.
        let _ = wake.send(Command::Synced);
    }
}
