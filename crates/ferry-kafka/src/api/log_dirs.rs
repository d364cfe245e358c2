//! DescribeLogDirs: Ferry keeps every partition in one directory, its data directory, so
//! the answer is that one log dir holding every partition asked for (all of them when the
//! request names none). A partition's size is its log's bytes on disk as the broker counts
//! them; its offset lag is 0 (there is no future replica catching up). The usable bytes
//! (v4) are the free space on the data directory's disk as publishes see it; the volume's
//! total size is not looked up and is sent as Kafka's "unknown", -1. A topic or partition
//! that does not exist is left out, as Kafka leaves out what a broker does not host.

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::Shared;

pub fn describe(shared: &Shared, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
    let broker = &shared.broker;
    // `(topic, partitions)`; `None` for every partition of the topic.
    let wanted: Vec<(String, Option<Vec<i32>>)> = match request.topics {
        None => broker
            .list_topics()
            .into_iter()
            .map(|name| (name.to_string(), None))
            .collect(),
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic.to_string(), Some(t.partitions)))
            .collect(),
    };
    let topics = wanted
        .into_iter()
        .filter_map(|(name, partitions)| {
            let info = broker.describe_topic(&name).ok()?;
            let sizes = info
                .partitions
                .iter()
                .filter(|p| {
                    partitions
                        .as_ref()
                        .is_none_or(|asked| asked.contains(&(p.partition as i32)))
                })
                .map(|p| {
                    DescribeLogDirsPartition::default()
                        .with_partition_index(p.partition as i32)
                        .with_partition_size(i64::try_from(p.bytes).unwrap_or(i64::MAX))
                })
                .collect::<Vec<_>>();
            (!sizes.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(sizes)
            })
        })
        .collect();
    let dir = std::path::absolute(broker.dir()).unwrap_or_else(|_| broker.dir().to_path_buf());
    let mut result = DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics);
    if let Ok(space) = broker.disk_space() {
        result.usable_bytes = i64::try_from(space.available).unwrap_or(i64::MAX);
    }
    DescribeLogDirsResponse::default().with_results(vec![result])
}
