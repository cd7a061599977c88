//! Dependency resolution on the real community catalog (v4.20 and the bundle directories):
//! the two packages with `olm.package.required`, and every bundle with a requirement.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use olm_rs::api::CatalogRef;
use olm_rs::api::{Subscription, SubscriptionSpec};
use olm_rs::catalog::CatalogIndex;
use olm_rs::reconcile::subscription::load_index;
use olm_rs::resolve::{
    CatalogContent, CatalogInput, NamespaceInput, OperatorGroups, Outcome, decide,
};

fn root() -> PathBuf {
    common::shared_dir().join("data/catalogs/community-operators-prod")
}

fn catalog(name: &str, index: Arc<CatalogIndex>) -> CatalogInput {
    CatalogInput {
        key: CatalogRef::new("olm", name),
        priority: 0,
        uid: None,
        content: CatalogContent::Ready(index),
        healthy: true,
    }
}

fn sub(
    catalog: &str,
    package: &str,
    channel: Option<&str>,
    starting: Option<&str>,
) -> Subscription {
    let mut s = Subscription::new(
        package,
        SubscriptionSpec {
            source: catalog.into(),
            source_namespace: "olm".into(),
            name: package.into(),
            channel: channel.map(Into::into),
            starting_csv: starting.map(Into::into),
            install_plan_approval: None,
            config: None,
        },
    );
    s.metadata.namespace = Some("ns".into());
    s
}

fn decide_one(catalogs: &[CatalogInput], s: Subscription) -> Outcome {
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    let subs = [s];
    decide(&NamespaceInput {
        namespace: "ns",
        subscriptions: &subs,
        installed: &[],
        catalogs,
        operator_groups: &groups,
        global_catalog_namespace: "olm",
    })
    .remove(0)
    .outcome
}

/// cert-manager is in neither v4.20 nor the bundle directories: a small catalog stands in for
/// the one a user would add.
fn cert_manager() -> Arc<CatalogIndex> {
    let dir = tempfile::tempdir().unwrap();
    let gvk = |kind: &str| {
        format!("- type: olm.gvk\n  value: {{group: cert-manager.io, kind: {kind}, version: v1}}\n")
    };
    let text = format!(
        "---\nschema: olm.package\nname: cert-manager\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: cert-manager\nname: stable\nentries:\n- name: cert-manager.v1.13.0\n---\nschema: olm.bundle\npackage: cert-manager\nname: cert-manager.v1.13.0\nimage: quay.io/jetstack/cert-manager-bundle:v1.13.0\nproperties:\n- type: olm.package\n  value: {{packageName: cert-manager, version: 1.13.0}}\n{}{}{}",
        gvk("Certificate"),
        gvk("ClusterIssuer"),
        gvk("Issuer")
    );
    std::fs::write(dir.path().join("catalog.yaml"), text).unwrap();
    load_index(dir.path()).unwrap()
}

fn rabbitmq_messaging_topology_operator_installs_with_rabbitmq_cluster_operator_above_2() {
    let v420 = load_index(&root().join("catalogs/v4.20")).unwrap();
    let bundles =
        load_index(&root().join("operators/rabbitmq-messaging-topology-operator")).unwrap();
    for (name, index) in [("community", v420.clone()), ("bundles", bundles)] {
        let catalogs = [catalog(name, index), catalog("v420", v420.clone())];
        let outcome = decide_one(
            &catalogs,
            sub(name, "rabbitmq-messaging-topology-operator", None, None),
        );
        let Outcome::Install(target) = outcome else {
            panic!("{name}: {outcome:?}")
        };
        let dep = target
            .dependencies
            .iter()
            .find(|d| d.package == "rabbitmq-cluster-operator")
            .unwrap_or_else(|| panic!("{name}: {:?}", target.dependencies));
        let version = semver::Version::parse(dep.version.as_deref().unwrap()).unwrap();
        assert!(version > semver::Version::new(2, 0, 0), "{name}: {dep:?}");
        assert_eq!(dep.required_by, target.bundle);
    }
}

fn alloydb_omni_operator_needs_cert_manager_and_finds_it_in_another_catalog() {
    let v420 = load_index(&root().join("catalogs/v4.20")).unwrap();
    let alone = [catalog("community", v420.clone())];
    let Outcome::Refused(refusal) = decide_one(
        &alone,
        sub("community", "alloydb-omni-operator", None, None),
    ) else {
        panic!("cert-manager is nowhere in v4.20")
    };
    let message = refusal.to_string();
    assert!(message.contains("bundle alloydb-omni-operator.v1.8.0 requires an operator providing an API with group: cert-manager.io, version: v1, kind: Certificate"), "{message}");
    assert!(
        message.contains("bundles alloydb-omni-operator.v1.8.0, alloydb-omni-operator.v1.7.1"),
        "{message}"
    );
    assert!(message.contains("each needs an operator providing Certificate (cert-manager.io/v1), and no catalog this namespace can see has one (add a catalog that provides it)"), "{message}");
    let with = [
        catalog("community", v420),
        catalog("jetstack", cert_manager()),
    ];
    let Outcome::Install(target) =
        decide_one(&with, sub("community", "alloydb-omni-operator", None, None))
    else {
        panic!("cert-manager is available")
    };
    let deps: Vec<(&str, &str)> = target
        .dependencies
        .iter()
        .map(|d| (d.bundle.as_str(), d.catalog.name.as_str()))
        .collect();
    assert_eq!(deps, [("cert-manager.v1.13.0", "jetstack")]);
}

fn every_v4_20_bundle_with_a_requirement_gets_a_plan_or_an_explanation() {
    let v420 = load_index(&root().join("catalogs/v4.20")).unwrap();
    let catalogs = [catalog("community", v420.clone())];
    let requirement_types = [
        "olm.gvk.required",
        "olm.package.required",
        "olm.label.required",
        "olm.constraint",
    ];
    let mut walked = 0;
    let mut installed = 0;
    for package in v420.packages() {
        for bundle in package.bundles() {
            if !bundle
                .properties()
                .iter()
                .any(|p| requirement_types.contains(&p.type_.as_str()))
            {
                continue;
            }
            let Some(channel) = bundle.channels().first() else {
                continue;
            };
            walked += 1;
            let outcome = decide_one(
                &catalogs,
                sub(
                    "community",
                    package.name(),
                    Some(channel),
                    Some(bundle.name()),
                ),
            );
            match outcome {
                Outcome::Install(t) => {
                    assert_eq!(t.bundle, bundle.name());
                    installed += 1;
                }
                Outcome::Refused(r) => {
                    let message = r.to_string();
                    assert!(
                        !message.trim().is_empty(),
                        "{}: empty explanation",
                        bundle.name()
                    );
                    assert!(
                        message.contains(bundle.name()),
                        "{}: {message}",
                        bundle.name()
                    );
                }
                other => panic!("{}: {other:?}", bundle.name()),
            }
        }
    }
    assert!(walked >= 15, "only {walked} bundles with requirements");
    assert!(installed > 0, "none of {walked} resolves");
}

crate::trials! {
    sync rabbitmq_messaging_topology_operator_installs_with_rabbitmq_cluster_operator_above_2,
    sync alloydb_omni_operator_needs_cert_manager_and_finds_it_in_another_catalog,
    sync every_v4_20_bundle_with_a_requirement_gets_a_plan_or_an_explanation,
}
