//! A catalog that fails validation is never served, not even as an empty catalog: loading for
//! serving refuses with every problem, and `olm-rs catalog serve` exits 1 listing them.

use std::process::Command;

use olm_rs::catalog::validated::{ServeLoadError, load_for_serving};

const TWO_HEADS: &str = r#"
schema: olm.package
name: broken
defaultChannel: stable
---
schema: olm.channel
package: broken
name: stable
entries:
- name: broken.v1.0.0
- name: broken.v2.0.0
---
schema: olm.bundle
package: broken
name: broken.v1.0.0
image: quay.io/example/broken-bundle:v1.0.0
properties:
- type: olm.package
  value: {packageName: broken, version: 1.0.0}
---
schema: olm.bundle
package: broken
name: broken.v2.0.0
image: quay.io/example/broken-bundle:v2.0.0
properties:
- type: olm.package
  value: {packageName: broken, version: 2.0.0}
"#;

fn broken_catalog() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("broken")).unwrap();
    std::fs::write(dir.path().join("broken/catalog.yaml"), TWO_HEADS).unwrap();
    dir
}

#[test]
fn invalid_catalog_is_refused_with_its_problems() {
    let dir = broken_catalog();
    let err = load_for_serving(dir.path()).unwrap_err();
    let ServeLoadError::Invalid { problems, .. } = &err else {
        panic!("expected validation problems, got {err}");
    };
    assert!(!problems.is_empty());
    let text = err.to_string();
    assert!(text.contains("not serving it"), "{text}");
    assert!(
        text.contains("multiple channel heads found in graph: broken.v1.0.0, broken.v2.0.0"),
        "{text}"
    );
}

#[test]
fn unreadable_catalog_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("index.json"), "{\"schema\": ").unwrap();
    assert!(load_for_serving(dir.path()).is_err());
    let missing = dir.path().join("nope");
    let err = load_for_serving(&missing).unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn serve_command_exits_listing_the_problems() {
    let dir = broken_catalog();
    let out = Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(["catalog", "serve"])
        .arg(dir.path())
        .args(["--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("multiple channel heads found in graph"),
        "{stderr}"
    );
}
