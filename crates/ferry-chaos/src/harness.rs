//! One run: start the server and the proxy, create the queues, start the workers, inject
//! the scheduled faults, then turn faults off, let traffic flow, stop the producers, drain
//! the queues, read the dead-letter queues, and check every history.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_client::Client;
use tokio::time::Instant;

use crate::broker_clock::{self, BrokerClock};
use crate::checker;
use crate::error::{ChaosError, Result};
use crate::history::{self, Event, HistoryWriter, monotonic_ns};
use crate::proxy::Proxy;
use crate::report::Report;
use crate::scenario::{ORDERS_QUEUE, Scenario, WORK_QUEUE};
use crate::schedule::{self, Fault, ProxyFault};
use crate::server::ServerProcess;
use crate::worker::Role;
use crate::workers::{WorkerEnv, WorkerProcess};

/// The scenario file saved beside the histories.
pub const SCENARIO_FILE: &str = "scenario.json";

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub scenario: Scenario,
    /// The `ferry` binary (the harness's own executable).
    pub binary: PathBuf,
    /// Keep the histories here (they are kept anyway, in `./ferry-chaos-<seed>`, when the
    /// run fails).
    pub keep_history: Option<PathBuf>,
}

/// Runs the scenario and checks it; a failing run keeps its histories for `chaos check`.
pub fn run(options: &RunOptions) -> Result<Report> {
    options.scenario.validate()?;
    if let Some(dir) = &options.keep_history
        && dir.exists()
        && std::fs::read_dir(dir)
            .map_err(|e| ChaosError::io(dir, e))?
            .next()
            .is_some()
    {
        return Err(ChaosError::BadScenario(format!(
            "--keep-history {} is not empty: histories of two runs would mix",
            dir.display()
        )));
    }
    let work = tempfile::Builder::new()
        .prefix("ferry-chaos-")
        .tempdir()
        .map_err(|e| ChaosError::io(Path::new("/tmp"), e))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ChaosError::Worker(format!("starting the async runtime: {e}")))?;
    let histories = work.path().join("histories");
    std::fs::create_dir_all(&histories).map_err(|e| ChaosError::io(&histories, e))?;
    std::fs::write(
        histories.join(SCENARIO_FILE),
        serde_json::to_vec_pretty(&options.scenario)?,
    )
    .map_err(|e| ChaosError::io(&histories, e))?;

    let outcome = runtime.block_on(drive(&options.scenario, &options.binary, work.path()));
    let mut report = match outcome {
        Ok(()) => check_dir(&histories)?,
        Err(error) => {
            let kept = keep(&histories, work.path(), &fallback_dir(options))?;
            eprintln!(
                "ferry chaos: the run stopped; its histories are in {}",
                kept.display()
            );
            return Err(error);
        }
    };
    if !report.clean || options.keep_history.is_some() {
        let dest = options
            .keep_history
            .clone()
            .unwrap_or_else(|| fallback_dir(options));
        report.history_dir = Some(keep(&histories, work.path(), &dest)?);
    }
    Ok(report)
}

/// Checks the histories (and `scenario.json`) saved in `dir`.
pub fn check_dir(dir: &Path) -> Result<Report> {
    let path = dir.join(SCENARIO_FILE);
    let text = std::fs::read(&path).map_err(|e| ChaosError::io(&path, e))?;
    let scenario: Scenario = serde_json::from_slice(&text)?;
    let events = history::read_dir(dir)?;
    let findings = checker::check(&events, &scenario);
    Ok(Report::new(
        scenario.seed,
        scenario.duration_ms,
        &events,
        findings,
    ))
}

fn fallback_dir(options: &RunOptions) -> PathBuf {
    options
        .keep_history
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("ferry-chaos-{}", options.scenario.seed)))
}

/// Copies the histories, the scenario and the logs to `dest`.
fn keep(histories: &Path, work: &Path, dest: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dest).map_err(|e| ChaosError::io(dest, e))?;
    let entries = std::fs::read_dir(histories).map_err(|e| ChaosError::io(histories, e))?;
    let logs = ["server.log", "workers.log"].map(|name| work.join(name));
    for path in entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .chain(logs.into_iter().filter(|p| p.exists()))
    {
        let Some(name) = path.file_name() else {
            continue;
        };
        std::fs::copy(&path, dest.join(name)).map_err(|e| ChaosError::io(&path, e))?;
    }
    Ok(dest.to_owned())
}

