//! How broker errors become Hermes errors.

use hermes_core::Error;

use crate::driver::NAME;

/// A lapin error as a Hermes error: a refused declaration is a configuration error that says
/// the way out; anything else is a (temporary) connection error.
pub(crate) fn lapin_error(error: lapin::Error) -> Error {
    let text = error.to_string();
    if text.contains("PRECONDITION_FAILED") {
        return Error::Config {
            driver: NAME,
            message: format!(
                "the broker refused a queue declaration ({text}); an existing queue with other \
                 settings (durable or not, arguments) must be deleted or used with matching options"
            ),
        };
    }
    Error::connection(NAME, error)
}
