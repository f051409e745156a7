//! Credentials every request must carry, for a dashboard served on its own.

use std::fmt;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The environment variable [`Credentials::from_env`] reads a token from.
pub const TOKEN_VARIABLE: &str = "HERMES_DASHBOARD_TOKEN";
/// The environment variable [`Credentials::from_env`] reads a user name from.
pub const USER_VARIABLE: &str = "HERMES_DASHBOARD_USER";
/// The environment variable [`Credentials::from_env`] reads a password from.
pub const PASSWORD_VARIABLE: &str = "HERMES_DASHBOARD_PASSWORD";

/// What a request must present: a token (as `Authorization: Bearer <token>`, or as the
/// password of HTTP Basic authentication with any user name, which is what a browser asks
/// for), or a user name and a password (HTTP Basic).
///
/// Only a digest of the secret is kept, and what a request presents is compared with it in
/// constant time. `Debug` shows which kind of credentials these are, never the secret.
///
/// ```
/// use hermes_dashboard::Credentials;
///
/// let credentials = Credentials::user_password("ops", "correct horse battery staple");
/// assert!(!format!("{credentials:?}").contains("horse"));
/// ```
#[derive(Clone)]
pub struct Credentials {
    kind: Kind,
    /// SHA-256 of the token, or of `user:password`.
    digest: [u8; 32],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Token,
    UserPassword,
}

impl Credentials {
    /// Requests must present `token`.
    pub fn token(token: impl AsRef<str>) -> Self {
        Credentials {
            kind: Kind::Token,
            digest: digest(token.as_ref()),
        }
    }

    /// Requests must present `user` and `password` (HTTP Basic).
    pub fn user_password(user: impl AsRef<str>, password: impl AsRef<str>) -> Self {
        Credentials {
            kind: Kind::UserPassword,
            digest: digest(&format!("{}:{}", user.as_ref(), password.as_ref())),
        }
    }

    /// The credentials the environment names: a token in [`TOKEN_VARIABLE`], or a user and
    /// a password in [`USER_VARIABLE`] and [`PASSWORD_VARIABLE`]; `None` when none is set.
    ///
    /// # Errors
    /// [`CredentialsError`] when a variable is set but empty, or only one of the user and
    /// the password is set.
    pub fn from_env() -> Result<Option<Self>, CredentialsError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(
        lookup: impl Fn(&'static str) -> Option<String>,
    ) -> Result<Option<Self>, CredentialsError> {
        let read = |name: &'static str| match lookup(name) {
            Some(value) if value.is_empty() => Err(CredentialsError::Empty { variable: name }),
            value => Ok(value),
        };
        if let Some(token) = read(TOKEN_VARIABLE)? {
            return Ok(Some(Credentials::token(token)));
        }
        match (read(USER_VARIABLE)?, read(PASSWORD_VARIABLE)?) {
            (Some(user), Some(password)) => Ok(Some(Credentials::user_password(user, password))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(CredentialsError::Incomplete {
                set: USER_VARIABLE,
                missing: PASSWORD_VARIABLE,
            }),
            (None, Some(_)) => Err(CredentialsError::Incomplete {
                set: PASSWORD_VARIABLE,
                missing: USER_VARIABLE,
            }),
        }
    }

    /// Whether `headers` present these credentials.
    pub fn accepts(&self, headers: &HeaderMap) -> bool {
        let Some(presented) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let (scheme, value) = presented.split_once(' ').unwrap_or((presented, ""));
        let secret = if scheme.eq_ignore_ascii_case("bearer") && self.kind == Kind::Token {
            value.trim().to_owned()
        } else if scheme.eq_ignore_ascii_case("basic") {
            let Some(pair) = base64::engine::general_purpose::STANDARD
                .decode(value.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
            else {
                return false;
            };
            match self.kind {
                Kind::UserPassword => pair,
                Kind::Token => match pair.split_once(':') {
                    Some((_, password)) => password.to_owned(),
                    None => return false,
                },
            }
        } else {
            return false;
        };
        same_secret(&digest(&secret), &self.digest)
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Token => "token",
            Kind::UserPassword => "user and password",
        };
        f.debug_struct("Credentials")
            .field("kind", &kind)
            .field("secret", &"<hidden>")
            .finish()
    }
}

/// Whether `presented` is `secret`, in a time that depends on their lengths alone: the
/// comparison never stops at the first byte that differs.
pub(crate) fn same_secret(presented: &[u8], secret: &[u8]) -> bool {
    bool::from(presented.ct_eq(secret))
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Why [`Credentials::from_env`] found no usable credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialsError {
    /// A variable is set to the empty string.
    Empty {
        /// Its name.
        variable: &'static str,
    },
    /// One of the user and the password is set, not the other.
    Incomplete {
        /// The variable set.
        set: &'static str,
        /// The one missing.
        missing: &'static str,
    },
}

impl fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialsError::Empty { variable } => write!(f, "{variable} is set but empty"),
            CredentialsError::Incomplete { set, missing } => {
                write!(f, "{set} is set without {missing}")
            }
        }
    }
}

