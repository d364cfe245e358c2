//! The catalog: every declaration, as one record per name in the compacted topic
//! `ferry-catalog` (a tombstone when deleted). Any connection reads it back, so a source
//! declared by one process is consumed with the same policy by all.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

use super::capabilities::NAME;
use super::engine::{TIMEOUT, kafka_error};
use super::names::CATALOG;
use super::settings::Entry;
use crate::error::{Error, Result};

pub(super) struct Catalog {
    /// Reads the catalog's one partition by assignment, never joining a group.
    reader: std::sync::Arc<Mutex<BaseConsumer>>,
}

impl Catalog {
    pub fn new(reader: BaseConsumer) -> Catalog {
        Catalog {
            reader: std::sync::Arc::new(Mutex::new(reader)),
        }
    }

    /// Every declaration, as of now.
    pub async fn read(&self) -> Result<HashMap<String, Entry>> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || read_all(&reader.lock().unwrap()))
            .await
            .map_err(|e| Error::transport(NAME, e))?
    }

    pub async fn get(&self, name: &str) -> Result<Option<Entry>> {
        Ok(self.read().await?.remove(name))
    }

    /// Keeps `entry` as `name`'s declaration, or removes it (`None`).
    pub async fn write(
        &self,
        producer: &FutureProducer,
        name: &str,
        entry: Option<&Entry>,
    ) -> Result<()> {
        let payload = entry.map(serde_json::to_vec).transpose()?;
        let mut record = FutureRecord::<str, [u8]>::to(CATALOG).key(name);
        if let Some(payload) = &payload {
            record = record.payload(payload);
        }
        producer
            .send(record, TIMEOUT)
            .await
            .map_err(|(e, _)| kafka_error(e))?;
        Ok(())
    }
}

fn read_all(reader: &BaseConsumer) -> Result<HashMap<String, Entry>> {
    let (low, high) = reader
        .fetch_watermarks(CATALOG, 0, TIMEOUT)
        .map_err(kafka_error)?;
    let mut entries = HashMap::new();
    if high <= low {
        return Ok(entries);
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(CATALOG, 0, Offset::Offset(low))
        .map_err(kafka_error)?;
    reader.assign(&tpl).map_err(kafka_error)?;
    let deadline = Instant::now() + TIMEOUT;
    let read = loop {
        if Instant::now() > deadline {
            break Err(Error::Timeout(TIMEOUT));
        }
        match reader.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                use rdkafka::message::Message as _;
                let offset = m.offset();
                if let Some(key) = m.key() {
                    let name = String::from_utf8_lossy(key).into_owned();
                    match m.payload() {
                        // An entry this version cannot read is left out rather than
                        // guessed at.
                        Some(p) => match serde_json::from_slice::<Entry>(p) {
                            Ok(entry) => {
                                entries.insert(name, entry);
                            }
                            Err(_) => {
                                entries.remove(&name);
                            }
                        },
                        None => {
                            entries.remove(&name);
                        }
                    }
                }
                if offset >= high - 1 {
                    break Ok(entries);
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) => break Ok(entries),
            Some(Err(e)) => break Err(kafka_error(e)),
            None => {}
        }
    };
    reader.unassign().map_err(kafka_error)?;
    read
}
