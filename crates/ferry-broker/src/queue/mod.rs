//! What one queue is made of, apart from the engine that runs it: the pure delivery state
//! machine ([`state`]) and the structures it decides with — key-shared ordering
//! ([`key_order`]), priority picking ([`priority`]), due-time timers ([`timers`]), runs of
//! seqs ([`seq_ranges`]) — plus the dedup windows ([`dedup`] per message, [`batch_window`]
//! per publish call) and the journal of state events ([`journal`]) that make a queue's
//! decisions durable. Topics, subscriptions and consumer groups live beside it (`topic/`,
//! `subscription.rs`, `group/`).

pub(crate) mod batch_window;
pub(crate) mod dedup;
pub(crate) mod journal;
mod journal_runs;
pub(crate) mod key_order;
pub(crate) mod priority;
pub(crate) mod seq_ranges;
pub(crate) mod state;
pub(crate) mod timers;
