//! Who sends a request and whether they may make it.
//!
//! **Without access keys** the endpoint is open, as it always was: every request is
//! served, signed or not, and nothing is checked ([`Caller::Open`]). `ferry serve` keeps
//! such an endpoint on the loopback interface.
//!
//! **With access keys** every request — SQS, SNS and STS alike — must carry a valid AWS
//! Signature Version 4 by one of them (an `Authorization` header dated within 15 minutes
//! of the server's clock, or a presigned query string not yet expired; [`crate::sigv4`]); a refusal uses AWS's code for it. Then the
//! action is checked against the key's permissions on the queue or topic it touches, the
//! same permissions `[[auth.tokens]]` grant Ferry's own API (`publish:orders.*`, …):
//! `requirements.rs` says what each action needs, in one table.
//!
//! The clock the signature's date is checked against is the machine's, not the broker's:
//! clock skew is between the client's clock and this host's, whatever time the broker
//! runs on.

pub mod requirements;

use ferry_access::Action;

use crate::sigv4::{AccessKey, SignatureError, SignedRequest, Verifier};

pub use requirements::{Requirement, Right};

/// Who sent a request.
#[derive(Debug, Clone, Copy)]
pub enum Caller<'a> {
    /// No access keys are configured: the endpoint is open and allows everything.
    Open,
    /// The key that signed the request.
    Key(&'a AccessKey),
}

/// The actions that let a caller see a name: any right on a queue or topic lets its holder
/// look it up and list it (`metrics` does not: it is for scrapers).
const SEEING: [Action; 4] = [
    Action::Publish,
    Action::Consume,
    Action::DeadLetters,
    Action::Admin,
];

impl Caller<'_> {
    /// Whether the caller may do `action` on `name`.
    pub fn may(&self, action: Action, name: &str) -> bool {
        match self {
            Caller::Open => true,
            Caller::Key(key) => key.permissions.iter().any(|p| p.allows(action, name)),
        }
    }

    /// Whether the caller may do `action` on every name: what a call needs when the name
    /// it touches cannot be read from its input.
    pub fn may_everywhere(&self, action: Action) -> bool {
        match self {
            Caller::Open => true,
            Caller::Key(key) => key
                .permissions
                .iter()
                .any(|p| p.action == action && p.pattern.matches_every_name()),
        }
    }

    /// Whether the caller holds any right on `name`: what look-ups need and what lists
    /// show.
    pub fn may_see(&self, name: &str) -> bool {
        SEEING.iter().any(|a| self.may(*a, name))
    }

    /// The caller's ARN: the key's IAM user, or the account's root for a key without a
    /// name and on an open endpoint.
    pub fn arn(&self, account: &str) -> String {
        match self {
            Caller::Key(AccessKey {
                name: Some(name), ..
            }) => format!("arn:aws:iam::{account}:user/{name}"),
            _ => format!("arn:aws:iam::{account}:root"),
        }
    }

    /// The access key id, for logs (never the secret).
    pub fn key_id(&self) -> &str {
        match self {
            Caller::Open => "",
            Caller::Key(key) => &key.id,
        }
    }
}

/// The caller of `request`: [`Caller::Open`] without access keys, else the key that signed
/// it, if the signature is right and dated within the allowed skew of `now_ms`.
pub fn authenticate<'a>(
    verifier: &'a Verifier,
    request: &SignedRequest<'_>,
    now_ms: i64,
) -> Result<Caller<'a>, SignatureError> {
    if verifier.is_empty() {
        return Ok(Caller::Open);
    }
    verifier.verify(request, now_ms).map(Caller::Key)
}

/// The machine's clock, in milliseconds since the epoch, for the signature's date.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A call the caller's permissions do not cover: the first need they miss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The Ferry action (or, for a look-up, the actions any one of which) was needed.
    pub needed: &'static str,
    /// The name it was needed on; `None`: on every name (the input named none).
    pub name: Option<String>,
}

/// What a look-up needs, in a refusal's words.
const ANY_RIGHT: &str = "publish, consume, dead_letters or admin";

