//! `ferry dlq list|peek|redrive`: what failed, why, and sending it back. Headers the
//! server redacts arrive as `***`; `--redact-header` (FERRY_REDACT_HEADERS) masks more
//! here, for a server that does not.

use std::time::Duration;

use anyhow::bail;
use clap::{Args, Subcommand};
use ferry_client::proto as v1;
use ferry_server::Redaction;
use serde_json::json;

use super::Remote;
use super::messages::delivery_json;
use super::output::{
    age, fields, millis, parse_duration, parse_pair, payload_text, print_json, table,
};

#[derive(Subcommand, Debug)]
pub enum DlqCommand {
    /// The dead letters of a dead-letter queue, oldest first.
    List {
        dlq: String,
        /// Most letters shown.
        #[arg(long, default_value_t = 100)]
        max: u32,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        redact: RedactArgs,
    },
    /// One dead letter in full (the first, or the one at --seq).
    Peek {
        dlq: String,
        #[arg(long)]
        seq: Option<u64>,
        #[command(flatten)]
        redact: RedactArgs,
    },
    /// Move dead letters back to their origin queue (or --target).
    Redrive(RedriveArgs),
}

#[derive(Args, Debug)]
pub struct FilterArgs {
    /// Only letters dead-lettered for this reason: max_deliveries, rejected, expired, overflow.
    #[arg(long)]
    pub reason: Option<String>,
    /// Only letters with this header, `name=value`.
    #[arg(long, value_parser = parse_pair)]
    pub header: Option<(String, String)>,
    /// Only letters dead-lettered longer ago than this.
    #[arg(long, value_parser = parse_duration)]
    pub older_than: Option<Duration>,
    /// Only letters dead-lettered more recently than this.
    #[arg(long, value_parser = parse_duration)]
    pub newer_than: Option<Duration>,
}

impl FilterArgs {
    fn filter(&self) -> Option<v1::DeadLetterFilter> {
        let filter = v1::DeadLetterFilter {
            reason: self.reason.clone(),
            header_name: self.header.as_ref().map(|h| h.0.clone()),
            header_value: self.header.as_ref().map(|h| h.1.clone()),
            older_than_ms: self.older_than.map(millis),
            newer_than_ms: self.newer_than.map(millis),
        };
        (filter != v1::DeadLetterFilter::default()).then_some(filter)
    }
}

/// Headers to mask here, on top of what the server masks: for a server that does not
/// redact them.
#[derive(Args, Debug)]
pub struct RedactArgs {
    /// Show this header's value as `***` (any case; repeat, or separate with commas). The
    /// server masks its own list (credentials and cookies by default) before this.
    #[arg(
        long = "redact-header",
        value_name = "NAME",
        env = "FERRY_REDACT_HEADERS",
        value_delimiter = ','
    )]
    pub headers: Vec<String>,
}

impl RedactArgs {
    fn redaction(&self) -> anyhow::Result<Redaction> {
        Redaction::new(&self.headers).map_err(|e| anyhow::anyhow!("--redact-header: {e}"))
    }
}

#[derive(Args, Debug)]
pub struct RedriveArgs {
    pub dlq: String,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Send them here instead of each back to its origin queue.
    #[arg(long)]
    pub target: Option<String>,
    /// Move at most this many.
    #[arg(long)]
    pub max: Option<u64>,
    /// Move at most this many per second.
    #[arg(long)]
    pub rate: Option<u32>,
}

/// Peek pages of at most this many.
const PAGE: u32 = 500;

