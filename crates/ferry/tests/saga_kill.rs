//! An orchestrator process killed (SIGKILL) mid-flight, several times over: the sagas it
//! was running finish correctly in the next process, and the participants — which keep
//! their effects and answers in SQLite, one transaction per command — apply each effect
//! exactly once. The test re-runs its own binary as the process to kill.
#![cfg(all(feature = "sqlite", feature = "embedded"))]

use std::path::Path;
use std::time::Duration;

use ferry::saga::{
    Command, Kind, Orchestrator, Outcome, Running, SagaDefinition, SagaOptions, SagaStore,
    SqliteSagaStore, Status, Step,
};
use ferry::{ConsumerOptions, DeliveryPolicy, Ferry, QueueDecl, Source};
use sqlx::{Row, SqlitePool};

const CHILD: &str = "FERRY_SAGA_KILL_CHILD";
const ROUNDS: usize = 3;
const SAGAS_PER_ROUND: usize = 12;

fn definition() -> SagaDefinition {
    SagaDefinition::new("order")
        .step(Step::new("reserve", "kill.reserve").compensate_with("kill.reserve"))
        .step(Step::new("charge", "kill.charge").compensate_with("kill.charge"))
        .step(Step::new("confirm", "kill.confirm"))
}

fn options() -> SagaOptions {
    let mut options = SagaOptions::new("kill.replies")
        .step_timeout(Duration::from_secs(20))
        .sweep_interval(Duration::from_millis(50));
    options.consumer.poll = Duration::from_millis(50);
    options
}

/// The broker, the saga store, the participants' database, all under `dir`.
async fn open(dir: &Path) -> (Ferry, SqliteSagaStore, SqlitePool) {
    let ferry = Ferry::connect(&format!("embedded:{}", dir.join("broker").display()))
        .await
        .unwrap();
    for queue in [
        "kill.replies",
        "kill.reserve",
        "kill.charge",
        "kill.confirm",
    ] {
        let decl = QueueDecl::new(queue)
            .delivery(DeliveryPolicy {
                lease: Duration::from_secs(1),
                max_deliveries: 100,
                ..DeliveryPolicy::default()
            })
            .dedup_window(Duration::from_secs(600));
        ferry.declare_queue(&decl).await.unwrap();
    }
    let store = SqliteSagaStore::open(dir.join("sagas.db")).await.unwrap();
    store.install().await.unwrap();
    // One connection: each participant transaction reads, then writes, and SQLite refuses
    // to upgrade a read lock another writer overtook.
    let participants = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(dir.join("participants.db"))
                .create_if_missing(true),
        )
        .await
        .unwrap();
    for ddl in [
        "CREATE TABLE IF NOT EXISTS answers (command_id TEXT PRIMARY KEY, outcome TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS effects (saga TEXT NOT NULL, step TEXT NOT NULL, PRIMARY KEY (saga, step))",
        // Append-only: one row per effect applied, so a second application would show.
        "CREATE TABLE IF NOT EXISTS applied (command_id TEXT NOT NULL)",
    ] {
        sqlx::query(ddl).execute(&participants).await.unwrap();
    }
    (ferry, store, participants)
}

/// Sagas whose id ends in `-decline` have their charge declined.
fn declines(command: &Command) -> bool {
    command.saga_id.ends_with("-decline") && command.step == "charge"
}

/// A participant: one transaction records the effect and the answer, so a redelivered
/// command — after a kill anywhere — gets the recorded answer and changes nothing.
async fn participate(ferry: Ferry, db: SqlitePool, queue: &'static str) {
    let options = ConsumerOptions {
        prefetch: 4,
        poll: Duration::from_millis(50),
        ..ConsumerOptions::default()
    };
    let mut consumer = ferry.consumer(Source::queue(queue), options).await.unwrap();
    loop {
        let Some(delivery) = consumer
            .next_within(Duration::from_millis(50))
            .await
            .unwrap()
        else {
            continue;
        };
        let command = Command::from_received(delivery.message()).unwrap();
        // The work a command takes: a saga lasts longer than the starts are apart, so a
        // kill at any moment after the first start finds sagas in flight.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut tx = db.begin().await.unwrap();
        let known = sqlx::query("SELECT outcome FROM answers WHERE command_id = $1")
            .bind(&command.command_id)
            .fetch_optional(&mut *tx)
            .await
            .unwrap();
        let outcome: Outcome = match known {
            Some(row) => serde_json::from_str(row.get::<&str, _>("outcome")).unwrap(),
            None => {
                let outcome = if command.kind == Kind::Action && declines(&command) {
                    Outcome::failed("card declined")
                } else {
                    let effect = match command.kind {
                        Kind::Action => "INSERT INTO effects (saga, step) VALUES ($1, $2)",
                        Kind::Compensation => "DELETE FROM effects WHERE saga = $1 AND step = $2",
                    };
                    sqlx::query(effect)
                        .bind(&command.saga_id)
                        .bind(&command.step)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    sqlx::query("INSERT INTO applied (command_id) VALUES ($1)")
                        .bind(&command.command_id)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    Outcome::succeeded("done").unwrap()
                };
                sqlx::query("INSERT INTO answers (command_id, outcome) VALUES ($1, $2)")
                    .bind(&command.command_id)
                    .bind(serde_json::to_string(&outcome).unwrap())
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                outcome
            }
        };
        tx.commit().await.unwrap();
        command.reply(&ferry, &outcome).await.unwrap();
        delivery.ack().await.unwrap();
    }
}

