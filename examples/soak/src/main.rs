//! `hermes-soak`: see the crate's documentation, or `hermes-soak --help`.

use std::process::ExitCode;

use clap::Parser as _;
use hermes_soak::args::{Cli, Role};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime starts");
    match cli.role {
        Some(Role::Worker(args)) => match runtime.block_on(hermes_soak::worker::run(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hermes-soak worker: {e}");
                ExitCode::from(3)
            }
        },
        Some(Role::Outage(args)) => report(runtime.block_on(hermes_soak::outage::run(&args))),
        Some(Role::Groups(args)) => report(runtime.block_on(hermes_soak::groups::run::run(&args))),
        None => report(runtime.block_on(hermes_soak::run::run(&cli.run))),
    }
}

fn report(outcome: Result<hermes_soak::run::Outcome, String>) -> ExitCode {
    match outcome {
        Ok(outcome) => {
            println!("{}", outcome.summary);
            if let Some(folder) = &outcome.folder {
                eprintln!("hermes-soak: the run's files are in {}", folder.display());
            }
            if outcome.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                for failure in &outcome.failures {
                    eprintln!("hermes-soak: FAILED: {failure}");
                }
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("hermes-soak: {e}");
            ExitCode::from(2)
        }
    }
}