impl std::error::Error for CredentialsError {}

/// Answers 401 to a request without the credentials, passes the others on.
pub(crate) async fn require(
    State(credentials): State<Arc<Credentials>>,
    request: Request,
    next: Next,
) -> Response {
    if credentials.accepts(request.headers()) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(
            WWW_AUTHENTICATE,
            "Basic realm=\"Hermes dashboard\", charset=\"UTF-8\"",
        )],
        "this dashboard asks for credentials\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(authorization).unwrap());
        headers
    }

    fn basic(pair: &str) -> HeaderMap {
        headers(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        ))
    }

    #[test]
    fn a_token_is_accepted_as_bearer_or_as_a_basic_password() {
        let credentials = Credentials::token("s3cret");
        assert!(credentials.accepts(&headers("Bearer s3cret")));
        assert!(credentials.accepts(&headers("bearer s3cret")));
        assert!(credentials.accepts(&basic("anyone:s3cret")));
        assert!(!credentials.accepts(&headers("Bearer s3cre")));
        assert!(!credentials.accepts(&headers("Bearer s3crett")));
        assert!(!credentials.accepts(&basic("s3cret")));
        assert!(!credentials.accepts(&headers("Basic !!!")));
        assert!(!credentials.accepts(&HeaderMap::new()));
    }

    #[test]
    fn a_user_and_password_are_accepted_only_together() {
        let credentials = Credentials::user_password("ops", "pw");
        assert!(credentials.accepts(&basic("ops:pw")));
        assert!(!credentials.accepts(&basic("ops:pw2")));
        assert!(!credentials.accepts(&basic("op:pw")));
        assert!(!credentials.accepts(&headers("Bearer pw")));
    }

    #[test]
    fn the_environment_names_them_or_says_what_is_missing() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &'static str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(Credentials::from_lookup(env(&[])).unwrap().is_none());
        let token = Credentials::from_lookup(env(&[(TOKEN_VARIABLE, "t")]))
            .unwrap()
            .unwrap();
        assert!(token.accepts(&headers("Bearer t")));
        let pair = Credentials::from_lookup(env(&[(USER_VARIABLE, "u"), (PASSWORD_VARIABLE, "p")]))
            .unwrap()
            .unwrap();
        assert!(pair.accepts(&basic("u:p")));
        assert_eq!(
            Credentials::from_lookup(env(&[(USER_VARIABLE, "u")])).unwrap_err(),
            CredentialsError::Incomplete {
                set: USER_VARIABLE,
                missing: PASSWORD_VARIABLE
            }
        );
        assert_eq!(
            Credentials::from_lookup(env(&[(TOKEN_VARIABLE, "")])).unwrap_err(),
            CredentialsError::Empty {
                variable: TOKEN_VARIABLE
            }
        );
    }

    /// Secrets of 1 MiB make a comparison that stops early show: one wrong only in its last
    /// byte would take the whole comparison longer than one wrong in its first. The two are
    /// timed in turns, many times, and their medians compared.
    #[test]
    fn a_wrong_secret_is_refused_in_the_same_time_however_much_of_it_is_right() {
        use std::time::{Duration, Instant};
        const LEN: usize = 1 << 20;
        let secret = vec![b's'; LEN];
        let mut wrong_first = secret.clone();
        wrong_first[0] = b'x';
        let mut wrong_last = secret.clone();
        wrong_last[LEN - 1] = b'x';
        assert!(same_secret(&secret, &secret));
        let time = |presented: &[u8]| {
            let began = Instant::now();
            let same = same_secret(std::hint::black_box(presented), &secret);
            let took = began.elapsed();
            assert!(!same);
            took
        };
        let median = |mut samples: Vec<Duration>| {
            samples.sort();
            samples[samples.len() / 2]
        };
        for _ in 0..5 {
            time(&wrong_first);
            time(&wrong_last);
        }
        let (mut first, mut last) = (Vec::new(), Vec::new());
        for _ in 0..41 {
            first.push(time(&wrong_first));
            last.push(time(&wrong_last));
        }
        let (first, last) = (median(first), median(last));
        let ratio = last.as_secs_f64() / first.as_secs_f64();
        assert!(
            (0.67..=1.5).contains(&ratio),
            "wrong in the last byte: {last:?}, in the first: {first:?} (ratio {ratio:.2})"
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let shown = format!("{:?}", Credentials::token("hunter2-hunter2"));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("token"), "{shown}");
    }
}
