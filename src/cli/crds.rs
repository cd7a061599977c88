//! `olm-rs crds`: print the CustomResourceDefinitions olm-rs serves, as one YAML stream
//! (`olm-rs crds | kubectl apply --server-side -f -`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

pub fn run() -> anyhow::Result<ExitCode> {
    let crds = olm_rs::api::crd::all().context("generating the CRDs")?;
    let stream = olm_rs::api::crd::to_yaml_stream(&crds).context("rendering the CRDs as YAML")?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(stream.as_bytes())
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}
