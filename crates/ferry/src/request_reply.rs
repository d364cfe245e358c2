//! Request/reply over queues.
