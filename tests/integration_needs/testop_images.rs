//! The OCI images of tests/real_control_plane/images.rs: layers and config agree (diff_ids,
//! entries, modes), the olm-rs and catalog images say what the `Dockerfile` and
//! `e2e/catalog.Dockerfile` say, a program's layer holds every library it links (it runs in a
//! `chroot` of the image's files when the test may chroot), and an image pushed to a real
//! docker-registry reads back the same.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use oci_client::Reference;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::common::skip;
use crate::images::{self, Image, Layer};
use crate::registry_support::{Kind, TestRegistry};

const OLM_RS: &str = env!("CARGO_BIN_EXE_olm-rs");
const TEST_OPERATOR: &str = env!("CARGO_BIN_EXE_olm-rs-test-operator");
/// coreutils' (the child's environment is cleared, so no PATH lookup).
const CHROOT: &str = "/usr/sbin/chroot";

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Path → (entry type, mode, link target or content length) of a layer.
fn entries(layer: &Layer) -> BTreeMap<String, (tar::EntryType, u32, String)> {
    let mut archive = tar::Archive::new(layer.tar.as_slice());
    let mut out = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let header = entry.header().clone();
        let detail = match header.entry_type() {
            tar::EntryType::Symlink => header.link_name().unwrap().unwrap().display().to_string(),
            _ => {
                let mut data = Vec::new();
                entry.read_to_end(&mut data).unwrap();
                String::from_utf8(data).unwrap_or_else(|e| format!("{} bytes", e.as_bytes().len()))
            }
        };
        let previous = out.insert(
            path.clone(),
            (header.entry_type(), header.mode().unwrap(), detail),
        );
        assert!(previous.is_none(), "{path} twice in one layer");
    }
    out
}

fn all_entries(image: &Image) -> BTreeMap<String, (tar::EntryType, u32, String)> {
    image.layers.iter().flat_map(entries).collect()
}

/// The words of a Dockerfile instruction in exec form (`CMD ["a", "b"]`) or plain (`USER x`).
fn dockerfile(path: &str, instruction: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_file(path)).unwrap();
    let line = text
        .lines()
        .rfind(|l| l.starts_with(&format!("{instruction} ")))
        .unwrap_or_else(|| panic!("{path} has no {instruction}"));
    let rest = line[instruction.len()..].trim();
    if rest.starts_with('[') {
        serde_json::from_str(rest).unwrap()
    } else {
        rest.split_whitespace().map(String::from).collect()
    }
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The image's layers unpacked into a directory, as a container runtime would.
fn unpack(image: &Image) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for layer in &image.layers {
        let mut archive = tar::Archive::new(layer.tar.as_slice());
        archive.set_preserve_permissions(true);
        archive.unpack(root.path()).unwrap();
    }
    root
}

/// Kills a process group (`-PGID`) when dropped.
struct KillGroupOnDrop(String);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// Skips the test unless Debian's static busybox is there (the pause and check images' files).
fn require_busybox() {
    skip::require_file(images::BUSYBOX, "apt-get install busybox-static");
}

fn config_diff_ids_are_the_uncompressed_layers() {
    let image = images::operator_image(Path::new(TEST_OPERATOR)).unwrap();
    let config = image.config_json();
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
    assert_eq!(config["rootfs"]["type"], "layers");
    let diff_ids = config["rootfs"]["diff_ids"].as_array().unwrap();
    assert_eq!(diff_ids.len(), image.layers.len());
    for (layer, diff_id) in image.layers.iter().zip(diff_ids) {
        let gz = layer.gzip().unwrap();
        let uncompressed = gunzip(&gz);
        assert_eq!(uncompressed, layer.tar);
        assert_eq!(
            diff_id.as_str().unwrap(),
            format!("sha256:{:x}", Sha256::digest(&uncompressed))
        );
        assert_ne!(
            diff_id.as_str().unwrap(),
            format!("sha256:{:x}", Sha256::digest(&gz)),
            "a diff_id names the uncompressed layer"
        );
    }
    // The same files give the same layers.
    let again = images::operator_image(Path::new(TEST_OPERATOR)).unwrap();
    assert_eq!(again.config_json(), config);
}

