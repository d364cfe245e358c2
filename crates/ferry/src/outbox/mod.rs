//! The transactional outbox.
