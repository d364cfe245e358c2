//! Resource policies — a queue's or a topic's `Policy` attribute — read and evaluated as
//! IAM evaluates a resource-based policy, for the one thing they can mean on a
//! single-account endpoint: what principals of *other* accounts may do, and what an
//! explicit `Deny` forbids to anyone.
//!
//! **The grammar taken** (anything else is refused when the policy is set, naming the
//! element, so that no part of a policy is ever silently ignored):
//! - `Version` (`2012-10-17` or `2008-10-17`), `Id`, `Statement` (one object or a list;
//!   none: a policy that says nothing);
//! - per statement: `Sid`, `Effect` (`Allow` / `Deny`), `Principal`, `Action` or
//!   `NotAction`, `Resource` or `NotResource` (absent: the resource the policy is on, as
//!   SQS takes it), `Condition`;
//! - `Principal`: `"*"`, or `{"AWS": …}` with `"*"`, an account id, an account's root
//!   `arn:aws:iam::<account>:root` (any principal of that account), or any other IAM ARN
//!   (`…:user/<name>` is what an access key with a name is); `{"Service": …}` names an AWS
//!   service, which never signs a request to this endpoint, so such a statement applies
//!   to no request;
//! - `Action`: `*` or `<service>:<action>`, the service case-insensitive, `*` and `?`
//!   wildcards, matched case-insensitively as IAM does; `Resource`: `*` or an ARN with
//!   wildcards, matched as written;
//! - `Condition`: the string and ARN operators (`StringEquals`, `StringNotEquals`,
//!   `StringEqualsIgnoreCase`, `StringNotEqualsIgnoreCase`, `StringLike`,
//!   `StringNotLike`, `ArnEquals`, `ArnLike`, `ArnNotEquals`, `ArnNotLike`) on the keys
//!   `aws:SourceArn`, `aws:SourceAccount`, `aws:SourceOwner` (what SNS→SQS policies and
//!   SNS's default topic policy test), `aws:PrincipalAccount` and `aws:PrincipalArn`. A
//!   request signed with an access key has no source (those keys are set when an AWS
//!   service acts for a resource), so as in IAM a positive operator on them is false and
//!   a negated one true.
//!
//! `NotPrincipal` is refused: its meaning with account and user principals is subtle
//! enough in IAM that approximating it would grant or deny what the writer did not mean.
//!
//! **Evaluation** ([`Policy::decide`]): a statement applies when its principal, action,
//! resource and every condition match; an applying `Deny` wins over any `Allow`, as in
//! IAM.

use serde_json::{Map, Value};

/// Why a policy document is not taken; the message names the element.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the policy is not valid JSON")]
    NotJson,
    #[error("the policy must be a JSON object")]
    NotAnObject,
    #[error("Version {0:?} is not a policy language version (2012-10-17 or 2008-10-17)")]
    Version(String),
    #[error("the element {0} is not supported by Ferry, which would otherwise ignore it")]
    Unsupported(String),
    #[error("{element} is malformed: {why}")]
    Malformed { element: &'static str, why: String },
}

fn malformed(element: &'static str, why: impl Into<String>) -> PolicyError {
    PolicyError::Malformed {
        element,
        why: why.into(),
    }
}

/// What a statement does when it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    Allow,
    Deny,
}

/// One `Principal` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Principal {
    /// `"*"`: anyone.
    Anyone,
    /// An account id or its root ARN: any principal of that account.
    Account(String),
    /// Any other IAM ARN, matched whole.
    Arn(String),
    /// An AWS service: never the signer of a request here.
    Service,
}

/// The `Action`/`NotAction` and `Resource`/`NotResource` lists: patterns and whether the
/// statement is about what they do not match.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Patterns {
    patterns: Vec<String>,
    negated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    StringEquals,
    StringEqualsIgnoreCase,
    StringLike,
    ArnEquals,
    ArnLike,
}

/// The condition keys a request can be tested on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConditionKey {
    /// `aws:SourceArn`, `aws:SourceAccount`, `aws:SourceOwner`: never set for a request
    /// signed with an access key.
    Source,
    PrincipalAccount,
    PrincipalArn,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Condition {
    operator: Operator,
    /// `…Not…`: true when the value matches none of `values` (or is absent).
    negated: bool,
    key: ConditionKey,
    values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Statement {
    effect: Effect,
    principals: Vec<Principal>,
    actions: Patterns,
    /// `None`: no `Resource` element — the resource the policy is on.
    resources: Option<Patterns>,
    conditions: Vec<Condition>,
}

/// A parsed resource policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    statements: Vec<Statement>,
}