fn the_test_operator_image_holds_its_libraries_and_the_nonroot_user() {
    let image = images::operator_image(Path::new(TEST_OPERATOR)).unwrap();
    let files = all_entries(&image);
    let (kind, mode, _) = &files["usr/local/bin/olm-rs-test-operator"];
    assert_eq!((*kind, *mode), (tar::EntryType::Regular, 0o755));
    for dir in ["usr", "usr/local", "usr/local/bin", "etc", "home/nonroot"] {
        assert_eq!(files[dir].0, tar::EntryType::Directory, "{dir}");
    }
    assert_eq!(files["tmp"].1, 0o1777);
    let libraries = images::linked_libraries(Path::new(TEST_OPERATOR)).unwrap();
    assert!(
        libraries.iter().any(|l| l.ends_with("libc.so.6")),
        "a test build links glibc: {libraries:?}"
    );
    for library in &libraries {
        let path = library.to_string_lossy();
        let (kind, mode, _) = &files[path.trim_start_matches('/')];
        assert_eq!((*kind, *mode), (tar::EntryType::Regular, 0o755), "{path}");
    }
    let passwd = &files["etc/passwd"].2;
    assert!(
        passwd.contains("nonroot:x:65532:65532:"),
        "/etc/passwd: {passwd}"
    );
    let config = image.config_json();
    assert_eq!(
        config["config"]["Entrypoint"],
        json!(["/usr/local/bin/olm-rs-test-operator"])
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["ExposedPorts"],
        json!({"8081/tcp": {}, "8443/tcp": {}, "9443/tcp": {}})
    );
}

fn the_olm_rs_image_is_the_dockerfiles() {
    let image = images::olm_rs_image(Path::new(OLM_RS)).unwrap();
    let config = &image.config_json()["config"];
    assert_eq!(
        config["Entrypoint"],
        json!(dockerfile("Dockerfile", "ENTRYPOINT"))
    );
    assert_eq!(config["Cmd"], json!(dockerfile("Dockerfile", "CMD")));
    assert_eq!(config["User"], json!(dockerfile("Dockerfile", "USER")[0]));
    let ports: BTreeMap<String, Value> = dockerfile("Dockerfile", "EXPOSE")
        .into_iter()
        .map(|p| (format!("{p}/tcp"), json!({})))
        .collect();
    assert_eq!(config["ExposedPorts"], json!(ports));
    let files = all_entries(&image);
    let (kind, mode, _) = &files["usr/local/bin/olm-rs"];
    assert_eq!((*kind, *mode), (tar::EntryType::Regular, 0o755));

    // The catalog image on top of it is e2e/catalog.Dockerfile's.
    let catalog = images::catalog_image(&image, &repo_file("e2e/catalog")).unwrap();
    assert_eq!(catalog.layers.len(), image.layers.len() + 1);
    let config = &catalog.config_json()["config"];
    assert_eq!(
        config["Cmd"],
        json!(dockerfile("e2e/catalog.Dockerfile", "CMD"))
    );
    assert_eq!(
        config["Entrypoint"],
        json!(dockerfile("e2e/catalog.Dockerfile", "ENTRYPOINT"))
    );
    let label = dockerfile("e2e/catalog.Dockerfile", "LABEL")[0].clone();
    let (key, value) = label.split_once('=').unwrap();
    assert_eq!(config["Labels"][key], value);
    assert_eq!(config["User"], "65532:65532");
    let fbc = entries(catalog.layers.last().unwrap());
    let package = &fbc["configs/olm-rs-e2e-demo/package.yaml"];
    assert_eq!((package.0, package.1), (tar::EntryType::Regular, 0o644));
    assert_eq!(
        package.2,
        std::fs::read_to_string(repo_file("e2e/catalog/olm-rs-e2e-demo/package.yaml")).unwrap()
    );
    assert_eq!(fbc["configs"].0, tar::EntryType::Directory);
}

