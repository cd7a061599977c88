//! What the sandbox creates, as plain values: the namespaces and OperatorGroups OLM's chart
//! installs, the CatalogSource pointing at the in-process registry, and the Subscription chosen
//! from the catalog and the flags. Pure: no client, no clock.

use serde_json::{Value, json};

use crate::api::Approval;
use crate::catalog::CatalogIndex;

/// Where OLM keeps its global catalogs (and the chart its controller).
pub const CATALOG_NAMESPACE: &str = "olm";
/// Where OLM's global OperatorGroup lives; the sandbox subscribes here.
pub const OPERATORS_NAMESPACE: &str = "operators";
/// Name of the CatalogSource serving the sandbox's catalog.
pub const CATALOG_SOURCE: &str = "sandbox-catalog";

/// What the user asked for; `None` means "take it from the catalog".
#[derive(Debug, Clone)]
pub struct SubscriptionRequest {
    pub package: Option<String>,
    pub channel: Option<String>,
    pub starting_csv: Option<String>,
    /// Subscribe without `startingCSV`: OLM installs the channel head directly.
    pub head: bool,
    pub approval: Approval,
}

impl Default for SubscriptionRequest {
    fn default() -> Self {
        Self {
            package: None,
            channel: None,
            starting_csv: None,
            head: false,
            approval: Approval::Automatic,
        }
    }
}

/// The Subscription the sandbox creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionChoice {
    pub package: String,
    pub channel: String,
    pub starting_csv: Option<String>,
    pub approval: Approval,
    /// The channel head, where the Subscription ends up.
    pub head: String,
    /// Every channel of the package (for "switch channel" hints).
    pub channels: Vec<String>,
}

/// Why the flags do not fit the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("the catalog has no packages")]
    NoPackages,
    #[error("the catalog has several packages ({known}); choose one with --package")]
    SeveralPackages { known: String },
    #[error("--package {package}: not in the catalog (packages: {known})")]
    UnknownPackage { package: String, known: String },
    #[error("package {package} has no default channel; choose one with --channel")]
    NoDefaultChannel { package: String },
    #[error("--channel {channel}: package {package} has no such channel (channels: {known})")]
    UnknownChannel {
        package: String,
        channel: String,
        known: String,
    },
    #[error("--starting-csv {csv}: not in channel {channel} of {package} (entries: {known})")]
    UnknownStartingCsv {
        package: String,
        channel: String,
        csv: String,
        known: String,
    },
    #[error("channel {channel} of {package} has no usable head: {reason}")]
    BrokenChannel {
        package: String,
        channel: String,
        reason: String,
    },
}

/// Picks package, channel and starting CSV: the flags when given, else the catalog's only
/// package, its default channel, and the oldest entry of the channel (so the run shows an
/// install followed by every upgrade hop).
pub fn choose_subscription(
    index: &CatalogIndex,
    request: &SubscriptionRequest,
) -> Result<SubscriptionChoice, ChoiceError> {
    let names = |it: &mut dyn Iterator<Item = &str>| it.collect::<Vec<_>>().join(", ");
    let packages = index.packages();
    let package = match &request.package {
        Some(name) => index
            .package(name)
            .ok_or_else(|| ChoiceError::UnknownPackage {
                package: name.clone(),
                known: names(&mut packages.iter().map(|p| p.name())),
            })?,
        None => match packages {
            [] => return Err(ChoiceError::NoPackages),
            [only] => only,
            many => {
                return Err(ChoiceError::SeveralPackages {
                    known: names(&mut many.iter().map(|p| p.name())),
                });
            }
        },
    };
    let pkg = package.name().to_owned();
    let channel = match &request.channel {
        Some(name) => package
            .channel(name)
            .ok_or_else(|| ChoiceError::UnknownChannel {
                package: pkg.clone(),
                channel: name.clone(),
                known: names(&mut package.channels().iter().map(|c| c.name())),
            })?,
        None => package
            .default_channel()
            .ok_or_else(|| ChoiceError::NoDefaultChannel {
                package: pkg.clone(),
            })?,
    };
    let broken = |reason: String| ChoiceError::BrokenChannel {
        package: pkg.clone(),
        channel: channel.name().to_owned(),
        reason,
    };
    let graph = channel.graph();
    let order = graph.channel_order().map_err(|e| broken(e.to_string()))?;
    let head = order
        .first()
        .ok_or_else(|| broken("no entries".to_owned()))?
        .name
        .clone();
    let starting_csv = match (&request.starting_csv, request.head) {
        (_, true) => None,
        (Some(csv), false) => {
            if graph.entry(csv).is_none() {
                return Err(ChoiceError::UnknownStartingCsv {
                    package: pkg,
                    channel: channel.name().to_owned(),
                    csv: csv.clone(),
                    known: names(&mut graph.entries().iter().map(|e| e.name.as_str())),
                });
            }
            Some(csv.clone())
        }
        // The channel order runs from the head down the replaces chain; its last entry is
        // the oldest one a Subscription can start from.
        (None, false) => order.last().map(|e| e.name.clone()),
    };
    Ok(SubscriptionChoice {
        package: pkg,
        channel: channel.name().to_owned(),
        starting_csv,
        approval: request.approval.clone(),
        head,
        channels: package
            .channels()
            .iter()
            .map(|c| c.name().to_owned())
            .collect(),
    })
}

