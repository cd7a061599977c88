//! `olm-rs catalog …`: validate, render, graph, upgrade-path. Text output is for people; JSON
//! (and YAML) shapes are stable for scripts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use olm_rs::catalog::bundle_dir::{self, render};
use olm_rs::catalog::semver_range::parse_tolerant;
use olm_rs::catalog::upgrade_graph::NoUpdate;
use olm_rs::catalog::{
    CatalogIndex, ChannelIndex, CsvMetadataHold, EdgeKind, LoadOptions, PackageIndex, Problem,
    load_catalog, load_catalog_with, validate,
};
use olm_rs::oci::{BundlePuller, Credentials, ImageName, PullerConfig};
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

/// Catalog tools. New subcommands (e.g. `serve`) are added as variants here.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Check a catalog with every rule `opm validate` enforces; exit 1 listing all problems.
    Validate(ValidateArgs),
    /// Render registry+v1 bundle directories into olm.bundle blobs, as `opm render` does.
    Render(RenderArgs),
    /// Show channel heads and upgrade edges of a package (`-o dot` for Graphviz).
    Graph(GraphArgs),
    /// The bundles OLM installs, one InstallPlan at a time, from an installed bundle to the head.
    UpgradePath(UpgradePathArgs),
    /// Serve the registry gRPC API (`api.Registry`) over a catalog directory, like `opm serve`.
    Serve(super::catalog_serve::ServeArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphOutput {
    Text,
    Json,
    Yaml,
    Dot,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// FBC directory, or a directory of bundle directories.
    pub catalog: PathBuf,
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// Bundle directories (each with manifests/ and metadata/) or bundle image references
    /// (pulled from their registry), in any mix.
    #[arg(required = true)]
    pub bundles: Vec<String>,
    #[arg(short, long, value_enum, default_value = "json")]
    pub output: Output,
    /// containers-registries.conf v2 file (mirrors, insecure, blocked); default
    /// /etc/containers/registries.conf when it exists.
    #[arg(long, value_name = "FILE")]
    pub registries_config: Option<PathBuf>,
    /// Extra CA certificates (PEM) for private registries.
    #[arg(long, value_name = "FILE")]
    pub registry_ca_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    pub catalog: PathBuf,
    #[arg(long)]
    pub package: String,
    /// Only this channel (default: every channel of the package).
    #[arg(long)]
    pub channel: Option<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: GraphOutput,
}

#[derive(Debug, Args)]
pub struct UpgradePathArgs {
    pub catalog: PathBuf,
    #[arg(long)]
    pub package: String,
    /// Channel (default: the package's default channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// Installed CSV name; without it, show what a new Subscription installs.
    #[arg(long)]
    pub from: Option<String>,
    /// Installed version, needed when the installed bundle is no longer in the catalog (a bundle
    /// of the package, in any channel, has its version taken from the catalog).
    #[arg(long, requires = "from")]
    pub from_version: Option<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

pub fn run(args: CatalogArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CatalogCommand::Validate(a) => validate_cmd(a),
        CatalogCommand::Render(a) => render_cmd(a),
        CatalogCommand::Graph(a) => graph_cmd(a),
        CatalogCommand::UpgradePath(a) => upgrade_path_cmd(a),
        CatalogCommand::Serve(a) => super::catalog_serve::run(a),
    }
}

fn print_structured(value: &Value, output: Output) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Yaml => out.write_all(serde_yaml_ng::to_string(value)?.as_bytes())?,
        _ => writeln!(out, "{}", serde_json::to_string_pretty(value)?)?,
    }
    Ok(())
}