impl Denied {
    /// What the key lacks, in Ferry's terms, for the end of a refusal's message.
    pub fn lacking(&self) -> String {
        match &self.name {
            Some(name) => format!("the access key has no {} permission on {name}", self.needed),
            None => format!(
                "the request names no queue or topic of this endpoint, so it needs {} on \
                 every name (`#`), which the access key does not have",
                self.needed
            ),
        }
    }
}

/// Whether `caller` meets `requirement`; `is_dead_letter_queue` decides what reading a
/// queue needs ([`Action::to_read`]) and is asked only for keys, not on an open endpoint.
pub fn check(
    caller: &Caller<'_>,
    requirement: &Requirement,
    is_dead_letter_queue: impl Fn(&str) -> bool,
) -> Result<(), Denied> {
    if matches!(caller, Caller::Open) {
        return Ok(());
    }
    let Requirement::Needs(needs) = requirement else {
        // A listing is filtered by what the caller may see.
        return Ok(());
    };
    for need in needs {
        let denied = |needed: &'static str| Denied {
            needed,
            name: need.name.clone(),
        };
        match (&need.right, need.name.as_deref()) {
            (Right::Do(action), Some(name)) if !caller.may(*action, name) => {
                return Err(denied(action.as_str()));
            }
            (Right::Do(action), None) if !caller.may_everywhere(*action) => {
                return Err(denied(action.as_str()));
            }
            (Right::Read, Some(name)) => {
                let action = Action::to_read(is_dead_letter_queue(name));
                if !caller.may(action, name) {
                    return Err(denied(action.as_str()));
                }
            }
            (Right::Read, None) => {
                for action in [Action::Consume, Action::DeadLetters] {
                    if !caller.may_everywhere(action) {
                        return Err(denied(action.as_str()));
                    }
                }
            }
            (Right::See, Some(name)) if !caller.may_see(name) => {
                return Err(denied(ANY_RIGHT));
            }
            (Right::See, None) if !SEEING.iter().any(|a| caller.may_everywhere(*a)) => {
                return Err(denied(ANY_RIGHT));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::requirements::Need;
    use super::*;

    fn key(permissions: &[&str]) -> AccessKey {
        AccessKey {
            id: "AKIDTEST".into(),
            secret: "secret".into(),
            name: None,
            permissions: permissions.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    fn need(right: Right, name: Option<&str>) -> Requirement {
        Requirement::Needs(vec![Need {
            right,
            name: name.map(str::to_owned),
        }])
    }

    #[test]
    fn reading_a_dead_letter_queue_needs_dead_letters_not_consume() {
        let consumer = key(&["consume:#"]);
        let caller = Caller::Key(&consumer);
        let read = need(Right::Read, Some("orders.dlq"));
        let denied = check(&caller, &read, |q| q.ends_with(".dlq")).unwrap_err();
        assert_eq!(denied.needed, "dead_letters");
        assert!(check(&caller, &need(Right::Read, Some("orders")), |_| false).is_ok());
    }

    #[test]
    fn an_unnamed_target_needs_the_right_on_every_name() {
        let narrow = key(&["admin:orders.#"]);
        let wide = key(&["admin:#"]);
        let unnamed = need(Right::Do(Action::Admin), None);
        assert!(check(&Caller::Key(&narrow), &unnamed, |_| false).is_err());
        assert!(check(&Caller::Key(&wide), &unnamed, |_| false).is_ok());
    }

    #[test]
    fn any_right_but_metrics_sees_a_name() {
        let publisher = key(&["publish:orders"]);
        let scraper = key(&["metrics:#"]);
        assert!(Caller::Key(&publisher).may_see("orders"));
        assert!(!Caller::Key(&publisher).may_see("payments"));
        assert!(!Caller::Key(&scraper).may_see("orders"));
        assert!(Caller::Open.may_see("anything"));
    }

    #[test]
    fn arns_name_the_user_or_the_root() {
        let mut named = key(&[]);
        named.name = Some("orders-service".into());
        assert_eq!(
            Caller::Key(&named).arn("123456789012"),
            "arn:aws:iam::123456789012:user/orders-service"
        );
        assert_eq!(
            Caller::Key(&key(&[])).arn("123456789012"),
            "arn:aws:iam::123456789012:root"
        );
        assert_eq!(
            Caller::Open.arn("000000000000"),
            "arn:aws:iam::000000000000:root"
        );
    }
}
