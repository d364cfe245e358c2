//! How queue and topic specs are stored in the broker's metadata store: UTF-8 text, a first
//! line naming the form and its version (`ferry-queue-spec 1`, `ferry-topic-spec 1`), then
//! one `setting=value` line per field.
//!
//! Text, because specs are small, written once and worth reading with any tool; hand-written
//! rather than serde, because the domain types carry no serde derives and a spec is a dozen
//! fields. Durations are `seconds.nanoseconds`; floats use Rust's shortest round-trip form.
//! Decoding is strict (unknown, repeated or missing settings are errors) and each spec's
//! decoder validates the result, so a stored spec is never silently reinterpreted. This
//! module is the form both share; [`queue`] and [`topic`] name the settings.

use std::collections::HashMap;
use std::time::Duration;

use ferry_storage::Durability;

pub(crate) mod queue;
pub(crate) mod topic;

/// A spec's stored text being written: the first line, then `setting=value` lines.
pub(super) struct Writer(String);

impl Writer {
    pub fn new(first_line: &str) -> Writer {
        Writer(first_line.to_owned())
    }

    pub fn setting(&mut self, key: &str, value: &str) {
        self.0.push('\n');
        self.0.push_str(key);
        self.0.push('=');
        self.0.push_str(value);
    }

    pub fn finish(mut self) -> String {
        self.0.push('\n');
        self.0
    }
}

/// A duration as `seconds.nanoseconds`.
pub(super) fn duration(d: Duration) -> String {
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

pub(super) fn durability(durability: Durability) -> String {
    match durability {
        Durability::Fsync => "fsync".to_owned(),
        Durability::None => "none".to_owned(),
        Durability::Interval(i) => format!("interval:{}", duration(i)),
    }
}

/// The settings of a stored spec, taken one by one as the decoder reads them; what is left
/// at the end is unknown ([`Fields::finish`]).
pub(super) struct Fields<'a>(HashMap<&'a str, &'a str>);

impl<'a> Fields<'a> {
    /// The settings of `bytes`, whose first line must be `first_line`.
    pub fn read(bytes: &'a [u8], first_line: &str) -> Result<Fields<'a>, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_owned())?;
        let mut lines = text.lines();
        if lines.next() != Some(first_line) {
            return Err(format!("the first line is not {first_line:?}"));
        }
        let mut fields = HashMap::new();
        for line in lines {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| format!("line {line:?} has no '='"))?;
            if fields.insert(key, value).is_some() {
                return Err(format!("setting {key} appears twice"));
            }
        }
        Ok(Fields(fields))
    }

    pub fn take(&mut self, key: &str) -> Result<&'a str, String> {
        self.0
            .remove(key)
            .ok_or_else(|| format!("setting {key} is missing"))
    }

    /// A setting that specs stored before it existed do not have.
    pub fn take_if_present(&mut self, key: &str) -> Option<&'a str> {
        self.0.remove(key)
    }

    pub fn parse<T: std::str::FromStr>(&mut self, key: &str) -> Result<T, String> {
        let value = self.take(key)?;
        value
            .parse()
            .map_err(|_| format!("setting {key} has the unreadable value {value:?}"))
    }

    /// A number or `none`.
    pub fn optional(&mut self, key: &str) -> Result<Option<u64>, String> {
        match self.take(key)? {
            "none" => Ok(None),
            value => value
                .parse()
                .map(Some)
                .map_err(|_| format!("setting {key} has the unreadable value {value:?}")),
        }
    }

    pub fn duration(&mut self, key: &str) -> Result<Duration, String> {
        parse_duration(self.take(key)?)
    }

    /// A duration or `none`.
    pub fn optional_duration(&mut self, key: &str) -> Result<Option<Duration>, String> {
        match self.take(key)? {
            "none" => Ok(None),
            other => parse_duration(other).map(Some),
        }
    }

    pub fn durability(&mut self, key: &str) -> Result<Durability, String> {
        match self.take(key)? {
            "fsync" => Ok(Durability::Fsync),
            "none" => Ok(Durability::None),
            other => match other.strip_prefix("interval:") {
                Some(i) => Ok(Durability::Interval(parse_duration(i)?)),
                None => Err(format!("{key} {other:?} is unknown")),
            },
        }
    }

    /// Refuses settings nobody took.
    pub fn finish(self) -> Result<(), String> {
        match self.0.keys().next() {
            Some(key) => Err(format!("setting {key} is unknown")),
            None => Ok(()),
        }
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration (seconds.nanoseconds)");
    let (secs, nanos) = text.split_once('.').ok_or_else(bad)?;
    let nanos: u32 = nanos.parse().map_err(|_| bad())?;
    if nanos >= 1_000_000_000 || text.len() - secs.len() != 10 {
        return Err(bad());
    }
    Ok(Duration::new(secs.parse().map_err(|_| bad())?, nanos))
}
