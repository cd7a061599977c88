//! Resolution benchmarks: one Subscription against the community catalog `catalogs/v4.20`, and
//! a namespace with 200 Subscriptions (decisions alone, and the whole status pass).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test or bench: a panic is the report

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use jiff::Timestamp;
use serde_json::Value;

use olm_rs::api::CatalogRef;
use olm_rs::api::{Subscription, SubscriptionSpec, SubscriptionStatus};
use olm_rs::catalog::model::{DeclarativeConfig, Property};
use olm_rs::catalog::{CatalogIndex, load_catalog};
use olm_rs::resolve::subscription::{NamespaceState, RollbackInput, decide_namespace};
use olm_rs::resolve::{
    CatalogContent, CatalogInput, InstalledCsv, NamespaceInput, OperatorGroups, decide,
};

// The one place that finds the shared reference data (`$OLM_RS_SHARED`, else `../shared`).
#[allow(dead_code)]
#[path = "../tests/real_control_plane/shared_data.rs"]
mod shared_data;
#[allow(dead_code)]
#[path = "../tests/real_control_plane/skip.rs"]
mod skip;

use shared_data::shared_dir;

fn v4_20() -> DeclarativeConfig {
    let dir = shared_dir().join("data/catalogs/community-operators-prod/catalogs/v4.20");
    load_catalog(&dir).expect("catalog loads").1
}

fn sub(name: &str, package: &str, installed: Option<&str>) -> Subscription {
    let mut s = Subscription::new(
        name,
        SubscriptionSpec {
            source: "community".into(),
            source_namespace: "olm".into(),
            name: package.into(),
            channel: None,
            starting_csv: None,
            install_plan_approval: None,
            config: None,
        },
    );
    s.metadata.namespace = Some("bench".into());
    s.metadata.uid = Some(format!("uid-{name}"));
    if let Some(csv) = installed {
        let mut status = SubscriptionStatus::new(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        );
        status.installed_csv = Some(csv.into());
        status.current_csv = Some(csv.into());
        s.status = Some(status);
    }
    s
}

/// `copies` copies of the catalog with package names and API groups suffixed, so that many
/// Subscriptions can live in one namespace without competing for a package or an API.
fn widened(config: &DeclarativeConfig, copies: usize) -> DeclarativeConfig {
    let mut out = DeclarativeConfig::default();
    for i in 0..copies {
        let rename = |p: &str| format!("{p}-{i}");
        for p in &config.packages {
            let mut p = p.clone();
            p.name = rename(&p.name);
            out.packages.push(p);
        }
        for c in &config.channels {
            let mut c = c.clone();
            c.package = rename(&c.package);
            out.channels.push(c);
        }
        for b in &config.bundles {
            let mut b = b.clone();
            b.package = rename(&b.package);
            // What a bundle provides and what it requires are renamed alike, so each copy's
            // requirements are met by the same copy (and never by another one's APIs).
            b.properties = renamed_properties(&b.properties, i);
            out.bundles.push(b);
        }
    }
    out
}

fn catalogs(index: Arc<CatalogIndex>) -> Vec<CatalogInput> {
    vec![CatalogInput {
        key: CatalogRef::new("olm", "community"),
        priority: 0,
        uid: Some("uid-community".into()),
        content: CatalogContent::Ready(index),
        healthy: true,
    }]
}

