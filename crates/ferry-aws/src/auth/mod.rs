//! Who sends a request and whether they may make it.
//!
//! **Without access keys** the endpoint is open, as it always was: every request is
//! served, signed or not, and nothing is checked ([`Caller::Open`]). `ferry serve` keeps
//! such an endpoint on the loopback interface. There is no caller to evaluate a resource
//! policy for, so policies are validated and kept but grant and deny nothing.
//!
//! **With access keys** every request — SQS, SNS and STS alike — must carry a valid AWS
//! Signature Version 4 by one of them (an `Authorization` header dated within 15 minutes
//! of the server's clock, or a presigned query string not yet expired; [`crate::sigv4`]); a refusal uses AWS's code for it. Then the
//! action is checked against the key's permissions on the queue or topic it touches, the
//! same permissions `[[auth.tokens]]` grant Ferry's own API (`publish:orders.*`, …):
//! `requirements.rs` says what each action needs, in one table.
//!
//! **Resource policies** (`policy.rs`) are then asked, as IAM asks them:
//! - A key of the endpoint's own account is governed by its permissions; an explicit
//!   `Deny` in the queue's or topic's policy that applies to it denies. (An `Allow` does
//!   not widen an own-account key: its permissions stand for everything its account
//!   would grant it.)
//! - A key of another account (`AccessKey::account_id`) is a cross-account caller: as in
//!   IAM's cross-account evaluation, both its own account's grant — its permissions,
//!   standing for its identity policy — and the resource's policy must allow the action,
//!   and no `Deny` may apply. Actions AWS keeps to the resource's own account
//!   (`requirements::grant`) are refused to it whatever a policy says, a need on no named
//!   resource is refused (no policy to grant it), and lists show it nothing, as AWS lists
//!   only the caller's own account's queues and topics.
//!
//! A stored policy that cannot be evaluated (kept before policies were enforced) grants
//! nothing and denies every action but the owner's administration, which can replace it.
//!
//! The clock the signature's date is checked against is the machine's, not the broker's:
//! clock skew is between the client's clock and this host's, whatever time the broker
//! runs on.

pub mod policy;
pub mod requirements;

use ferry_access::Action;

use crate::location::Location;
use crate::sigv4::{AccessKey, SignatureError, SignedRequest, Verifier};

pub use policy::Policy;
pub use requirements::{Kind, Requirement, Right};

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
    /// The account the caller belongs to: its key's, or the endpoint's `home` one.
    pub fn account<'a>(&'a self, home: &'a str) -> &'a str {
        match self {
            Caller::Key(AccessKey {
                account_id: Some(account),
                ..
            }) => account,
            _ => home,
        }
    }

    /// Whether the caller is a key of another account than the endpoint's.
    pub fn is_foreign(&self) -> bool {
        matches!(
            self,
            Caller::Key(AccessKey {
                account_id: Some(_),
                ..
            })
        )
    }

    /// Whether the caller's permissions let it do `action` on `name`.
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

    /// Whether the caller holds any right on `name`: what look-ups need.
    fn holds_any(&self, name: &str) -> bool {
        SEEING.iter().any(|a| self.may(*a, name))
    }

    /// Whether a list shows `name` to the caller: a name it holds a right on, of its own
    /// account — another account's key is shown nothing, as AWS lists only the caller's
    /// account's queues and topics.
    pub fn may_see(&self, name: &str) -> bool {
        !self.is_foreign() && self.holds_any(name)
    }

    /// The caller's ARN: the key's IAM user, or its account's root for a key without a
    /// name and on an open endpoint; `home` is the endpoint's account.
    pub fn arn(&self, home: &str) -> String {
        let account = self.account(home);
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

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The key's permissions do not cover it.
    Lacks,
    /// A statement of the resource's policy denies it.
    ExplicitDeny,
    /// The caller is of another account and the resource's policy does not allow it.
    NotGranted,
    /// The action is the resource's own account's alone (AWS applies no cross-account
    /// grant to it).
    OwnerOnly,
    /// The resource's stored policy cannot be evaluated.
    UnreadablePolicy,
}

/// A call the caller may not make: the first need it misses, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The Ferry action (or, for a look-up, the actions any one of which) was needed; for
    /// a refusal by policy, the action as the policy names it (`sqs:SendMessage`).
    pub needed: String,
    /// The name it was needed on; `None`: on every name (the input named none).
    pub name: Option<String>,
    pub why: Why,
}

