//! `ferry topology plan` and `apply`: the file against what the server holds, and the
//! plan carried out change by change in the plan's order.

use std::collections::BTreeSet;

use ferry_client::proto as v1;
use ferry_topology::Topology;
use ferry_topology::plan::{Action, Change, Channel, Kind, Loss, Options, Plan, Setting};

use super::{
    Connection, EXIT_DATA_LOSS_REFUSED, EXIT_FINDINGS, EXIT_NO_VERDICT, EXIT_PARTLY_APPLIED,
    PlanArgs, PlanFormat, check, export, spec, with_server,
};
use crate::remote::Remote;
use crate::remote::output::write_line;

pub fn plan(
    args: &PlanArgs,
    format: PlanFormat,
    connection: impl FnOnce() -> anyhow::Result<Connection>,
) -> i32 {
    let Ok(desired) = read_file(args) else {
        return EXIT_NO_VERDICT;
    };
    let plan = with_server(connection, async |remote| {
        make_plan(args, &desired, remote).await
    });
    let plan = match plan {
        Ok(plan) => plan,
        Err(code) => return code,
    };
    match format {
        PlanFormat::Text => print_plan(&plan),
        PlanFormat::Json => match serde_json::to_string_pretty(&plan) {
            Ok(json) => write_line(format_args!("{json}")),
            Err(e) => {
                eprintln!("ferry: error: writing the plan: {e}");
                return EXIT_NO_VERDICT;
            }
        },
    }
    if plan.is_empty() { 0 } else { EXIT_FINDINGS }
}

pub fn apply(
    args: &PlanArgs,
    allow_data_loss: bool,
    connection: impl FnOnce() -> anyhow::Result<Connection>,
) -> i32 {
    let Ok(desired) = read_file(args) else {
        return EXIT_NO_VERDICT;
    };
    let outcome = with_server(connection, async |remote| {
        let plan = make_plan(args, &desired, remote).await?;
        print_plan(&plan);
        if plan.is_empty() {
            return Ok(0);
        }
        let losing: Vec<&Change> = plan.data_losing().collect();
        if !losing.is_empty() && !allow_data_loss {
            eprintln!(
                "ferry: error: refused: {} change(s) above lose data (marked `loses data`); \
                 nothing was changed. Review them and apply with --allow-data-loss, or change \
                 the file",
                losing.len()
            );
            return Ok(EXIT_DATA_LOSS_REFUSED);
        }
        Ok(carry_out(&plan, remote).await)
    });
    outcome.unwrap_or_else(|code| code)
}

/// The file, or `Err` once its error is printed.
fn read_file(args: &PlanArgs) -> Result<Topology, ()> {
    let topology = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read it: {e}"))
        .and_then(|text| Topology::from_yaml(&text).map_err(|e| e.to_string()));
    topology.map_err(|error| eprintln!("ferry: error: {}: {error}", args.file.display()))
}

async fn make_plan(args: &PlanArgs, desired: &Topology, remote: &Remote) -> anyhow::Result<Plan> {
    let desired =
        canonical_filters(desired).map_err(|e| anyhow::anyhow!("{}: {e}", args.file.display()))?;
    let current = export::read(remote).await?;
    let options = Options {
        prune: args.prune,
        skip_foreign: args.skip_other_brokers,
    };
    let plan = ferry_topology::plan::plan(&desired, &current, options).map_err(|e| {
        let hint = match e {
            ferry_topology::plan::PlanError::Foreign { .. } => " (--skip-other-brokers)",
            _ => "",
        };
        anyhow::anyhow!("{}: {e}{hint}", args.file.display())
    })?;
    check::check(&plan).map_err(|e| anyhow::anyhow!("{}: {e:#}", args.file.display()))?;
    Ok(plan)
}

/// The file with each subscription filter as the server writes it back (`region in (eu)`
/// is `region in ("eu")`), so that a filter written another way is no difference; and a
/// filter the server would refuse is an error before anything changes.
fn canonical_filters(desired: &Topology) -> anyhow::Result<Topology> {
    let mut desired = desired.clone();
    for topic in &mut desired.topics {
        if !ferry_topology::plan::served_by_ferry(topic.broker, topic.kind) {
            continue;
        }
        for sub in &mut topic.subscriptions {
            let Some(filter) = sub.filter.as_mut() else {
                continue;
            };
            if filter.trim().is_empty() {
                filter.clear();
                continue;
            }
            let parsed = ferry_broker::Filter::parse(filter)
                .map_err(|e| anyhow::anyhow!("subscription {}: filter: {e}", sub.name))?;
            *filter = parsed.to_string();
        }
    }
    Ok(desired)
}

/// The plan for people on stdout; what it leaves alone on stderr.
fn print_plan(plan: &Plan) {
    for skipped in &plan.skipped {
        eprintln!("skipped {skipped}: not served by the Ferry server");
    }
    for channel in &plan.unmanaged {
        eprintln!(
            "{} {}: on the server, not in the file; left as it is (--prune deletes it)",
            channel.kind, channel.name
        );
    }
    write_line(format_args!("{}", plan.to_string().trim_end()));
}

