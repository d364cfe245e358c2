//! Table names the SQL patterns (outbox, inbox, saga store) splice into statements.
//!
//! A table name cannot be bound as a parameter, so it goes into the SQL text; one rule for
//! every pattern keeps that safe and predictable: each part `[a-z_][a-z0-9_]*`. Lowercase
//! only, because PostgreSQL folds unquoted identifiers to lowercase — a name with capitals
//! would name one table in the SQL and another in anything keyed by the text (the outbox's
//! NOTIFY channel, the install advisory lock).

use crate::error::{Error, Result};

/// PostgreSQL's identifier limit, in bytes.
pub(crate) const MAX_IDENTIFIER: usize = 63;

/// Checks `name` as the table of `pattern` (for the error message): `table`, or
/// `schema.table` where `allow_schema`, each part at most `max_part` bytes.
pub(crate) fn check_table(
    pattern: &str,
    name: &str,
    allow_schema: bool,
    max_part: usize,
) -> Result<()> {
    let bad = |problem: String| Err(Error::invalid(format!("{pattern} table `{name}`"), problem));
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 || (parts.len() == 2 && !allow_schema) {
        return bad(if allow_schema {
            "expected `table` or `schema.table`".to_owned()
        } else {
            "expected a table name without a schema".to_owned()
        });
    }
    for part in parts {
        let ok = !part.is_empty()
            && part.len() <= max_part
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !part.as_bytes()[0].is_ascii_digit();
        if !ok {
            return bad(format!(
                "use 1 to {max_part} lowercase letters, digits and `_`, not starting with a \
                 digit"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_lowercase_identifiers_are_table_names() {
        for good in ["processed_messages", "_x", "orders_outbox2"] {
            assert!(
                check_table("inbox", good, false, MAX_IDENTIFIER).is_ok(),
                "{good}"
            );
        }
        assert!(check_table("saga", "billing.saga_2", true, MAX_IDENTIFIER).is_ok());
        for bad in [
            "",
            "1abc",
            "Orders",
            "a-b",
            "x\"y",
            "orders; drop table users",
            "a.b.c",
            "a.",
            &"x".repeat(64),
        ] {
            assert!(
                matches!(
                    check_table("inbox", bad, true, MAX_IDENTIFIER),
                    Err(Error::Invalid { .. })
                ),
                "{bad:?}"
            );
        }
        assert!(check_table("inbox", "main.inbox", false, MAX_IDENTIFIER).is_err());
        assert!(check_table("outbox", &"a".repeat(49), false, 48).is_err());
    }
}