async fn drive(scenario: &Scenario, binary: &Path, work: &Path) -> Result<()> {
    let histories = work.join("histories");
    let mut harness = HistoryWriter::create(&histories.join("harness.jsonl"))?;
    let mut server = ServerProcess::new(binary, work);
    server.start().await?;
    let proxy = Proxy::start(server.addr()).await?;
    let admin = Client::connect(&format!("ferry://{}", server.addr())).await?;
    admin
        .create_queue(ORDERS_QUEUE, scenario.orders_spec())
        .await?;
    admin.create_queue(WORK_QUEUE, scenario.work_spec()).await?;

    let env = WorkerEnv {
        binary: binary.to_owned(),
        url: format!("ferry://{}", proxy.addr()),
        history_dir: histories.clone(),
        log: work.join("workers.log"),
        seed: scenario.seed,
    };
    let producer_flags = producer_flags(scenario);
    let mut producers = Vec::new();
    for index in 0..scenario.producers {
        producers.push(WorkerProcess::spawn(
            &env,
            Role::Producer,
            index,
            0,
            &producer_flags,
        )?);
    }
    let mut consumers = Vec::new();
    for index in 0..scenario.consumers {
        consumers.push(WorkerProcess::spawn(&env, Role::Consumer, index, 0, &[])?);
    }

    // Dead letters carry the server's clock, which the clock jumps move.
    let mut clock = BrokerClock::new(server.clock_offset_ms());
    let start = Instant::now();
    for planned in schedule::plan(scenario) {
        tokio::time::sleep_until(start + Duration::from_millis(planned.at_ms)).await;
        for worker in producers.iter_mut().chain(consumers.iter_mut()) {
            worker.check_running(&env.log)?;
        }
        let detail = describe(&planned.fault);
        eprintln!(
            "ferry chaos: {:>7.1}s {} {detail}",
            start.elapsed().as_secs_f64(),
            planned.fault.kind()
        );
        harness.append(&Event::Fault {
            t: monotonic_ns(),
            kind: planned.fault.kind().to_owned(),
            detail,
        })?;
        inject(&planned.fault, &mut server, &proxy, &mut consumers, &env).await?;
        if let Fault::ClockJump { .. } = planned.fault {
            clock.jumped(monotonic_ns(), server.clock_offset_ms());
        }
    }
    tokio::time::sleep_until(start + scenario.duration()).await;
    harness.append(&Event::Phase {
        t: monotonic_ns(),
        phase: "faults_over".into(),
    })?;
    eprintln!("ferry chaos: faults over; traffic goes on, then the drain");

    // Traffic with no faults, then the producers stop and the consumers empty the queues.
    tokio::time::sleep(Duration::from_millis(scenario.calm_ms)).await;
    for worker in producers.iter_mut().chain(consumers.iter_mut()) {
        worker.check_running(&env.log)?;
    }
    for producer in &mut producers {
        producer.stop().await?;
    }
    drain(&admin, scenario).await?;
    for consumer in &mut consumers {
        consumer.stop().await?;
    }
    harness.append(&Event::Phase {
        t: monotonic_ns(),
        phase: "drained".into(),
    })?;
    for queue in [ORDERS_QUEUE, WORK_QUEUE] {
        record_dead_letters(&admin, queue, &clock, &mut harness).await?;
    }
    drop(proxy);
    server.stop().await
}

fn producer_flags(scenario: &Scenario) -> Vec<String> {
    let mut flags = vec![
        "--rate".to_owned(),
        (scenario.rate / scenario.producers).max(1).to_string(),
    ];
    if let Some(max) = scenario.max_messages {
        flags.push("--max-messages".into());
        flags.push((max / u64::from(scenario.producers)).max(1).to_string());
    }
    flags
}

