//! Engines outside this process (NATS, RabbitMQ, Redis, PostgreSQL): find them, or skip
//! loudly — and under `CI=true`, where the machine must have them, fail instead. The rule
//! is the one every test suite of the workspace follows, so it lives in `ferry-testkit`.

pub use ferry_testkit::engine::url_or_skip;
