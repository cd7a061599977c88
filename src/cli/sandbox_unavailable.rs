//! `olm-rs sandbox` in a build without the `sandbox` feature (the container image): the
//! subcommand still parses, whatever its flags, and explains how to get a binary that has it.

use std::ffi::OsString;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;

#[derive(Debug, Args)]
pub struct SandboxArgs {
    /// Accepted and ignored: this build has no sandbox.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub ignored: Vec<OsString>,
}

pub fn run(_args: SandboxArgs) -> anyhow::Result<ExitCode> {
    bail!(
        "this olm-rs was built without the `sandbox` feature (the container image leaves the \
         embedded API server out to stay small); run the sandbox from a source checkout with \
         `cargo run -- sandbox`, or build with default features"
    )
}
