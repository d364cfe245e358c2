//! A saga type: ordered steps, each an action with an optional compensation, both commands
//! sent over a queue.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::spec::validate_name;

/// One step: its action is a command sent to `queue`; its compensation, when it has one, a
/// command sent to the compensation queue after a later step fails or the deadline passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub name: String,
    /// The queue the action command is sent to.
    pub queue: String,
    /// The queue the compensation command is sent to; `None`: nothing to undo (e.g. a final
    /// confirmation, or a read).
    pub compensation: Option<String>,
}

impl Step {
    /// A step `name` whose action is sent to `queue`.
    pub fn new(name: impl Into<String>, queue: impl Into<String>) -> Step {
        Step {
            name: name.into(),
            queue: queue.into(),
            compensation: None,
        }
    }

    /// Undoes this step by a command sent to `queue` (often the action's own queue; the
    /// command's kind tells the participant which it is).
    pub fn compensate_with(mut self, queue: impl Into<String>) -> Step {
        self.compensation = Some(queue.into());
        self
    }
}

/// A saga type: a name, its steps in order and a deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SagaDefinition {
    pub name: String,
    pub steps: Vec<Step>,
    /// How long a saga may run before its completed steps are compensated.
    pub deadline: Duration,
}

impl SagaDefinition {
    /// A saga type `name` with no steps yet and a 30-minute deadline.
    pub fn new(name: impl Into<String>) -> SagaDefinition {
        SagaDefinition {
            name: name.into(),
            steps: Vec::new(),
            deadline: Duration::from_secs(30 * 60),
        }
    }

    /// Appends a step; steps run in the order they are added.
    pub fn step(mut self, step: Step) -> SagaDefinition {
        self.steps.push(step);
        self
    }

    pub fn deadline(mut self, deadline: Duration) -> SagaDefinition {
        self.deadline = deadline;
        self
    }

    /// Refuses a definition the orchestrator could not run: no steps, an unnamed or
    /// duplicated step (replies and results are keyed by step), a bad queue name, a zero
    /// deadline.
    pub fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::invalid("saga name", "must not be empty"));
        }
        if self.steps.is_empty() {
            return Err(Error::invalid(
                format!("saga `{}`", self.name),
                "has no steps",
            ));
        }
        if self.deadline.is_zero() {
            return Err(Error::invalid(
                format!("saga `{}` deadline", self.name),
                "must be longer than zero",
            ));
        }
        for (i, step) in self.steps.iter().enumerate() {
            if step.name.is_empty() {
                return Err(Error::invalid(
                    format!("saga `{}` step {i}", self.name),
                    "has no name",
                ));
            }
            if self.steps[..i].iter().any(|s| s.name == step.name) {
                return Err(Error::invalid(
                    format!("saga `{}` step `{}`", self.name, step.name),
                    "appears twice; step names must be unique",
                ));
            }
            validate_name(&step.queue)?;
            if let Some(queue) = &step.compensation {
                validate_name(queue)?;
            }
        }
        Ok(())
    }

    /// The highest step at or below `from` that has a compensation: the next one to undo.
    pub(crate) fn compensable_at_or_below(&self, from: usize) -> Option<usize> {
        (0..=from.min(self.steps.len().checked_sub(1)?))
            .rev()
            .find(|&i| self.steps[i].compensation.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_the_orchestrator_could_not_run_are_refused() {
        assert!(SagaDefinition::new("order").validate().is_err());
        let twice = SagaDefinition::new("order")
            .step(Step::new("a", "q"))
            .step(Step::new("a", "q"));
        assert!(twice.validate().unwrap_err().to_string().contains("twice"));
        let ok = SagaDefinition::new("order").step(Step::new("a", "q").compensate_with("q"));
        ok.validate().unwrap();
        assert!(ok.deadline(Duration::ZERO).validate().is_err());
    }

    #[test]
    fn compensation_skips_steps_with_nothing_to_undo() {
        let saga = SagaDefinition::new("s")
            .step(Step::new("a", "q").compensate_with("q"))
            .step(Step::new("b", "q"))
            .step(Step::new("c", "q").compensate_with("q"));
        assert_eq!(saga.compensable_at_or_below(2), Some(2));
        assert_eq!(saga.compensable_at_or_below(1), Some(0));
        assert_eq!(saga.compensable_at_or_below(9), Some(2));
        let none = SagaDefinition::new("s").step(Step::new("b", "q"));
        assert_eq!(none.compensable_at_or_below(0), None);
    }
}
