//! The web console at `/ui`: static files embedded in the binary, so `ferry serve` needs
//! nothing beside it and the page always matches the API it was built with.
//!
//! The files are served without a token (the sign-in form must load); every API call the
//! page makes sends the token itself. The content security policy allows only this
//! server's own scripts, styles and connections, and no inline script: a name or payload
//! that ever slipped into the page as markup could still not run.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// One embedded file: where it is served under `/ui/`, and as what.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/console/", $path)),
        }
    };
}

/// Every file of `console/`; the suite checks none is missing from this table.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("assets/console.css", CSS),
    asset!("assets/icon.svg", SVG),
    asset!("assets/js/api.js", JS),
    asset!("assets/js/chart.js", JS),
    asset!("assets/js/confirm.js", JS),
    asset!("assets/js/dom.js", JS),
    asset!("assets/js/format.js", JS),
    asset!("assets/js/live.js", JS),
    asset!("assets/js/main.js", JS),
    asset!("assets/js/message_view.js", JS),
    asset!("assets/js/router.js", JS),
    asset!("assets/js/sse.js", JS),
    asset!("assets/js/pages/common.js", JS),
    asset!("assets/js/pages/dead_letters.js", JS),
    asset!("assets/js/pages/filters.js", JS),
    asset!("assets/js/pages/overview.js", JS),
    asset!("assets/js/pages/queue.js", JS),
    asset!("assets/js/pages/topic.js", JS),
    asset!("assets/js/pages/topology.js", JS),
];

/// Same-origin only. `form-action 'none'`: the sign-in form is submitted by script, so a
/// page whose script failed cannot send the token in a URL; `frame-ancestors 'none'`:
/// no other site can frame the console to trick clicks on its buttons.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; base-uri 'none'; object-src 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// `/ui`, `/ui/` and `/ui/assets/...`, without the token middleware.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { serve("index.html") }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>| async move { serve(&path) }),
        )
}

fn serve(path: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.path == path) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "no such file in the console\n",
        )
            .into_response();
    };
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            // Revalidate every time: after an upgrade the page must not mix old modules
            // with new ones.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        asset.body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_served_at_a_distinct_path_with_a_type_matching_its_extension() {
        let mut seen = std::collections::HashSet::new();
        for a in ASSETS {
            assert!(seen.insert(a.path), "{} twice in the table", a.path);
            let expected = match a.path.rsplit('.').next() {
                Some("html") => HTML,
                Some("css") => CSS,
                Some("js") => JS,
                Some("svg") => SVG,
                other => panic!("{}: no content type for {other:?}", a.path),
            };
            assert_eq!(a.content_type, expected, "{}", a.path);
            assert!(!a.body.is_empty(), "{} is empty", a.path);
        }
    }
}
