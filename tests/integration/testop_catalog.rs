//! The test operator's packages (e2e/testop/): the catalogs validate, each `bundles.yaml` is
//! what `olm-rs catalog render` makes of the bundle directories, each version plays the role the
//! real-node journeys expect of it (good, never ready, crash loop, fixed), the own-namespace
//! package can sit beside the other one (no API of theirs in common), and the CSVs reach the
//! test operator on the ports and with the flags it really has.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_json::Value;

const PACKAGE: &str = "olm-rs-testop";
/// The package for one namespace (OwnNamespace): no conversion webhook, APIs of its own.
const OWN_PACKAGE: &str = "olm-rs-testop-own";
/// Each package and the catalog directory holding it.
const CATALOGS: [(&str, &str); 2] = [(PACKAGE, "catalog"), (OWN_PACKAGE, "catalog-own")];
const BIN: &str = env!("CARGO_BIN_EXE_olm-rs-test-operator");
/// `OLM_RS_UPDATE_TESTOP_CATALOG=1 cargo test --test integration testop_catalog` rewrites
/// `bundles.yaml` from the bundle directories.
const UPDATE: &str = "OLM_RS_UPDATE_TESTOP_CATALOG";

fn testop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/testop")
}

fn bundle_dirs() -> Vec<PathBuf> {
    bundle_dirs_of(PACKAGE)
}

fn bundle_dirs_of(package: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(testop_dir().join("bundles").join(package))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn csv_of(dir: &Path) -> Value {
    csv_of_package(dir, PACKAGE)
}

fn csv_of_package(dir: &Path, package: &str) -> Value {
    let path = dir.join(format!("manifests/{package}.clusterserviceversion.yaml"));
    yaml_documents(&path).remove(0)
}

#[test]
fn the_catalog_validates() {
    use olm_rs::catalog::{load_catalog, validate};
    let dir = testop_dir().join("catalog");
    let (_kind, config, mut problems) = load_catalog(&dir).unwrap();
    problems.extend(validate::validate(&config));
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| !p.rule.is_warning())
        .map(ToString::to_string)
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert_eq!(
        (
            config.packages.len(),
            config.channels.len(),
            config.bundles.len()
        ),
        (1, 3, 4)
    );
    // Each channel's head is the version that plays its role; stable's head skips both bad ones.
    let heads: BTreeMap<&str, Vec<&str>> = config
        .channels
        .iter()
        .map(|c| {
            let replaced: Vec<&str> = c
                .entries
                .iter()
                .filter_map(|e| e.replaces.as_deref())
                .collect();
            let heads = c
                .entries
                .iter()
                .map(|e| e.name.as_str())
                .filter(|n| !replaced.contains(n))
                .collect();
            (c.name.as_str(), heads)
        })
        .collect();
    assert_eq!(
        heads,
        BTreeMap::from([
            ("crash-loop", vec!["olm-rs-testop.v0.3.0"]),
            ("never-ready", vec!["olm-rs-testop.v0.2.0"]),
            ("stable", vec!["olm-rs-testop.v0.4.0"]),
        ])
    );
    let stable = config.channels.iter().find(|c| c.name == "stable").unwrap();
    let fixed = stable
        .entries
        .iter()
        .find(|e| e.name == "olm-rs-testop.v0.4.0")
        .unwrap();
    assert_eq!(
        fixed.skips,
        ["olm-rs-testop.v0.2.0", "olm-rs-testop.v0.3.0"]
    );
    assert_eq!(fixed.replaces.as_deref(), Some("olm-rs-testop.v0.1.0"));
}

#[test]
fn bundles_yaml_is_rendered_from_the_bundles() {
    for (package, catalog) in CATALOGS {
        bundles_yaml_is_rendered(package, catalog);
    }
}

