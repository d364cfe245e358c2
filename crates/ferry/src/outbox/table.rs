//! [`TableName`]: the outbox table's name, checked before it is spliced into SQL.

use std::fmt;

use crate::error::Result;

/// A validated outbox table name. Statements cannot bind a table name as a parameter, so
/// the name is spliced into SQL text; only plain lowercase identifiers pass, which also
/// keeps PostgreSQL's case folding and its NOTIFY channel (the same name) in agreement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableName(String);

impl TableName {
    /// The table used unless the application chooses another.
    pub const DEFAULT: &'static str = "ferry_outbox";

    /// `name` if it is 1–48 of `[a-z0-9_]`, not starting with a digit. The limit leaves
    /// room for the derived index names within PostgreSQL's 63-byte identifiers.
    pub fn new(name: &str) -> Result<TableName> {
        crate::sql_name::check_table("outbox", name, false, 48)?;
        Ok(TableName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for TableName {
    fn default() -> Self {
        TableName(TableName::DEFAULT.to_owned())
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn only_plain_lowercase_identifiers_are_table_names() {
        for good in ["ferry_outbox", "orders_outbox2", "_x"] {
            assert_eq!(TableName::new(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "1abc",
            "Orders",
            "orders; drop table users",
            "a-b",
            "x\"y",
            &"a".repeat(49),
        ] {
            assert!(
                matches!(TableName::new(bad), Err(Error::Invalid { .. })),
                "{bad:?}"
            );
        }
    }
}
