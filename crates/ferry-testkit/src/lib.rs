//! What Ferry's test suites share, so each rule lives in one place:
//!
//! - [`ci`]: a test that cannot run here skips loudly, except under `CI=true`, where the
//!   machine must have everything and a skip is a failure;
//! - [`engine`]: the URL of an engine outside this process (PostgreSQL, Redis, NATS,
//!   RabbitMQ) when it answers, else a skip by the rule above;
//! - [`names`]: names no other run, process or call used, for engines that keep what earlier
//!   runs made;
//! - [`killed_child`]: the crash tests' child processes, SIGKILLed at a chosen moment;
//! - [`small_fs`]: a small tmpfs for disk-full and read-only cases;
//! - [`eventually`]: waiting for a state another task reaches on its own;
//! - `pki` (feature `pki`): a CA and a server certificate made at test time.
//!
//! Dev-only: suites take it as a dev-dependency and nothing ships with it.

pub mod ci;
pub mod engine;
pub mod killed_child;
pub mod names;
#[cfg(feature = "pki")]
pub mod pki;
pub mod small_fs;
pub mod wait;

pub use ci::skip_or_fail;
pub use engine::url_or_skip;
pub use names::{fresh, fresh_ident};
#[cfg(feature = "pki")]
pub use pki::TestPki;
pub use small_fs::SmallFs;
pub use wait::eventually;
