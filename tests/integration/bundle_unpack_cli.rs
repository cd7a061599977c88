//! The two halves of an unpack pod (docs/bundle-images.md, "When only the node can pull") as the
//! pod runs them: `olm-rs bundle-unpack install DIR` copies the binary (and, for this
//! dynamically linked test build, its loader and libraries), the copy runs as the bundle
//! container's command (`bundle_unpack::unpack_pod::emit_command`) and writes a bundle
//! directory to stdout, and the controller's reader gives back the very files, rendered as a
//! pull renders them.

use std::path::Path;
use std::process::Command;

use olm_rs::bundle_unpack::handback::unpack_handed_back;
use olm_rs::bundle_unpack::unpack_pod::{UnpackPodOptions, emit_command};
use olm_rs::oci::{Limits, PulledBundle};

#[test]
fn a_bundle_copied_out_by_the_installed_extractor_renders_as_the_directory_does() {
    let util = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_olm-rs"))
        .args(["bundle-unpack", "install"])
        .arg(util.path())
        .status()
        .unwrap();
    assert!(status.success(), "install: {status}");
    assert!(util.path().join("olm-rs").is_file());
    // The loader the copy runs through, when the build is dynamically linked.
    let loader = std::fs::read_dir(util.path().join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|f| f.starts_with("ld-linux") || f.starts_with("ld-musl"));
    let options = UnpackPodOptions {
        util_image: String::new(),
        loader,
        workload_user_id: None,
    };
    // The pod's command, with /util where install put the copy.
    let command: Vec<String> = emit_command(&options)
        .into_iter()
        .map(|a| match a.strip_prefix("/util") {
            Some(rest) => format!("{}{rest}", util.path().display()),
            None => a,
        })
        .collect();
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/bundles/olm-rs-e2e-demo/0.3.0");
    let output = Command::new(&command[0])
        .args(&command[1..])
        .arg("--root")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "emit: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let log = String::from_utf8(output.stdout).unwrap();
    let files = unpack_handed_back(&log, &Limits::default()).unwrap();
    let from_pod = PulledBundle::from_files("localhost:5001/b:v1", "sha256:00", &files).unwrap();
    let from_dir = PulledBundle::from_dir("localhost:5001/b:v1", "sha256:00", &bundle).unwrap();
    assert_eq!(from_pod.bundle.name, from_dir.bundle.name);
    assert_eq!(from_pod.manifests(), from_dir.manifests());
    assert!(
        files.keys().any(|f| f.starts_with("manifests/"))
            && files.contains_key("metadata/annotations.yaml"),
        "{:?}",
        files.keys().collect::<Vec<_>>()
    );
}
