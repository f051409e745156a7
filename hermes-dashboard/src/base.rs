//! The path the dashboard is mounted under, so its links and forms work nested as well as at
//! the root.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;

/// The path the router was nested under (`/ops/hermes`), empty at the root; never ends with
/// `/`. Read off the request: the path the application received less the one the router
/// routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Base(String);

impl Base {
    /// `path` (which starts with `/`) under the base: `/ops/hermes/dead`.
    pub(crate) fn to(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }

    /// The base of a request whose application saw `original` and whose router sees `routed`.
    fn of(original: &str, routed: &str) -> Base {
        let base = if routed == "/" {
            original.trim_end_matches('/')
        } else {
            original.strip_suffix(routed).unwrap_or("")
        };
        Base(base.to_owned())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Base {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let routed = parts.uri.path();
        Ok(match parts.extensions.get::<OriginalUri>() {
            Some(OriginalUri(original)) => Base::of(original.path(), routed),
            None => Base::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_what_the_application_routed_before_the_dashboard() {
        assert_eq!(Base::of("/dead", "/dead"), Base::default());
        assert_eq!(Base::of("/", "/"), Base::default());
        assert_eq!(
            Base::of("/ops/hermes/dead", "/dead").to("/"),
            "/ops/hermes/"
        );
        assert_eq!(
            Base::of("/ops/hermes", "/").to("/queues"),
            "/ops/hermes/queues"
        );
        assert_eq!(
            Base::of("/ops/hermes/", "/").to("/queues"),
            "/ops/hermes/queues"
        );
    }
}
