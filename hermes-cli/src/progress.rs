//! Progress on standard error for commands that work through many jobs: a bar, or a spinner
//! when the work is one call; drawn only on a terminal, so scripts and logs see nothing of it.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where progress goes: standard error on a terminal, nowhere otherwise.
fn target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bar for `total` jobs, saying what is done to them (`replaying`).
pub(crate) fn bar(total: u64, doing: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), target());
    let style =
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({per_sec}, {eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(doing.to_owned());
    bar
}

/// A spinner saying what is under way, for work done in one call.
pub(crate) fn spinner(doing: String) -> ProgressBar {
    let spinner = ProgressBar::with_draw_target(None, target());
    spinner.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(doing);
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}
