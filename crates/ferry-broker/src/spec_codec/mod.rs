//! How queue and topic specs are stored in the broker's metadata store.

pub(crate) mod queue;
pub(crate) mod topic;
