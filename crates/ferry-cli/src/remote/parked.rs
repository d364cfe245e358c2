//! `ferry queue park|unpark|parked`: hold a poison key's messages on a key-shared queue
//! while other keys flow, release it, and list what is held.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use clap::Args;
use serde_json::json;

use super::Remote;
use super::output::{payload_text, print_json, table};

#[derive(Args, Debug)]
pub struct ParkArgs {
    /// A key-shared queue (or subscription).
    pub queue: String,
    /// The ordering key, as UTF-8 text; with --key-base64, its bytes in standard base64.
    pub key: String,
    /// KEY is standard base64, for keys that are not text.
    #[arg(long)]
    pub key_base64: bool,
}

impl ParkArgs {
    fn key(&self) -> anyhow::Result<Vec<u8>> {
        let key = if self.key_base64 {
            BASE64
                .decode(self.key.as_bytes())
                .map_err(|e| anyhow::anyhow!("KEY is not standard base64 (--key-base64): {e}"))?
        } else {
            self.key.clone().into_bytes()
        };
        if key.is_empty() {
            anyhow::bail!("KEY is empty: name the ordering key to park or unpark");
        }
        Ok(key)
    }
}

pub async fn park(remote: &Remote, args: &ParkArgs) -> anyhow::Result<()> {
    let key = args.key()?;
    remote.call(remote.client.park(&args.queue, key)).await?;
    done(remote, "parked", args);
    Ok(())
}

pub async fn unpark(remote: &Remote, args: &ParkArgs) -> anyhow::Result<()> {
    let key = args.key()?;
    remote.call(remote.client.unpark(&args.queue, key)).await?;
    done(remote, "unparked", args);
    Ok(())
}

fn done(remote: &Remote, what: &str, args: &ParkArgs) {
    if remote.json {
        print_json(&json!({ what: true, "queue": args.queue, "key": args.key }));
    } else {
        out!("{what} key {} on queue {}", args.key, args.queue);
    }
}

pub async fn list(remote: &Remote, queue: &str) -> anyhow::Result<()> {
    let keys = remote.call(remote.client.parked_keys(queue)).await?;
    if remote.json {
        // A key that is not UTF-8 goes as base64, which `park --key-base64` takes back.
        let rows: Vec<_> = keys
            .iter()
            .map(|p| match std::str::from_utf8(&p.key) {
                Ok(text) => json!({ "key": text, "held": p.held }),
                Err(_) => json!({ "key_base64": BASE64.encode(&p.key), "held": p.held }),
            })
            .collect();
        print_json(&json!(rows));
    } else if keys.is_empty() {
        out!("no parked keys on {queue}");
    } else {
        let mut t = table(["key", "held"]);
        for p in &keys {
            t.add_row([payload_text(&p.key), p.held.to_string()]);
        }
        out!("{t}");
    }
    Ok(())
}