fn validate_cmd(a: ValidateArgs) -> anyhow::Result<ExitCode> {
    // Only problems and counts are printed: CSV metadata is checked at load and not kept
    // (less memory to fault in, README "Performance").
    let options = LoadOptions {
        csv_metadata: CsvMetadataHold::CheckOnly,
    };
    let (kind, config, mut problems) = load_catalog_with(&a.catalog, options)?;
    problems.extend(validate::validate(&config));
    let (warnings, problems): (Vec<Problem>, Vec<Problem>) =
        problems.into_iter().partition(|p| p.rule.is_warning());
    let valid = problems.is_empty();
    match a.output {
        Output::Text => {
            let mut out = std::io::stdout().lock();
            for p in &problems {
                writeln!(out, "{p}")?;
            }
            for w in &warnings {
                writeln!(out, "warning: {w}")?;
            }
            if valid {
                writeln!(
                    out,
                    "{} is valid: {} packages, {} channels, {} bundles",
                    a.catalog.display(),
                    config.packages.len(),
                    config.channels.len(),
                    config.bundles.len()
                )?;
            } else {
                writeln!(
                    out,
                    "{} is invalid: {} problem(s)",
                    a.catalog.display(),
                    problems.len()
                )?;
            }
        }
        output => print_structured(
            &json!({
                "catalog": a.catalog.display().to_string(),
                "kind": kind,
                "valid": valid,
                "packages": config.packages.len(),
                "channels": config.channels.len(),
                "bundles": config.bundles.len(),
                "problems": problems,
                "warnings": warnings,
            }),
            output,
        )?,
    }
    // The process ends here: freeing a catalog's worth of small allocations one by one took
    // about a tenth of validate's time on catalogs/v4.20 (2–3 ms of 30), so the exit frees
    // it all at once instead.
    std::mem::forget(config);
    Ok(if valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn render_cmd(a: RenderArgs) -> anyhow::Result<ExitCode> {
    let mut blobs = Vec::new();
    let mut puller: Option<(BundlePuller, Credentials, tokio::runtime::Runtime)> = None;
    for arg in &a.bundles {
        let path = Path::new(arg);
        if path.exists() {
            if !bundle_dir::is_bundle_dir(path) {
                bail!(
                    "{}: not a bundle directory (needs manifests/ and metadata/)",
                    path.display()
                );
            }
            let dir = bundle_dir::read(path)?;
            let rendered = render::render(&dir, "")?;
            for w in &rendered.warnings {
                eprintln!("warning: {w}");
            }
            blobs.push(render::bundle_blob(&rendered.bundle));
            continue;
        }
        if let Err(e) = ImageName::parse(arg) {
            bail!(
                "{arg}: neither a bundle directory nor an image reference ({})",
                e.reason
            );
        }
        if puller.is_none() {
            puller = Some(image_puller(&a)?);
        }
        if let Some((p, creds, runtime)) = &puller {
            let pulled = runtime.block_on(p.pull(arg, creds))?;
            for w in &pulled.warnings {
                eprintln!("warning: {w}");
            }
            blobs.push(pulled.blob());
        }
    }
    let mut out = std::io::stdout().lock();
    for blob in &blobs {
        match a.output {
            Output::Yaml => write!(out, "---\n{}", serde_yaml_ng::to_string(blob)?)?,
            _ => writeln!(out, "{}", to_json_indent4(blob)?)?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The puller `catalog render` uses for image arguments, with the credentials podman and
/// skopeo read: `$REGISTRY_AUTH_FILE`, else `~/.docker/config.json` when it exists.
fn image_puller(
    a: &RenderArgs,
) -> anyhow::Result<(BundlePuller, Credentials, tokio::runtime::Runtime)> {
    let conf = a
        .registries_config
        .clone()
        .or_else(PullerConfig::default_registries_conf);
    let cfg = PullerConfig::from_files(conf.as_deref(), a.registry_ca_file.as_deref(), None)?;
    let puller = BundlePuller::new(cfg)?;
    let auth_file = std::env::var_os("REGISTRY_AUTH_FILE")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let f = PathBuf::from(std::env::var_os("HOME")?).join(".docker/config.json");
            f.is_file().then_some(f)
        });
    let creds = match auth_file {
        Some(f) => Credentials::from_auth_file(&f)?,
        None => Credentials::anonymous(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok((puller, creds, runtime))
}

/// JSON with 4-space indentation, as `opm render -o json` prints.
fn to_json_indent4(value: &Value) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    serde::Serialize::serialize(value, &mut ser)?;
    Ok(String::from_utf8(buf)?)
}

fn open_index(path: &Path) -> anyhow::Result<CatalogIndex> {
    let (_, config, problems) = load_catalog(path)?;
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(Problem::to_string).collect();
        bail!(
            "{} cannot be loaded:\n  {}",
            path.display(),
            list.join("\n  ")
        );
    }
    Ok(CatalogIndex::new(config))
}

fn find_package<'a>(index: &'a CatalogIndex, name: &str) -> anyhow::Result<&'a PackageIndex> {
    index.package(name).with_context(|| {
        let known: Vec<&str> = index.packages().iter().map(PackageIndex::name).collect();
        format!(
            "package {name:?} not found (packages: {})",
            known.join(", ")
        )
    })
}

fn find_channel<'a>(
    package: &'a PackageIndex,
    channel: Option<&str>,
) -> anyhow::Result<&'a ChannelIndex> {
    let name = match channel {
        Some(c) => c,
        None => package.default_channel_name().with_context(|| {
            format!(
                "package {:?} has no default channel; pass --channel",
                package.name()
            )
        })?,
    };
    package.channel(name).with_context(|| {
        let known: Vec<&str> = package.channels().iter().map(ChannelIndex::name).collect();
        format!(
            "channel {name:?} not found in package {:?} (channels: {})",
            package.name(),
            known.join(", ")
        )
    })
}