/// What a look-up needs, in a refusal's words.
const ANY_RIGHT: &str = "publish, consume, dead_letters or admin";

impl Denied {
    /// Why the call is refused, for the end of a refusal's message.
    pub fn lacking(&self) -> String {
        let needed = &self.needed;
        match (&self.name, self.why) {
            (Some(name), Why::Lacks) => {
                format!("the access key has no {needed} permission on {name}")
            }
            (None, Why::Lacks) => format!(
                "the request names no queue or topic of this endpoint, so it needs {needed} on \
                 every name (`#`), which the access key does not have"
            ),
            (Some(name), Why::ExplicitDeny) => {
                format!("the policy of {name} explicitly denies {needed} to this principal")
            }
            (Some(name), Why::NotGranted) => format!(
                "the access key is of another account, and the policy of {name} does not \
                 allow it {needed}"
            ),
            (None, _) => format!(
                "the access key is of another account, and the request names no queue or \
                 topic of this endpoint whose policy could allow it {needed}"
            ),
            (Some(name), Why::OwnerOnly) => format!(
                "{needed} on {name} is for its own account only: no policy grants it to \
                 another account"
            ),
            (Some(name), Why::UnreadablePolicy) => format!(
                "the stored policy of {name} cannot be evaluated; replace it (Policy \
                 attribute) to use it"
            ),
        }
    }
}

/// What a request is, for asking resource policies about it.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The service the request is to: SQS (queues) or SNS (topics).
    pub service: Kind,
    /// The action, as the request names it.
    pub action: &'a str,
    pub location: &'a Location,
}

impl Context<'_> {
    /// The ARN of queue or topic `name`, as policies name it.
    fn arn(&self, on: Kind, name: &str) -> String {
        match on {
            Kind::Queue => self.location.arn(name),
            Kind::Topic => format!(
                "arn:aws:sns:{}:{}:{name}",
                self.location.region, self.location.account_id
            ),
        }
    }
}

/// Whether `caller` may make the request `context` describes: the key's permissions meet
/// `requirement` and the resource policies agree (see the module head).
/// `is_dead_letter_queue` decides what reading a queue needs ([`Action::to_read`]);
/// `policy_text` is the `Policy` attribute of a queue or topic (`None` or empty: none).
/// Neither is asked on an open endpoint.
pub fn check(
    caller: &Caller<'_>,
    requirement: &Requirement,
    context: &Context<'_>,
    is_dead_letter_queue: impl Fn(&str) -> bool,
    policy_text: impl Fn(Kind, &str) -> Option<String>,
) -> Result<(), Denied> {
    if matches!(caller, Caller::Open) {
        return Ok(());
    }
    let Requirement::Needs(needs) = requirement else {
        // A listing is filtered by what the caller may see.
        return Ok(());
    };
    for need in needs {
        permitted(caller, need, &is_dead_letter_queue)?;
        allowed_by_policy(caller, need, context, &policy_text)?;
    }
    Ok(())
}

/// Whether the key's permissions cover `need`.
fn permitted(
    caller: &Caller<'_>,
    need: &requirements::Need,
    is_dead_letter_queue: impl Fn(&str) -> bool,
) -> Result<(), Denied> {
    let denied = |needed: &str| Denied {
        needed: needed.to_owned(),
        name: need.name.clone(),
        why: Why::Lacks,
    };
    match (&need.right, need.name.as_deref()) {
        (Right::Do(action), Some(name)) if !caller.may(*action, name) => {
            Err(denied(action.as_str()))
        }
        (Right::Do(action), None) if !caller.may_everywhere(*action) => {
            Err(denied(action.as_str()))
        }
        (Right::Read, Some(name)) => {
            let action = Action::to_read(is_dead_letter_queue(name));
            if caller.may(action, name) {
                Ok(())
            } else {
                Err(denied(action.as_str()))
            }
        }
        (Right::Read, None) => {
            for action in [Action::Consume, Action::DeadLetters] {
                if !caller.may_everywhere(action) {
                    return Err(denied(action.as_str()));
                }
            }
            Ok(())
        }
        (Right::See, Some(name)) if !caller.holds_any(name) => Err(denied(ANY_RIGHT)),
        (Right::See, None) if !SEEING.iter().any(|a| caller.may_everywhere(*a)) => {
            Err(denied(ANY_RIGHT))
        }
        _ => Ok(()),
    }
}

