//! [`SqlDialect`]: what differs between the databases the SQL patterns (outbox, inbox) run
//! on, so each pattern is written once over sqlx and each database adds only its dialect.
//!
//! Statements are written with PostgreSQL's numbered placeholders (`$1`); a dialect that
//! spells them otherwise rewrites the text in [`SqlDialect::statement`].

use std::borrow::Cow;

/// A database the SQL patterns support: the sqlx driver itself (`sqlx::Postgres`,
/// `sqlx::Sqlite`), with the few spellings that differ. Sealed: the patterns' guarantees
/// (claims under a lock, records in the caller's transaction) are argued per database.
pub trait SqlDialect: sqlx::Database + sealed::Sealed {
    /// The database's name in errors (`"postgres"`, `"sqlite"`).
    const ENGINE: &'static str;

    /// A statement that serialises schema changes across processes, binding one text key,
    /// where the database's own `IF NOT EXISTS` alone is not race-free.
    const INSTALL_LOCK: Option<&'static str>;

    /// `sql`, written with `$n` placeholders, in this database's spelling.
    fn statement(sql: &str) -> Cow<'_, str>;

    /// How many rows a statement inserted, changed or deleted.
    fn rows_affected(done: &Self::QueryResult) -> u64;
}

pub(crate) mod sealed {
    pub trait Sealed {}
    #[cfg(feature = "postgres")]
    impl Sealed for sqlx::Postgres {}
    #[cfg(feature = "sqlite")]
    impl Sealed for sqlx::Sqlite {}
}

#[cfg(feature = "postgres")]
impl SqlDialect for sqlx::Postgres {
    const ENGINE: &'static str = "postgres";
    const INSTALL_LOCK: Option<&'static str> = Some("SELECT pg_advisory_xact_lock(hashtext($1))");

    fn statement(sql: &str) -> Cow<'_, str> {
        Cow::Borrowed(sql)
    }

    fn rows_affected(done: &sqlx::postgres::PgQueryResult) -> u64 {
        done.rows_affected()
    }
}

#[cfg(feature = "sqlite")]
impl SqlDialect for sqlx::Sqlite {
    const ENGINE: &'static str = "sqlite";
    // One writer at a time: concurrent installs queue on the database lock.
    const INSTALL_LOCK: Option<&'static str> = None;

    fn statement(sql: &str) -> Cow<'_, str> {
        Cow::Owned(numbered_question_marks(sql))
    }

    fn rows_affected(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        done.rows_affected()
    }
}

/// `$1` → `?1`: SQLite's own spelling of a numbered parameter. The patterns' statements
/// hold no `$` outside placeholders (table names are plain identifiers).
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
fn numbered_question_marks(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_placeholders_become_sqlites_question_marks() {
        assert_eq!(
            numbered_question_marks("VALUES ($1, $2, $11) -- $x"),
            "VALUES (?1, ?2, ?11) -- $x"
        );
    }
}