fn bundles_yaml_is_rendered(package: &str, catalog: &str) {
    use olm_rs::catalog::bundle_dir::{self, render};
    let mut rendered = Vec::new();
    for dir in bundle_dirs_of(package) {
        let bundle = bundle_dir::read(&dir).unwrap();
        let out = render::render(&bundle, "").unwrap();
        assert!(
            out.warnings.is_empty(),
            "{}: {:?}",
            dir.display(),
            out.warnings
        );
        rendered.push(render::bundle_blob(&out.bundle));
    }
    let path = testop_dir()
        .join(catalog)
        .join(package)
        .join("bundles.yaml");
    if std::env::var_os(UPDATE).is_some() {
        let mut text = format!(
            "# Rendered from e2e/testop/bundles/{package}/*/ (olm-rs catalog render, as opm \
             render does).\n# Do not edit: {UPDATE}=1 cargo test --test integration \
             testop_catalog rewrites it.\n"
        );
        for blob in &rendered {
            text.push_str("---\n");
            text.push_str(&serde_yaml_ng::to_string(blob).unwrap());
        }
        std::fs::write(&path, text).unwrap();
    }
    assert!(
        yaml_documents(&path) == rendered,
        "{} is not what the bundle directories render to; regenerate it with \
         {UPDATE}=1 cargo test --test integration testop_catalog",
        path.display()
    );
}

/// The container of the operator Deployment.
fn container(csv: &Value) -> &Value {
    &csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn each_version_plays_its_role() {
    let roles: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("0.1.0", &[][..]),
        ("0.2.0", &["--never-ready"][..]),
        ("0.3.0", &["--crash-after=20s"][..]),
        ("0.4.0", &[][..]),
    ]);
    let dirs = bundle_dirs();
    assert_eq!(dirs.len(), roles.len());
    for dir in dirs {
        let version = dir.file_name().unwrap().to_string_lossy().into_owned();
        let csv = csv_of(&dir);
        assert_eq!(csv["metadata"]["name"], format!("{PACKAGE}.v{version}"));
        assert_eq!(csv["spec"]["version"], version);
        let c = container(&csv);
        assert_eq!(
            c["image"],
            format!("example.com/olm-rs-test-operator:{version}")
        );
        let mut args: Vec<String> = serde_json::from_value(c["args"].clone()).unwrap();
        assert_eq!(args.remove(0), format!("--operator-version={version}"));
        assert_eq!(args, roles[version.as_str()], "{version}");
        // Both webhooks and the aggregated API on every version, so a bad version fails
        // only through its pod.
        let types: Vec<&str> = csv["spec"]["webhookdefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["ValidatingAdmissionWebhook", "ConversionWebhook"]);
        assert_eq!(
            csv["spec"]["apiservicedefinitions"]["owned"][0]["group"],
            "api.testop.olm-rs.dev"
        );
        let crd =
            yaml_documents(&dir.join("manifests/gadgets.testop.olm-rs.dev.crd.yaml")).remove(0);
        let served: Vec<&str> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["served"] == true)
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(served, ["v1alpha1", "v1"], "two served versions to convert");
    }
}

/// The default of `--flag` in the test operator's `--help` (clap: the flag's line, then its
/// description ending in `[default: …]`).
fn default_of(help: &str, flag: &str) -> String {
    let lines: Vec<&str> = help.lines().map(str::trim).collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("{flag} ")))
        .unwrap_or_else(|| panic!("the test operator has no {flag}"));
    let description = lines.get(at + 1).copied().unwrap_or("");
    let start = description
        .find("[default: ")
        .unwrap_or_else(|| panic!("{flag} has no default: {description}"));
    let rest = &description[start + "[default: ".len()..];
    rest[..rest.find(']').unwrap()].to_string()
}

#[test]
fn the_csvs_reach_the_operator_where_it_listens() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let health: i64 = default_of(&help, "--health-port").parse().unwrap();
    let webhook: i64 = default_of(&help, "--webhook-port").parse().unwrap();
    let apiserver: i64 = default_of(&help, "--apiserver-port").parse().unwrap();
    // Where OLM mounts the certificates (docs/certificates.md §5).
    assert_eq!(
        default_of(&help, "--webhook-cert-dir"),
        "/tmp/k8s-webhook-server/serving-certs"
    );
    assert_eq!(
        default_of(&help, "--apiserver-cert-dir"),
        "/apiserver.local.config/certificates"
    );
    assert_eq!(default_of(&help, "--api-group"), "api.testop.olm-rs.dev");
    let every_bundle = bundle_dirs().into_iter().map(|d| (d, PACKAGE)).chain(
        bundle_dirs_of(OWN_PACKAGE)
            .into_iter()
            .map(|d| (d, OWN_PACKAGE)),
    );
    for (dir, package) in every_bundle {
        let csv = csv_of_package(&dir, package);
        let c = container(&csv);
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], health);
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(c["livenessProbe"]["httpGet"]["port"], health);
        for w in csv["spec"]["webhookdefinitions"].as_array().unwrap() {
            assert_eq!(w["targetPort"], webhook);
            let path = w["webhookPath"].as_str().unwrap();
            assert!(["/validate", "/convert"].contains(&path), "{path}");
        }
        assert_eq!(
            csv["spec"]["apiservicedefinitions"]["owned"][0]["containerPort"],
            apiserver
        );
        for arg in c["args"].as_array().unwrap() {
            let flag = arg.as_str().unwrap().split('=').next().unwrap();
            assert!(
                help.lines()
                    .any(|l| l.trim() == flag || l.trim().starts_with(&format!("{flag} "))),
                "{flag} is not a flag of the test operator"
            );
        }
    }
}