/// Whether the policy of `need`'s queue or topic lets `caller` do the request's action.
fn allowed_by_policy(
    caller: &Caller<'_>,
    need: &requirements::Need,
    context: &Context<'_>,
    policy_text: impl Fn(Kind, &str) -> Option<String>,
) -> Result<(), Denied> {
    let foreign = caller.is_foreign();
    let grant = requirements::grant(context.service, context.action, need);
    let denied = |why| Denied {
        needed: grant.action.clone(),
        name: need.name.clone(),
        why,
    };
    let Some(name) = need.name.as_deref() else {
        // No resource, no policy: nothing can grant another account this; an own-account
        // key's permissions on every name were checked.
        return if foreign {
            Err(denied(Why::NotGranted))
        } else {
            Ok(())
        };
    };
    if foreign && !grant.cross_account {
        return Err(denied(Why::OwnerOnly));
    }
    let text = policy_text(need.on, name).unwrap_or_default();
    let policy = match Policy::parse(&text) {
        Ok(policy) => policy,
        // Fail closed, but leave the owner what it takes to replace the policy.
        Err(_) if foreign || grant.cross_account => return Err(denied(Why::UnreadablePolicy)),
        Err(_) => return Ok(()),
    };
    let home = &context.location.account_id;
    let arn = caller.arn(home);
    let resource = context.arn(need.on, name);
    let request = policy::Request {
        account: caller.account(home),
        arn: &arn,
        action: &grant.action,
        resource: &resource,
    };
    match policy.map(|p| p.decide(&request)) {
        Some(policy::Decision::Deny) => Err(denied(Why::ExplicitDeny)),
        Some(policy::Decision::Allow) => Ok(()),
        _ if foreign => Err(denied(Why::NotGranted)),
        _ => Ok(()),
    }
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
            account_id: None,
            permissions: permissions.iter().map(|p| p.parse().unwrap()).collect(),
        }
    }

    fn foreign(permissions: &[&str]) -> AccessKey {
        AccessKey {
            account_id: Some("111111111111".into()),
            ..key(permissions)
        }
    }

    fn need(right: Right, name: Option<&str>) -> Requirement {
        Requirement::Needs(vec![Need {
            right,
            name: name.map(str::to_owned),
            on: Kind::Queue,
        }])
    }

    fn here() -> Location {
        Location {
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
        }
    }

    /// `caller` making SQS `action` under `requirement`, the queues' policy `policy`.
    fn sqs(
        caller: &Caller<'_>,
        action: &str,
        requirement: &Requirement,
        policy: &str,
    ) -> Result<(), Denied> {
        let here = here();
        let context = Context {
            service: Kind::Queue,
            action,
            location: &here,
        };
        check(
            caller,
            requirement,
            &context,
            |q| q.ends_with(".dlq"),
            |_, _| Some(policy.to_owned()),
        )
    }

    #[test]
    fn reading_a_dead_letter_queue_needs_dead_letters_not_consume() {
        let consumer = key(&["consume:#"]);
        let caller = Caller::Key(&consumer);
        let read = need(Right::Read, Some("orders.dlq"));
        let denied = sqs(&caller, "ReceiveMessage", &read, "").unwrap_err();
        assert_eq!(denied.needed, "dead_letters");
        let read = need(Right::Read, Some("orders"));
        assert!(sqs(&caller, "ReceiveMessage", &read, "").is_ok());
    }

    #[test]
    fn an_unnamed_target_needs_the_right_on_every_name() {
        let narrow = key(&["admin:orders.#"]);
        let wide = key(&["admin:#"]);
        let unnamed = need(Right::Do(Action::Admin), None);
        assert!(sqs(&Caller::Key(&narrow), "PurgeQueue", &unnamed, "").is_err());
        assert!(sqs(&Caller::Key(&wide), "PurgeQueue", &unnamed, "").is_ok());
    }

    const GRANT_SEND: &str = r#"{"Statement": [{"Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::111111111111:root"},
        "Action": "SQS:SendMessage", "Resource": "arn:aws:sqs:us-east-1:000000000000:orders"}]}"#;

    #[test]
    fn another_accounts_key_needs_both_its_permissions_and_the_policy() {
        let send = need(Right::Do(Action::Publish), Some("orders"));
        let sender = foreign(&["publish:#"]);
        let caller = Caller::Key(&sender);
        let denied = sqs(&caller, "SendMessage", &send, "").unwrap_err();
        assert_eq!(denied.why, Why::NotGranted);
        assert_eq!(denied.needed, "sqs:SendMessage");
        assert!(sqs(&caller, "SendMessage", &send, GRANT_SEND).is_ok());
        assert!(sqs(&caller, "SendMessageBatch", &send, GRANT_SEND).is_ok());
        // The policy grants sending, not receiving.
        let read = need(Right::Read, Some("orders"));
        let reader = foreign(&["consume:#"]);
        let denied = sqs(&Caller::Key(&reader), "ReceiveMessage", &read, GRANT_SEND);
        assert_eq!(denied.unwrap_err().why, Why::NotGranted);
        // Without its own account's grant, the policy is not enough.
        let bare = foreign(&[]);
        let denied = sqs(&Caller::Key(&bare), "SendMessage", &send, GRANT_SEND);
        assert_eq!(denied.unwrap_err().why, Why::Lacks);
        // Nothing names a resource: nothing can grant it.
        let unnamed = need(Right::Do(Action::Publish), None);
        assert_eq!(
            sqs(&caller, "SendMessage", &unnamed, GRANT_SEND)
                .unwrap_err()
                .why,
            Why::NotGranted
        );
    }

    #[test]
    fn owner_only_actions_are_refused_to_another_account_whatever_the_policy() {
        let everything =
            r#"{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}}"#;
        let admin = foreign(&["admin:#"]);
        let set = need(Right::Do(Action::Admin), Some("orders"));
        let denied = sqs(&Caller::Key(&admin), "SetQueueAttributes", &set, everything);
        assert_eq!(denied.unwrap_err().why, Why::OwnerOnly);
        assert!(sqs(&Caller::Key(&admin), "PurgeQueue", &set, everything).is_ok());
    }

    #[test]
    fn an_explicit_deny_refuses_an_own_account_key_and_an_allow_does_not_widen_it() {
        let deny = r#"{"Statement": [{"Effect": "Deny", "Principal": {"AWS": "000000000000"},
            "Action": "sqs:SendMessage"}]}"#;
        let publisher = key(&["publish:orders"]);
        let send = need(Right::Do(Action::Publish), Some("orders"));
        let caller = Caller::Key(&publisher);
        assert!(sqs(&caller, "SendMessage", &send, "").is_ok());
        assert_eq!(
            sqs(&caller, "SendMessage", &send, deny).unwrap_err().why,
            Why::ExplicitDeny
        );
        let everything = r#"{"Statement": {"Effect": "Allow", "Principal": "*", "Action": "*"}}"#;
        let read = need(Right::Read, Some("orders"));
        assert_eq!(
            sqs(&caller, "ReceiveMessage", &read, everything)
                .unwrap_err()
                .why,
            Why::Lacks
        );
    }

    #[test]
    fn an_unreadable_stored_policy_fails_closed_but_can_be_replaced() {
        let admin = key(&["admin:#", "publish:#"]);
        let caller = Caller::Key(&admin);
        let garbled =
            r#"{"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "*", "Odd": 1}]}"#;
        let send = need(Right::Do(Action::Publish), Some("orders"));
        assert_eq!(
            sqs(&caller, "SendMessage", &send, garbled).unwrap_err().why,
            Why::UnreadablePolicy
        );
        let set = need(Right::Do(Action::Admin), Some("orders"));
        assert!(sqs(&caller, "SetQueueAttributes", &set, garbled).is_ok());
    }

    #[test]
    fn an_open_endpoint_asks_no_policy() {
        let deny = r#"{"Statement": {"Effect": "Deny", "Principal": "*", "Action": "*"}}"#;
        let send = need(Right::Do(Action::Publish), Some("orders"));
        assert!(sqs(&Caller::Open, "SendMessage", &send, deny).is_ok());
    }

    #[test]
    fn another_accounts_key_is_listed_nothing_and_named_in_its_account() {
        let mut named = foreign(&["consume:#"]);
        assert!(Caller::Key(&named).holds_any("orders"));
        assert!(!Caller::Key(&named).may_see("orders"));
        named.name = Some("bob".into());
        assert_eq!(
            Caller::Key(&named).arn("000000000000"),
            "arn:aws:iam::111111111111:user/bob"
        );
        assert_eq!(Caller::Key(&named).account("000000000000"), "111111111111");
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
