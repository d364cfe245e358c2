//! The saga orchestrator.