/// The own-namespace package installs beside olm-rs-testop: OwnNamespace supported (so no
/// conversion webhook, which OLM allows only for AllNamespaces), a validating webhook and an
/// aggregated API, and neither a CRD group nor an APIService group in common with the other
/// package (OLM refuses a second operator providing an API), nor an APIService plural and
/// version (OLM names the APIService's per-API ClusterRoles `<plural>-<version>-…`, without the
/// group: docs/operator-groups.md §9.1).
#[test]
fn the_own_namespace_package_sits_beside_the_other() {
    use olm_rs::catalog::{load_catalog, validate};
    let (_kind, config, mut problems) = load_catalog(&testop_dir().join("catalog-own")).unwrap();
    problems.extend(validate::validate(&config));
    assert!(problems.iter().all(|p| p.rule.is_warning()), "{problems:?}");
    assert_eq!(
        (
            config.packages.len(),
            config.channels.len(),
            config.bundles.len()
        ),
        (1, 1, 1)
    );
    let groups = |csv: &Value| {
        let crds: Vec<String> = csv["spec"]["customresourcedefinitions"]["owned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                c["name"]
                    .as_str()
                    .unwrap()
                    .split_once('.')
                    .unwrap()
                    .1
                    .to_owned()
            })
            .collect();
        let apis: Vec<String> = csv["spec"]["apiservicedefinitions"]["owned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["group"].as_str().unwrap().to_owned())
            .collect();
        let roles: Vec<String> = csv["spec"]["apiservicedefinitions"]["owned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                format!(
                    "{}-{}",
                    a["name"].as_str().unwrap(),
                    a["version"].as_str().unwrap()
                )
            })
            .collect();
        (crds, apis, roles)
    };
    let others: Vec<(Vec<String>, Vec<String>, Vec<String>)> =
        bundle_dirs().iter().map(|d| groups(&csv_of(d))).collect();
    for dir in bundle_dirs_of(OWN_PACKAGE) {
        let csv = csv_of_package(&dir, OWN_PACKAGE);
        let modes: BTreeMap<&str, bool> = csv["spec"]["installModes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["type"].as_str().unwrap(), m["supported"] == true))
            .collect();
        assert!(
            modes["OwnNamespace"] && !modes["AllNamespaces"],
            "{modes:?}"
        );
        let types: Vec<&str> = csv["spec"]["webhookdefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["ValidatingAdmissionWebhook"]);
        let (crds, apis, roles) = groups(&csv);
        for (other_crds, other_apis, other_roles) in &others {
            assert!(crds.iter().all(|g| !other_crds.contains(g)), "{crds:?}");
            assert!(apis.iter().all(|g| !other_apis.contains(g)), "{apis:?}");
            assert!(roles.iter().all(|r| !other_roles.contains(r)), "{roles:?}");
        }
        // The operator serves the APIService's group and version, not its default ones.
        let api = &csv["spec"]["apiservicedefinitions"]["owned"][0];
        let args: Vec<String> = serde_json::from_value(container(&csv)["args"].clone()).unwrap();
        for (flag, value) in [
            ("--api-group", &api["group"]),
            ("--api-version", &api["version"]),
        ] {
            let want = format!("{flag}={}", value.as_str().unwrap());
            assert!(args.contains(&want), "{want} not in {args:?}");
        }
    }
}
