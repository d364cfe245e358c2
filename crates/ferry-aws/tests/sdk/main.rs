//! The official AWS SDK for Rust (`aws-sdk-sqs`, `aws-sdk-sns`) against the front end over
//! a real socket, with a plain-HTTP client and static credentials: queue lifecycle and
//! attributes, sends and batches with every attribute type (each MD5 the answer carries
//! checked here, as the Rust SDK does not check them), long polls, visibility, deletes,
//! FIFO groups and deduplication, SNS topics with a subscribed queue (envelope and raw
//! delivery, filter policies), and the typed errors the SDK raises from the answers.

mod errors;
mod sns;
mod sqs;
mod support;