/// Who asks for what, on which resource.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The caller's account.
    pub account: &'a str,
    /// The caller's ARN (`arn:aws:iam::<account>:user/<name>` or `…:root`).
    pub arn: &'a str,
    /// The action as a policy names it: `sqs:SendMessage`, `sns:Publish`.
    pub action: &'a str,
    /// The ARN of the queue or topic.
    pub resource: &'a str,
}

/// What a policy says of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A statement allows it and none denies it.
    Allow,
    /// A statement denies it.
    Deny,
    /// No statement applies.
    Silent,
}

impl Policy {
    /// The policy a `Policy` attribute holds; the empty string is no policy.
    pub fn parse(text: &str) -> Result<Option<Policy>, PolicyError> {
        if text.is_empty() {
            return Ok(None);
        }
        let value: Value = serde_json::from_str(text).map_err(|_| PolicyError::NotJson)?;
        let Value::Object(document) = value else {
            return Err(PolicyError::NotAnObject);
        };
        let mut statements = None;
        for (key, value) in &document {
            match key.as_str() {
                "Version" => match value.as_str() {
                    Some("2012-10-17" | "2008-10-17") => {}
                    _ => return Err(PolicyError::Version(short(&value.to_string()))),
                },
                "Id" if value.is_string() => {}
                "Id" => return Err(malformed("Id", "must be a string")),
                "Statement" => {
                    statements = Some(match value {
                        Value::Array(list) => {
                            list.iter().map(statement).collect::<Result<Vec<_>, _>>()?
                        }
                        one => vec![statement(one)?],
                    })
                }
                other => return Err(PolicyError::Unsupported(short(other))),
            }
        }
        // A document without statements (`{}`) grants and denies nothing.
        Ok(Some(Policy {
            statements: statements.unwrap_or_default(),
        }))
    }

    /// What the policy says of `request`: a `Deny` that applies wins.
    pub fn decide(&self, request: &Request<'_>) -> Decision {
        let mut decision = Decision::Silent;
        for statement in self.statements.iter().filter(|s| s.applies(request)) {
            match statement.effect {
                Effect::Deny => return Decision::Deny,
                Effect::Allow => decision = Decision::Allow,
            }
        }
        decision
    }
}

/// At most 100 characters of what a message quotes.
fn short(text: &str) -> String {
    text.chars().take(100).collect()
}

fn statement(value: &Value) -> Result<Statement, PolicyError> {
    let Value::Object(fields) = value else {
        return Err(malformed(
            "Statement",
            "each statement must be a JSON object",
        ));
    };
    let mut effect = None;
    let mut principals = None;
    let mut actions = None;
    let mut resources = None;
    let mut conditions = Vec::new();
    for (key, value) in fields {
        match key.as_str() {
            "Sid" if value.is_string() => {}
            "Sid" => return Err(malformed("Sid", "must be a string")),
            "Effect" => {
                effect = Some(match value.as_str() {
                    Some("Allow") => Effect::Allow,
                    Some("Deny") => Effect::Deny,
                    _ => return Err(malformed("Effect", "must be Allow or Deny")),
                })
            }
            "Principal" => principals = Some(principal(value)?),
            "Action" | "NotAction" => {
                if actions.is_some() {
                    return Err(malformed("Action", "give Action or NotAction, not both"));
                }
                actions = Some(action_patterns(value, key == "NotAction")?);
            }
            "Resource" | "NotResource" => {
                if resources.is_some() {
                    return Err(malformed(
                        "Resource",
                        "give Resource or NotResource, not both",
                    ));
                }
                resources = Some(Patterns {
                    patterns: strings(value, "Resource")?,
                    negated: key == "NotResource",
                });
            }
            "Condition" => conditions = condition_block(value)?,
            other => return Err(PolicyError::Unsupported(short(other))),
        }
    }
    Ok(Statement {
        effect: effect.ok_or_else(|| malformed("Effect", "every statement needs one"))?,
        principals: principals
            .ok_or_else(|| malformed("Principal", "a resource policy's statement needs one"))?,
        actions: actions
            .ok_or_else(|| malformed("Action", "every statement needs Action or NotAction"))?,
        resources,
        conditions,
    })
}

