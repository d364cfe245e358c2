//! `ferry stats`: every queue's counts in one table, once or every few seconds.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use super::Remote;
use super::admin::{dead_letter_queue, stats_json};
use super::output::{human_ms, parse_interval, print_json, table};

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Refresh every N seconds (default 2; units like 500ms work too) until Ctrl-C.
    #[arg(long, num_args = 0..=1, default_missing_value = "2s", value_parser = parse_interval)]
    pub watch: Option<Duration>,
}

pub async fn stats(remote: &Remote, args: StatsArgs) -> anyhow::Result<()> {
    let Some(every) = args.watch else {
        return once(remote, false).await;
    };
    let clear = std::io::stdout().is_terminal();
    loop {
        once(remote, clear).await?;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

async fn once(remote: &Remote, clear: bool) -> anyhow::Result<()> {
    let names = remote.call(remote.client.list_queues()).await?;
    let mut infos = Vec::with_capacity(names.len());
    for name in &names {
        match remote.client.describe_queue(name).await {
            Ok(info) => infos.push(info),
            // Deleted between the list and the describe.
            Err(e) if e.code() == Some(tonic::Code::NotFound) => {}
            Err(e) => return Err(super::output::explain(e, &remote.server)),
        }
    }
    let ready: HashMap<&str, u64> = infos
        .iter()
        .map(|i| (i.name.as_str(), i.stats.unwrap_or_default().ready))
        .collect();
    let dlq_depth = |info: &ferry_client::proto::QueueInfo| {
        dead_letter_queue(info).and_then(|dlq| ready.get(dlq.as_str()).copied())
    };
    if remote.json {
        let rows: Vec<_> = infos
            .iter()
            .map(|i| {
                let mut v = stats_json(&i.stats.unwrap_or_default());
                v["queue"] = json!(i.name);
                v["dlq"] = json!(dead_letter_queue(i));
                v["dlq_depth"] = json!(dlq_depth(i));
                v
            })
            .collect();
        print_json(&json!(rows));
        return Ok(());
    }
    let mut t = table([
        "queue",
        "ready",
        "in flight",
        "delayed",
        "dlq depth",
        "oldest",
        "published",
        "acked",
        "nacked",
        "dead-lettered",
    ]);
    for info in &infos {
        let s = info.stats.unwrap_or_default();
        t.add_row([
            info.name.clone(),
            s.ready.to_string(),
            s.in_flight.to_string(),
            s.delayed.to_string(),
            dlq_depth(info).map_or_else(|| "-".into(), |d| d.to_string()),
            human_ms(s.oldest_ready_age_ms),
            s.published.to_string(),
            s.acked.to_string(),
            s.nacked.to_string(),
            s.dead_lettered.to_string(),
        ]);
    }
    // Clear the screen and home the cursor, so a watch redraws in place.
    let clear = if clear { "\x1b[2J\x1b[H" } else { "" };
    out!("{clear}{t}");
    Ok(())
}
