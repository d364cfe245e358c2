//! The SNS front end over a real socket, in the query protocol boto3 speaks: topic CRUD,
//! subscriptions of SQS queues, Publish seen by SQS ReceiveMessage (SNS's envelope, raw
//! delivery), filter policies on attributes and on the body, FIFO topics into FIFO
//! queues (order and deduplication), PublishBatch, RedrivePolicy, refused protocols,
//! unknown topics, and the records surviving a restart; fan-out by reference (one copy of
//! the payload whatever the number of subscribed queues).

mod by_reference;
mod delivery;
mod support;
mod topics;