/// `olm` and `operators`, as the chart creates them.
pub fn namespaces() -> Vec<Value> {
    [CATALOG_NAMESPACE, OPERATORS_NAMESPACE]
        .into_iter()
        .map(|name| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
        .collect()
}

/// The chart's two OperatorGroups: `global-operators` (all namespaces) in `operators`, and
/// `olm-operators` targeting only `olm`.
pub fn operator_groups() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "global-operators", "namespace": OPERATORS_NAMESPACE},
            "spec": {}
        }),
        json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "olm-operators", "namespace": CATALOG_NAMESPACE},
            "spec": {"targetNamespaces": [CATALOG_NAMESPACE]}
        }),
    ]
}

/// A `grpc` CatalogSource dialling `address` directly (no registry pod).
pub fn catalog_source(address: &str) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": CATALOG_SOURCE, "namespace": CATALOG_NAMESPACE},
        "spec": {
            "sourceType": "grpc",
            "address": address,
            "displayName": "olm-rs sandbox catalog",
            "publisher": "olm-rs",
        }
    })
}

/// The Subscription, named after its package, in `operators`.
pub fn subscription(choice: &SubscriptionChoice) -> Value {
    let mut spec = json!({
        "name": choice.package,
        "channel": choice.channel,
        "source": CATALOG_SOURCE,
        "sourceNamespace": CATALOG_NAMESPACE,
        "installPlanApproval": choice.approval.as_str(),
    });
    if let Some(csv) = &choice.starting_csv {
        spec["startingCSV"] = json!(csv);
    }
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": choice.package, "namespace": OPERATORS_NAMESPACE},
        "spec": spec
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::load_catalog;

    fn examples() -> CatalogIndex {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/catalog");
        let (_, config, problems) = load_catalog(&dir).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        CatalogIndex::new(config)
    }

    #[test]
    fn defaults_start_from_the_oldest_entry_of_the_default_channel() {
        let choice = choose_subscription(&examples(), &SubscriptionRequest::default()).unwrap();
        assert_eq!(choice.package, "greeter-operator");
        assert_eq!(choice.channel, "stable");
        assert_eq!(
            choice.starting_csv.as_deref(),
            Some("greeter-operator.v1.0.0")
        );
        assert_eq!(choice.head, "greeter-operator.v1.2.0");
        let sub = subscription(&choice);
        assert_eq!(sub["spec"]["startingCSV"], "greeter-operator.v1.0.0");
        assert_eq!(sub["spec"]["installPlanApproval"], "Automatic");
    }

    #[test]
    fn head_flag_omits_the_starting_csv() {
        let request = SubscriptionRequest {
            channel: Some("fast".into()),
            head: true,
            ..Default::default()
        };
        let choice = choose_subscription(&examples(), &request).unwrap();
        assert_eq!(choice.starting_csv, None);
        assert_eq!(choice.head, "greeter-operator.v2.0.0");
        assert!(subscription(&choice)["spec"].get("startingCSV").is_none());
    }

    #[test]
    fn unknown_flags_name_the_flag_and_the_choices() {
        let index = examples();
        let bad = |request: SubscriptionRequest| {
            choose_subscription(&index, &request)
                .unwrap_err()
                .to_string()
        };
        let err = bad(SubscriptionRequest {
            package: Some("nope".into()),
            ..Default::default()
        });
        assert_eq!(
            err,
            "--package nope: not in the catalog (packages: greeter-operator)"
        );
        let err = bad(SubscriptionRequest {
            channel: Some("beta".into()),
            ..Default::default()
        });
        assert!(
            err.starts_with("--channel beta:") && err.contains("fast, stable"),
            "{err}"
        );
        let err = bad(SubscriptionRequest {
            starting_csv: Some("greeter-operator.v2.0.0".into()),
            ..Default::default()
        });
        assert!(
            err.starts_with("--starting-csv greeter-operator.v2.0.0: not in channel stable"),
            "{err}"
        );
    }
}
