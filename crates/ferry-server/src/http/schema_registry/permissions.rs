//! What a call to the schema registry needs of its caller, read from its method and path:
//! `schema_read` or `schema_write` on the subject it names, on every subject for the
//! registry-wide level and mode, or a valid token only for what names no subject. A call
//! that lists subjects is answered with the readable ones only ([`Need::ReadableList`]).
//!
//! Confluent's own registry does this with RBAC role bindings on subjects; Ferry's tokens
//! already carry action-on-pattern permissions, so subjects get two actions of their own
//! and the same patterns (`schema_write:orders.#`).

use axum::http::Method;
use ferry_access::Action;
use percent_encoding::percent_decode_str;

/// What the caller must hold for one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Need {
    /// A valid token: the root, the schema types, reading the registry-wide level or mode.
    Token,
    /// `action` on the subject.
    Subject(Action, String),
    /// `action` on every subject (a `#` pattern): setting the registry-wide level or mode,
    /// and any path this table does not know (failing closed).
    EverySubject(Action),
    /// Reading a schema by id: `schema_read` on some subject that holds it.
    SchemaId(u32),
    /// A list the registry answers in full and the caller sees cut to the subjects it
    /// may read.
    ReadableList(ListShape),
}

/// How a listed item names its subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListShape {
    /// `["orders-value", ..]`.
    Names,
    /// `[{"subject": "orders-value", "version": 1}, ..]`.
    SubjectVersions,
}

/// The need of `method` on `path`, the path below the registry's prefix.
pub(super) fn need(method: &Method, path: &str) -> Need {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let read_or_write = |subject: &str, writes: bool| {
        let action = if writes {
            Action::SchemaWrite
        } else {
            Action::SchemaRead
        };
        Need::Subject(action, subject.to_owned())
    };
    let is_get = *method == Method::GET;
    match segments.as_slice() {
        [] | ["schemas", "types"] => Need::Token,
        ["subjects"] => Need::ReadableList(ListShape::Names),
        // POST /subjects/{s} looks a schema up; POST …/versions registers one.
        ["subjects", subject] => read_or_write(subject, *method == Method::DELETE),
        ["subjects", subject, "versions"] => read_or_write(subject, *method == Method::POST),
        ["subjects", subject, ..] => read_or_write(subject, !is_get),
        ["schemas", "ids", id, rest @ ..] => match (id.parse::<u32>(), rest) {
            // Not an id: the registry answers its own 404.
            (Err(_), _) => Need::Token,
            (Ok(id), [] | ["schema"]) => Need::SchemaId(id),
            (Ok(_), ["versions"]) => Need::ReadableList(ListShape::SubjectVersions),
            (Ok(_), ["subjects"]) => Need::ReadableList(ListShape::Names),
            (Ok(_), _) => Need::EverySubject(Action::SchemaRead),
        },
        // A compatibility check changes nothing.
        ["compatibility", "subjects", subject, ..] => read_or_write(subject, false),
        ["config" | "mode"] if is_get => Need::Token,
        ["config" | "mode"] => Need::EverySubject(Action::SchemaWrite),
        ["config" | "mode", subject] => read_or_write(subject, !is_get),
        _ => Need::EverySubject(Action::SchemaRead),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(action: Action, name: &str) -> Need {
        Need::Subject(action, name.to_owned())
    }

    #[test]
    fn reads_and_writes_of_one_subject_need_that_subject() {
        let read = |p| need(&Method::GET, p);
        assert_eq!(
            read("/subjects/orders-value/versions"),
            subject(Action::SchemaRead, "orders-value")
        );
        assert_eq!(
            read("/subjects/orders-value/versions/latest/schema"),
            subject(Action::SchemaRead, "orders-value")
        );
        assert_eq!(
            need(&Method::POST, "/subjects/orders-value"),
            subject(Action::SchemaRead, "orders-value")
        );
        assert_eq!(
            need(&Method::POST, "/subjects/orders-value/versions"),
            subject(Action::SchemaWrite, "orders-value")
        );
        assert_eq!(
            need(&Method::DELETE, "/subjects/orders-value/versions/2"),
            subject(Action::SchemaWrite, "orders-value")
        );
        assert_eq!(
            need(&Method::DELETE, "/subjects/orders-value"),
            subject(Action::SchemaWrite, "orders-value")
        );
        assert_eq!(
            need(
                &Method::POST,
                "/compatibility/subjects/orders-value/versions/latest"
            ),
            subject(Action::SchemaRead, "orders-value")
        );
        assert_eq!(
            need(&Method::PUT, "/config/orders-value"),
            subject(Action::SchemaWrite, "orders-value")
        );
        assert_eq!(
            read("/mode/orders-value"),
            subject(Action::SchemaRead, "orders-value")
        );
    }

    #[test]
    fn a_subject_in_the_path_is_percent_decoded() {
        assert_eq!(
            need(&Method::GET, "/subjects/com.acme%2FOrder/versions"),
            subject(Action::SchemaRead, "com.acme/Order")
        );
    }

    #[test]
    fn registry_wide_settings_need_write_on_every_subject_to_change() {
        assert_eq!(need(&Method::GET, "/config"), Need::Token);
        assert_eq!(need(&Method::GET, "/mode"), Need::Token);
        assert_eq!(
            need(&Method::PUT, "/config"),
            Need::EverySubject(Action::SchemaWrite)
        );
        assert_eq!(
            need(&Method::PUT, "/mode"),
            Need::EverySubject(Action::SchemaWrite)
        );
        assert_eq!(
            need(&Method::DELETE, "/config"),
            Need::EverySubject(Action::SchemaWrite)
        );
    }

    #[test]
    fn schemas_by_id_and_lists_are_cut_to_readable_subjects() {
        assert_eq!(need(&Method::GET, "/schemas/ids/7"), Need::SchemaId(7));
        assert_eq!(
            need(&Method::GET, "/schemas/ids/7/schema"),
            Need::SchemaId(7)
        );
        assert_eq!(
            need(&Method::GET, "/schemas/ids/7/versions"),
            Need::ReadableList(ListShape::SubjectVersions)
        );
        assert_eq!(
            need(&Method::GET, "/schemas/ids/7/subjects"),
            Need::ReadableList(ListShape::Names)
        );
        assert_eq!(
            need(&Method::GET, "/subjects"),
            Need::ReadableList(ListShape::Names)
        );
        assert_eq!(need(&Method::GET, "/schemas/ids/x"), Need::Token);
    }

    #[test]
    fn what_names_no_subject_needs_a_token_and_unknown_paths_fail_closed() {
        assert_eq!(need(&Method::GET, "/"), Need::Token);
        assert_eq!(need(&Method::GET, "/schemas/types"), Need::Token);
        assert_eq!(
            need(&Method::GET, "/contexts"),
            Need::EverySubject(Action::SchemaRead)
        );
    }
}
