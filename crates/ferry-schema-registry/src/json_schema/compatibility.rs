//! Whether every document one JSON Schema accepts is accepted by another: the question
//! each compatibility level asks in one direction or both, answered by Confluent's JSON
//! Schema rules (its `SchemaDiff` change types). Hand-written: no crate compares JSON
//! Schemas, and Confluent's rules are a list of structural changes, not set inclusion.
//!
//! Each rule looks at the writer (the schema data was written with) and the reader (the
//! schema that must accept it):
//!
//! - `type` narrowed or changed (`integer` is within `number`; widening is fine);
//! - `enum` (and `const`) added, or values removed;
//! - a lower bound (`minimum`, `exclusiveMinimum`, `minLength`, `minItems`,
//!   `minProperties`) added or raised, an upper bound added or lowered; `multipleOf`,
//!   `pattern`, `format` and `uniqueItems` added or changed;
//! - properties under the *content model*: a property the reader adds is refused when
//!   the writer's model is open (`additionalProperties` absent or `true`: old data may
//!   hold anything under that name), unless its schema is empty; a property the reader
//!   drops is refused when the reader's model is closed (`additionalProperties: false`);
//!   a partially open model (`additionalProperties` a schema) is compared with the
//!   property's schema;
//! - `required` properties added (unless the reader's property has a `default`);
//! - `additionalProperties` closed or narrowed;
//! - `items` compared recursively, item by item for tuples, under the same open/closed
//!   rule through `additionalItems`;
//! - `anyOf`/`oneOf` may gain alternatives and not lose them, `allOf` may lose
//!   sub-schemas and not gain them, and a schema may become an `anyOf`/`oneOf` that
//!   includes it.
//!
//! `$ref` is followed (inside the schema and into its references). Keywords this module
//! does not compare (`not`, `if`/`then`/`else`, `dependencies`, `dependentRequired`,
//! `dependentSchemas`, `propertyNames`, `contains`, `patternProperties`,
//! `unevaluated*`) are refused when they change at all, saying so, rather than passed
//! unchecked.

use std::collections::{BTreeSet, HashSet};

use serde_json::{Map, Value};

use super::JsonSchema;
use crate::canonical_json;

/// Why documents `writer` accepts may be refused by `reader`; empty when none can be.
pub(crate) fn readable(writer: &JsonSchema, reader: &JsonSchema) -> Vec<String> {
    let mut diff = Diff {
        writer,
        reader,
        seen: HashSet::new(),
        out: Vec::new(),
    };
    diff.compare(
        Node {
            doc: &writer.root,
            schema: &writer.root,
        },
        Node {
            doc: &reader.root,
            schema: &reader.root,
        },
        "#",
    );
    diff.out
}

/// A schema inside the document its local `$ref`s resolve against.
#[derive(Clone, Copy)]
struct Node<'a> {
    doc: &'a Value,
    schema: &'a Value,
}

/// The empty schema, which accepts everything: what `true` and an absent `items` mean.
static EMPTY: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| Value::Object(Map::new()));

/// Keywords compared only for equality: a change to them is refused.
const UNCOMPARED: [&str; 13] = [
    "not",
    "if",
    "then",
    "else",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
    "contains",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
];

const LOWER_BOUNDS: [&str; 5] = [
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
const UPPER_BOUNDS: [&str; 5] = [
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];

struct Diff<'a> {
    writer: &'a JsonSchema,
    reader: &'a JsonSchema,
    /// Pairs already compared, so that recursive schemas end.
    seen: HashSet<(usize, usize)>,
    out: Vec<String>,
}

/// How a schema takes members it does not declare.
enum Content<'a> {
    Open,
    Closed,
    Partial(Node<'a>),
}