fn bench(c: &mut Criterion) {
    let config = v4_20();
    let index = Arc::new(CatalogIndex::new(config.clone()));
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };

    // One Subscription: an installed operator five hops from its head, and a fresh install.
    let cats = catalogs(index.clone());
    let installed = vec![InstalledCsv {
        name: "kube-green.v0.5.0".into(),
        version: olm_rs::catalog::semver_range::parse_tolerant("0.5.0").ok(),
        package: Some("kube-green".into()),
        provided: vec![],
        phase: "Succeeded".into(),
        properties: Vec::new(),
    }];
    let upgrade = [sub("kube-green", "kube-green", Some("kube-green.v0.5.0"))];
    let fresh = [sub("opendatahub", "opendatahub-operator", None)];
    c.bench_function("resolve one subscription (upgrade, v4.20)", |b| {
        b.iter(|| {
            decide(&NamespaceInput {
                namespace: "bench",
                subscriptions: &upgrade,
                installed: &installed,
                catalogs: &cats,
                operator_groups: &groups,
                global_catalog_namespace: "olm",
            })
        })
    });
    c.bench_function("resolve one subscription (fresh install, v4.20)", |b| {
        b.iter(|| {
            decide(&NamespaceInput {
                namespace: "bench",
                subscriptions: &fresh,
                installed: &[],
                catalogs: &cats,
                operator_groups: &groups,
                global_catalog_namespace: "olm",
            })
        })
    });

    // 200 Subscriptions in one namespace, half of them installed one release behind the head.
    let wide = Arc::new(CatalogIndex::new(widened(&config, 6)));
    let cats = catalogs(wide.clone());
    let mut subs = Vec::new();
    let mut installed = Vec::new();
    // Packages whose bundles need an operator that no catalog here has (alloydb-omni-operator
    // needs cert-manager, absent from v4.20) are refused, rightly; they are left out so that
    // every Subscription measured resolves.
    let resolves_alone = |package: &str| {
        let alone = [sub("alone", package, None)];
        decide(&NamespaceInput {
            namespace: "bench",
            subscriptions: &alone,
            installed: &[],
            catalogs: &cats,
            operator_groups: &groups,
            global_catalog_namespace: "olm",
        })
        .iter()
        .all(|d| !matches!(d.outcome, olm_rs::resolve::Outcome::Refused(_)))
    };
    let resolvable: Vec<_> = wide
        .packages()
        .iter()
        .filter(|p| resolves_alone(p.name()))
        .take(200)
        .collect();
    for (i, package) in resolvable.into_iter().enumerate() {
        let head = package
            .default_channel()
            .or_else(|| package.channels().first())
            .and_then(|c| c.graph().channel_order().ok())
            .and_then(|order| order.get(1).map(|e| e.name.clone()));
        let installed_csv = head.filter(|_| i % 2 == 0);
        if let Some(csv) = &installed_csv {
            installed.push(InstalledCsv {
                name: csv.clone(),
                version: package.bundle(csv).and_then(|b| b.version().cloned()),
                package: Some(package.name().to_owned()),
                provided: package
                    .bundle(csv)
                    .map(|b| b.provided_gvks().collect())
                    .unwrap_or_default(),
                phase: "Succeeded".into(),
                properties: Vec::new(),
            });
        }
        subs.push(sub(
            &format!("sub-{i}"),
            package.name(),
            installed_csv.as_deref(),
        ));
    }
    assert_eq!(subs.len(), 200);
    let input = NamespaceInput {
        namespace: "bench",
        subscriptions: &subs,
        installed: &installed,
        catalogs: &cats,
        operator_groups: &groups,
        global_catalog_namespace: "olm",
    };
    let refused: Vec<String> = decide(&input)
        .iter()
        .filter_map(|d| match &d.outcome {
            olm_rs::resolve::Outcome::Refused(why) => Some(format!("{why:?}")),
            _ => None,
        })
        .collect();
    assert!(
        refused.is_empty(),
        "every Subscription of the benchmark resolves; refused: {refused:#?}"
    );
    c.bench_function("resolve a namespace of 200 subscriptions", |b| {
        b.iter(|| decide(&input))
    });
    let state = NamespaceState {
        input,
        plans: &[],
        crds: &[],
        rollback: &RollbackInput::default(),
        now: Timestamp::from_second(1_000_000).expect("time"),
    };
    c.bench_function("status pass over a namespace of 200 subscriptions", |b| {
        b.iter(|| decide_namespace(&state))
    });
}

/// Copy `i` of the packages `names` of `config`: package names and API groups suffixed, in
/// what bundles provide and in what they require, so each copy depends only on itself.
fn renamed_copy(config: &DeclarativeConfig, names: &[&str], i: usize) -> DeclarativeConfig {
    let rename = |p: &str| format!("{p}-{i}");
    let keep = |p: &str| names.contains(&p);
    let mut out = DeclarativeConfig::default();
    for p in config.packages.iter().filter(|p| keep(&p.name)) {
        let mut p = p.clone();
        p.name = rename(&p.name);
        out.packages.push(p);
    }
    for c in config.channels.iter().filter(|c| keep(&c.package)) {
        let mut c = c.clone();
        c.package = rename(&c.package);
        out.channels.push(c);
    }
    for b in config.bundles.iter().filter(|b| keep(&b.package)) {
        let mut b = b.clone();
        b.package = rename(&b.package);
        b.properties = renamed_properties(&b.properties, i);
        out.bundles.push(b);
    }
    out
}

/// `properties` with the package names and API groups they provide or require suffixed `-i`.
fn renamed_properties(properties: &[Property], i: usize) -> Vec<Property> {
    properties
        .iter()
        .map(|p| {
            let mut v: Value = serde_json::from_str(p.json().get()).expect("JSON");
            match p.type_.as_str() {
                "olm.gvk" | "olm.gvk.required" => {
                    let group = format!("{}-{i}", v["group"].as_str().unwrap_or_default());
                    v["group"] = group.into();
                }
                "olm.package" | "olm.package.required" => {
                    let name = format!("{}-{i}", v["packageName"].as_str().unwrap_or_default());
                    v["packageName"] = name.into();
                }
                _ => return p.clone(),
            }
            Property::from_value(&p.type_, &v).expect("serialises")
        })
        .collect()
}