/// Makes the plan's changes in order and returns the exit code. A channel with several
/// setting changes is updated, or recreated, once with all of them; recreated when any of
/// them cannot be made in place.
async fn carry_out(plan: &Plan, remote: &Remote) -> i32 {
    let recreating: BTreeSet<(Kind, &str)> = plan
        .changes
        .iter()
        .filter(|c| c.loses_data == Some(Loss::Recreates))
        .map(|c| (c.kind, c.name.as_str()))
        .collect();
    let mut done: BTreeSet<(Kind, &str)> = BTreeSet::new();
    let mut made = 0;
    for change in &plan.changes {
        let channel = (change.kind, change.name.as_str());
        let result = match &change.action {
            Action::Create { .. } => create(plan, change, remote).await,
            Action::Delete => delete(change.kind, &change.name, remote).await,
            Action::Update {
                setting: Setting::Partitions,
                to,
                ..
            } if !recreating.contains(&channel) => {
                let partitions = match to {
                    ferry_topology::plan::Value::Count(n) => u32::try_from(*n).unwrap_or(u32::MAX),
                    _ => 0,
                };
                remote
                    .call(remote.client.add_partitions(&change.name, partitions))
                    .await
            }
            Action::Update { .. } if !done.insert(channel) => Ok(()),
            Action::Update { .. } if recreating.contains(&channel) => {
                recreate(plan, change, remote).await
            }
            Action::Update { .. } => update_in_place(plan, change, remote).await,
        };
        if let Err(error) = result {
            eprintln!(
                "ferry: error: {change}: {error:#}\n{made} of {} change(s) were made (printed \
                 `done` above); fix the cause and apply again: the plan starts from what the \
                 server holds now",
                plan.changes.len()
            );
            return EXIT_PARTLY_APPLIED;
        }
        made += 1;
        write_line(format_args!("done: {change}"));
    }
    write_line(format_args!("applied {made} change(s)"));
    0
}

fn desired<'p>(plan: &'p Plan, change: &Change) -> anyhow::Result<&'p Channel> {
    plan.desired
        .get(change.kind, &change.name)
        .ok_or_else(|| anyhow::anyhow!("{} {} is not in the file", change.kind, change.name))
}

async fn create(plan: &Plan, change: &Change, remote: &Remote) -> anyhow::Result<()> {
    let channel = desired(plan, change)?;
    let client = &remote.client;
    match channel.kind {
        Kind::Topic => {
            let spec = spec::topic(channel, v1::TopicSpec::default());
            remote.call(client.create_topic(&channel.name, spec)).await
        }
        Kind::Queue => {
            let spec = spec::queue(channel, v1::QueueSpec::default());
            remote.call(client.create_queue(&channel.name, spec)).await
        }
        Kind::Subscription => {
            let spec = spec::subscription(channel, v1::SubscriptionSpec::default());
            remote
                .call(client.create_subscription(&channel.name, spec))
                .await
        }
    }
}

async fn delete(kind: Kind, name: &str, remote: &Remote) -> anyhow::Result<()> {
    let client = &remote.client;
    match kind {
        Kind::Topic => remote.call(client.delete_topic(name)).await,
        Kind::Queue => remote.call(client.delete_queue(name)).await,
        Kind::Subscription => remote.call(client.delete_subscription(name)).await,
    }
}

/// Gives a queue or topic its current spec with the file's settings over it, in place:
/// every change of the channel is one the server makes without emptying it
/// (`ferry_topology::plan::changes_in_place`). A topic's partitions are left to
/// AddPartitions.
async fn update_in_place(plan: &Plan, change: &Change, remote: &Remote) -> anyhow::Result<()> {
    let channel = desired(plan, change)?;
    let client = &remote.client;
    let name = channel.name.as_str();
    match channel.kind {
        Kind::Topic => {
            let current = remote.call(client.describe_topic(name)).await?;
            let mut spec = spec::topic(channel, current.spec.unwrap_or_default());
            spec.partitions = 0;
            remote.call(client.update_topic(name, spec)).await.map(drop)
        }
        Kind::Queue => {
            let current = remote.call(client.describe_queue(name)).await?;
            let spec = spec::queue(channel, current.spec.unwrap_or_default());
            remote.call(client.update_queue(name, spec)).await.map(drop)
        }
        Kind::Subscription => anyhow::bail!(
            "subscription {name}: the server changes a subscription's settings only by \
             recreating it"
        ),
    }
}

/// Deletes the channel and creates it with its current spec and the file's settings over
/// it: the server changes these settings in no other way.
async fn recreate(plan: &Plan, change: &Change, remote: &Remote) -> anyhow::Result<()> {
    let channel = desired(plan, change)?;
    let client = &remote.client;
    let name = channel.name.as_str();
    match channel.kind {
        Kind::Topic => {
            let current = remote.call(client.describe_topic(name)).await?;
            let spec = spec::topic(channel, current.spec.unwrap_or_default());
            delete(Kind::Topic, name, remote).await?;
            remote.call(client.create_topic(name, spec)).await
        }
        Kind::Queue => {
            let current = remote.call(client.describe_queue(name)).await?;
            let spec = spec::queue(channel, current.spec.unwrap_or_default());
            delete(Kind::Queue, name, remote).await?;
            remote.call(client.create_queue(name, spec)).await
        }
        Kind::Subscription => {
            let current = remote.call(client.describe_subscription(name)).await?;
            let mut base = current.spec.unwrap_or_default();
            base.delivery = current.queue.and_then(|q| q.spec);
            let spec = spec::subscription(channel, base);
            delete(Kind::Subscription, name, remote).await?;
            remote.call(client.create_subscription(name, spec)).await
        }
    }
}
