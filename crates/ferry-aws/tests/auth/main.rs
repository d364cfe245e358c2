//! The endpoint with access keys, over a real socket: requests signed with a configured
//! key are served; a wrong secret, an unknown key, no signature, a malformed header or a
//! clock more than 15 minutes off are refused with AWS's codes in each protocol (SQS JSON
//! and query, SNS, STS), and change nothing; each action family is checked against the
//! key's permissions (a refusal changes nothing); lists show only what a key may see; STS
//! GetCallerIdentity names the key's user and the account; queue and topic policies grant
//! keys of another account what they say and an explicit Deny refuses any key.

mod permissions;
mod policies;
mod signatures;
mod signer;
mod sns;
mod sts;
mod support;
