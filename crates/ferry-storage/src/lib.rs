//! Ferry's storage engine: durable, segmented, append-only logs and a crash-safe metadata
//! store. No async runtime and no network: the broker above drives it from its own threads.

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
pub mod config;
pub mod index;
pub mod log;
mod preallocate;
pub mod recovery;
pub mod retention;
mod segment;
mod writer;

pub use batch::{NewRecord, Record, RecordBatch};
pub use config::{Durability, LogConfig};
pub use log::{Appended, Log};
pub use recovery::{RecoveryReport, RepairedSegment};
pub use retention::{RetentionPolicy, RetentionReport};