/// `chain-0` requires an API of `chain-1`, which requires package `chain-2`, which requires an
/// API of `chain-3`.
fn chain() -> DeclarativeConfig {
    let mut out = DeclarativeConfig::default();
    for i in 0..4 {
        let name = format!("chain-{i}");
        let mut properties = vec![
            Property::from_value(
                "olm.package",
                &serde_json::json!({"packageName": name, "version": "1.0.0"}),
            )
            .expect("JSON"),
            Property::from_value(
                "olm.gvk",
                &serde_json::json!({"group": "chain.example.com", "kind": format!("Link{i}"), "version": "v1"}),
            )
            .expect("JSON"),
        ];
        match i {
            0 | 2 => properties.push(
                Property::from_value(
                    "olm.gvk.required",
                    &serde_json::json!({"group": "chain.example.com", "kind": format!("Link{}", i + 1), "version": "v1"}),
                )
                .expect("JSON"),
            ),
            1 => properties.push(
                Property::from_value(
                    "olm.package.required",
                    &serde_json::json!({"packageName": "chain-2", "versionRange": ">=1.0.0"}),
                )
                .expect("JSON"),
            ),
            _ => {}
        }
        out.packages.push(olm_rs::catalog::model::Package {
            name: name.clone(),
            default_channel: Some("stable".into()),
            ..Default::default()
        });
        out.channels.push(olm_rs::catalog::model::Channel {
            package: name.clone(),
            name: "stable".into(),
            entries: vec![olm_rs::catalog::model::ChannelEntry {
                name: format!("{name}.v1.0.0"),
                ..Default::default()
            }],
            ..Default::default()
        });
        out.bundles.push(olm_rs::catalog::model::Bundle {
            package: name.clone(),
            name: format!("{name}.v1.0.0"),
            image: format!("example.com/{name}:v1.0.0"),
            properties,
            ..Default::default()
        });
    }
    out
}

fn dependencies(c: &mut Criterion) {
    let config = v4_20();
    let groups = OperatorGroups {
        names: vec!["og".into()],
        exclude_global_catalogs: false,
    };
    let bundle_dirs = olm_rs::reconcile::subscription::load_index(
        &shared_dir().join("data/catalogs/community-operators-prod/operators"),
    )
    .expect("bundle directories load");
    let pair = [
        "rabbitmq-messaging-topology-operator",
        "rabbitmq-cluster-operator",
    ];
    let mut community = config.clone();
    for i in 0..50 {
        community.merge(renamed_copy(&config, &pair, i));
    }
    community.merge(chain());
    let index = Arc::new(CatalogIndex::new(community));
    let mut cats = catalogs(index);
    cats.push(CatalogInput {
        key: CatalogRef::new("olm", "bundles"),
        priority: 0,
        uid: None,
        content: CatalogContent::Ready(bundle_dirs),
        healthy: true,
    });
    let subs: Vec<Subscription> = (0..50)
        .map(|i| {
            sub(
                &format!("topology-{i}"),
                &format!("rabbitmq-messaging-topology-operator-{i}"),
                None,
            )
        })
        .collect();
    let input = NamespaceInput {
        namespace: "bench",
        subscriptions: &subs,
        installed: &[],
        catalogs: &cats,
        operator_groups: &groups,
        global_catalog_namespace: "olm",
    };
    let decisions = decide(&input);
    let with_dependencies = decisions
        .iter()
        .filter(|d| matches!(&d.outcome, olm_rs::resolve::Outcome::Install(t) if !t.dependencies.is_empty()))
        .count();
    assert_eq!(
        with_dependencies, 50,
        "every Subscription installs with a dependency"
    );
    c.bench_function(
        "resolve 50 subscriptions with dependencies (v4.20 + bundle dirs)",
        |b| b.iter(|| decide(&input)),
    );
    let one = [sub("chain", "chain-0", None)];
    let input = NamespaceInput {
        subscriptions: &one,
        ..input
    };
    let decisions = decide(&input);
    let olm_rs::resolve::Outcome::Install(target) = &decisions[0].outcome else {
        panic!("the chain resolves: {:?}", decisions[0].outcome)
    };
    assert_eq!(target.dependencies.len(), 3);
    c.bench_function(
        "resolve one subscription with a 3-deep chain (v4.20)",
        |b| b.iter(|| decide(&input)),
    );
}

criterion_group!(benches, bench, dependencies);
criterion_main!(benches);
