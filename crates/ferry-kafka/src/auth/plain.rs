//! SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd` in one message.
//!
//! In Ferry's words the user (authcid) is a token's `name` in `[[auth.tokens]]` and the
//! password is the token itself, which is checked against the token's SHA-256 as the other
//! front ends check a bearer token. The name is required rather than ignored (a token
//! alone finds its grant) because Kafka's principal is the user name — in logs, refusals
//! and ACL-shaped thinking — and SCRAM, which must look a user up before any secret is
//! seen, names it anyway: one rule for both mechanisms.

/// Why a PLAIN message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    #[error("the PLAIN message is not `[authzid] NUL user NUL password`")]
    Malformed,
    #[error("the PLAIN message is not UTF-8")]
    NotUtf8,
    #[error("the PLAIN authorization identity must be empty or the user name")]
    AuthorizationIdentity,
    #[error("the PLAIN user name or password is empty")]
    Empty,
}

/// The user and password of a PLAIN message.
#[derive(Debug, PartialEq, Eq)]
pub struct PlainCredentials {
    pub user: String,
    pub password: String,
}

pub fn parse(message: &[u8]) -> Result<PlainCredentials, PlainError> {
    let text = std::str::from_utf8(message).map_err(|_| PlainError::NotUtf8)?;
    let mut parts = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(PlainError::Malformed);
    };
    if user.is_empty() || password.is_empty() {
        return Err(PlainError::Empty);
    }
    // Kafka refuses acting for another identity the same way.
    if !authzid.is_empty() && authzid != user {
        return Err(PlainError::AuthorizationIdentity);
    }
    Ok(PlainCredentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_takes_user_and_password_with_an_optional_matching_identity() {
        let plain = |u: &str, p: &str| PlainCredentials {
            user: u.into(),
            password: p.into(),
        };
        assert_eq!(parse(b"\0orders\0tok"), Ok(plain("orders", "tok")));
        assert_eq!(parse(b"orders\0orders\0tok"), Ok(plain("orders", "tok")));
        assert_eq!(
            parse(b"admin\0orders\0tok"),
            Err(PlainError::AuthorizationIdentity)
        );
        assert_eq!(parse(b"orders\0tok"), Err(PlainError::Malformed));
        assert_eq!(parse(b"\0a\0b\0c"), Err(PlainError::Malformed));
        assert_eq!(parse(b"\0\0tok"), Err(PlainError::Empty));
        assert_eq!(parse(b"\0orders\0"), Err(PlainError::Empty));
        assert_eq!(parse(b"\0or\xffders\0tok"), Err(PlainError::NotUtf8));
    }
}
