//! Failures as Confluent answers them: an HTTP status and `{"error_code", "message"}`,
//! where the code is the status followed by two digits that tell the cases apart
//! (40401 subject not found, 40402 version not found, …). The one place a
//! [`RegistryError`] becomes a status and a code.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::wire::json;
use crate::RegistryError;

/// A failed call as the client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_code: u32,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, error_code: u32, message: impl Into<String>) -> Self {
        ApiError {
            status,
            error_code,
            message: message.into(),
        }
    }

    /// A request this API cannot read (bad JSON, a bad query value): the status itself as
    /// the code, as Confluent's REST layer answers.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, 400, message)
    }

    /// Well-formed JSON of the wrong shape (an unknown field, a string for a number).
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, 422, message)
    }
}

impl From<RegistryError> for ApiError {
    fn from(error: RegistryError) -> ApiError {
        use RegistryError::*;
        let (status, code) = match &error {
            SubjectNotFound(_) => (StatusCode::NOT_FOUND, 40401),
            VersionNotFound { .. } => (StatusCode::NOT_FOUND, 40402),
            SchemaIdNotFound(_) | SchemaNotFound(_) => (StatusCode::NOT_FOUND, 40403),
            SubjectSoftDeleted(_) => (StatusCode::NOT_FOUND, 40404),
            SubjectNotSoftDeleted(_) => (StatusCode::NOT_FOUND, 40405),
            VersionSoftDeleted { .. } => (StatusCode::NOT_FOUND, 40406),
            VersionNotSoftDeleted { .. } => (StatusCode::NOT_FOUND, 40407),
            SubjectLevelNotConfigured(_) => (StatusCode::NOT_FOUND, 40408),
            SubjectModeNotConfigured(_) => (StatusCode::NOT_FOUND, 40409),
            Incompatible { .. } => (StatusCode::CONFLICT, 40901),
            InvalidSchema(_) | UnsupportedSchemaType(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, 42201)
            }
            InvalidVersion(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42202),
            InvalidCompatibilityLevel(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42203),
            InvalidMode(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42204),
            NotPermitted(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42205),
            ReferenceExists { .. } => (StatusCode::UNPROCESSABLE_ENTITY, 42206),
            IdDoesNotMatch { .. } => (StatusCode::UNPROCESSABLE_ENTITY, 42207),
            InvalidSubject(_) => (StatusCode::UNPROCESSABLE_ENTITY, 42208),
            Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, 50001),
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(code = self.error_code, message = %self.message, "schema registry call failed");
        }
        json(
            self.status,
            &serde_json::json!({"error_code": self.error_code, "message": self.message}),
        )
    }
}
