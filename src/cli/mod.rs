//! Subcommands. Each lives in its own file; this one only routes.

mod catalog;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "olm-rs",
    version,
    about = "Operator Lifecycle Manager, re-built in Rust"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the olm-rs version.
    Version,
    /// Catalog tools: validate, render, graph, upgrade-path.
    Catalog(catalog::CatalogArgs),
}

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Version => {
            println!("olm-rs {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        Command::Catalog(args) => catalog::run(args),
    }
}