pub async fn dlq(remote: &Remote, command: DlqCommand) -> anyhow::Result<()> {
    match command {
        DlqCommand::List {
            dlq,
            max,
            filter,
            redact,
        } => {
            let redaction = redact.redaction()?;
            let filter = filter.filter();
            let mut letters = Vec::new();
            let mut after = None;
            while letters.len() < max as usize {
                let want = PAGE.min(max - letters.len() as u32);
                let page = remote
                    .call(remote.client.peek(&dlq, filter.clone(), want, after))
                    .await?;
                // Only an empty page is the end: the server caps a page in bytes too,
                // so a shorter page than asked may have more after it.
                let Some(last) = page.last() else { break };
                after = Some(last.seq);
                letters.extend(page.into_iter().map(|mut l| {
                    redaction.mask(&mut l.headers);
                    l
                }));
            }
            if remote.json {
                print_json(&json!(
                    letters.iter().map(delivery_json).collect::<Vec<_>>()
                ));
                return Ok(());
            }
            let mut t = table(["seq", "reason", "deliveries", "last error", "age", "from"]);
            for l in &letters {
                let dl = l.dead_letter.clone().unwrap_or_default();
                let at = dl.last_failure_at_ms.unwrap_or(l.published_at_ms);
                t.add_row([
                    l.seq.to_string(),
                    dl.reason.clone(),
                    dl.deliveries.to_string(),
                    dl.last_error.clone().unwrap_or_else(|| "-".into()),
                    age(at),
                    format!("{} #{}", dl.origin_queue, dl.origin_seq),
                ]);
            }
            out!("{t}");
            out!("{} dead letter(s) in {dlq}", letters.len());
        }
        DlqCommand::Peek { dlq, seq, redact } => {
            let redaction = redact.redaction()?;
            // The first letter at or after `seq`: ask from just before it.
            let after = seq.and_then(|s| s.checked_sub(1));
            let page = remote
                .call(remote.client.peek(&dlq, None, 1, after))
                .await?;
            let letter = match seq {
                Some(s) => page.into_iter().find(|l| l.seq == s),
                None => page.into_iter().next(),
            };
            let Some(mut letter) = letter else {
                let at = seq.map_or_else(String::new, |s| format!(" at seq {s}"));
                bail!("no dead letter{at} in {dlq}: `ferry dlq list {dlq}` shows what is there");
            };
            redaction.mask(&mut letter.headers);
            if remote.json {
                print_json(&delivery_json(&letter));
                return Ok(());
            }
            let dl = letter.dead_letter.clone().unwrap_or_default();
            let mut rows = vec![
                ("seq", letter.seq.to_string()),
                ("id", letter.id.clone()),
                ("reason", dl.reason.clone()),
                ("deliveries", dl.deliveries.to_string()),
                (
                    "last error",
                    dl.last_error.clone().unwrap_or_else(|| "-".into()),
                ),
                (
                    "consumer",
                    dl.consumer.clone().unwrap_or_else(|| "-".into()),
                ),
                ("origin", format!("{} #{}", dl.origin_queue, dl.origin_seq)),
                (
                    "published",
                    format!("{} ago", age(dl.origin_published_at_ms)),
                ),
            ];
            if let Some(at) = dl.last_failure_at_ms {
                rows.push(("last failure", format!("{} ago", age(at))));
            }
            if let Some(key) = &letter.key {
                rows.push(("key", payload_text(key)));
            }
            let mut headers: Vec<_> = letter.headers.iter().collect();
            headers.sort();
            let headers: Vec<String> = headers.iter().map(|(k, v)| format!("{k}={v}")).collect();
            rows.push(("headers", headers.join("\n")));
            rows.push(("payload", payload_text(&letter.payload)));
            out!("{}", fields(&rows));
        }
        DlqCommand::Redrive(args) => {
            let request = v1::RedriveRequest {
                dlq: args.dlq.clone(),
                target: args.target.clone(),
                filter: args.filter.filter(),
                max_messages: args.max,
                rate_per_sec: args.rate,
            };
            let answer = remote.call(remote.client.redrive(request)).await?;
            let to = args.target.as_deref().unwrap_or("their origin queues");
            if remote.json {
                print_json(&json!({
                    "dlq": args.dlq, "moved": answer.moved, "skipped": answer.skipped,
                    "target": args.target,
                }));
            } else {
                out!(
                    "moved {} dead letter(s) from {} to {to}; {} skipped",
                    answer.moved,
                    args.dlq,
                    answer.skipped
                );
            }
        }
    }
    Ok(())
}
