//! A real image registry for the bundle-image flow tests: Debian's `docker-registry` (CNCF
//! distribution 2.8) started on 127.0.0.1 with a temporary storage directory and a generated
//! config (plain HTTP, optionally htpasswd basic auth), and bundle images built by the test
//! (an OCI layout written here, pushed with `skopeo copy`).
//!
//! Tests skip (with a message) only when the binaries are absent and `CI` is not set.

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
pub const SKOPEO_BIN: &str = "/usr/bin/skopeo";
/// User and password of the htpasswd registry.
pub const USER: &str = "olm";
pub const PASSWORD: &str = "s3cret";
/// bcrypt (cost 4, fast enough for every request) of [`PASSWORD`].
const PASSWORD_HASH: &str = "$2b$04$SUhv0NPN6u7sr4g/fff3X.6b8Hqlk7s0keL7pbMUY1n7MqxSOhHfO";

/// Whether the registry binaries exist; outside CI a missing one skips the test (printed).
pub fn available(test: &str) -> bool {
    let present = Path::new(REGISTRY_BIN).exists() && Path::new(SKOPEO_BIN).exists();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{REGISTRY_BIN} and {SKOPEO_BIN} are required in CI (.ci/run installs them)"
        );
        eprintln!(
            "skipping {test}: {REGISTRY_BIN} or {SKOPEO_BIN} is missing (apt-get install docker-registry skopeo)"
        );
    }
    present
}

/// A running registry; stopped (and its storage removed) on drop.
pub struct Registry {
    child: Option<Child>,
    pub addr: SocketAddr,
    auth: bool,
    dir: tempfile::TempDir,
}

impl Registry {
    /// A plain-HTTP registry; with `auth`, every request needs [`USER`]/[`PASSWORD`].
    pub fn start(auth: bool) -> Registry {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut registry = Registry {
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            auth,
            dir: tempfile::tempdir().expect("temp dir"),
        };
        registry.run();
        registry
    }

    /// `127.0.0.1:<port>`
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    fn run(&mut self) {
        let dir = self.dir.path();
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage).expect("storage dir");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {}\n",
            storage.display(),
            self.addr
        );
        if self.auth {
            let htpasswd = dir.join("htpasswd");
            std::fs::write(&htpasswd, format!("{USER}:{PASSWORD_HASH}\n")).expect("htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: olm-rs-tests\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).expect("registry config");
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(self.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "registry on {} did not listen",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the registry (its storage stays for [`Registry::restart`]).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(self.addr).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts it again on the same port with the same content.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }

    /// Pushes an image whose single layer holds `files` (path → content) as `repo:tag`;
    /// returns the image reference.
    pub fn push(&self, repo: &str, tag: &str, layer: Vec<u8>) -> String {
        let layout = tempfile::tempdir().expect("layout dir");
        write_oci_layout(layout.path(), tag, &layer);
        let image = format!("{}/{repo}:{tag}", self.host());
        let mut command = Command::new(SKOPEO_BIN);
        command
            .args(["copy", "--quiet", "--dest-tls-verify=false"])
            .arg(format!("oci:{}:{tag}", layout.path().display()))
            .arg(format!("docker://{image}"));
        if self.auth {
            command.arg(format!("--dest-creds={USER}:{PASSWORD}"));
        }
        let out = command.output().expect("skopeo runs");
        assert!(
            out.status.success(),
            "skopeo copy to {image}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        image
    }

    /// A registries.conf letting olm-rs use this registry over plain HTTP.
    pub fn registries_conf(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!("registries-{}.conf", self.addr.port()));
        std::fs::write(
            &path,
            format!(
                "[[registry]]\nprefix = \"{host}\"\nlocation = \"{host}\"\ninsecure = true\n",
                host = self.host()
            ),
        )
        .expect("registries.conf");
        path
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A gzip'd tar layer with a registry+v1 bundle: `manifests/<name>` for each manifest (JSON is
/// YAML) and `metadata/annotations.yaml`.
pub fn bundle_layer(package: &str, channel: &str, manifests: &[(String, Value)]) -> Vec<u8> {
    let annotations = format!(
        "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: {package}\n  operators.operatorframework.io.bundle.channels.v1: {channel}\n  operators.operatorframework.io.bundle.channel.default.v1: {channel}\n"
    );
    let mut files: Vec<(String, Vec<u8>)> = manifests
        .iter()
        .map(|(name, object)| {
            (
                format!("manifests/{name}"),
                serde_json::to_vec_pretty(object).expect("json"),
            )
        })
        .collect();
    files.push(("metadata/annotations.yaml".into(), annotations.into_bytes()));
    layer(&files, &[])
}

/// A tar entry written by hand, so that it can be what `tar::Builder` refuses to write.
pub enum RawEntry {
    /// A regular file at a raw path (e.g. `manifests/../../etc/x`).
    File { path: String, data: Vec<u8> },
    /// A symbolic link.
    Symlink { path: String, target: String },
}

/// A gzip'd tar of `files`, then `raw` entries.
pub fn layer(files: &[(String, Vec<u8>)], raw: &[RawEntry]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, path, data.as_slice())
            .expect("tar entry");
    }
    for entry in raw {
        let mut header = tar::Header::new_old();
        let (path, data, kind, link) = match entry {
            RawEntry::File { path, data } => (path, data.as_slice(), tar::EntryType::Regular, None),
            RawEntry::Symlink { path, target } => {
                (path, &[][..], tar::EntryType::Symlink, Some(target))
            }
        };
        let old = header.as_old_mut();
        old.name[..path.len()].copy_from_slice(path.as_bytes());
        if let Some(link) = link {
            old.linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(kind);
        header.set_cksum();
        tar.append(&header, data).expect("raw tar entry");
    }
    let gz = tar.into_inner().expect("tar");
    gz.finish().expect("gzip")
}

fn sha256(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

fn put_blob(layout: &Path, data: &[u8]) -> String {
    let digest = sha256(data);
    let hex = digest.trim_start_matches("sha256:");
    let path = layout.join("blobs/sha256").join(hex);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("blobs dir");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(data))
        .expect("blob");
    digest
}

/// An OCI image layout with one image (one layer) tagged `tag`.
fn write_oci_layout(layout: &Path, tag: &str, layer: &[u8]) {
    let diff_id = {
        use std::io::Read as _;
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(layer)
            .read_to_end(&mut raw)
            .expect("gunzip");
        sha256(&raw)
    };
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1"}},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}
    }))
    .expect("config");
    let layer_digest = put_blob(layout, layer);
    let config_digest = put_blob(layout, &config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer.len()}]
    }))
    .expect("manifest");
    let manifest_digest = put_blob(layout, &manifest);
    std::fs::write(
        layout.join("oci-layout"),
        br#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .expect("oci-layout");
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest_digest,
                           "size": manifest.len(), "annotations": {"org.opencontainers.image.ref.name": tag}}]
        }))
        .expect("index"),
    )
    .expect("index.json");
}