impl<'a> Diff<'a> {
    fn compare(&mut self, writer: Node<'a>, reader: Node<'a>, path: &str) {
        let (Some(w), Some(r)) = (
            self.resolve(writer, self.writer, path),
            self.resolve(reader, self.reader, path),
        ) else {
            return;
        };
        let key = (
            std::ptr::from_ref(w.schema) as usize,
            std::ptr::from_ref(r.schema) as usize,
        );
        if !self.seen.insert(key) {
            return;
        }
        let w_map = match w.schema {
            Value::Bool(false) => return,
            Value::Bool(true) => empty_map(),
            Value::Object(map) => map,
            _ => return,
        };
        let r_map = match r.schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                self.out.push(format!(
                    "{path}: the schema became false, which refuses every document"
                ));
                return;
            }
            Value::Object(map) => map,
            _ => return,
        };
        if r_map.is_empty() {
            return;
        }
        if self.combined(w, w_map, r, r_map, path) {
            return;
        }
        self.types(w_map, r_map, path);
        self.values(w_map, r_map, path);
        self.bounds(w_map, r_map, path);
        self.object(w, w_map, r, r_map, path);
        self.array(w, w_map, r, r_map, path);
        for keyword in UNCOMPARED {
            if w_map.get(keyword) != r_map.get(keyword)
                && canonical(w_map.get(keyword)) != canonical(r_map.get(keyword))
            {
                self.out.push(format!(
                    "{path}: {keyword} changed, and changes to {keyword} are not compared, \
                     so the change is refused"
                ));
            }
        }
    }

    /// Follows `$ref`s to the schema they name; `None` (with a message) when one names
    /// nothing.
    fn resolve(
        &mut self,
        mut node: Node<'a>,
        side: &'a JsonSchema,
        path: &str,
    ) -> Option<Node<'a>> {
        for _ in 0..64 {
            let Some(Value::String(target)) = node.schema.get("$ref") else {
                return Some(node);
            };
            let (document, fragment) = match target.split_once('#') {
                Some((doc, fragment)) => (doc, fragment),
                None => (target.as_str(), ""),
            };
            let doc = if document.is_empty() {
                node.doc
            } else if let Some(doc) = side.reference(document) {
                doc
            } else {
                self.out
                    .push(format!("{path}: $ref {target:?} names no known document"));
                return None;
            };
            let Some(schema) = doc.pointer(fragment) else {
                self.out
                    .push(format!("{path}: $ref {target:?} points at nothing"));
                return None;
            };
            node = Node { doc, schema };
        }
        self.out
            .push(format!("{path}: $ref chain too long or circular"));
        None
    }

    /// `anyOf`/`oneOf`/`allOf`; true when it decided for the whole schema.
    fn combined(
        &mut self,
        w: Node<'a>,
        w_map: &'a Map<String, Value>,
        r: Node<'a>,
        r_map: &'a Map<String, Value>,
        path: &str,
    ) -> bool {
        for keyword in ["anyOf", "oneOf"] {
            let w_alts = w_map.get(keyword).and_then(Value::as_array);
            let r_alts = r_map.get(keyword).and_then(Value::as_array);
            match (w_alts, r_alts) {
                (Some(w_alts), Some(r_alts)) => {
                    for (i, w_alt) in w_alts.iter().enumerate() {
                        let matched = r_alts
                            .iter()
                            .any(|r_alt| self.quietly(node(w, w_alt), node(r, r_alt), path));
                        if !matched {
                            self.out.push(format!(
                                "{path}/{keyword}/{i}: no alternative of the new {keyword} \
                                 accepts what this one did (an alternative was removed or \
                                 narrowed)"
                            ));
                        }
                    }
                }
                (None, Some(r_alts)) if !has_any(w_map, &["anyOf", "oneOf", "allOf"]) => {
                    // A schema that became a sum including it: data it wrote still fits.
                    let matched = r_alts
                        .iter()
                        .any(|r_alt| self.quietly(w, node(r, r_alt), path));
                    if !matched {
                        self.out.push(format!(
                            "{path}: became a {keyword} none of whose alternatives accepts \
                             what the schema did"
                        ));
                    }
                    return true;
                }
                (Some(_), None) | (None, Some(_)) => {
                    self.out.push(format!(
                        "{path}: the combined type changed ({keyword} added or removed)"
                    ));
                    return true;
                }
                (None, None) => {}
            }
        }
        let w_all = w_map.get("allOf").and_then(Value::as_array);
        let r_all = r_map.get("allOf").and_then(Value::as_array);
        if w_all.is_some() || r_all.is_some() {
            let w_all = w_all.map_or(&[][..], Vec::as_slice);
            for (i, r_sub) in r_all.map_or(&[][..], Vec::as_slice).iter().enumerate() {
                let matched = w_all
                    .iter()
                    .any(|w_sub| self.quietly(node(w, w_sub), node(r, r_sub), path));
                if !matched {
                    self.out.push(format!(
                        "{path}/allOf/{i}: the new allOf adds a constraint the old data need \
                         not meet"
                    ));
                }
            }
        }
        false
    }

    /// Whether `writer` is readable by `reader`, without reporting.
    fn quietly(&mut self, writer: Node<'a>, reader: Node<'a>, path: &str) -> bool {
        let mut sub = Diff {
            writer: self.writer,
            reader: self.reader,
            seen: self.seen.clone(),
            out: Vec::new(),
        };
        sub.compare(writer, reader, path);
        sub.out.is_empty()
    }

    fn types(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        let Some(r_types) = types(r) else { return };
        let Some(w_types) = types(w) else {
            self.out.push(format!(
                "{path}: type narrowed from any type to {}",
                list(&r_types)
            ));
            return;
        };
        let covered =
            |t: &String| r_types.contains(t) || (t == "integer" && r_types.contains("number"));
        if w_types.iter().all(covered) {
            return;
        }
        let narrowed = r_types
            .iter()
            .all(|t| w_types.contains(t) || (t == "integer" && w_types.contains("number")));
        let what = if narrowed { "narrowed" } else { "changed" };
        self.out.push(format!(
            "{path}: type {what} from {} to {}",
            list(&w_types),
            list(&r_types)
        ));
    }

    fn values(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        if let Some(Value::Array(r_enum)) = r.get("enum") {
            match w.get("enum") {
                Some(Value::Array(w_enum)) => {
                    let removed: Vec<String> = w_enum
                        .iter()
                        .filter(|v| !r_enum.contains(v))
                        .map(Value::to_string)
                        .collect();
                    if !removed.is_empty() {
                        self.out.push(format!(
                            "{path}: enum values removed: {}",
                            removed.join(", ")
                        ));
                    }
                }
                _ => self.out.push(format!("{path}: enum added")),
            }
        }
        if let Some(r_const) = r.get("const")
            && w.get("const") != Some(r_const)
        {
            self.out
                .push(format!("{path}: const added or changed to {r_const}"));
        }
    }

    fn bounds(&mut self, w: &Map<String, Value>, r: &Map<String, Value>, path: &str) {
        for (keywords, lower) in [(LOWER_BOUNDS, true), (UPPER_BOUNDS, false)] {
            for keyword in keywords {
                let Some(r_bound) = r.get(keyword).and_then(Value::as_f64) else {
                    continue;
                };
                match w.get(keyword).and_then(Value::as_f64) {
                    None => self
                        .out
                        .push(format!("{path}: {keyword} added ({r_bound})")),
                    Some(w_bound) if lower && w_bound < r_bound => self.out.push(format!(
                        "{path}: {keyword} increased from {w_bound} to {r_bound}"
                    )),
                    Some(w_bound) if !lower && w_bound > r_bound => self.out.push(format!(
                        "{path}: {keyword} decreased from {w_bound} to {r_bound}"
                    )),
                    Some(_) => {}
                }
            }
        }
        if let Some(r_step) = r.get("multipleOf").and_then(Value::as_f64) {
            match w.get("multipleOf").and_then(Value::as_f64) {
                Some(w_step) if (w_step / r_step).fract() == 0.0 => {}
                Some(w_step) => self.out.push(format!(
                    "{path}: multipleOf changed from {w_step} to {r_step}"
                )),
                None => self
                    .out
                    .push(format!("{path}: multipleOf added ({r_step})")),
            }
        }
        for keyword in ["pattern", "format"] {
            if let Some(r_value) = r.get(keyword)
                && w.get(keyword) != Some(r_value)
            {
                let how = if w.contains_key(keyword) {
                    "changed"
                } else {
                    "added"
                };
                self.out
                    .push(format!("{path}: {keyword} {how} ({r_value})"));
            }
        }
        if r.get("uniqueItems") == Some(&Value::Bool(true))
            && w.get("uniqueItems") != Some(&Value::Bool(true))
        {
            self.out.push(format!("{path}: uniqueItems added"));
        }
    }

    fn object(
        &mut self,
        w: Node<'a>,
        w_map: &'a Map<String, Value>,
        r: Node<'a>,
        r_map: &'a Map<String, Value>,
        path: &str,
    ) {
        let w_props = w_map.get("properties").and_then(Value::as_object);
        let r_props = r_map.get("properties").and_then(Value::as_object);
        let w_content = content(w, w_map, "additionalProperties");
        let r_content = content(r, r_map, "additionalProperties");
        let (w_props, r_props) = (
            w_props.unwrap_or(empty_map()),
            r_props.unwrap_or(empty_map()),
        );
        for (name, w_prop) in w_props {
            let at = format!("{path}/properties/{name}");
            match (r_props.get(name), &r_content) {
                (Some(r_prop), _) => self.compare(node(w, w_prop), node(r, r_prop), &at),
                (None, Content::Open) => {}
                (None, Content::Closed) => self.out.push(format!(
                    "{at}: property removed from a closed content model \
                     (additionalProperties false): data holding it is refused"
                )),
                (None, Content::Partial(extra)) => self.compare(node(w, w_prop), *extra, &at),
            }
        }
        for (name, r_prop) in r_props {
            if w_props.contains_key(name) {
                continue;
            }
            let at = format!("{path}/properties/{name}");
            match &w_content {
                Content::Open if is_empty_schema(r_prop) => {}
                Content::Open => self.out.push(format!(
                    "{at}: property added to an open content model: earlier data may hold \
                     anything under that name (close the model with additionalProperties \
                     false first)"
                )),
                Content::Closed => {}
                Content::Partial(extra) => self.compare(*extra, node(r, r_prop), &at),
            }
        }
        let w_required = names(w_map.get("required"));
        for name in names(r_map.get("required")) {
            if w_required.contains(&name) {
                continue;
            }
            let has_default = r_props
                .get(&name)
                .is_some_and(|p| p.get("default").is_some());
            if !has_default {
                self.out.push(format!(
                    "{path}/required: required property {name:?} added (without a default)"
                ));
            }
        }
        match (&w_content, &r_content) {
            (_, Content::Open) | (Content::Closed, _) => {}
            (Content::Open, Content::Closed) => self.out.push(format!(
                "{path}: additionalProperties false added: undeclared properties earlier \
                 data may hold are refused"
            )),
            (Content::Open, Content::Partial(_)) => self.out.push(format!(
                "{path}: additionalProperties narrowed from any value to a schema"
            )),
            (Content::Partial(_), Content::Closed) => self
                .out
                .push(format!("{path}: additionalProperties removed (now false)")),
            (Content::Partial(a), Content::Partial(b)) => {
                self.compare(*a, *b, &format!("{path}/additionalProperties"));
            }
        }
    }

    fn array(
        &mut self,
        w: Node<'a>,
        w_map: &'a Map<String, Value>,
        r: Node<'a>,
        r_map: &'a Map<String, Value>,
        path: &str,
    ) {
        let (w_tuple, w_rest) = items(w, w_map);
        let (r_tuple, r_rest) = items(r, r_map);
        let at = format!("{path}/items");
        let longest = w_tuple.len().max(r_tuple.len());
        for i in 0..longest {
            let at = format!("{at}/{i}");
            match (w_tuple.get(i), r_tuple.get(i)) {
                (Some(a), Some(b)) => self.compare(*a, *b, &at),
                (Some(a), None) => match &r_rest {
                    Content::Open => {}
                    Content::Closed => self.out.push(format!(
                        "{at}: item removed from a closed tuple: data holding it is refused"
                    )),
                    Content::Partial(rest) => self.compare(*a, *rest, &at),
                },
                (None, Some(b)) => match &w_rest {
                    Content::Open if is_empty_schema(b.schema) => {}
                    Content::Open => self.out.push(format!(
                        "{at}: item added to an open tuple: earlier data may hold anything \
                         there"
                    )),
                    Content::Closed => {}
                    Content::Partial(rest) => self.compare(*rest, *b, &at),
                },
                (None, None) => unreachable!("i is below the longer length"),
            }
        }
        match (&w_rest, &r_rest) {
            (_, Content::Open) | (Content::Closed, _) => {}
            (Content::Open, Content::Partial(b)) => {
                self.compare(node(w, &EMPTY), *b, &at);
            }
            (Content::Open | Content::Partial(_), Content::Closed) => self.out.push(format!(
                "{at}: items closed: further items earlier data may hold are refused"
            )),
            (Content::Partial(a), Content::Partial(b)) => self.compare(*a, *b, &at),
        }
    }
}