/// A string or a non-empty list of strings.
fn strings(value: &Value, element: &'static str) -> Result<Vec<String>, PolicyError> {
    let list = match value {
        Value::String(one) => vec![one.clone()],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| malformed(element, "must be a string or a list of strings"))?,
        _ => return Err(malformed(element, "must be a string or a list of strings")),
    };
    Ok(list)
}

fn principal(value: &Value) -> Result<Vec<Principal>, PolicyError> {
    if value.as_str() == Some("*") {
        return Ok(vec![Principal::Anyone]);
    }
    let Value::Object(kinds) = value else {
        return Err(malformed(
            "Principal",
            "must be \"*\" or an object such as {\"AWS\": \"123456789012\"}",
        ));
    };
    let mut principals = Vec::new();
    for (kind, value) in kinds {
        match kind.as_str() {
            "AWS" => {
                for id in strings(value, "Principal")? {
                    principals.push(aws_principal(&id)?);
                }
            }
            "Service" => {
                strings(value, "Principal")?;
                principals.push(Principal::Service);
            }
            other => {
                return Err(PolicyError::Unsupported(format!(
                    "Principal {}",
                    short(other)
                )));
            }
        }
    }
    if principals.is_empty() {
        return Err(malformed("Principal", "names no principal"));
    }
    Ok(principals)
}

fn is_account_id(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

fn aws_principal(id: &str) -> Result<Principal, PolicyError> {
    if id == "*" {
        return Ok(Principal::Anyone);
    }
    if is_account_id(id) {
        return Ok(Principal::Account(id.to_owned()));
    }
    let invalid = || {
        malformed(
            "Principal",
            format!("{} is not an account id or an IAM ARN", short(id)),
        )
    };
    let rest = id.strip_prefix("arn:aws:iam::").ok_or_else(invalid)?;
    let (account, resource) = rest.split_once(':').ok_or_else(invalid)?;
    if !is_account_id(account) || resource.is_empty() {
        return Err(invalid());
    }
    Ok(if resource == "root" {
        Principal::Account(account.to_owned())
    } else {
        Principal::Arn(id.to_owned())
    })
}

fn action_patterns(value: &Value, negated: bool) -> Result<Patterns, PolicyError> {
    let patterns = strings(value, "Action")?;
    for pattern in &patterns {
        let valid = pattern == "*"
            || pattern.split_once(':').is_some_and(|(service, action)| {
                !service.is_empty()
                    && service
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !action.is_empty()
            });
        if !valid {
            return Err(malformed(
                "Action",
                format!("{} is not \"*\" or <service>:<action>", short(pattern)),
            ));
        }
    }
    Ok(Patterns { patterns, negated })
}

fn condition_block(value: &Value) -> Result<Vec<Condition>, PolicyError> {
    let Value::Object(operators) = value else {
        return Err(malformed("Condition", "must be a JSON object"));
    };
    let mut conditions = Vec::new();
    for (name, keys) in operators {
        let (operator, negated) = operator(name)?;
        let Value::Object(keys) = keys else {
            return Err(malformed(
                "Condition",
                format!("{} must map keys to values", short(name)),
            ));
        };
        conditions.extend(conditions_of(operator, negated, keys)?);
    }
    Ok(conditions)
}

fn operator(name: &str) -> Result<(Operator, bool), PolicyError> {
    Ok(match name {
        "StringEquals" => (Operator::StringEquals, false),
        "StringNotEquals" => (Operator::StringEquals, true),
        "StringEqualsIgnoreCase" => (Operator::StringEqualsIgnoreCase, false),
        "StringNotEqualsIgnoreCase" => (Operator::StringEqualsIgnoreCase, true),
        "StringLike" => (Operator::StringLike, false),
        "StringNotLike" => (Operator::StringLike, true),
        "ArnEquals" => (Operator::ArnEquals, false),
        "ArnNotEquals" => (Operator::ArnEquals, true),
        "ArnLike" => (Operator::ArnLike, false),
        "ArnNotLike" => (Operator::ArnLike, true),
        other => {
            return Err(PolicyError::Unsupported(format!(
                "Condition operator {}",
                short(other)
            )));
        }
    })
}

fn conditions_of(
    operator: Operator,
    negated: bool,
    keys: &Map<String, Value>,
) -> Result<Vec<Condition>, PolicyError> {
    keys.iter()
        .map(|(key, values)| {
            // Condition keys are case-insensitive in IAM.
            let key = match key.to_ascii_lowercase().as_str() {
                "aws:sourcearn" | "aws:sourceaccount" | "aws:sourceowner" => ConditionKey::Source,
                "aws:principalaccount" => ConditionKey::PrincipalAccount,
                "aws:principalarn" => ConditionKey::PrincipalArn,
                _ => {
                    return Err(PolicyError::Unsupported(format!(
                        "Condition key {}",
                        short(key)
                    )));
                }
            };
            Ok(Condition {
                operator,
                negated,
                key,
                values: condition_values(values)?,
            })
        })
        .collect()
}

/// A condition's values: strings, or numbers and booleans, which IAM compares as the
/// strings they are written as (`"aws:SourceAccount": 123456789012`).
fn condition_values(value: &Value) -> Result<Vec<String>, PolicyError> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let values = match value {
        Value::Array(items) if !items.is_empty() => items.iter().map(one).collect(),
        Value::Array(_) => None,
        single => one(single).map(|v| vec![v]),
    };
    values.ok_or_else(|| malformed("Condition", "values must be strings, numbers or booleans"))
}

