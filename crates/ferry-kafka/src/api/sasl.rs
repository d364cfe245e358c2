//! SaslHandshake (v0–1) and SaslAuthenticate (v0–2): a connection's authentication, as
//! Kafka's broker runs it.
//!
//! - With users, a connection starts unauthenticated: ApiVersions and SaslHandshake are
//!   answered, anything else closes it (Kafka's IllegalSaslStateException: "unexpected
//!   request during SASL handshake"). After the handshake only SaslAuthenticate is taken
//!   until the exchange ends.
//! - SaslHandshake v0 means the tokens that follow come as bare length-prefixed frames, not
//!   inside SaslAuthenticate (Kafka's pre-KIP-152 exchange); v1 means SaslAuthenticate.
//! - A mechanism not offered is answered UNSUPPORTED_SASL_MECHANISM with the list, and the
//!   connection closes. A failed exchange is answered SASL_AUTHENTICATION_FAILED with the
//!   reason (never whether the user exists) and the connection closes; in the raw v0
//!   exchange, which has no error field, it just closes, as Kafka does.
//! - Once authenticated — or on an endpoint without users — SaslHandshake and
//!   SaslAuthenticate are answered ILLEGAL_SASL_STATE and the connection goes on, as Kafka
//!   answers them after authentication (re-authentication is not offered).
//! - `session_lifetime_ms` is 0: the session does not expire and no re-authentication is
//!   asked for (Kafka's `connections.max.reauth.ms` = 0, its default).

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::text;
use crate::auth::scram::{self, Exchange, Hash};
use crate::auth::{PLAIN, Users, plain};
use crate::authz::Access;
use crate::connection::{ConnectionError, Request, decode_body, encode_response};

/// A SASL mechanism served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(Hash),
}

impl Mechanism {
    fn named(name: &str) -> Option<Mechanism> {
        match name {
            PLAIN => Some(Mechanism::Plain),
            "SCRAM-SHA-256" => Some(Mechanism::Scram(Hash::Sha256)),
            "SCRAM-SHA-512" => Some(Mechanism::Scram(Hash::Sha512)),
            _ => None,
        }
    }
}

/// Where a connection's authentication stands.
#[derive(Debug)]
pub enum Session {
    /// Nothing yet: ApiVersions and SaslHandshake only.
    Start,
    /// A mechanism was chosen; its first token is awaited. `raw`: handshake v0, whose
    /// tokens come as bare frames.
    Chosen { mechanism: Mechanism, raw: bool },
    /// SCRAM's server-first message was sent; the client-final one is awaited.
    Scram { exchange: Box<Exchange>, raw: bool },
    /// Authenticated, or an endpoint without users.
    Authenticated(Access),
}

impl Session {
    /// How a connection to an endpoint with `users` (or without) starts.
    pub fn new(users: Option<&Users>) -> Session {
        match users {
            None => Session::Authenticated(Access::Open),
            Some(_) => Session::Start,
        }
    }

    /// Whether the next frame is a bare SASL token (after a v0 handshake).
    pub fn expects_raw_token(&self) -> bool {
        matches!(
            self,
            Session::Chosen { raw: true, .. } | Session::Scram { raw: true, .. }
        )
    }

    pub fn access(&self) -> Option<&Access> {
        match self {
            Session::Authenticated(access) => Some(access),
            _ => None,
        }
    }
}

/// What the connection does after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Continue,
    /// Send the answer, then close the connection.
    Close,
}

fn mechanisms(users: Option<&Users>) -> Vec<StrBytes> {
    users
        .map(|u| u.mechanisms())
        .unwrap_or_default()
        .into_iter()
        .map(StrBytes::from_static_str)
        .collect()
}

pub fn handshake(
    users: Option<&Users>,
    session: &mut Session,
    request: SaslHandshakeRequest,
    version: i16,
) -> (SaslHandshakeResponse, After) {
    let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms(users));
    let illegal = response
        .clone()
        .with_error_code(ResponseError::IllegalSaslState.code());
    match (&*session, users) {
        (Session::Authenticated(_), _) | (_, None) => (illegal, After::Continue),
        (Session::Start, Some(users)) => {
            let asked = request.mechanism.as_str();
            match Mechanism::named(asked).filter(|_| users.mechanisms().contains(&asked)) {
                Some(mechanism) => {
                    *session = Session::Chosen {
                        mechanism,
                        raw: version == 0,
                    };
                    (response, After::Continue)
                }
                None => {
                    tracing::info!(mechanism = asked, "kafka: SASL mechanism not offered");
                    let refused =
                        response.with_error_code(ResponseError::UnsupportedSaslMechanism.code());
                    (refused, After::Close)
                }
            }
        }
        (Session::Chosen { .. } | Session::Scram { .. }, Some(_)) => (illegal, After::Close),
    }
}