fn a_bundle_image_is_its_directory_labelled_with_its_annotations() {
    let dir = repo_file("e2e/bundles/olm-rs-e2e-demo/0.2.0");
    let image = images::bundle_image(&dir).unwrap();
    assert_eq!(image.layers.len(), 1);
    let config = image.config_json();
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["operators.operatorframework.io.bundle.package.v1"],
        "olm-rs-e2e-demo"
    );
    assert_eq!(
        labels["operators.operatorframework.io.bundle.mediatype.v1"],
        "registry+v1"
    );
    assert_eq!(
        labels["operators.operatorframework.io.bundle.channels.v1"],
        "stable,fast"
    );
    assert!(config["config"].get("Entrypoint").is_none(), "FROM scratch");
    let files = entries(&image.layers[0]);
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "manifests",
            "manifests/olm-rs-e2e-demo.clusterserviceversion.yaml",
            "manifests/widgets.e2e.olm-rs.dev.crd.yaml",
            "metadata",
            "metadata/annotations.yaml",
        ]
    );
    assert_eq!(files["metadata/annotations.yaml"].1, 0o644);
    assert_eq!(files["manifests"].1, 0o755);
}

fn ldd_output_names_the_libraries_and_the_loader() {
    let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f01)\n\
                \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f02)\n\
                \t/lib64/ld-linux-x86-64.so.2 (0x00007f03)\n";
    assert_eq!(
        images::parse_ldd(text).unwrap(),
        [
            "/lib/x86_64-linux-gnu/libgcc_s.so.1",
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ]
        .map(PathBuf::from)
    );
    let missing = images::parse_ldd("\tlibfoo.so.1 => not found\n").unwrap_err();
    assert!(missing.to_string().contains("libfoo.so.1"), "{missing}");
    assert!(
        images::parse_ldd("\tstatically linked\n")
            .unwrap()
            .is_empty()
    );
    assert!(
        images::linked_libraries(Path::new(images::BUSYBOX))
            .map(|l| l.is_empty())
            .unwrap_or(true),
        "busybox-static links nothing"
    );
}

fn the_pause_image_sleeps_as_65535_and_stops_at_sigterm() {
    require_busybox();
    let image = images::pause_image().unwrap();
    let files = all_entries(&image);
    assert_eq!(
        (files["bin/busybox"].0, files["bin/busybox"].1),
        (tar::EntryType::Regular, 0o755)
    );
    assert_eq!(
        files["bin/sleep"],
        (tar::EntryType::Symlink, 0o777, "busybox".to_string())
    );
    let config = image.config_json();
    assert_eq!(config["config"]["User"], "65535:65535");
    // What follows runs the image; the checks above ran already, the outcome is "ignored".
    skip::require_root("running the pause image in a chroot");
    // Its entrypoint, run in a chroot of its files: it keeps running, then exits 0 at SIGTERM.
    let root = unpack(&image);
    // A container runtime gives every container /dev/null (the shell's background job reads it).
    std::fs::create_dir(root.path().join("dev")).unwrap();
    let mknod = Command::new("mknod")
        .arg(root.path().join("dev/null"))
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(mknod.success());
    let entrypoint: Vec<String> =
        serde_json::from_value(config["config"]["Entrypoint"].clone()).unwrap();
    // Its own process group: the shell's `sleep` outlives it here (a container's PID namespace
    // would end it), and the group is killed below.
    let mut child = Command::new(CHROOT)
        .arg(root.path())
        .args(&entrypoint)
        .env_clear()
        .env("PATH", "/bin")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let group = format!("-{}", child.id());
    let _kill_group = KillGroupOnDrop(group.clone());
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "it sleeps");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "it ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{status}");
}