fn describe(fault: &Fault) -> String {
    match fault {
        Fault::KillServer => "SIGKILL, restart".into(),
        Fault::KillConsumer { index } => format!("consumer {index}: SIGKILL, restart"),
        Fault::PauseServer { ms } => format!("SIGSTOP for {ms} ms"),
        Fault::Proxy(ProxyFault::DropAll) => "drop_all connections (FIN)".into(),
        Fault::Proxy(ProxyFault::ResetAll) => "reset_all connections (RST)".into(),
        Fault::Proxy(ProxyFault::Delay { ms, for_ms }) => {
            format!("delay {ms} ms per chunk for {for_ms} ms")
        }
        Fault::ClockJump { ms } => format!("forward {ms} ms"),
    }
}

async fn inject(
    fault: &Fault,
    server: &mut ServerProcess,
    proxy: &Proxy,
    consumers: &mut [WorkerProcess],
    env: &WorkerEnv,
) -> Result<()> {
    match *fault {
        Fault::KillServer => server.restart().await,
        Fault::KillConsumer { index } => {
            let slot = consumers
                .iter()
                .position(|c| c.index() == index)
                .ok_or_else(|| ChaosError::BadScenario(format!("no consumer {index}")))?;
            consumers[slot].kill().await?;
            let incarnation = consumers[slot].incarnation() + 1;
            consumers[slot] = WorkerProcess::spawn(env, Role::Consumer, index, incarnation, &[])?;
            Ok(())
        }
        Fault::PauseServer { ms } => {
            server.pause()?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            server.resume()
        }
        Fault::Proxy(ProxyFault::DropAll) => {
            proxy.drop_all();
            Ok(())
        }
        Fault::Proxy(ProxyFault::ResetAll) => {
            proxy.reset_all();
            Ok(())
        }
        Fault::Proxy(ProxyFault::Delay { ms, for_ms }) => {
            proxy.set_delay(Duration::from_millis(ms));
            tokio::time::sleep(Duration::from_millis(for_ms)).await;
            proxy.set_delay(Duration::ZERO);
            Ok(())
        }
        Fault::ClockJump { ms } => server.jump_clock(ms).await,
    }
}

/// Waits until both queues hold nothing: no message ready, in flight, delayed or parked.
/// The broker has no "empty" event to wait on, so its counts are polled.
async fn drain(admin: &Client, scenario: &Scenario) -> Result<()> {
    let deadline = Instant::now() + Duration::from_millis(scenario.drain_timeout_ms);
    loop {
        let mut left = Vec::new();
        for queue in [ORDERS_QUEUE, WORK_QUEUE] {
            let info = admin.describe_queue(queue).await?;
            let s = info.stats.unwrap_or_default();
            let total = s.ready + s.in_flight + s.delayed + s.parked;
            if total > 0 {
                left.push(format!(
                    "{queue}: {} ready, {} in flight, {} delayed, {} parked",
                    s.ready, s.in_flight, s.delayed, s.parked
                ));
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(ChaosError::DrainTimeout {
                seconds: scenario.drain_timeout_ms / 1000,
                left: left.join("; "),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every letter of `queue`'s dead-letter queue, into the harness's history.
async fn record_dead_letters(
    admin: &Client,
    queue: &str,
    clock: &BrokerClock,
    harness: &mut HistoryWriter,
) -> Result<()> {
    let dlq = format!("{queue}.dlq");
    let mut after = None;
    loop {
        let page = admin.peek(&dlq, None, 500, after).await?;
        let Some(last) = page.last() else {
            return Ok(());
        };
        after = Some(last.seq);
        for letter in &page {
            let info = letter.dead_letter.clone().unwrap_or_default();
            harness.append(&Event::DeadLetter {
                origin_queue: if info.origin_queue.is_empty() {
                    queue.to_owned()
                } else {
                    info.origin_queue
                },
                id: letter.id.clone(),
                origin_seq: info.origin_seq,
                reason: info.reason,
                deliveries: info.deliveries,
                last_error: info.last_error,
                last_failure_t: info
                    .last_failure_at_ms
                    .map(|at| clock.to_monotonic(at, broker_clock::wall_ms(), monotonic_ns())),
            })?;
        }
    }
}
