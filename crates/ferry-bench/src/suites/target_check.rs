//! A target of an in-process bench checked against what a run measured, as the targets
//! table prints it and the JSON document records it. A check whose figures were not
//! measured says so instead of passing.

use super::json::Json;

pub struct TargetCheck {
    /// What is measured, e.g. `consume + ack msgs/s`.
    pub figure: String,
    /// `None` when what it needs was not run.
    pub measured: Option<String>,
    pub target: String,
    /// The figure as the target states it: measured / target for an absolute target, the
    /// ratio itself for a relative one.
    pub ratio: Option<f64>,
    pub pass: Option<bool>,
    /// Caveats: a run smaller than the target's, a peak not reset.
    pub note: String,
}

impl TargetCheck {
    pub fn verdict(&self) -> &'static str {
        match self.pass {
            None => "not run",
            Some(true) => "PASS",
            Some(false) => "MISS",
        }
    }

    /// The cells of its row in a targets table: figure, measured, target, ratio, met?, notes.
    pub fn cells(&self) -> Vec<String> {
        vec![
            self.figure.clone(),
            self.measured.clone().unwrap_or_else(|| "-".into()),
            self.target.clone(),
            // Three decimals, so a ratio just under its threshold does not print as equal.
            self.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}")),
            self.verdict().to_string(),
            self.note.clone(),
        ]
    }

    /// Its fields in the JSON document, in the order of the table's columns.
    pub fn json_fields(self) -> Vec<(&'static str, Json)> {
        vec![
            ("figure", self.figure.clone().into()),
            ("verdict", self.verdict().into()),
            ("measured", self.measured.into()),
            ("target", self.target.into()),
            ("ratio", self.ratio.into()),
            ("pass", self.pass.into()),
            ("note", self.note.into()),
        ]
    }
}