fn empty_map() -> &'static Map<String, Value> {
    EMPTY.as_object().expect("EMPTY is an object")
}

fn node<'a>(parent: Node<'a>, schema: &'a Value) -> Node<'a> {
    Node {
        doc: parent.doc,
        schema,
    }
}

/// How an object schema takes undeclared properties (`keyword` is
/// `additionalProperties`).
fn content<'a>(parent: Node<'a>, map: &'a Map<String, Value>, keyword: &str) -> Content<'a> {
    match map.get(keyword) {
        None | Some(Value::Bool(true)) => Content::Open,
        Some(Value::Bool(false)) => Content::Closed,
        Some(schema) if is_empty_schema(schema) => Content::Open,
        Some(schema) => Content::Partial(node(parent, schema)),
    }
}

/// The positional item schemas and the schema of the items after them: `items` as one
/// schema is every item; `items` as an array (drafts 4 to 2019-09) or `prefixItems`
/// (2020-12) are positions, followed by `additionalItems` or `items`.
fn items<'a>(parent: Node<'a>, map: &'a Map<String, Value>) -> (Vec<Node<'a>>, Content<'a>) {
    let rest_of = |keyword: &str| content(parent, map, keyword);
    if let Some(Value::Array(prefix)) = map.get("prefixItems") {
        let tuple = prefix.iter().map(|s| node(parent, s)).collect();
        return (tuple, rest_of("items"));
    }
    match map.get("items") {
        Some(Value::Array(tuple)) => (
            tuple.iter().map(|s| node(parent, s)).collect(),
            rest_of("additionalItems"),
        ),
        _ => (Vec::new(), rest_of("items")),
    }
}