/// Participants and an orchestrator over `dir`, resuming what is unfinished.
async fn process(dir: &Path) -> (Orchestrator, Running, SqlitePool) {
    let (ferry, store, db) = open(dir).await;
    for queue in ["kill.reserve", "kill.charge", "kill.confirm"] {
        tokio::spawn(participate(ferry.clone(), db.clone(), queue));
    }
    let orchestrator = Orchestrator::new(ferry, store, definition(), options()).unwrap();
    let running = orchestrator.run().await.unwrap();
    (orchestrator, running, db)
}

/// The process to kill: starts this round's sagas and keeps running them.
async fn child(dir: &Path, round: usize) {
    let (orchestrator, _running, _) = process(dir).await;
    for n in 0..SAGAS_PER_ROUND {
        let suffix = if n % 3 == 0 { "decline" } else { "ok" };
        orchestrator
            .start_with_id(
                format!("r{round}-{n}-{suffix}"),
                serde_json::json!({"n": n}),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await; // killed long before
}

/// A child process, killed at the latest when the test ends (also by a failed assertion).
struct Killed(std::process::Child);

impl Killed {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the saga `id` is in the store (read without creating anything).
async fn started(dir: &Path, id: &str) -> bool {
    let path = dir.join("sagas.db");
    if !path.exists() {
        return false;
    }
    let Ok(store) = SqliteSagaStore::open(path).await else {
        return false;
    };
    let found = matches!(store.load(id).await, Ok(Some(_)));
    store.pool().close().await;
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orchestrators_killed_mid_flight_leave_every_saga_finished_with_effects_once() {
    if let Ok(spec) = std::env::var(CHILD) {
        let (dir, round) = spec.rsplit_once('|').unwrap();
        return child(Path::new(dir), round.parse().unwrap()).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    for round in 0..ROUNDS {
        let mut child = Killed(
            std::process::Command::new(&exe)
                .args([
                    "--exact",
                    "orchestrators_killed_mid_flight_leave_every_saga_finished_with_effects_once",
                    "--nocapture",
                ])
                .env(CHILD, format!("{}|{round}", dir.path().display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        // Killed once this round's sagas are under way: after its first start, at a
        // random moment.
        let first = format!("r{round}-0-decline");
        let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
        while !started(dir.path(), &first).await {
            assert!(
                tokio::time::Instant::now() < give_up,
                "round {round} never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Before its last start (12 starts 25 ms apart): some sagas are always in flight.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..250))).await;
        child.kill(); // SIGKILL: no destructor, no flush, no settlement
    }

    let store = SqliteSagaStore::open(dir.path().join("sagas.db"))
        .await
        .unwrap();
    let unfinished: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM saga_state WHERE status NOT IN ('COMPLETED', 'FAILED')",
    )
    .fetch_one(store.pool())
    .await
    .unwrap()
    .get("n");
    assert!(unfinished > 0, "the kills left nothing to resume");
    let (orchestrator, running, db) = process(dir.path()).await;
    let ids: Vec<String> = sqlx::query("SELECT id FROM saga_state ORDER BY id")
        .fetch_all(store.pool())
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("id"))
        .collect();
    assert!(!ids.is_empty(), "no round got to start a saga");
    for id in &ids {
        let state = orchestrator
            .wait(id, Duration::from_secs(20))
            .await
            .unwrap();
        let effects: Vec<String> =
            sqlx::query("SELECT step FROM effects WHERE saga = $1 ORDER BY step")
                .bind(id)
                .fetch_all(&db)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get("step"))
                .collect();
        if id.ends_with("-decline") {
            assert_eq!(state.status, Status::Failed, "{state:?}");
            assert!(effects.is_empty(), "{id}: left over {effects:?}");
        } else {
            assert_eq!(state.status, Status::Completed, "{state:?}");
            assert_eq!(effects, ["charge", "confirm", "reserve"], "{id}");
        }
    }
    let twice: Vec<(String, i64)> = sqlx::query(
        "SELECT command_id, COUNT(*) AS n FROM applied GROUP BY command_id HAVING n > 1",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    .iter()
    .map(|row| (row.get("command_id"), row.get("n")))
    .collect();
    assert!(twice.is_empty(), "effects applied twice: {twice:?}");
    running.stop().await;
}
