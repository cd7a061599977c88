//! `olm-rs resolve`: what a Subscription would install, the whole upgrade path it would follow,
//! or why nothing would be installed — the same words the `ResolutionFailed` condition uses.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;

use olm_rs::api::CatalogRef;
use olm_rs::api::Subscription;
use olm_rs::reconcile::subscription::load_index;
use olm_rs::resolve::subscription::dependency_subscription_name;
use olm_rs::resolve::{
    CatalogContent, CatalogInput, InstalledCsv, NamespaceInput, OperatorGroups, Outcome, PathStep,
    Preview, preview,
};

#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// The Subscription (YAML or JSON). Its `status.installedCSV`, when set, is taken as the
    /// installed operator.
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// A catalog directory (file-based catalog, or registry+v1 bundle directories) standing in
    /// for the Subscription's CatalogSource.
    #[arg(
        long,
        conflicts_with = "kubeconfig",
        required_unless_present = "kubeconfig"
    )]
    pub catalog: Option<PathBuf>,
    /// Read the CatalogSources, OperatorGroups and installed CSVs from this cluster instead.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Exit code 0 when something would be installed or the installed operator is up to date, 1
/// when nothing can be installed (the explanation is printed either way).
pub fn run(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    let sub = read_subscription(&args.file)?;
    let namespace = sub
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_owned());
    let (report, outcome) = match (&args.catalog, &args.kubeconfig) {
        (Some(dir), _) => {
            let index = load_index(dir)?;
            let key = CatalogRef::new(&sub.spec.source_namespace, &sub.spec.source);
            let catalogs = vec![CatalogInput {
                key,
                priority: 0,
                uid: None,
                content: CatalogContent::Ready(Arc::clone(&index)),
                healthy: true,
            }];
            let installed: Vec<InstalledCsv> = installed_from_status(&sub, &index);
            let groups = OperatorGroups {
                names: vec!["(assumed)".into()],
                exclude_global_catalogs: false,
            };
            let subs = [sub.clone()];
            let ns = NamespaceInput {
                namespace: &namespace,
                subscriptions: &subs,
                installed: &installed,
                catalogs: &catalogs,
                operator_groups: &groups,
                // The directory stands in for the Subscription's catalog wherever it lives.
                global_catalog_namespace: &sub.spec.source_namespace,
            };
            let p = preview(&ns, &sub);
            (Report::new(&sub, &namespace, &p), p.outcome)
        }
        (None, Some(kubeconfig)) => preview_in_cluster(kubeconfig, &sub, &namespace)?,
        (None, None) => anyhow::bail!("give --catalog DIR or --kubeconfig FILE"),
    };
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", report.text()),
    }
    Ok(if matches!(outcome, Outcome::Refused(_)) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_subscription(path: &PathBuf) -> anyhow::Result<Subscription> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("{}: not YAML or JSON", path.display()))?;
    if value.get("kind").and_then(Value::as_str) != Some("Subscription") {
        anyhow::bail!("{}: kind must be Subscription", path.display());
    }
    olm_rs::api::decode::decode(&value).with_context(|| path.display().to_string())
}

/// The installed operator named by `status.installedCSV`, with the version the catalog gives it.
pub fn installed_from_status(
    sub: &Subscription,
    index: &olm_rs::catalog::CatalogIndex,
) -> Vec<InstalledCsv> {
    let Some(name) = sub
        .status
        .as_ref()
        .and_then(|s| s.installed_csv.clone())
        .filter(|n| !n.is_empty())
    else {
        return Vec::new();
    };
    let bundle = index.bundle(&sub.spec.name, &name);
    vec![InstalledCsv {
        version: bundle.and_then(|b| b.version().cloned()),
        package: Some(sub.spec.name.clone()),
        provided: bundle
            .map(|b| b.provided_gvks().collect())
            .unwrap_or_default(),
        phase: "Succeeded".into(),
        properties: bundle.map(|b| b.properties().to_vec()).unwrap_or_default(),
        name,
    }]
}

