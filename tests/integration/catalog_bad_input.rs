//! Bad input gets a clear problem naming the file (and line when known), never a panic.

use std::path::Path;

use olm_rs::catalog::bundle_dir::{self, BundleDirError};
use olm_rs::catalog::{Problem, Rule, fbc, load_catalog, validate};

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn problems(dir: &Path) -> Vec<Problem> {
    let (_, config, mut problems) = load_catalog(dir).unwrap();
    problems.extend(validate::validate(&config));
    problems
}

const PACKAGE: &str = "schema: olm.package\nname: demo\ndefaultChannel: stable\n";
const CHANNEL: &str =
    "---\nschema: olm.channel\npackage: demo\nname: stable\nentries:\n- name: demo.v1.0.0\n";
const BUNDLE: &str = "---\nschema: olm.bundle\npackage: demo\nname: demo.v1.0.0\nimage: quay.io/demo/bundle:v1\nproperties:\n- type: olm.package\n  value:\n    packageName: demo\n    version: 1.0.0\n";

#[test]
fn valid_catalog_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "demo/index.yaml",
        &format!("{PACKAGE}{CHANNEL}{BUNDLE}"),
    );
    assert_eq!(problems(dir.path()), vec![]);
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "demo/index.yaml",
        &format!("{PACKAGE}{CHANNEL}{BUNDLE}"),
    );
    write(
        dir.path(),
        "broken/index.yaml",
        "schema: olm.package\nname: broken\ndescription: [unclosed\n",
    );
    let p = problems(dir.path());
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_eq!(p[0].rule, Rule::L1);
    assert_eq!(p[0].location.file.as_deref(), Some("broken/index.yaml"));
    assert!(p[0].location.line.is_some());
    assert!(
        p[0].to_string().starts_with("broken/index.yaml:"),
        "{}",
        p[0]
    );
}

#[test]
fn malformed_json_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "demo/index.json",
        "{\"schema\":\"olm.package\",\"name\":\"demo\"}\n{\"schema\": \"olm.channel\",\n \"name\": ",
    );
    let p = problems(dir.path());
    assert_eq!(p[0].rule, Rule::L1);
    assert_eq!(p[0].location.file.as_deref(), Some("demo/index.json"));
    assert_eq!(p[0].location.line, Some(3));
}

#[test]
fn concatenated_json_documents_load() {
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{"schema":"olm.package","name":"demo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"demo","name":"stable","entries":[{"name":"demo.v1.0.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"x","properties":[{"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}
{"schema":"vendor.io/custom","anything":[1,2,3]}"#;
    write(dir.path(), "demo/catalog.json", json);
    assert_eq!(problems(dir.path()), vec![]);
    let loaded = fbc::load_dir(dir.path()).unwrap();
    assert_eq!(loaded.config.others.len(), 1, "unknown schemas are kept");
    assert_eq!(loaded.config.bundles[0].origin.line, Some(3));
}

#[test]
fn missing_package_property_and_entry_without_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = BUNDLE.replace(
        "- type: olm.package\n  value:\n    packageName: demo\n    version: 1.0.0\n",
        "- type: olm.gvk\n  value: {group: g, kind: K, version: v1}\n",
    );
    let channel = format!("{CHANNEL}- name: demo.v2.0.0\n  replaces: demo.v1.0.0\n");
    write(
        dir.path(),
        "index.yaml",
        &format!("{PACKAGE}{channel}{bundle}"),
    );
    let p = problems(dir.path());
    let rules: Vec<Rule> = p.iter().map(|p| p.rule).collect();
    assert!(rules.contains(&Rule::C12), "{p:#?}");
    assert!(rules.contains(&Rule::C16), "{p:#?}");
    let c12 = p.iter().find(|p| p.rule == Rule::C12).unwrap();
    assert_eq!(c12.location.bundle.as_deref(), Some("demo.v1.0.0"));
    assert_eq!(c12.location.line, Some(13));
}

#[test]
fn unparsable_skip_range_warns() {
    let dir = tempfile::tempdir().unwrap();
    let channel = CHANNEL.replace(
        "- name: demo.v1.0.0\n",
        "- name: demo.v1.0.0\n  skipRange: '>=1.0 <2'\n",
    );
    write(
        dir.path(),
        "index.yaml",
        &format!("{PACKAGE}{channel}{BUNDLE}"),
    );
    let p = problems(dir.path());
    assert_eq!(p.len(), 1);
    assert!(p[0].rule.is_warning());
    assert!(
        p[0].message.contains("Could not parse version \"1.0\""),
        "{}",
        p[0]
    );
}

#[test]
fn indexignore_excludes_files_relative_to_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "demo/index.yaml",
        &format!("{PACKAGE}{CHANNEL}{BUNDLE}"),
    );
    write(
        dir.path(),
        "demo/README.md",
        "# not a catalog: this would fail to parse\n: : :\n",
    );
    write(dir.path(), "demo/.indexignore", "*.md\n");
    write(dir.path(), "other/notes.txt", "{ not json");
    write(dir.path(), ".indexignore", "/other/\n");
    assert_eq!(problems(dir.path()), vec![]);
    let files = fbc::catalog_files(dir.path()).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
}

#[test]
fn non_object_and_non_utf8_documents() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", "- just\n- a list\n");
    std::fs::write(dir.path().join("b.yaml"), [0xff, 0xfe, 0x00]).unwrap();
    let p = problems(dir.path());
    assert_eq!(p.iter().filter(|p| p.rule == Rule::L1).count(), 2, "{p:#?}");
}

#[test]
fn bundle_dir_without_csv_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("1.0.0");
    write(
        &b,
        "metadata/annotations.yaml",
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.channels.v1: stable\n",
    );
    write(
        &b,
        "manifests/crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: xs.demo.io\n",
    );
    let err = bundle_dir::read(&b).unwrap_err();
    assert!(matches!(err, BundleDirError::NoCsv { .. }));
    assert!(err.to_string().contains("1.0.0"), "{err}");
    let p = problems(dir.path());
    assert_eq!(p[0].rule, Rule::B1);
    assert!(
        p[0].to_string().contains("no ClusterServiceVersion"),
        "{}",
        p[0]
    );
}

#[test]
fn bundle_dir_with_missing_owned_crd_or_annotations() {
    let dir = tempfile::tempdir().unwrap();
    let b = dir.path().join("b");
    write(
        &b,
        "manifests/csv.yaml",
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: demo.v1.0.0\nspec:\n  version: 1.0.0\n  customresourcedefinitions:\n    owned:\n    - name: xs.demo.io\n      version: v1\n      kind: X\n",
    );
    write(&b, "metadata/other.yaml", "foo: bar\n");
    assert!(matches!(
        bundle_dir::read(&b).unwrap_err(),
        BundleDirError::NoAnnotations { .. }
    ));
    write(
        &b,
        "metadata/annotations.yaml",
        "annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.channels.v1: stable\n",
    );
    let err = bundle_dir::read(&b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error checking provided apis in bundle demo.v1.0.0: couldn't find demo.io/v1/X (xs) in bundle"
    );
}
