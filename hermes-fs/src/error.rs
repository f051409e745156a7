//! Filesystem errors as Hermes errors.

use std::io;
use std::path::Path;

use hermes_core::Error;

use crate::NAME;

/// An error for `action` (a verb phrase) on `path`. Errors that an operator can fix while the
/// worker runs (permissions, a full or read-only disk) are temporary, so the dispatcher retries
/// instead of exiting.
pub(crate) fn io_error(action: &str, path: &Path, error: io::Error) -> Error {
    let temporary = matches!(
        error.kind(),
        io::ErrorKind::PermissionDenied
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
            | io::ErrorKind::Interrupted
            | io::ErrorKind::TimedOut
            | io::ErrorKind::ResourceBusy
    );
    Error::Driver {
        driver: NAME,
        message: format!("cannot {action} {}: {error}", path.display()),
        temporary,
        source: Some(Box::new(error)),
    }
}
