//! The check that restarts the engine mid-stream: nothing acknowledged or published is lost,
//! nothing acked comes back.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ferry::{Destination, Ferry, Message, Source};

use super::WAIT;
use crate::report::Outcome;
use crate::support::{Context, consumer, ensure, next, queue};
use crate::{Restart, Target};

/// Publishes, consumes part, restarts the engine, and checks that every published message
/// arrives and nothing acked returns. Gives back the new connection (`None` if the engine
/// did not come back).
pub(super) async fn restart_check(ferry: Ferry, target: &Target) -> (Outcome, Option<Ferry>) {
    let hook = match &target.restart {
        Restart::Cannot(why) => return (Outcome::Skipped((*why).to_owned()), Some(ferry)),
        Restart::Reconnect => None,
        Restart::Hook(hook) => Some(hook.clone()),
    };
    const MESSAGES: usize = 1000;
    let first = async {
        let name = queue(&ferry, "restart-engine", |q| {
            q.delivery.lease = Duration::from_secs(3)
        })
        .await?;
        let publisher = ferry.publisher(Destination::queue(&name));
        let mut sent = HashSet::new();
        for _ in 0..MESSAGES / 100 {
            let batch = (0..100).map(|i| Message::new(format!("{i}"))).collect();
            sent.extend(publisher.send_batch(batch).await.during("publish")?);
        }
        let mut acked = HashSet::new();
        let mut c = consumer(&ferry, Source::queue(&name)).await?;
        while acked.len() < MESSAGES / 3 {
            let d = next(&mut c, WAIT).await?;
            acked.insert(d.id.clone());
            d.ack().await.during("ack")?;
        }
        // Some held unsettled when the engine stops.
        let _held = next(&mut c, WAIT).await?;
        Ok::<_, String>((name, sent, acked))
    };
    let (name, sent, mut acked) = match first.await {
        Ok(state) => state,
        Err(how) => return (Outcome::Failed(how), Some(ferry)),
    };
    if let Err(e) = ferry.close().await {
        return (Outcome::Failed(format!("close: {e}")), None);
    }
    // Let go of the connection entirely, as a stopped process would.
    drop(ferry);
    if let Some(hook) = hook {
        hook().await;
    }
    let ferry = match reconnect(&target.url).await {
        Ok(f) => f,
        Err(how) => return (Outcome::Failed(how), None),
    };
    let second = async {
        let mut c = consumer(&ferry, Source::queue(&name)).await?;
        while acked.len() < MESSAGES {
            // Deliveries held at the restart come back when their 3 s lease ends.
            let d = next(&mut c, Duration::from_secs(45)).await?;
            ensure!(
                acked.insert(d.id.clone()),
                "{} came back after its ack",
                d.id
            );
            d.ack().await.during("ack")?;
        }
        ensure!(
            acked == sent,
            "the acked set differs from the published one"
        );
        c.close().await.during("close")
    };
    let outcome = match tokio::time::timeout(target.check_timeout, second).await {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(how)) => Outcome::Failed(how),
        Err(_) => Outcome::Failed("timed out after the restart".into()),
    };
    (outcome, Some(ferry))
}

/// Connects, retrying for a while: an engine just restarted may not answer yet.
async fn reconnect(url: &str) -> Result<Ferry, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Ferry::connect(url).await {
            Ok(f) => return Ok(f),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("reconnect after restart: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