/// The JSON document `-o json` prints (and the text output is made from).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub subscription: String,
    pub namespace: String,
    pub catalog: String,
    pub package: String,
    pub channel: Option<String>,
    /// `install`, `adopt`, `upToDate` or `refused`.
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installed: Option<String>,
    /// The bundle the first InstallPlan would install.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub install: Option<PathStep>,
    /// Every InstallPlan up to the channel head, the first one included.
    pub path: Vec<PathStep>,
    /// What the first InstallPlan installs besides the bundle: its dependencies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<DependencyStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_stops: Option<String>,
    /// Why nothing newer is installed (up to date), or why nothing can be (refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Report {
    pub fn new(sub: &Subscription, namespace: &str, p: &Preview) -> Report {
        let installed = sub
            .status
            .as_ref()
            .and_then(|s| s.installed_csv.clone())
            .filter(|s| !s.is_empty());
        let mut report = Report {
            subscription: sub.metadata.name.clone().unwrap_or_default(),
            namespace: namespace.to_owned(),
            catalog: format!("{}/{}", sub.spec.source_namespace, sub.spec.source),
            package: sub.spec.name.clone(),
            channel: sub.spec.channel.clone().filter(|c| !c.is_empty()),
            outcome: "install",
            installed,
            install: p.path.first().cloned(),
            path: p.path.clone(),
            dependencies: Vec::new(),
            path_stops: p.stopped.clone(),
            reason: None,
            message: None,
        };
        match &p.outcome {
            Outcome::Install(target) => {
                report.dependencies = target
                    .dependencies
                    .iter()
                    .map(|d| DependencyStep {
                        bundle: d.bundle.clone(),
                        version: d.version.clone(),
                        package: d.package.clone(),
                        channel: d.channel.clone(),
                        catalog: d.catalog.to_string(),
                        required_by: d.required_by.clone(),
                        subscription: dependency_subscription_name(d),
                    })
                    .collect();
            }
            Outcome::Adopt { csv } => {
                report.outcome = "adopt";
                report.message = Some(format!(
                    "{csv} is installed without a Subscription; this Subscription would manage it"
                ));
            }
            Outcome::UpToDate { why, held, .. } => {
                report.outcome = "upToDate";
                report.message = Some(match held {
                    Some(held) => held.to_string(),
                    None => why.to_string(),
                });
            }
            Outcome::Refused(refusal) => {
                report.outcome = "refused";
                report.reason = Some(refusal.reason().to_owned());
                report.message = Some(refusal.to_string());
            }
        }
        report
    }

    pub fn text(&self) -> String {
        let mut out = format!(
            "Subscription {}/{}: package {:?}, {}, catalog {}\n",
            self.namespace,
            self.subscription,
            self.package,
            self.channel
                .as_ref()
                .map_or("default channel first".to_owned(), |c| format!(
                    "channel {c:?}"
                )),
            self.catalog
        );
        if let Some(installed) = &self.installed {
            out.push_str(&format!("Installed: {installed}\n"));
        }
        match self.outcome {
            "install" => {
                if let Some(first) = &self.install {
                    out.push_str(&format!(
                        "Would install: {}{}\n",
                        first.bundle,
                        version(first)
                    ));
                    if let Some(image) = &first.image {
                        out.push_str(&format!("Bundle image to pull: {image}\n"));
                    }
                }
                if !self.dependencies.is_empty() {
                    out.push_str("With its dependencies, in the same InstallPlan:\n");
                    for d in &self.dependencies {
                        let version = d
                            .version
                            .as_ref()
                            .map_or(String::new(), |v| format!(" (version {v})"));
                        out.push_str(&format!(
                            "  - {}{version} from package {:?}, channel {:?}, catalog {}; required by {}; Subscription {}\n",
                            d.bundle, d.package, d.channel, d.catalog, d.required_by, d.subscription
                        ));
                    }
                }
                out.push_str("Upgrade path, one InstallPlan per step:\n");
                for (i, step) in self.path.iter().enumerate() {
                    let how = match &step.replaces {
                        Some(r) => format!("{} {r}", step.via),
                        None => step.via.clone(),
                    };
                    let version = step
                        .version
                        .as_ref()
                        .map_or(String::new(), |v| format!("  version {v}"));
                    out.push_str(&format!("  {}. {}{version}  {how}\n", i + 1, step.bundle));
                }
                if let Some(stop) = &self.path_stops {
                    out.push_str(&format!("The path stops there: {stop}\n"));
                }
            }
            "refused" => out.push_str(&format!(
                "Nothing would be installed ({}): {}\n",
                self.reason.as_deref().unwrap_or_default(),
                self.message.as_deref().unwrap_or_default()
            )),
            _ => out.push_str(&format!(
                "Nothing new to install: {}\n",
                self.message.as_deref().unwrap_or_default()
            )),
        }
        out
    }
}

/// A dependency the first InstallPlan would install.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyStep {
    pub bundle: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub package: String,
    pub channel: String,
    pub catalog: String,
    pub required_by: String,
    /// The Subscription created for it (unless one for its package exists).
    pub subscription: String,
}

fn version(step: &PathStep) -> String {
    step.version
        .as_ref()
        .map_or(String::new(), |v| format!(" (version {v})"))
}

/// TEMPORARY until the registry client is on main.
fn preview_in_cluster(
    kubeconfig: &std::path::Path,
    _sub: &Subscription,
    _namespace: &str,
) -> anyhow::Result<(Report, Outcome)> {
    anyhow::bail!(
        "{}: reading catalogs from a cluster is not wired yet",
        kubeconfig.display()
    )
}