/// Whether `text` matches `pattern`, where `*` is any run of characters and `?` any one,
/// as IAM matches actions, resources and `…Like` conditions.
fn wildcard(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let fold = |s: &str| -> Vec<char> {
        if ignore_case {
            s.to_lowercase().chars().collect()
        } else {
            s.chars().collect()
        }
    };
    let (pattern, text) = (fold(pattern), fold(text));
    // Iterative matching with one backtrack point for the last `*`.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

impl Principal {
    fn matches(&self, request: &Request<'_>) -> bool {
        match self {
            Principal::Anyone => true,
            Principal::Account(account) => account == request.account,
            Principal::Arn(arn) => arn == request.arn,
            Principal::Service => false,
        }
    }
}

impl Condition {
    fn holds(&self, request: &Request<'_>) -> bool {
        let value = match self.key {
            ConditionKey::Source => None,
            ConditionKey::PrincipalAccount => Some(request.account),
            ConditionKey::PrincipalArn => Some(request.arn),
        };
        let Some(value) = value else {
            // IAM: a missing key fails every positive operator and passes every negated one.
            return self.negated;
        };
        let matches_one = self.values.iter().any(|v| match self.operator {
            Operator::StringEquals | Operator::ArnEquals => v == value,
            Operator::StringEqualsIgnoreCase => v.eq_ignore_ascii_case(value),
            Operator::StringLike | Operator::ArnLike => wildcard(v, value, false),
        });
        matches_one != self.negated
    }
}

impl Statement {
    fn applies(&self, request: &Request<'_>) -> bool {
        let action = self
            .actions
            .patterns
            .iter()
            .any(|p| p == "*" || wildcard(p, request.action, true));
        let resource = self.resources.as_ref().is_none_or(|r| {
            r.patterns
                .iter()
                .any(|p| wildcard(p, request.resource, false))
                != r.negated
        });
        self.principals.iter().any(|p| p.matches(request))
            && action != self.actions.negated
            && resource
            && self.conditions.iter().all(|c| c.holds(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUEUE: &str = "arn:aws:sqs:us-east-1:000000000000:orders";

    fn policy(statements: Value) -> Policy {
        let text = serde_json::json!({"Version": "2012-10-17", "Statement": statements});
        Policy::parse(&text.to_string()).unwrap().unwrap()
    }

    fn by<'a>(account: &'a str, arn: &'a str, action: &'a str) -> Request<'a> {
        Request {
            account,
            arn,
            action,
            resource: QUEUE,
        }
    }

    const ROOT_1: &str = "arn:aws:iam::111111111111:root";
    const ALICE_1: &str = "arn:aws:iam::111111111111:user/alice";
    const BOB_2: &str = "arn:aws:iam::222222222222:user/bob";

    #[test]
    fn principals_by_account_id_root_arn_user_arn_and_star() {
        for (principal, alice, bob) in [
            (serde_json::json!({"AWS": "111111111111"}), true, false),
            (serde_json::json!({"AWS": ROOT_1}), true, false),
            (serde_json::json!({"AWS": [ALICE_1]}), true, false),
            (
                serde_json::json!({"AWS": "arn:aws:iam::111111111111:user/carol"}),
                false,
                false,
            ),
            (
                serde_json::json!({"AWS": ["111111111111", BOB_2]}),
                true,
                true,
            ),
            (serde_json::json!("*"), true, true),
            (serde_json::json!({"AWS": "*"}), true, true),
            (
                serde_json::json!({"Service": "sns.amazonaws.com"}),
                false,
                false,
            ),
        ] {
            let p = policy(serde_json::json!([{
                "Effect": "Allow", "Principal": principal.clone(),
                "Action": "sqs:SendMessage", "Resource": QUEUE,
            }]));
            let decide = |account, arn| p.decide(&by(account, arn, "sqs:SendMessage"));
            assert_eq!(
                decide("111111111111", ALICE_1) == Decision::Allow,
                alice,
                "{principal}"
            );
            assert_eq!(
                decide("222222222222", BOB_2) == Decision::Allow,
                bob,
                "{principal}"
            );
        }
    }

    #[test]
    fn actions_match_case_insensitively_with_wildcards() {
        let p = policy(serde_json::json!({
            "Effect": "Allow", "Principal": {"AWS": "111111111111"},
            "Action": ["SQS:Send*", "sqs:ChangeMessageVisibilit?"],
        }));
        let allowed = |action| p.decide(&by("111111111111", ALICE_1, action)) == Decision::Allow;
        assert!(allowed("sqs:SendMessage"));
        assert!(allowed("SQS:sendmessage"));
        assert!(allowed("sqs:ChangeMessageVisibility"));
        assert!(!allowed("sqs:ReceiveMessage"));
        assert!(!allowed("sns:SendMessage"));
        let all =
            policy(serde_json::json!({"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}));
        assert_eq!(
            all.decide(&by("1", ALICE_1, "sqs:PurgeQueue")),
            Decision::Allow
        );
        assert_eq!(
            all.decide(&by("1", ALICE_1, "sns:Publish")),
            Decision::Silent
        );
    }

    #[test]
    fn resources_match_the_arn_with_wildcards_and_not_resource_inverts() {
        let with = |resource: Value, key: &str| {
            policy(serde_json::json!({
                "Effect": "Allow", "Principal": "*", "Action": "*", key: resource,
            }))
            .decide(&by("111111111111", ALICE_1, "sqs:SendMessage"))
        };
        assert_eq!(with(QUEUE.into(), "Resource"), Decision::Allow);
        assert_eq!(
            with("arn:aws:sqs:*:000000000000:ord*".into(), "Resource"),
            Decision::Allow
        );
        assert_eq!(with("*".into(), "Resource"), Decision::Allow);
        assert_eq!(
            with(
                "arn:aws:sqs:us-east-1:000000000000:other".into(),
                "Resource"
            ),
            Decision::Silent
        );
        assert_eq!(
            with(
                "arn:aws:sqs:us-east-1:000000000000:other".into(),
                "NotResource"
            ),
            Decision::Allow
        );
        assert_eq!(with(QUEUE.into(), "NotResource"), Decision::Silent);
    }

    #[test]
    fn an_explicit_deny_wins_over_any_allow() {
        let p = policy(serde_json::json!([
            {"Effect": "Allow", "Principal": "*", "Action": "sqs:*"},
            {"Effect": "Deny", "Principal": {"AWS": "111111111111"}, "Action": "sqs:ReceiveMessage"},
        ]));
        assert_eq!(
            p.decide(&by("111111111111", ALICE_1, "sqs:ReceiveMessage")),
            Decision::Deny
        );
        assert_eq!(
            p.decide(&by("111111111111", ALICE_1, "sqs:SendMessage")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&by("222222222222", BOB_2, "sqs:ReceiveMessage")),
            Decision::Allow
        );
        let not_action = policy(serde_json::json!(
            {"Effect": "Deny", "Principal": "*", "NotAction": "sqs:SendMessage"}
        ));
        assert_eq!(
            not_action.decide(&by("1", ALICE_1, "sqs:DeleteQueue")),
            Decision::Deny
        );
        assert_eq!(
            not_action.decide(&by("1", ALICE_1, "sqs:SendMessage")),
            Decision::Silent
        );
    }

    #[test]
    fn source_conditions_never_hold_for_a_signed_request_and_principal_ones_do() {
        let sns_to_sqs = policy(serde_json::json!({
            "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
            "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:000000000000:news"}},
        }));
        assert_eq!(
            sns_to_sqs.decide(&by("111111111111", ALICE_1, "sqs:SendMessage")),
            Decision::Silent
        );
        let unless_source = policy(serde_json::json!({
            "Effect": "Deny", "Principal": "*", "Action": "sqs:SendMessage",
            "Condition": {"StringNotEquals": {"AWS:SourceOwner": "000000000000"}},
        }));
        assert_eq!(
            unless_source.decide(&by("111111111111", ALICE_1, "sqs:SendMessage")),
            Decision::Deny
        );
        let principal = policy(serde_json::json!({
            "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
            "Condition": {"StringLike": {"aws:PrincipalArn": "arn:aws:iam::111111111111:user/a*"}},
        }));
        assert_eq!(
            principal.decide(&by("111111111111", ALICE_1, "sqs:SendMessage")),
            Decision::Allow
        );
        assert_eq!(
            principal.decide(&by("222222222222", BOB_2, "sqs:SendMessage")),
            Decision::Silent
        );
    }

    #[test]
    fn numeric_condition_values_compare_as_written() {
        let p = policy(serde_json::json!({
            "Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage",
            "Condition": {"StringEquals": {"aws:PrincipalAccount": [111111111111_u64]}},
        }));
        assert_eq!(
            p.decide(&by("111111111111", ALICE_1, "sqs:SendMessage")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&by("222222222222", BOB_2, "sqs:SendMessage")),
            Decision::Silent
        );
        let nested = serde_json::json!({"Statement": {"Effect": "Allow", "Principal": "*",
            "Action": "*", "Condition": {"StringEquals": {"aws:PrincipalAccount": [{}]}}}});
        assert!(Policy::parse(&nested.to_string()).is_err());
    }

    #[test]
    fn unsupported_or_malformed_elements_are_refused_by_name() {
        let refused = |statement: Value| {
            let text = serde_json::json!({"Statement": [statement]}).to_string();
            Policy::parse(&text).unwrap_err().to_string()
        };
        let base = |extra: (&str, Value)| {
            let mut s = serde_json::json!({"Effect": "Allow", "Principal": "*", "Action": "*"});
            s.as_object_mut().unwrap().insert(extra.0.into(), extra.1);
            s
        };
        assert!(refused(base(("NotPrincipal", serde_json::json!("*")))).contains("NotPrincipal"));
        let ip = serde_json::json!({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}});
        assert!(refused(base(("Condition", ip))).contains("IpAddress"));
        let vpc = serde_json::json!({"StringEquals": {"aws:SourceVpc": "vpc-1"}});
        assert!(refused(base(("Condition", vpc))).contains("aws:SourceVpc"));
        let federated = serde_json::json!({"Federated": "cognito-identity.amazonaws.com"});
        assert!(refused(base(("Principal", federated))).contains("Federated"));
        assert!(refused(base(("Effect", "Maybe".into()))).contains("Effect"));
        assert!(refused(base(("Principal", serde_json::json!({"AWS": "bob"})))).contains("bob"));
        assert!(
            refused(serde_json::json!({"Effect": "Allow", "Action": "*"})).contains("Principal")
        );
        assert!(refused(base(("Action", "SendMessage".into()))).contains("SendMessage"));
        assert_eq!(Policy::parse("{not json"), Err(PolicyError::NotJson));
        assert_eq!(Policy::parse("[]"), Err(PolicyError::NotAnObject));
        assert_eq!(
            Policy::parse("{\"Version\":\"2012-10-17\"}"),
            Ok(Some(Policy { statements: vec![] }))
        );
        assert!(matches!(
            Policy::parse("{\"Statement\":[],\"Extra\":1}"),
            Err(PolicyError::Unsupported(e)) if e == "Extra"
        ));
        assert_eq!(Policy::parse(""), Ok(None));
    }

    #[test]
    fn wildcards_backtrack() {
        assert!(wildcard("a*b*c", "aXbYbZc", false));
        assert!(!wildcard("a*b*c", "aXbYbZ", false));
        assert!(wildcard("*", "", false));
        assert!(wildcard("a?c", "abc", false));
        assert!(!wildcard("a?c", "ac", false));
        assert!(wildcard("SQS:*", "sqs:x", true));
    }
}
