//! Ferry's storage engine: durable, segmented, append-only logs and a crash-safe metadata
//! store. No async runtime and no network: the broker above drives it from its own threads.
//!
//! ```
//! use ferry_storage::{Durability, Log, LogConfig, NewRecord};
//!
//! let dir = tempfile::tempdir()?;
//! let config = LogConfig { durability: Durability::Fsync, ..LogConfig::default() };
//! let log = Log::open(dir.path(), config)?;
//! // Returns once the batch is on disk; concurrent appends share one fdatasync.
//! let appended = log.append(vec![
//!     NewRecord::new("created").with_key("order-1").with_header("type", "order.created"),
//!     NewRecord::new("paid").with_key("order-1"),
//! ])?;
//! assert_eq!((appended.base_offset, appended.last_offset), (0, 1));
//! let records = log.read(0, 64 * 1024)?;
//! assert_eq!(records[1].value, "paid");
//! log.close()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod clock;
pub mod dir_lock;
pub mod error;
pub mod fs_util;
pub mod meta_store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use dir_lock::DirLock;
pub use error::{Result, StorageError};
pub use meta_store::{MetaBatch, MetaStore};
pub mod batch;
mod checkpoint;
pub mod compaction;
pub mod config;
pub mod index;
pub mod log;
mod preallocate;
pub mod recovery;
pub mod retention;
mod segment;
pub mod stats;
mod syncer;
mod writer;

pub use batch::{NewRecord, Record, RecordBatch};
pub use compaction::{CompactionPolicy, CompactionReport};
pub use config::{Durability, LogConfig};
pub use log::{Appended, Log};
pub use recovery::{RecoveryReport, RepairedSegment};
pub use retention::{RetentionPolicy, RetentionReport};
pub use stats::{HistogramSnapshot, LogStats, LogStatsSnapshot};
