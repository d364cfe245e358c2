//! What a run found: per check, passed, skipped (and why) or failed (and how).

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Skipped(String),
    Failed(String),
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub target: String,
    pub results: Vec<(&'static str, Outcome)>,
    /// How long each check took, in the order of `results`.
    pub timings: Vec<std::time::Duration>,
}

impl Report {
    pub fn failures(&self) -> Vec<&(&'static str, Outcome)> {
        self.results
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
            .collect()
    }

    pub fn skipped(&self) -> Vec<(&'static str, &str)> {
        self.results
            .iter()
            .filter_map(|(name, o)| match o {
                Outcome::Skipped(why) => Some((*name, why.as_str())),
                _ => None,
            })
            .collect()
    }

    pub fn passed(&self) -> usize {
        self.results
            .iter()
            .filter(|(_, o)| *o == Outcome::Passed)
            .count()
    }

    /// One line per check, to stderr (shown by `cargo test -- --nocapture`, and on failure).
    pub fn print(&self) {
        eprintln!("conformance on {}:", self.target);
        for (i, (name, outcome)) in self.results.iter().enumerate() {
            let took = self.timings.get(i).copied().unwrap_or_default();
            match outcome {
                Outcome::Passed => eprintln!("  pass  {name} ({:.1} s)", took.as_secs_f64()),
                Outcome::Skipped(why) => eprintln!("  SKIP  {name}: {why}"),
                Outcome::Failed(how) => eprintln!("  FAIL  {name}: {how}"),
            }
        }
    }

    /// Panics naming every failed check.
    pub fn assert_passed(&self) {
        let failures = self.failures();
        if !failures.is_empty() {
            self.print();
            panic!(
                "{} of {} conformance checks failed on {}: {:?}",
                failures.len(),
                self.results.len(),
                self.target,
                failures
            );
        }
    }
}