fn programs_run_from_the_image_files_alone() {
    skip::require_root("running the image's programs in a chroot");
    let image = images::operator_image(Path::new(TEST_OPERATOR)).unwrap();
    let root = unpack(&image);
    // No ld.so.cache, no library of this machine: only the layer's files.
    assert!(!root.path().join("etc/ld.so.cache").exists());
    let out = Command::new(CHROOT)
        .arg(root.path())
        .arg(images::TEST_OPERATOR_PATH)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("--webhook-cert-dir"));

    // The catalog image: its olm-rs reads the catalog under /configs (what `catalog serve`
    // loads before it listens).
    let base = images::olm_rs_image(Path::new(OLM_RS)).unwrap();
    let catalog = images::catalog_image(&base, &repo_file("e2e/testop/catalog")).unwrap();
    let root = unpack(&catalog);
    let out = Command::new(CHROOT)
        .arg(root.path())
        .args([images::OLM_RS_PATH, "catalog", "validate", "/configs"])
        .env_clear()
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("1 packages, 3 channels, 4 bundles"),
        "{stdout}"
    );
}

async fn pushed_images_read_back_from_a_real_registry() {
    let registry = TestRegistry::start(Kind::Plain);
    let image = images::operator_image(Path::new(TEST_OPERATOR)).unwrap();
    let pushed = image
        .push(&registry, "olm-rs-test-operator", "0.1.0")
        .await
        .unwrap();
    assert!(
        pushed.starts_with(&format!("{}/olm-rs-test-operator@sha256:", registry.host())),
        "{pushed}"
    );
    // Read back by digest: the manifest lists the gzip layers, the config is ours, and each
    // pulled layer, uncompressed, has the config's diff_id.
    let client = registry.push_client();
    let reference: Reference = pushed.parse().unwrap();
    let pulled = client
        .pull(
            &reference,
            &registry.push_auth(),
            vec![images::LAYER_MEDIA_TYPE],
        )
        .await
        .unwrap();
    let config: Value = serde_json::from_slice(&pulled.config.data).unwrap();
    assert_eq!(config, image.config_json());
    let manifest = pulled.manifest.unwrap();
    assert_eq!(manifest.layers.len(), image.layers.len());
    assert!(
        manifest
            .layers
            .iter()
            .all(|l| l.media_type == images::LAYER_MEDIA_TYPE)
    );
    // Blob by blob in the manifest's order, as a runtime unpacks them (`pull` gathers the
    // layers in the order their downloads finish).
    for (descriptor, diff_id) in manifest
        .layers
        .iter()
        .zip(config["rootfs"]["diff_ids"].as_array().unwrap())
    {
        let mut gz = Vec::new();
        client
            .pull_blob(&reference, descriptor, &mut gz)
            .await
            .unwrap();
        assert_eq!(
            format!("sha256:{:x}", Sha256::digest(&gz)),
            descriptor.digest
        );
        let tar = gunzip(&gz);
        assert_eq!(
            format!("sha256:{:x}", Sha256::digest(&tar)),
            diff_id.as_str().unwrap()
        );
    }

    // Any name: the pause image mirrored as registry.k8s.io's, and read by skopeo (as a node's
    // container runtime would resolve it) when skopeo is installed.
    require_busybox();
    let pause = images::pause_image()
        .unwrap()
        .push(&registry, "pause", "3.10")
        .await
        .unwrap();
    let digest = pause.rsplit_once('@').unwrap().1.to_string();
    if Path::new("/usr/bin/skopeo").is_file() {
        let out = Command::new("skopeo")
            .args(["inspect", "--tls-verify=false", "--config"])
            .arg(format!("docker://{}/pause:3.10", registry.host()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(seen["config"]["User"], "65535:65535");
        let out = Command::new("skopeo")
            .args(["inspect", "--tls-verify=false"])
            .arg(format!("docker://{}/pause:3.10", registry.host()))
            .output()
            .unwrap();
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(seen["Digest"], digest);
    } else {
        // Read back with oci-client, then reported skipped: skopeo's view was not checked.
        let tagged: Reference = format!("{}/pause:3.10", registry.host()).parse().unwrap();
        let seen = client
            .fetch_manifest_digest(&tagged, &registry.push_auth())
            .await
            .unwrap();
        assert_eq!(seen, digest);
        skip::skip(
            "reading the pause image back with skopeo needs /usr/bin/skopeo (apt-get install skopeo)",
        );
    }
}

async fn the_test_operator_package_is_pushed_under_the_names_its_csvs_use() {
    let registry = TestRegistry::start(Kind::Plain);
    let olm_rs = images::olm_rs_image(Path::new(OLM_RS)).unwrap();
    let package = images::push_test_operator_package(&registry, &olm_rs, Path::new(TEST_OPERATOR))
        .await
        .unwrap();
    let versions: Vec<&str> = package.operator.keys().map(String::as_str).collect();
    assert_eq!(versions, ["0.1.0", "0.2.0", "0.3.0", "0.4.0"]);
    let client = registry.push_client();
    let auth = registry.push_auth();
    let digests: std::collections::BTreeSet<&str> = package
        .operator
        .values()
        .map(|r| r.rsplit_once('@').unwrap().1)
        .collect();
    assert_eq!(digests.len(), 1, "one image under every tag: {package:?}");
    for version in versions {
        // The tag a CSV names (example.com/olm-rs-test-operator:<version>, mirrored here).
        let csv = std::fs::read_to_string(repo_file(&format!(
            "e2e/testop/bundles/olm-rs-testop/{version}/manifests/olm-rs-testop.clusterserviceversion.yaml"
        )))
        .unwrap();
        let image = format!("example.com/{}:{version}", images::TEST_OPERATOR_REPO);
        assert!(csv.contains(&format!("image: {image}")), "{version}");
        let tagged: Reference = format!(
            "{}/{}:{version}",
            registry.host(),
            images::TEST_OPERATOR_REPO
        )
        .parse()
        .unwrap();
        let digest = client.fetch_manifest_digest(&tagged, &auth).await.unwrap();
        assert!(package.operator[version].ends_with(&digest));
        // Its bundle image carries the package's labels.
        let bundle: Reference = package.bundles[version].parse().unwrap();
        let (_, _, config) = client
            .pull_manifest_and_config(&bundle, &auth)
            .await
            .unwrap();
        let config: Value = serde_json::from_str(&config).unwrap();
        assert_eq!(
            config["config"]["Labels"]["operators.operatorframework.io.bundle.package.v1"],
            "olm-rs-testop"
        );
    }
    let catalog: Reference = package.catalog.parse().unwrap();
    let (_, _, config) = client
        .pull_manifest_and_config(&catalog, &auth)
        .await
        .unwrap();
    let config: Value = serde_json::from_str(&config).unwrap();
    assert_eq!(
        config["config"]["Labels"][images::CONFIGS_LABEL],
        "/configs"
    );
    assert_eq!(
        config["config"]["Cmd"],
        json!(["catalog", "serve", "/configs"])
    );
}

crate::trials! {
    sync config_diff_ids_are_the_uncompressed_layers,
    sync the_test_operator_image_holds_its_libraries_and_the_nonroot_user,
    sync the_olm_rs_image_is_the_dockerfiles,
    sync a_bundle_image_is_its_directory_labelled_with_its_annotations,
    sync ldd_output_names_the_libraries_and_the_loader,
    sync the_pause_image_sleeps_as_65535_and_stops_at_sigterm,
    sync programs_run_from_the_image_files_alone,
    multi pushed_images_read_back_from_a_real_registry,
    multi the_test_operator_package_is_pushed_under_the_names_its_csvs_use,
}
