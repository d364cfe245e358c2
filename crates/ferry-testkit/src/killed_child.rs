//! Running this test binary again as a child process, reading what it says line by line,
//! and SIGKILLing it at a chosen moment — the parent side shared by the crash tests — and
//! the child side's way of saying things.
//!
//! The child is the same test binary run with `--exact <test>`: the test sees an
//! environment variable the parent set and plays the child (open, say `READY`, work, say
//! what it made durable), and the parent kills it and checks what survived.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When to kill the child.
#[derive(Debug, Clone, Copy)]
pub enum Kill {
    /// This long after it said `READY`: under load.
    AfterReady(Duration),
    /// This long after it was started, ready or not: possibly while it recovers.
    AfterSpawn(Duration),
}

/// What a killed child left behind.
pub struct Killed {
    /// Its complete stdout lines (a line the kill cut short was never fully said).
    pub lines: Vec<String>,
    pub stderr: String,
    pub status: ExitStatus,
    /// Wall-clock ms at the kill.
    pub killed_at_ms: i64,
}

/// Kills the child if the parent test panics before doing so.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Wall-clock milliseconds since the epoch, as the child and the parent both read them.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Starts this test binary running only `test_name`, with `envs`, and kills it per `kill`.
pub fn run_and_kill(test_name: &str, envs: &[(&str, String)], kill: Kill) -> Killed {
    let exe = std::env::current_exe().expect("current test binary");
    let mut command = Command::new(exe);
    command.args(["--exact", test_name, "--nocapture", "--test-threads=1"]);
    for (name, value) in envs {
        command.env(name, value);
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let started = Instant::now();
    let mut guard = ChildGuard(Some(child));
    let child = guard.0.as_mut().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                // A line without its newline was cut by the kill: it was never fully said.
                Ok(_) if line.last() != Some(&b'\n') => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                    if tx.send(text).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut lines = Vec::new();
    match kill {
        Kill::AfterSpawn(after) => std::thread::sleep(after.saturating_sub(started.elapsed())),
        Kill::AfterReady(after) => {
            let deadline = started + Duration::from_secs(10);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(line) => {
                        let ready = line == "READY";
                        lines.push(line);
                        if ready {
                            break;
                        }
                    }
                    // Ended or stuck before it was ready: the caller's checks say why.
                    Err(_) => break,
                }
            }
            std::thread::sleep(after);
        }
    }
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain syscall on the pid of a child we have not reaped yet.
    let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill({pid}, SIGKILL) failed");
    let killed_at_ms = now_ms();
    let status = child.wait().expect("wait for child");
    guard.0 = None;
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    let stderr = err_reader.join().unwrap();
    Killed {
        lines,
        stderr,
        status,
        killed_at_ms,
    }
}

/// SplitMix64: derives independent seeds from one.
pub fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One line to stdout in a single write: a pipe write under PIPE_BUF bytes is atomic, so
/// the parent never sees half a line.
pub fn say(text: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).expect("write to parent");
    out.flush().expect("flush to parent");
}

/// Tells the parent what went wrong and stops at once (a panic in a task would only end
/// that task).
pub fn fail(what: &str) -> ! {
    say(&format!("\nFAIL {what}\n"));
    std::process::exit(3);
}

/// The run's seed: `env` if set (to replay a run), else from the clock.
pub fn seed_from_env(env: &str) -> u64 {
    std::env::var(env)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

/// The crash tests' rounds: (directory, verify in the parent afterwards, kill while
/// possibly still recovering). Directories 1 and 2 are crashed two and three times before
/// the parent looks, so a child recovers the previous child's leftovers and is killed in
/// turn.
pub const ROUNDS: [(usize, bool, bool); 8] = [
    (0, true, false),
    (1, false, false),
    (1, true, false),
    (0, true, false),
    (2, false, false),
    (2, false, true),
    (2, true, false),
    (0, true, false),
];

/// When to kill a round's child: early (while a reopening child, ready in a few hundred ms,
/// may still recover) or some time after it said it is ready.
pub fn kill_for(rng: &mut fastrand::Rng, early: bool) -> Kill {
    if early {
        Kill::AfterSpawn(Duration::from_millis(20 + rng.u64(..250)))
    } else {
        Kill::AfterReady(Duration::from_millis(50 + rng.u64(..450)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set by the parent test for the child run of [`child_says_ready_then_waits`].
    const CHILD: &str = "FERRY_TESTKIT_KILLED_CHILD";

    /// The child side: nothing unless the parent started it.
    #[test]
    fn child_says_ready_then_waits() {
        if std::env::var(CHILD).is_err() {
            return;
        }
        // On a line of its own: the test harness has begun one without ending it.
        say("\nREADY\n");
        say("working\n");
        std::thread::sleep(Duration::from_secs(30));
        fail("was not killed");
    }

    #[test]
    fn a_child_killed_after_ready_left_its_lines_and_died_of_sigkill() {
        use std::os::unix::process::ExitStatusExt;
        let before = now_ms();
        let killed = run_and_kill(
            "killed_child::tests::child_says_ready_then_waits",
            &[(CHILD, "1".into())],
            Kill::AfterReady(Duration::from_millis(100)),
        );
        assert_eq!(
            killed.status.signal(),
            Some(libc::SIGKILL),
            "{}",
            killed.stderr
        );
        let ready = killed.lines.iter().position(|l| l == "READY");
        let ready = ready.unwrap_or_else(|| panic!("no READY in {:?}", killed.lines));
        assert_eq!(killed.lines[ready + 1..], ["working"], "{}", killed.stderr);
        assert!(killed.killed_at_ms >= before + 100);
    }

    #[test]
    fn a_child_killed_soon_after_spawn_is_killed_all_the_same() {
        use std::os::unix::process::ExitStatusExt;
        let killed = run_and_kill(
            "killed_child::tests::child_says_ready_then_waits",
            &[(CHILD, "1".into())],
            Kill::AfterSpawn(Duration::from_millis(5)),
        );
        assert_eq!(killed.status.signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn splitmix_is_a_fixed_function_that_spreads_close_seeds() {
        assert_eq!(splitmix(0), splitmix(0));
        assert_ne!(splitmix(1), splitmix(2));
        assert_ne!(splitmix(1), 1);
    }

    #[test]
    fn a_seed_in_the_variable_replays_that_run() {
        // A variable no other test sets, so the process environment is ours to change.
        const VAR: &str = "FERRY_TESTKIT_SEED_FOR_REPLAY";
        // SAFETY: only this test reads or writes VAR.
        unsafe { std::env::set_var(VAR, "12345") };
        assert_eq!(seed_from_env(VAR), 12345);
        unsafe { std::env::remove_var(VAR) };
        assert_ne!(seed_from_env(VAR), 0);
    }

    #[test]
    fn kill_times_stay_in_their_windows() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..1000 {
            match kill_for(&mut rng, true) {
                Kill::AfterSpawn(d) => assert!((20..270).contains(&(d.as_millis() as u64))),
                other => panic!("early kill {other:?}"),
            }
            match kill_for(&mut rng, false) {
                Kill::AfterReady(d) => assert!((50..500).contains(&(d.as_millis() as u64))),
                other => panic!("late kill {other:?}"),
            }
        }
    }

    #[test]
    fn every_directory_is_verified_after_its_last_crash() {
        for dir in 0..3 {
            let last = ROUNDS.iter().rev().find(|r| r.0 == dir).unwrap();
            assert!(
                last.1,
                "directory {dir} is never verified after its last round"
            );
        }
    }
}
