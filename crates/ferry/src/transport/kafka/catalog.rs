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
    /// Reads the catalog's one partition by assignment, never joining a group; with what
    /// it has read so far.
    reader: std::sync::Arc<Mutex<Reader>>,
}

/// The catalog as read up to `next`: each read asks for the partition's end offset and
/// polls only the records added since, so a publish (which looks its destination up) costs
/// one offsets round trip while nothing was declared, rather than a re-read of the whole
/// catalog. A catalog whose log no longer holds `next` (compacted or deleted past it, or
/// the topic made again) is read from its start again.
struct Reader {
    consumer: BaseConsumer,
    entries: HashMap<String, Entry>,
    next: i64,
}

impl Catalog {
    pub fn new(reader: BaseConsumer) -> Catalog {
        Catalog {
            reader: std::sync::Arc::new(Mutex::new(Reader {
                consumer: reader,
                entries: HashMap::new(),
                next: 0,
            })),
        }
    }

    /// Every declaration, as of now.
    pub async fn read(&self) -> Result<HashMap<String, Entry>> {
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let mut reader = reader.lock().unwrap_or_else(|e| e.into_inner());
            reader.catch_up()?;
            Ok(reader.entries.clone())
        })
        .await
        .map_err(|e| Error::transport(NAME, e))?
    }

    pub async fn get(&self, name: &str) -> Result<Option<Entry>> {
        let reader = self.reader.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut reader = reader.lock().unwrap_or_else(|e| e.into_inner());
            reader.catch_up()?;
            Ok(reader.entries.get(&name).cloned())
        })
        .await
        .map_err(|e| Error::transport(NAME, e))?
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

impl Reader {
    /// Reads the records added since the last read, if any.
    fn catch_up(&mut self) -> Result<()> {
        let (low, high) = self
            .consumer
            .fetch_watermarks(CATALOG, 0, TIMEOUT)
            .map_err(kafka_error)?;
        if self.next < low || self.next > high {
            self.entries.clear();
            self.next = low;
        }
        if high <= self.next {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(CATALOG, 0, Offset::Offset(self.next))
            .map_err(kafka_error)?;
        self.consumer.assign(&tpl).map_err(kafka_error)?;
        let read = self.poll_until(high);
        self.consumer.unassign().map_err(kafka_error)?;
        if read.is_err() {
            // Part of the records may have been applied: read from the start next time.
            self.entries.clear();
            self.next = 0;
        }
        read
    }

    /// Applies records until the one before `high`.
    fn poll_until(&mut self, high: i64) -> Result<()> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if Instant::now() > deadline {
                return Err(Error::Timeout(TIMEOUT));
            }
            match self.consumer.poll(Duration::from_millis(100)) {
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
                                    self.entries.insert(name, entry);
                                }
                                Err(_) => {
                                    self.entries.remove(&name);
                                }
                            },
                            None => {
                                self.entries.remove(&name);
                            }
                        }
                    }
                    self.next = offset + 1;
                    if offset >= high - 1 {
                        return Ok(());
                    }
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    self.next = self.next.max(high);
                    return Ok(());
                }
                Some(Err(e)) => return Err(kafka_error(e)),
                None => {}
            }
        }
    }
}
