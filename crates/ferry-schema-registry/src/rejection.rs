//! Why a message's payload does not match the schema it names: what enforcement at
//! publish answers a producer. Every format's validator answers in this one form, so a
//! refusal names the field the same way whichever format the subject uses.

use std::fmt;

/// A payload refused by its schema. Nothing is stored when one is returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadRejection {
    /// The path to the first field that fails, as a reader would write it:
    /// `order.items[2].sku`. Empty when the payload as a whole is wrong: truncated, not
    /// in the schema's encoding, trailing bytes, no schema named, an unknown schema id.
    pub field: String,
    /// What is wrong, for people: `expected a long, found the end of the payload`.
    pub reason: String,
}

impl PayloadRejection {
    /// The payload as a whole is wrong.
    pub fn whole(reason: impl Into<String>) -> Self {
        Self {
            field: String::new(),
            reason: reason.into(),
        }
    }

    /// The field at `field` is wrong.
    pub fn at(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for PayloadRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "payload: {}", self.reason)
        } else {
            write!(f, "field `{}`: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for PayloadRejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_names_its_field_or_the_whole_payload() {
        assert_eq!(
            PayloadRejection::at("order.items[2].sku", "expected a string").to_string(),
            "field `order.items[2].sku`: expected a string"
        );
        assert_eq!(
            PayloadRejection::whole("truncated after 3 bytes").to_string(),
            "payload: truncated after 3 bytes"
        );
    }
}
