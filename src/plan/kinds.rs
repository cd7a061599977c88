//! The kinds an InstallPlan step may carry and how each is executed
//! (docs/install-plans.md §7.3). OLM dispatches on the step's `kind` alone; so do we.

/// Where an object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

/// How the executor treats an existing object of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// Created with an installed-alongside annotation; updated only after the docs/install-plans.md §7.4 checks;
    /// `WaitingForApi` until Established.
    CustomResourceDefinition,
    /// Created; an existing CSV is left untouched.
    ClusterServiceVersion,
    /// Created (dependency Subscriptions); an existing one is left untouched.
    Subscription,
    /// Created with an owner reference to the CSV; owner references merged on update.
    ServiceAccount,
    /// Converged to the desired content; owner reference to the CSV.
    Role,
    RoleBinding,
    /// Converged; tied to the CSV by `olm.owner*` labels (no owner reference across scopes).
    ClusterRole,
    ClusterRoleBinding,
    /// Converged; owner reference to the CSV.
    Service,
    ConfigMap,
    /// A `Secret` shipped inside a bundle (step kind `BundleSecret`).
    BundleSecret,
    /// One of the extra kinds OLM supports through discovery (PrometheusRule, …).
    Discovered(DiscoveredKind),
}

/// The extra kinds of docs/install-plans.md §7.3, with the scope their APIs have everywhere they exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveredKind {
    PrometheusRule,
    ServiceMonitor,
    PodDisruptionBudget,
    PriorityClass,
    VerticalPodAutoscaler,
    ConsoleYamlSample,
    ConsoleQuickStart,
    ConsoleCliDownload,
    ConsoleLink,
    ConsolePlugin,
    NetworkPolicy,
}

const DISCOVERED: [(&str, DiscoveredKind, Scope); 11] = [
    (
        "PrometheusRule",
        DiscoveredKind::PrometheusRule,
        Scope::Namespaced,
    ),
    (
        "ServiceMonitor",
        DiscoveredKind::ServiceMonitor,
        Scope::Namespaced,
    ),
    (
        "PodDisruptionBudget",
        DiscoveredKind::PodDisruptionBudget,
        Scope::Namespaced,
    ),
    (
        "PriorityClass",
        DiscoveredKind::PriorityClass,
        Scope::Cluster,
    ),
    (
        "VerticalPodAutoscaler",
        DiscoveredKind::VerticalPodAutoscaler,
        Scope::Namespaced,
    ),
    (
        "ConsoleYAMLSample",
        DiscoveredKind::ConsoleYamlSample,
        Scope::Cluster,
    ),
    (
        "ConsoleQuickStart",
        DiscoveredKind::ConsoleQuickStart,
        Scope::Cluster,
    ),
    (
        "ConsoleCLIDownload",
        DiscoveredKind::ConsoleCliDownload,
        Scope::Cluster,
    ),
    ("ConsoleLink", DiscoveredKind::ConsoleLink, Scope::Cluster),
    (
        "ConsolePlugin",
        DiscoveredKind::ConsolePlugin,
        Scope::Cluster,
    ),
    (
        "NetworkPolicy",
        DiscoveredKind::NetworkPolicy,
        Scope::Namespaced,
    ),
];

/// Step kind of a bundle Secret (spec docs/install-plans.md §7.1): distinguishes it from legacy pull-secret steps.
pub const BUNDLE_SECRET_KIND: &str = "BundleSecret";

impl StepKind {
    /// The handling of a step kind, `None` for kinds OLM does not install (`UnsupportedResource`).
    pub fn of(step_kind: &str) -> Option<StepKind> {
        Some(match step_kind {
            "CustomResourceDefinition" => StepKind::CustomResourceDefinition,
            "ClusterServiceVersion" => StepKind::ClusterServiceVersion,
            "Subscription" => StepKind::Subscription,
            "ServiceAccount" => StepKind::ServiceAccount,
            "Role" => StepKind::Role,
            "RoleBinding" => StepKind::RoleBinding,
            "ClusterRole" => StepKind::ClusterRole,
            "ClusterRoleBinding" => StepKind::ClusterRoleBinding,
            "Service" => StepKind::Service,
            "ConfigMap" => StepKind::ConfigMap,
            BUNDLE_SECRET_KIND => StepKind::BundleSecret,
            other => {
                let (_, kind, _) = DISCOVERED.iter().find(|(name, _, _)| *name == other)?;
                StepKind::Discovered(*kind)
            }
        })
    }

    pub fn scope(self) -> Scope {
        match self {
            StepKind::CustomResourceDefinition
            | StepKind::ClusterRole
            | StepKind::ClusterRoleBinding => Scope::Cluster,
            StepKind::Discovered(kind) => DISCOVERED
                .iter()
                .find(|(_, k, _)| *k == kind)
                .map_or(Scope::Namespaced, |(_, _, scope)| *scope),
            _ => Scope::Namespaced,
        }
    }

    /// Whether an existing object is left as it is (OLM never edits an existing CSV or
    /// Subscription from a plan, docs/install-plans.md §7.3).
    pub fn create_only(self) -> bool {
        matches!(
            self,
            StepKind::ClusterServiceVersion | StepKind::Subscription
        )
    }

    /// The kind as it appears in manifests (`BundleSecret` steps hold Secrets).
    pub fn manifest_kind(step_kind: &str) -> &str {
        if step_kind == BUNDLE_SECRET_KIND {
            "Secret"
        } else {
            step_kind
        }
    }

    /// The step kind recorded for a manifest of `kind`.
    pub fn step_kind(manifest_kind: &str) -> &str {
        if manifest_kind == "Secret" {
            BUNDLE_SECRET_KIND
        } else {
            manifest_kind
        }
    }
}

/// Names of every supported step kind, for messages that list them.
pub fn supported_kind_names() -> Vec<&'static str> {
    let mut names = vec![
        "CustomResourceDefinition",
        "ClusterServiceVersion",
        "Subscription",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "ConfigMap",
        "Secret",
    ];
    names.extend(DISCOVERED.iter().map(|(name, _, _)| *name));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_their_handling_and_scope() {
        assert_eq!(
            StepKind::of("Deployment"),
            None,
            "Deployments come from the CSV only"
        );
        assert_eq!(
            StepKind::of("Secret"),
            None,
            "bundle secrets travel as BundleSecret"
        );
        assert_eq!(StepKind::of("BundleSecret"), Some(StepKind::BundleSecret));
        let pc = StepKind::of("PriorityClass").unwrap();
        assert_eq!(pc.scope(), Scope::Cluster);
        assert_eq!(
            StepKind::of("ServiceMonitor").unwrap().scope(),
            Scope::Namespaced
        );
        assert_eq!(StepKind::of("ClusterRole").unwrap().scope(), Scope::Cluster);
        assert!(StepKind::of("ClusterServiceVersion").unwrap().create_only());
        assert!(!StepKind::of("ConfigMap").unwrap().create_only());
        assert_eq!(StepKind::step_kind("Secret"), "BundleSecret");
        assert_eq!(StepKind::manifest_kind("BundleSecret"), "Secret");
        assert!(supported_kind_names().contains(&"ConsoleYAMLSample"));
    }
}
