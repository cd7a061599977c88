use super::*;
use serde_json::{Value, json};

const KEY: &str = "operators.coreos.com/etcd.demo";

fn csv(targets: Option<&str>, install: Value) -> ClusterServiceVersion {
    csv_in(targets, install, "Succeeded")
}

fn csv_in(targets: Option<&str>, install: Value, phase: &str) -> ClusterServiceVersion {
    let mut annotations = serde_json::Map::new();
    if let Some(t) = targets {
        annotations.insert("olm.targetNamespaces".into(), json!(t));
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "etcd.v1", "namespace": "demo", "annotations": annotations},
        "spec": {"displayName": "etcd", "install": install,
                 "customresourcedefinitions": {"owned": [
                     {"name": "etcdclusters.etcd.database.coreos.com", "version": "v1beta2",
                      "kind": "EtcdCluster"},
                     {"name": "backups.etcd.database.coreos.com", "version": "v1",
                      "kind": "Backup"}]}},
        "status": {"phase": phase}
    }))
    .unwrap()
}

/// The etcd operator's strategy: `etcd-operator` may list its clusters (cluster-wide), the
/// Deployment runs as `runner`.
fn install() -> Value {
    json!({"strategy": "deployment", "spec": {
        "deployments": [{"name": "etcd-operator", "spec": {"selector": {}, "template": {
            "spec": {"serviceAccountName": "runner", "containers": []}}}}],
        "permissions": [{"serviceAccountName": "helper", "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}],
        "clusterPermissions": [{"serviceAccountName": "etcd-operator", "rules": [
            {"apiGroups": ["etcd.database.coreos.com"], "resources": ["etcdclusters"],
             "verbs": ["get", "list", "watch", "patch"]}]}]
    }})
}

fn crd(name: &str, scope: &str, versions: &[(&str, bool)]) -> Arc<CustomResourceDefinition> {
    let (plural, group) = name.split_once('.').unwrap();
    let versions: Vec<Value> = versions
        .iter()
        .map(|(v, served)| json!({"name": v, "served": served, "storage": true}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"group": group, "scope": scope, "versions": versions,
                     "names": {"plural": plural, "kind": format!("K{plural}")}}
        }))
        .unwrap(),
    )
}

#[test]
fn the_account_is_the_one_granted_list_on_the_resource_else_the_deployments() {
    let apis = owned_apis(&csv(Some("demo"), install()));
    let account = |crd: &str| {
        apis.iter()
            .find(|a| a.crd == crd)
            .and_then(|a| a.account.clone())
    };
    assert_eq!(
        account("etcdclusters.etcd.database.coreos.com").as_deref(),
        Some("etcd-operator")
    );
    // No rule names backups: the Deployment's account, which the API server then judges.
    assert_eq!(
        account("backups.etcd.database.coreos.com").as_deref(),
        Some("runner")
    );
    // A wildcard rule counts; a rule without `list` does not.
    let wildcard = json!({"strategy": "deployment", "spec": {"deployments": [],
        "permissions": [
            {"serviceAccountName": "reader", "rules": [{"apiGroups": ["*"],
                "resources": ["*"], "verbs": ["get"]}]},
            {"serviceAccountName": "admin", "rules": [{"apiGroups": ["*"],
                "resources": ["*"], "verbs": ["*"]}]}]}});
    let apis = owned_apis(&csv(Some("demo"), wildcard));
    assert!(apis.iter().all(|a| a.account.as_deref() == Some("admin")));
    let nothing = owned_apis(&csv(Some("demo"), json!({"strategy": "deployment"})));
    assert!(nothing.iter().all(|a| a.account.is_none()));
}

fn watches(targets: Option<&str>, crds: &[Arc<CustomResourceDefinition>]) -> Vec<String> {
    let source = OperandSource::of(&csv(targets, install()));
    operand_watches("etcd.demo", &[source], |name| {
        crds.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned()
    })
    .into_iter()
    .map(|w| {
        format!(
            "{} {} as {}",
            w.resource().api_version,
            w.scope(),
            w.account
        )
    })
    .collect()
}

