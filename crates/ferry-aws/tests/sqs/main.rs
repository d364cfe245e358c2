//! The SQS front end over a real socket, in both protocols: round trips, every error
//! code with its status (and nothing changed by a refused request), tamper-proof receipt
//! handles, visibility and redelivery, dead-lettering by RedrivePolicy, FIFO order and
//! deduplication, long polls, purges, settings changed after creation, message-move tasks,
//! MD5 digests against AWS's algorithm, and messages crossing between SQS and Ferry's own
//! API.

mod compat;
mod delivery;
mod fifo;
mod interop;
mod json;
mod move_tasks;
mod query;
mod schema;
mod settings;
mod support;
