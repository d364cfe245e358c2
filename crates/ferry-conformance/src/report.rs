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

    /// Panics unless the skipped checks are exactly `pinned`, in the order they ran, each
    /// with the reason the run gave (the capability the transport lacks, or why the harness
    /// cannot restart it): a new skip, a changed reason or a skip that vanished fails.
    pub fn assert_skipped_exactly(&self, pinned: &[(&str, &str)]) {
        let skipped = self.skipped();
        if skipped.as_slice() != pinned {
            self.print();
            panic!(
                "the checks skipped on {} are not those pinned\n  skipped: {skipped:#?}\n  pinned: {pinned:#?}",
                self.target
            );
        }
    }

    /// Panics unless the failed checks are exactly those `pinned` (each with why it fails
    /// there, for the reader): a failure a transport is known to have is written down, never
    /// hidden — a new failure fails, and so does a pinned one that passes (its pin must go).
    pub fn assert_failed_exactly(&self, pinned: &[(&str, &str)]) {
        self.assert_failed_exactly_beside(pinned, &[]);
    }

    /// As [`Report::assert_failed_exactly`], but the checks in `unjudged` may pass or fail:
    /// for an engine nobody here wrote whose own defect makes a check's outcome a matter of
    /// timing (each with that defect, for the reader). The check still runs, and is judged on
    /// every other target.
    pub fn assert_failed_exactly_beside(&self, pinned: &[(&str, &str)], unjudged: &[(&str, &str)]) {
        let unjudged: Vec<&str> = unjudged.iter().map(|(name, _)| *name).collect();
        let failed: Vec<&str> = self
            .failures()
            .iter()
            .map(|(name, _)| *name)
            .filter(|name| !unjudged.contains(name))
            .collect();
        let known: Vec<&str> = pinned.iter().map(|(name, _)| *name).collect();
        if failed != known {
            self.print();
            panic!(
                "the checks failing on {} are not those pinned\n  failing: {:#?}\n  pinned: {known:#?}",
                self.target,
                self.failures()
            );
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
