//! What an action posts: form fields that may repeat (`id=a&id=b` for a selection), checked
//! for the token of the dashboard's pages.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use hermes_core::{DEFAULT_PRIORITY, Priority};

use crate::base::Base;
use crate::state::State;

/// A posted form.
pub(crate) struct Posted(Vec<(String, String)>);

/// Why a form is refused: its status and a line saying why.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Refused(pub(crate) StatusCode, pub(crate) &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

impl Posted {
    /// The form of `body`, when it carries the token of `state`'s pages; the answer refusing
    /// it otherwise.
    pub(crate) fn checked(state: &State, body: &[u8]) -> Result<Posted, Refused> {
        let posted = Posted(url::form_urlencoded::parse(body).into_owned().collect());
        if posted.one("token").is_some_and(|t| state.carries_token(t)) {
            Ok(posted)
        } else {
            Err(Refused(
                StatusCode::FORBIDDEN,
                "the form's token is not this dashboard's",
            ))
        }
    }

    /// The first value of `name`.
    pub(crate) fn one(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order.
    pub(crate) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The queue the form names (`priority`), the default one when it names none.
    pub(crate) fn priority(&self) -> Result<Priority, Refused> {
        match self.one("priority") {
            None => Ok(DEFAULT_PRIORITY),
            Some(text) => text
                .parse()
                .map_err(|_| Refused(StatusCode::BAD_REQUEST, "priority: not a number")),
        }
    }

    /// Back to the page the form was on (`back`, a path under the dashboard), or to `default`
    /// under it; never to another site.
    pub(crate) fn back(&self, base: &Base, default: &str) -> Response {
        let under = base.to("/");
        let back = self
            .one("back")
            .filter(|b| b.starts_with(&under) && !b.starts_with("//") && !b.contains('\\'))
            .map_or_else(|| base.to(default), str::to_owned);
        Redirect::to(&back).into_response()
    }
}