pub fn authenticate(
    users: Option<&Users>,
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> (SaslAuthenticateResponse, After) {
    let response = SaslAuthenticateResponse::default();
    let illegal = |message: &str, after| {
        (
            response
                .clone()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(text(message)),
            after,
        )
    };
    let Some(users) = users else {
        return illegal("this endpoint has no SASL users", After::Continue);
    };
    match session {
        Session::Authenticated(_) => illegal(
            "SaslAuthenticate after a successful authentication (re-authentication is not \
             offered)",
            After::Continue,
        ),
        Session::Start => illegal("SaslAuthenticate before SaslHandshake", After::Close),
        Session::Chosen { raw: true, .. } | Session::Scram { raw: true, .. } => illegal(
            "SaslAuthenticate after a v0 SaslHandshake, whose tokens come unframed",
            After::Close,
        ),
        Session::Chosen { .. } | Session::Scram { .. } => {
            match step(users, session, &request.auth_bytes) {
                Ok(reply) => (
                    // The codec's default message is "", Kafka's is null on success.
                    response
                        .with_error_message(None)
                        .with_auth_bytes(reply.into())
                        .with_session_lifetime_ms(0),
                    After::Continue,
                ),
                Err(reason) => (
                    response
                        .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                        .with_error_message(text(reason)),
                    After::Close,
                ),
            }
        }
    }
}

/// One client token of the exchange: the server's reply token, or why it failed (then the
/// session is back at the start, and the connection is to be closed).
pub fn step(users: &Users, session: &mut Session, token: &[u8]) -> Result<Vec<u8>, String> {
    let state = std::mem::replace(session, Session::Start);
    let failed = |user: Option<&str>, reason: String| {
        tracing::info!(user, reason = %reason, "kafka: SASL authentication failed");
        Err(format!("Authentication failed: {reason}"))
    };
    match state {
        Session::Chosen {
            mechanism: Mechanism::Plain,
            ..
        } => {
            let credentials = match plain::parse(token) {
                Ok(c) => c,
                Err(e) => return failed(None, e.to_string()),
            };
            match users.check_plain(&credentials.user, &credentials.password) {
                Some(principal) => {
                    tracing::debug!(user = %principal.name, "kafka: authenticated (PLAIN)");
                    *session = Session::Authenticated(Access::User(principal));
                    Ok(Vec::new())
                }
                None => failed(
                    Some(&credentials.user),
                    "wrong user name or token (PLAIN: the user is the token's name, the \
                     password the token)"
                        .into(),
                ),
            }
        }
        Session::Chosen {
            mechanism: Mechanism::Scram(hash),
            raw,
        } => {
            let first = match scram::parse_client_first(token) {
                Ok(first) => first,
                Err(e) => return failed(None, e.to_string()),
            };
            let credential = users.scram(hash, &first.user).map(|(_, c)| c);
            let user = first.user.clone();
            let (exchange, server_first) = Exchange::start(
                hash,
                first,
                credential,
                || scram::decoy_salt(hash, users.decoy_secret(), &user),
                users.random(),
            );
            *session = Session::Scram {
                exchange: Box::new(exchange),
                raw,
            };
            Ok(server_first.into_bytes())
        }
        Session::Scram { exchange, .. } => match exchange.finish(token) {
            Ok((user, server_final)) => {
                // `finish` succeeds only with a credential, which only a known user has.
                let Some(principal) = users.principal(&user) else {
                    return failed(Some(&user), "the user is gone".into());
                };
                tracing::debug!(user = %user, "kafka: authenticated (SCRAM)");
                *session = Session::Authenticated(Access::User(Arc::clone(&principal)));
                Ok(server_final.into_bytes())
            }
            Err(e) => failed(None, e.to_string()),
        },
        Session::Start | Session::Authenticated(_) => {
            *session = state;
            Err("no SASL exchange is in progress".into())
        }
    }
}

/// The encoded answer to a SaslHandshake or SaslAuthenticate request, and what the
/// connection does after sending it.
pub fn answer(
    users: Option<&Users>,
    session: &mut Session,
    request: &mut Request,
) -> Result<(bytes::Bytes, After), ConnectionError> {
    let version = request.header.request_api_version;
    if request.api == ApiKey::SaslHandshake {
        let body: SaslHandshakeRequest = decode_body(request)?;
        let (response, after) = handshake(users, session, body, version);
        Ok((encode_response(request, version, &response)?, after))
    } else {
        let body: SaslAuthenticateRequest = decode_body(request)?;
        let (response, after) = authenticate(users, session, body);
        Ok((encode_response(request, version, &response)?, after))
    }
}
