//! The install manifests agree with each other: `config/` (kustomize) and the Helm chart grant the
//! controller the same permissions, and every manifest parses.

use std::path::{Path, PathBuf};

use serde::Deserialize as _;

fn crate_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn yaml_documents(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| {
            serde_json::Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        })
        .filter(|doc| !doc.is_null())
        .collect()
}

#[test]
fn chart_and_config_grant_the_controller_the_same_cluster_rules() {
    let config = yaml_documents(&crate_path("config/rbac/cluster_role.yaml"));
    let chart = yaml_documents(&crate_path("charts/olm-rs/files/cluster-role-rules.yaml"));
    assert_eq!(config.len(), 1);
    assert_eq!(chart.len(), 1);
    assert_eq!(
        config[0]["rules"], chart[0]["rules"],
        "config/rbac/cluster_role.yaml and charts/olm-rs/files/cluster-role-rules.yaml differ"
    );
}

#[test]
fn controller_rbac_never_grants_wildcards() {
    let config = yaml_documents(&crate_path("config/rbac/cluster_role.yaml"));
    let rules = config[0]["rules"].as_array().expect("rules is a list");
    assert!(!rules.is_empty());
    for rule in rules {
        for field in ["apiGroups", "resources", "verbs"] {
            let values = rule[field].as_array().expect("rule fields are lists");
            assert!(
                values.iter().all(|v| v != "*"),
                "wildcard in {field} of rule {rule}"
            );
        }
    }
}

#[test]
fn every_config_manifest_parses_and_names_its_kind() {
    let mut seen = 0;
    for dir in ["config/rbac", "config/manager", "config/samples"] {
        let Ok(entries) = std::fs::read_dir(crate_path(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("readable dir entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            for doc in yaml_documents(&path) {
                assert!(doc["kind"].is_string(), "{}: no kind", path.display());
                assert!(
                    doc["apiVersion"].is_string(),
                    "{}: no apiVersion",
                    path.display()
                );
                seen += 1;
            }
        }
    }
    assert!(
        seen >= 8,
        "expected the rbac and manager manifests, found {seen} documents"
    );
}

/// The kustomize Deployment runs the controller the way the chart does with leader election on:
/// the same flags (election durations = the chart's defaults) and the downward-API env that
/// names the Lease holder and the Lease namespace.
#[test]
fn config_deployment_matches_the_chart_on_leader_election_and_pod_identity() {
    let config = yaml_documents(&crate_path("config/manager/deployment.yaml"));
    let container = &config[0]["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args is a list")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    let values = yaml_documents(&crate_path("charts/olm-rs/values.yaml"));
    let election = &values[0]["leaderElection"];
    let template = std::fs::read_to_string(crate_path("charts/olm-rs/templates/deployment.yaml"))
        .expect("chart deployment template");
    assert!(args.contains(&"--leader-elect"), "{args:?}");
    for (flag, key) in [
        ("--leader-election-lease-duration", "leaseDuration"),
        ("--leader-election-renew-deadline", "renewDeadline"),
        ("--leader-election-retry-period", "retryPeriod"),
    ] {
        let want = format!("{flag}={}", election[key].as_str().expect("duration text"));
        assert!(
            args.contains(&want.as_str()),
            "{want} missing from {args:?}"
        );
        assert!(template.contains(flag), "the chart no longer passes {flag}");
    }
    // Every flag the config passes is one the chart passes too.
    for arg in &args[1..] {
        let flag = arg.split('=').next().unwrap_or_default();
        assert!(
            template.contains(flag),
            "{flag} is not in the chart's Deployment"
        );
    }
    let env = container["env"].as_array().expect("env is a list");
    for (name, path) in [
        ("POD_NAME", "metadata.name"),
        ("POD_NAMESPACE", "metadata.namespace"),
    ] {
        let var = env
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing from config/manager env"));
        assert_eq!(var["valueFrom"]["fieldRef"]["fieldPath"], path, "{name}");
        assert!(
            template.contains(&format!("name: {name}")),
            "{name} not in chart"
        );
        assert!(
            template.contains(&format!("fieldPath: {path}")),
            "{path} not in chart"
        );
    }
}

/// The controller checks at start-up that it may list and watch what it watches
/// (olm_rs::access_review::WATCHED); the chart's rules must grant exactly that.
#[test]
fn the_chart_grants_every_watch_the_controller_checks_at_start_up() {
    let chart = yaml_documents(&crate_path("charts/olm-rs/files/cluster-role-rules.yaml"));
    let rules = chart[0]["rules"].as_array().expect("rules is a list");
    let grants = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|rule| {
            let has = |field: &str, value: &str| {
                rule[field]
                    .as_array()
                    .is_some_and(|values| values.iter().any(|v| v == value))
            };
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for watched in olm_rs::access_review::WATCHED {
        for verb in olm_rs::access_review::WATCH_VERBS {
            assert!(
                grants(watched.group, watched.resource, verb),
                "the chart's ClusterRole does not grant {verb} on {watched:?}"
            );
        }
    }
}
