//! Path parameters that fail in the API's error shape. axum's own `Path` answers a
//! parameter it cannot decode (a percent-encoding that is not UTF-8, say) with a plain-text
//! body, where every other failure of the API is `{"error", "code"}`.

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The request's path parameters as `T`, or a `bad_path` [`ApiError`].
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(rejection.into()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> ApiError {
        ApiError::new(r.status(), "bad_path", r.body_text())
    }
}