fn channel_json(package: &PackageIndex, c: &ChannelIndex) -> Value {
    let g = c.graph();
    let head = g.channel_head();
    let order = g.channel_order();
    json!({
        "name": c.name(),
        "default": package.default_channel_name() == Some(c.name()),
        "head": head.as_ref().ok().map(|h| h.name.clone()),
        "headError": head.as_ref().err().map(ToString::to_string),
        "order": order.as_ref().ok().map(|o| o.iter().map(|e| e.name.clone()).collect::<Vec<_>>()),
        "orderError": order.as_ref().err().map(ToString::to_string),
        "deprecation": package.channel_deprecation(c.name()),
        "entries": g.entries().iter().map(|e| json!({
            "name": e.name,
            "version": e.version.as_ref().map(ToString::to_string),
            "replaces": e.replaces,
            "skips": e.skips,
            "skipRange": e.skip_range,
            "skipRangeError": e.skip_range_error().map(ToString::to_string),
        })).collect::<Vec<_>>(),
        "edges": g.edges().iter().map(|e| json!({"from": e.from, "to": e.to, "kind": e.kind})).collect::<Vec<_>>(),
    })
}

fn graph_cmd(a: GraphArgs) -> anyhow::Result<ExitCode> {
    let index = open_index(&a.catalog)?;
    let package = find_package(&index, &a.package)?;
    let channels: Vec<&ChannelIndex> = match &a.channel {
        Some(c) => vec![find_channel(package, Some(c))?],
        None => package.channels().iter().collect(),
    };
    match a.output {
        GraphOutput::Dot => print!("{}", olm_rs::catalog::dot::dot(package, &channels)),
        GraphOutput::Text => {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "package {} (default channel: {})",
                package.name(),
                package.default_channel_name().unwrap_or("<none>")
            )?;
            for c in channels {
                let g = c.graph();
                match g.channel_head() {
                    Ok(h) => writeln!(out, "channel {}: head {}", c.name(), h.name)?,
                    Err(e) => writeln!(out, "channel {}: {e}", c.name())?,
                }
                for e in g.entries() {
                    let version = e
                        .version
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_else(|| "?".into());
                    let mut edges = Vec::new();
                    if let Some(r) = &e.replaces {
                        edges.push(format!("replaces {r}"));
                    }
                    if !e.skips.is_empty() {
                        edges.push(format!("skips {}", e.skips.join(", ")));
                    }
                    if let Some(r) = &e.skip_range {
                        let note = if e.skip_range_error().is_some() {
                            " (unparsable, ignored)"
                        } else {
                            ""
                        };
                        edges.push(format!("skipRange {r:?}{note}"));
                    }
                    writeln!(
                        out,
                        "  {} ({version}){}{}",
                        e.name,
                        if edges.is_empty() { "" } else { ": " },
                        edges.join("; ")
                    )?;
                }
            }
        }
        GraphOutput::Json | GraphOutput::Yaml => {
            let value = json!({
                "package": package.name(),
                "defaultChannel": package.default_channel_name(),
                "channels": channels.iter().map(|c| channel_json(package, c)).collect::<Vec<_>>(),
            });
            print_structured(
                &value,
                if a.output == GraphOutput::Yaml {
                    Output::Yaml
                } else {
                    Output::Json
                },
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn upgrade_path_cmd(a: UpgradePathArgs) -> anyhow::Result<ExitCode> {
    let index = open_index(&a.catalog)?;
    let package = find_package(&index, &a.package)?;
    let channel = find_channel(package, a.channel.as_deref())?;
    let g = channel.graph();
    let version = match (&a.from_version, &a.from) {
        (Some(v), _) => Some(parse_tolerant(v).with_context(|| format!("--from-version {v:?}"))?),
        // The installed bundle is a bundle of the package (in this channel or another): its
        // version is in the catalog, and skipRanges are checked against it, as the controller
        // does with the installed CSV's `spec.version`.
        (None, Some(from)) => package.bundle(from).and_then(|b| b.version()).cloned(),
        (None, None) => None,
    };
    let head = g.channel_head().ok().map(|h| h.name.clone());
    // Each step: bundle name and the edge that made it a candidate (none for a fresh install).
    type Steps = Vec<(String, Option<EdgeKind>)>;
    let (steps, reason): (Steps, Option<String>) = match &a.from {
        Some(from) => {
            let p = g.upgrade_path(from, version.as_ref());
            let steps = p
                .steps
                .iter()
                .map(|c| (c.entry.name.clone(), Some(c.via)))
                .collect();
            (steps, p.stopped.as_ref().map(|r: &NoUpdate| r.to_string()))
        }
        None => match g.fresh_install() {
            Ok(e) => (vec![(e.name.clone(), None)], None),
            Err(e) => (vec![], Some(e.to_string())),
        },
    };
    let path: Vec<String> = steps.iter().map(|(n, _)| n.clone()).collect();
    match a.output {
        Output::Text => {
            let mut out = std::io::stdout().lock();
            match &a.from {
                None => match path.first() {
                    Some(b) => writeln!(
                        out,
                        "a new Subscription to {}/{} installs {b}",
                        package.name(),
                        channel.name()
                    )?,
                    None => writeln!(
                        out,
                        "a new Subscription to {}/{} installs nothing",
                        package.name(),
                        channel.name()
                    )?,
                },
                Some(from) => {
                    writeln!(out, "from {from} in {}/{}:", package.name(), channel.name())?;
                    for (i, (name, via)) in steps.iter().enumerate() {
                        let via = via.map(|v| format!(" (via {v})")).unwrap_or_default();
                        writeln!(out, "  {}. {name}{via}", i + 1)?;
                    }
                    if path.is_empty() {
                        writeln!(out, "  no update")?;
                    }
                }
            }
            if let Some(r) = &reason {
                writeln!(out, "reason: {r}")?;
            }
        }
        output => print_structured(
            &json!({
                "package": package.name(),
                "channel": channel.name(),
                "from": a.from,
                "path": path,
                "head": head,
                "reason": reason,
            }),
            output,
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