#[test]
fn a_watch_per_target_namespace_or_one_everywhere() {
    let clusters = crd(
        "etcdclusters.etcd.database.coreos.com",
        "Namespaced",
        &[("v1beta1", true), ("v1beta2", true)],
    );
    let backups = crd(
        "backups.etcd.database.coreos.com",
        "Cluster",
        &[("v1", true)],
    );
    let both = [clusters.clone(), backups.clone()];
    assert_eq!(
        watches(Some("a,b"), &both),
        [
            "etcd.database.coreos.com/v1beta2 etcdclusters.etcd.database.coreos.com in namespace a as etcd-operator",
            "etcd.database.coreos.com/v1beta2 etcdclusters.etcd.database.coreos.com in namespace b as etcd-operator",
            // Cluster-scoped: one watch, whatever the targets.
            "etcd.database.coreos.com/v1 backups.etcd.database.coreos.com in every namespace as runner",
        ]
    );
    // All namespaces (`olm.targetNamespaces: ""`): one watch everywhere.
    assert_eq!(
        watches(Some(""), std::slice::from_ref(&clusters)),
        [
            "etcd.database.coreos.com/v1beta2 etcdclusters.etcd.database.coreos.com in every namespace as etcd-operator"
        ]
    );
    // Not yet a member of its group, or the CRD gone: no watch.
    assert!(watches(None, &both).is_empty());
    // Not yet past its requirements (its account's RBAC may not exist): no watch.
    for phase in ["Pending", "InstallReady", ""] {
        let source = OperandSource::of(&csv_in(Some("a"), install(), phase));
        assert!(operand_watches("etcd.demo", &[source], |_| Some(clusters.clone())).is_empty());
    }
    assert_eq!(watches(Some("a"), &[backups]).len(), 1);
    // The CSV's version no longer served: the first served one.
    let moved = crd(
        "etcdclusters.etcd.database.coreos.com",
        "Namespaced",
        &[("v1beta2", false), ("v1", true)],
    );
    assert_eq!(
        watches(Some("a"), &[moved]),
        [
            "etcd.database.coreos.com/v1 etcdclusters.etcd.database.coreos.com in namespace a as etcd-operator"
        ]
    );
    let unserved = crd(
        "etcdclusters.etcd.database.coreos.com",
        "Namespaced",
        &[("v1beta2", false)],
    );
    assert!(watches(Some("a"), &[unserved]).is_empty());
}

#[test]
fn only_operands_without_the_label_are_patched_once_each_with_the_label_alone() {
    let clusters = crd(
        "etcdclusters.etcd.database.coreos.com",
        "Namespaced",
        &[("v1beta2", true)],
    );
    let source = OperandSource::of(&csv(Some("a,b"), install()));
    let all = operand_watches("etcd.demo", &[source], |_| Some(clusters.clone()));
    let w: Vec<_> = all.into_iter().collect();
    let labelled = [(KEY.to_owned(), String::new())].into_iter().collect();
    let operands = vec![
        Operand::new(&w[0], Some("a".into()), "one", BTreeMap::new()),
        Operand::new(&w[0], Some("a".into()), "two", labelled),
        Operand::new(&w[1], Some("b".into()), "three", BTreeMap::new()),
        // The same operand seen through a second watch (an upgrade's two CSVs): once.
        Operand::new(&w[0], Some("a".into()), "one", BTreeMap::new()),
    ];
    let labels = operand_labels(KEY, &operands);
    let shown: Vec<String> = labels
        .iter()
        .map(|(w, write)| format!("{} {} as {}", write.verb(), write.key(), w.account))
        .collect();
    assert_eq!(
        shown,
        [
            "patch Ketcdclusters a/one as etcd-operator",
            "patch Ketcdclusters b/three as etcd-operator"
        ]
    );
    let Write::MergePatch {
        patch,
        resource_version,
        ..
    } = &labels[0].1
    else {
        panic!("a merge patch");
    };
    assert_eq!(
        patch.to_json().unwrap(),
        json!({"metadata": {"labels": {KEY: ""}}})
    );
    assert_eq!(resource_version, &None);
    // The labelled operand is a component the status lists, without conditions.
    let r = operands[1].component.reference();
    assert_eq!(
        (r.kind.as_deref(), r.api_version.as_deref(), r.conditions),
        (
            Some("Ketcdclusters"),
            Some("etcd.database.coreos.com/v1beta2"),
            None
        )
    );
}

#[test]
fn the_decision_lists_labelled_operands_and_never_patches_one_itself() {
    use crate::operator_api::decision::{Interest, Observed, decide};
    let clusters = crd(
        "etcdclusters.etcd.database.coreos.com",
        "Namespaced",
        &[("v1beta2", true)],
    );
    let mut owner = csv(Some("a"), install());
    owner.metadata.labels = Some([(KEY.to_owned(), String::new())].into_iter().collect());
    let interest = Interest::new("etcd.demo", &[], [&owner]).unwrap();
    let w = operand_watches("etcd.demo", &[interest.csvs[0].operands.clone()], |_| {
        Some(clusters.clone())
    });
    let w = w.first().unwrap();
    let labelled = [(KEY.to_owned(), String::new())].into_iter().collect();
    let operands = [
        Operand::new(w, Some("a".into()), "listed", labelled),
        Operand::new(w, Some("a".into()), "not-yet", BTreeMap::new()),
    ];
    let components: Vec<Component> = operands.iter().map(|o| o.component.clone()).collect();
    let effects = decide(&Observed {
        name: "etcd.demo",
        operator: None,
        subscriptions: &[],
        interest: &interest,
        components: &components,
    });
    // The controller's own writes: the Operator, nothing to an operand (those are written as
    // the operator's account, by `operand_labels`).
    let shown: Vec<String> = effects
        .writes
        .iter()
        .map(|w| format!("{} {}", w.verb(), w.key()))
        .collect();
    assert_eq!(shown, ["create Operator etcd.demo"]);
    let status = crate::operator_api::decision::status_of(KEY, &components);
    let refs = status.components.unwrap().refs.unwrap();
    let names: Vec<_> = refs.iter().map(|r| r.name.clone().unwrap()).collect();
    assert_eq!(names, ["listed"]);
}
