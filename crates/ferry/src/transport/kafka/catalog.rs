//! The catalog: every declaration, as one record per name in the compacted topic
//! `ferry-catalog` (a tombstone when deleted). Any connection reads it back, so a source
//! declared by one process is consumed with the same policy by all.
//!
//! Every publish, consumer open and declaration looks its name up here, so a lookup must
//! be cheap: the connection keeps what it has read and, each time, asks only for the
//! catalog's end offset and reads the records added since. A lookup still sees every
//! declaration stored before it began, from any process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// How long the reader's fetch waits at the catalog's end for more records. A Kafka
/// connection answers its requests in order, and librdkafka sends the next fetch as soon
/// as one returns: the fetch left in flight after a read holds the next lookup's offset
/// request behind it for this long. Kafka's default (500 ms) made every lookup that
/// followed another wait half a second.
pub(super) const FETCH_WAIT: &str = "10";

pub(super) struct Catalog {
    reader: Arc<Mutex<Reader>>,
}

/// The catalog's one partition, read by assignment (never joining a group), and what has
/// been read of it.
struct Reader {
    consumer: BaseConsumer,
    entries: HashMap<String, Entry>,
    /// The offset after the last record applied to `entries`.
    next: i64,
}

impl Catalog {
    pub fn new(consumer: BaseConsumer) -> Catalog {
        Catalog {
            reader: Arc::new(Mutex::new(Reader {
                consumer,
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
    /// Applies the records stored since the last read, up to the catalog's current end.
    fn catch_up(&mut self) -> Result<()> {
        let (low, high) = self
            .consumer
            .fetch_watermarks(CATALOG, 0, TIMEOUT)
            .map_err(kafka_error)?;
        if low > self.next || high < self.next {
            // Records this reader had not read were removed, or the topic was made again:
            // what was read no longer describes it, so read it all again.
            self.entries.clear();
            self.next = low;
        }
        if self.next >= high {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(CATALOG, 0, Offset::Offset(self.next))
            .map_err(kafka_error)?;
        self.consumer.assign(&tpl).map_err(kafka_error)?;
        let read = self.read_to(high);
        self.consumer.unassign().map_err(kafka_error)?;
        read
    }

    /// Reads the assigned partition until the record before `high`, or its end.
    fn read_to(&mut self, high: i64) -> Result<()> {
        let deadline = Instant::now() + TIMEOUT;
        while self.next < high {
            if Instant::now() > deadline {
                return Err(Error::Timeout(TIMEOUT));
            }
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    use rdkafka::message::Message as _;
                    if m.offset() < self.next {
                        continue;
                    }
                    if let Some(key) = m.key() {
                        let name = String::from_utf8_lossy(key).into_owned();
                        // An entry this version cannot read is left out rather than guessed
                        // at.
                        match m.payload().map(serde_json::from_slice::<Entry>) {
                            Some(Ok(entry)) => {
                                self.entries.insert(name, entry);
                            }
                            Some(Err(_)) | None => {
                                self.entries.remove(&name);
                            }
                        }
                    }
                    self.next = m.offset() + 1;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => {
                    // The end came before `high`: the records between were compacted away —
                    // or this is the end of an earlier read, when the fetch still stands
                    // before `high`.
                    let position = self
                        .consumer
                        .position()
                        .ok()
                        .and_then(|p| p.find_partition(CATALOG, 0)?.offset().to_raw());
                    match position {
                        Some(position) if position >= high => {
                            self.next = high;
                            return Ok(());
                        }
                        Some(_) => {}
                        None => return Ok(()),
                    }
                }
                Some(Err(e)) => return Err(kafka_error(e)),
                None => {}
            }
        }
        Ok(())
    }
}
