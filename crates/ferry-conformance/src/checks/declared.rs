//! A consumer knows the limit its source was declared with, as the engine keeps it — also
//! on a connection that did not declare it — so the poison layer decides on the right
//! delivery whichever process declared the queue.

use ferry::{Ferry, SubscriptionDecl, TopicDecl};

use crate::support::{CheckResult, Context, consumer, ensure, fresh_name, queue, quick_policy};
use crate::{Restart, Target};

pub(super) async fn a_consumer_knows_the_declared_max_deliveries_on_any_connection(
    ferry: &Ferry,
    target: &Target,
) -> CheckResult {
    let name = queue(ferry, "declared-limit", |q| q.delivery.max_deliveries = 4).await?;
    let topic = fresh_name("declared-limit-topic");
    ferry
        .declare_topic(&TopicDecl::new(&topic))
        .await
        .during("declare topic")?;
    let subscription =
        SubscriptionDecl::new(&topic, format!("{topic}-s")).delivery(ferry::DeliveryPolicy {
            max_deliveries: 6,
            ..quick_policy()
        });
    ferry
        .declare_subscription(&subscription)
        .await
        .during("declare subscription")?;
    let sources = [
        (ferry::Source::queue(&name), Some(4)),
        (
            ferry::Source::subscription(&topic, &subscription.name),
            Some(6),
        ),
        (ferry::Source::queue(&name).dead_letters(), None),
    ];
    // An engine living in this process takes one connection at a time: there only the
    // declaring one is asked (the SDK's own tests reopen it to ask a fresh one).
    let other = match target.restart {
        Restart::Reconnect => None,
        _ => Some(Ferry::connect(&target.url).await.during("connect again")?),
    };
    for handle in std::iter::once(ferry).chain(other.as_ref()) {
        for (source, expected) in &sources {
            let mut c = consumer(handle, source.clone()).await?;
            let known = c.max_deliveries();
            c.close().await.during("close")?;
            ensure!(
                known == *expected,
                "a consumer of {source:?} knew max_deliveries {known:?}, not {expected:?}"
            );
        }
    }
    if let Some(other) = other {
        other.close().await.during("close the second connection")?;
    }
    let sub_source = ferry::Source::subscription(&topic, &subscription.name);
    ferry
        .delete(&sub_source)
        .await
        .during("delete subscription")?;
    ferry.delete_topic(&topic).await.during("delete topic")
}
