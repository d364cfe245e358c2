//! Durations (`7d`, `30s`, `500ms`) and byte sizes (`256KiB`, `1MB`) as a topology file
//! writes them: a number and a unit, always both, so that `retention: 7` (seconds? days?)
//! is an error at its line rather than a guess.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer};
use serde::ser::{Serialize, Serializer};

/// A unit-carrying value is written as it is read (`7d`, `256KiB`): its `Display` out,
/// its `parse` in, so that an error names the text at its line.
macro_rules! serde_as_text {
    ($type:ty) => {
        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                Self::parse(text.trim()).map_err(de::Error::custom)
            }
        }
    };
}

/// A length of time, kept in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration {
    millis: u64,
}

impl Duration {
    pub const fn from_millis(millis: u64) -> Self {
        Self { millis }
    }

    pub const fn from_secs(secs: u64) -> Self {
        Self::from_millis(secs * 1000)
    }

    pub const fn from_days(days: u64) -> Self {
        Self::from_secs(days * 86_400)
    }

    pub const fn as_millis(self) -> u64 {
        self.millis
    }

    /// Parses `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
    pub fn parse(text: &str) -> Result<Self, String> {
        const UNITS: [(&str, u64); 5] = [
            ("ms", 1),
            ("s", 1000),
            ("m", 60_000),
            ("h", 3_600_000),
            ("d", 86_400_000),
        ];
        let (number, unit) = split_number(text);
        let scale = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| {
                format!("`{text}` is not a duration: write a number and a unit (ms, s, m, h, d), e.g. 30s or 7d")
            })?;
        let number: u64 = number.parse().map_err(|_| {
            format!("`{text}` is not a duration: the number must be a whole number")
        })?;
        number
            .checked_mul(scale)
            .map(Self::from_millis)
            .ok_or_else(|| format!("`{text}` is too long a duration"))
    }
}

impl fmt::Display for Duration {
    /// The largest unit that divides the value exactly: `7d`, `90s`, `1500ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1000),
        ];
        write_in_largest_unit(f, self.millis, &UNITS, "ms")
    }
}

serde_as_text!(Duration);

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize {
    bytes: u64,
}

impl ByteSize {
    pub const fn from_bytes(bytes: u64) -> Self {
        Self { bytes }
    }

    pub const fn as_bytes(self) -> u64 {
        self.bytes
    }

    /// Parses `<number><unit>` with unit `B`, `KB`, `MB`, `GB` (powers of 1000) or `KiB`,
    /// `MiB`, `GiB` (powers of 1024): brokers document their limits in both.
    pub fn parse(text: &str) -> Result<Self, String> {
        const UNITS: [(&str, u64); 7] = [
            ("B", 1),
            ("KB", 1000),
            ("MB", 1_000_000),
            ("GB", 1_000_000_000),
            ("KiB", 1 << 10),
            ("MiB", 1 << 20),
            ("GiB", 1 << 30),
        ];
        let (number, unit) = split_number(text);
        let scale = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| {
                format!("`{text}` is not a size: write a number and a unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 256KiB")
            })?;
        let number: u64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size: the number must be a whole number"))?;
        number
            .checked_mul(scale)
            .map(Self::from_bytes)
            .ok_or_else(|| format!("`{text}` is too large a size"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 6] = [
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
            ("GB", 1_000_000_000),
            ("MB", 1_000_000),
            ("KB", 1000),
        ];
        write_in_largest_unit(f, self.bytes, &UNITS, "B")
    }
}

serde_as_text!(ByteSize);

/// Writes `value` in the first of `units` (largest first) that divides it exactly, else
/// in `smallest`: `7d` rather than `604800s`.
fn write_in_largest_unit(
    f: &mut fmt::Formatter<'_>,
    value: u64,
    units: &[(&str, u64)],
    smallest: &str,
) -> fmt::Result {
    for (unit, scale) in units {
        if value >= *scale && value.is_multiple_of(*scale) {
            return write!(f, "{}{unit}", value / scale);
        }
    }
    write!(f, "{value}{smallest}")
}

/// `"30s"` → `("30", "s")`: the leading digits and the rest.
fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    text.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_print_in_the_largest_exact_one() {
        assert_eq!(Duration::parse("7d").unwrap(), Duration::from_days(7));
        assert_eq!(Duration::parse("90s").unwrap().to_string(), "90s");
        assert_eq!(Duration::parse("120s").unwrap().to_string(), "2m");
        assert_eq!(Duration::parse("1500ms").unwrap().to_string(), "1500ms");
        assert!(Duration::parse("7").unwrap_err().contains("unit"));
        assert!(Duration::parse("d").unwrap_err().contains("whole number"));
        assert!(Duration::parse("1.5h").is_err());
    }

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(ByteSize::parse("256KiB").unwrap().as_bytes(), 262_144);
        assert_eq!(ByteSize::parse("1MB").unwrap().as_bytes(), 1_000_000);
        assert_eq!(ByteSize::parse("1MiB").unwrap().to_string(), "1MiB");
        assert!(ByteSize::parse("1 MB").is_err());
        assert!(ByteSize::parse("256").unwrap_err().contains("unit"));
    }
}