/// A schema that accepts everything (annotations aside).
fn is_empty_schema(schema: &Value) -> bool {
    match schema {
        Value::Bool(b) => *b,
        Value::Object(map) => map.keys().all(|k| {
            matches!(
                k.as_str(),
                "title" | "description" | "default" | "examples" | "$comment" | "$id"
            )
        }),
        _ => false,
    }
}

fn types(map: &Map<String, Value>) -> Option<BTreeSet<String>> {
    match map.get("type")? {
        Value::String(t) => Some(BTreeSet::from([t.clone()])),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    }
}

fn names(value: Option<&Value>) -> BTreeSet<String> {
    value
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn has_any(map: &Map<String, Value>, keywords: &[&str]) -> bool {
    keywords.iter().any(|k| map.contains_key(*k))
}

fn list(types: &BTreeSet<String>) -> String {
    let names: Vec<&str> = types.iter().map(String::as_str).collect();
    format!("[{}]", names.join(", "))
}

fn canonical(value: Option<&Value>) -> Option<String> {
    value.map(canonical_json::write)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SchemaType;
    use crate::json_schema::parse;
    use crate::schema::ResolvedReference;

    fn check(writer: &str, reader: &str) -> Vec<String> {
        readable(&parse(writer, &[]).unwrap(), &parse(reader, &[]).unwrap())
    }

    fn ok(writer: &str, reader: &str) {
        let found = check(writer, reader);
        assert!(found.is_empty(), "{writer} -> {reader}: {found:?}");
    }

    fn refused(writer: &str, reader: &str, expect: &str) {
        let found = check(writer, reader);
        assert!(
            found.iter().any(|m| m.contains(expect)),
            "{writer} -> {reader}: expected {expect:?} in {found:?}"
        );
    }

    const OPEN: &str = r#"{"type":"object","properties":{"id":{"type":"string"}}}"#;
    const OPEN_PLUS: &str =
        r#"{"type":"object","properties":{"id":{"type":"string"},"note":{"type":"string"}}}"#;
    const CLOSED: &str = r#"{"type":"object","additionalProperties":false,
        "properties":{"id":{"type":"string"}}}"#;
    const CLOSED_PLUS: &str = r#"{"type":"object","additionalProperties":false,
        "properties":{"id":{"type":"string"},"note":{"type":"string"}}}"#;

    #[test]
    fn a_property_added_to_an_open_model_is_refused_and_to_a_closed_one_is_not() {
        refused(
            OPEN,
            OPEN_PLUS,
            "/properties/note: property added to an open content model",
        );
        ok(CLOSED, CLOSED_PLUS);
        // An empty schema accepts whatever old data held there.
        ok(
            OPEN,
            r#"{"type":"object","properties":{"id":{"type":"string"},"note":{}}}"#,
        );
    }

    #[test]
    fn a_property_removed_from_a_closed_model_is_refused_and_from_an_open_one_is_not() {
        ok(OPEN_PLUS, OPEN);
        refused(
            CLOSED_PLUS,
            CLOSED,
            "/properties/note: property removed from a closed",
        );
    }

    #[test]
    fn a_partially_open_model_compares_the_property_with_additional_properties() {
        let partial = r#"{"type":"object","additionalProperties":{"type":"string"},
            "properties":{"id":{"type":"string"}}}"#;
        let with_string = r#"{"type":"object","additionalProperties":{"type":"string"},
            "properties":{"id":{"type":"string"},"note":{"type":"string"}}}"#;
        let with_int = r#"{"type":"object","additionalProperties":{"type":"string"},
            "properties":{"id":{"type":"string"},"note":{"type":"integer"}}}"#;
        ok(partial, with_string);
        refused(partial, with_int, "/properties/note: type changed");
    }

    #[test]
    fn required_added_is_refused_unless_it_has_a_default_and_removed_is_fine() {
        let required = r#"{"type":"object","additionalProperties":false,"required":["note"],
            "properties":{"id":{"type":"string"},"note":{"type":"string"}}}"#;
        let defaulted = r#"{"type":"object","additionalProperties":false,"required":["note"],
            "properties":{"id":{"type":"string"},"note":{"type":"string","default":""}}}"#;
        refused(CLOSED_PLUS, required, "required property \"note\" added");
        ok(CLOSED_PLUS, defaulted);
        ok(required, CLOSED_PLUS);
    }

    #[test]
    fn types_may_widen_but_not_narrow_or_change() {
        ok(r#"{"type":"integer"}"#, r#"{"type":"number"}"#);
        ok(r#"{"type":"string"}"#, r#"{"type":["string","null"]}"#);
        refused(
            r#"{"type":"number"}"#,
            r#"{"type":"integer"}"#,
            "type narrowed",
        );
        refused(
            r#"{"type":["string","null"]}"#,
            r#"{"type":"string"}"#,
            "type narrowed from [null, string] to [string]",
        );
        refused(
            r#"{"type":"string"}"#,
            r#"{"type":"boolean"}"#,
            "type changed",
        );
        refused(
            r#"{}"#,
            r#"{"type":"string"}"#,
            "type narrowed from any type",
        );
    }

    #[test]
    fn enum_values_may_be_added_but_not_removed() {
        let two = r#"{"enum":["NEW","PAID"]}"#;
        let three = r#"{"enum":["NEW","PAID","SHIPPED"]}"#;
        ok(two, three);
        refused(three, two, "enum values removed: \"SHIPPED\"");
        refused(r#"{"type":"string"}"#, two, "enum added");
    }

    #[test]
    fn bounds_may_loosen_but_not_tighten_or_appear() {
        ok(
            r#"{"type":"integer","minimum":5}"#,
            r#"{"type":"integer","minimum":1}"#,
        );
        refused(
            r#"{"type":"integer","minimum":1}"#,
            r#"{"type":"integer","minimum":5}"#,
            "minimum increased from 1 to 5",
        );
        refused(
            r#"{"type":"integer","maximum":10}"#,
            r#"{"type":"integer","maximum":5}"#,
            "maximum decreased",
        );
        refused(
            r#"{"type":"string"}"#,
            r#"{"type":"string","maxLength":3}"#,
            "maxLength added",
        );
        ok(r#"{"type":"string","maxLength":3}"#, r#"{"type":"string"}"#);
        refused(
            r#"{"type":"string"}"#,
            r#"{"type":"string","pattern":"^a"}"#,
            "pattern added",
        );
        ok(r#"{"multipleOf":4}"#, r#"{"multipleOf":2}"#);
        refused(
            r#"{"multipleOf":2}"#,
            r#"{"multipleOf":4}"#,
            "multipleOf changed",
        );
    }

    #[test]
    fn items_are_compared_recursively_with_the_path_named() {
        let ints = r#"{"type":"object","properties":{"lines":{"type":"array",
            "items":{"type":"object","properties":{"qty":{"type":"integer"}}}}}}"#;
        let numbers = r#"{"type":"object","properties":{"lines":{"type":"array",
            "items":{"type":"object","properties":{"qty":{"type":"number"}}}}}}"#;
        ok(ints, numbers);
        refused(
            numbers,
            ints,
            "#/properties/lines/items/properties/qty: type narrowed",
        );
        refused(
            r#"{"type":"array","items":{"type":"string"}}"#,
            r#"{"type":"array","items":{"type":"string"},"maxItems":3}"#,
            "maxItems added",
        );
        refused(
            r#"{"type":"array","items":[{"type":"string"}]}"#,
            r#"{"type":"array","items":[{"type":"string"},{"type":"integer"}]}"#,
            "item added to an open tuple",
        );
    }

    #[test]
    fn sums_may_grow_and_a_schema_may_become_a_sum_that_includes_it() {
        let one = r#"{"oneOf":[{"type":"string"}]}"#;
        let two = r#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#;
        ok(one, two);
        refused(two, one, "/oneOf/1: no alternative");
        ok(r#"{"type":"string"}"#, two);
        refused(r#"{"type":"boolean"}"#, two, "became a oneOf");
    }

    #[test]
    fn refs_are_followed_locally_and_into_references() {
        let local = r##"{"definitions":{"qty":{"type":"integer"}},
            "type":"object","properties":{"qty":{"$ref":"#/definitions/qty"}}}"##;
        let inline = r#"{"type":"object","properties":{"qty":{"type":"string"}}}"#;
        refused(
            local,
            inline,
            "/properties/qty: type changed from [integer] to [string]",
        );
        let qty = ResolvedReference {
            name: "qty.json".to_owned(),
            schema_type: SchemaType::Json,
            schema: r#"{"type":"number"}"#.to_owned(),
        };
        let referring = parse(
            r#"{"type":"object","properties":{"qty":{"$ref":"qty.json"}}}"#,
            &[qty],
        )
        .unwrap();
        let widened = readable(&parse(local, &[]).unwrap(), &referring);
        assert!(widened.is_empty(), "{widened:?}");
    }

    #[test]
    fn uncompared_keywords_are_refused_when_they_change() {
        refused(
            r#"{"not":{"type":"string"}}"#,
            r#"{"not":{"type":"integer"}}"#,
            "not changed",
        );
        ok(
            r#"{"not":{"type":"string"}}"#,
            r#"{"not":{"type":"string"}}"#,
        );
    }

    #[test]
    fn annotations_do_not_matter() {
        ok(
            r#"{"type":"string","description":"a","title":"t","default":"x"}"#,
            r#"{"type":"string","description":"b","default":"y"}"#,
        );
    }
}
