//! Pub/Sub resource names and the broker names they stand for.
//!
//! `projects/P/topics/T` is the broker's topic `P.T`, `projects/P/subscriptions/S` its
//! subscription `P.S`, `projects/P/snapshots/N` its snapshot `P.N` (and `projects/P/schemas/S` the registry's
//! subject `pubsub:P.S`, see `schemas`): each project keeps a namespace of its own, as in Pub/Sub, and the
//! CLI, the console and the other front ends see the same topics under those names. A
//! project id never holds a dot (Google's are lowercase letters, digits and hyphens), so
//! the first dot splits a broker name back into project and id.
//!
//! Pub/Sub ids may also hold `~`, `+` and `%`, which broker names do not: such an id is
//! refused with a message saying so, never altered.

use ferry_broker::Name;
use tonic::Status;

/// The collections of a project that map onto broker names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    Topics,
    Subscriptions,
    Snapshots,
    Schemas,
}

impl Collection {
    fn segment(self) -> &'static str {
        match self {
            Collection::Topics => "topics",
            Collection::Subscriptions => "subscriptions",
            Collection::Snapshots => "snapshots",
            Collection::Schemas => "schemas",
        }
    }
}

/// The broker's name for `projects/P/<collection>/ID`.
pub fn to_broker(resource: &str, collection: Collection) -> Result<Name, Status> {
    let invalid = |why: &str| {
        Status::invalid_argument(format!(
            "Invalid [{}] name: (name={resource}): {why}",
            collection.segment()
        ))
    };
    let mut parts = resource.splitn(4, '/');
    let (Some("projects"), Some(project), Some(segment), Some(id)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(&format!(
            "expected projects/{{project}}/{}/{{id}}",
            collection.segment()
        )));
    };
    if segment != collection.segment() {
        return Err(invalid(&format!(
            "expected projects/{{project}}/{}/{{id}}",
            collection.segment()
        )));
    }
    check_project(project).map_err(|why| invalid(&why))?;
    check_id(id).map_err(|why| invalid(&why))?;
    Name::new(format!("{project}.{id}")).map_err(|e| invalid(&e.to_string()))
}

/// The project of `projects/P`, checked.
pub fn project(resource: &str) -> Result<&str, Status> {
    let project = resource.strip_prefix("projects/").ok_or_else(|| {
        Status::invalid_argument(format!("Invalid [projects] name: (name={resource})"))
    })?;
    check_project(project).map_err(|why| {
        Status::invalid_argument(format!("Invalid [projects] name: (name={resource}): {why}"))
    })?;
    Ok(project)
}

/// `projects/P/<collection>/ID` for the broker's `P.ID`; `None` for a broker name with no
/// project part (made by another front end), which Pub/Sub cannot name.
pub fn to_resource(broker: &str, collection: Collection) -> Option<String> {
    let (project, id) = broker.split_once('.')?;
    (check_project(project).is_ok() && check_id(id).is_ok())
        .then(|| format!("projects/{project}/{}/{id}", collection.segment()))
}

/// The prefix of every broker name in `project`.
pub fn prefix(project: &str) -> String {
    format!("{project}.")
}

fn check_project(project: &str) -> Result<(), String> {
    if project.is_empty() {
        return Err("the project is empty".into());
    }
    if let Some(c) = project
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "project ids here hold letters, digits, '-' and '_' only, not {c:?}"
        ));
    }
    Ok(())
}

/// Pub/Sub's rule for topic and subscription ids, then the broker's narrower alphabet.
fn check_id(id: &str) -> Result<(), String> {
    if !(3..=255).contains(&id.len()) {
        return Err(format!("an id is 3 to 255 characters (got {})", id.len()));
    }
    if !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err("an id starts with a letter".into());
    }
    if id.starts_with("goog") {
        return Err("an id may not start with \"goog\"".into());
    }
    if let Some(c) = id.chars().find(|c| matches!(c, '~' | '+' | '%')) {
        return Err(format!(
            "{c:?} is valid in Pub/Sub ids but not in this server's names (letters, digits, \
             '.', '_' and '-')"
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!("{c:?} is not valid in an id"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_name_maps_to_project_dot_id_and_back() {
        let name = to_broker("projects/demo-1/topics/orders.v2", Collection::Topics).unwrap();
        assert_eq!(name.as_str(), "demo-1.orders.v2");
        assert_eq!(
            to_resource(name.as_str(), Collection::Topics).as_deref(),
            Some("projects/demo-1/topics/orders.v2")
        );
        let sub = to_broker("projects/p/subscriptions/work", Collection::Subscriptions).unwrap();
        assert_eq!(sub.as_str(), "p.work");
    }

    #[test]
    fn malformed_and_unrepresentable_names_are_refused() {
        for bad in [
            "orders",
            "projects/p/topics",
            "projects//topics/orders",
            "projects/p/subscriptions/orders",
            "projects/p.q/topics/orders",
            "projects/p/topics/or",
            "projects/p/topics/9orders",
            "projects/p/topics/google-orders",
            "projects/p/topics/or~ders",
            "projects/p/topics/or/ders",
        ] {
            let err = to_broker(bad, Collection::Topics).unwrap_err();
            assert_eq!(err.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn broker_names_without_a_project_have_no_resource() {
        assert_eq!(to_resource("orders", Collection::Topics), None);
        assert_eq!(project("projects/p").unwrap(), "p");
        assert!(project("p").is_err());
    }
}
