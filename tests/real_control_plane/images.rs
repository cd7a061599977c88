//! OCI images assembled from files of this machine — no container engine, no base image from a
//! public registry — and pushed to the test's docker-registry, for a real node to pull:
//!
//! - an image is a list of layers (each a tar archive, stored gzip-compressed) and a config
//!   (`architecture`, `os`, the container's `Entrypoint`, `Cmd`, `User`, `ExposedPorts`,
//!   `Labels`, `Env`, `WorkingDir`, and `rootfs.diff_ids`: the sha256 of each *uncompressed*
//!   layer, which containerd checks when it unpacks them);
//! - a program goes in with the shared libraries `ldd` says it links, each at the path the
//!   loader looks for it, so a dynamically linked test build runs as it does on this machine;
//! - the images mirror what users run: [`olm_rs_image`] is the repository's `Dockerfile`
//!   (distroless `nonroot` layout: `/etc/passwd`, user 65532, read-only root file system),
//!   [`catalog_image`] is `e2e/catalog.Dockerfile`, [`bundle_image`] is a registry+v1 bundle as
//!   `opm`/`operator-sdk` build it.
//!
//! Layers are deterministic (fixed times and owners), so the same files give the same digests.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail, ensure};
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

use crate::registry_support::TestRegistry;

pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The user of the olm-rs and test operator images, as distroless `nonroot`.
pub const NONROOT: &str = "65532:65532";
/// The user of `registry.k8s.io/pause` (so a pod with `runAsNonRoot` may run it).
pub const PAUSE_USER: &str = "65535:65535";
/// Debian's `busybox-static`.
pub const BUSYBOX: &str = "/bin/busybox";
pub const OLM_RS_PATH: &str = "/usr/local/bin/olm-rs";
pub const TEST_OPERATOR_PATH: &str = "/usr/local/bin/olm-rs-test-operator";
/// opm's label for "where the file-based catalog lives in this image".
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// One layer: an uncompressed tar archive.
#[derive(Debug, Clone)]
pub struct Layer {
    pub tar: Vec<u8>,
}

impl Layer {
    /// `sha256:<hex>` of the uncompressed archive: the config's `rootfs.diff_ids` entry.
    pub fn diff_id(&self) -> String {
        format!("sha256:{:x}", Sha256::digest(&self.tar))
    }

    /// The archive as it is pushed (gzip, no time stamp in the header).
    pub fn gzip(&self) -> anyhow::Result<Vec<u8>> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&self.tar)?;
        Ok(e.finish()?)
    }
}

/// Builds one layer. Parent directories are added (0755, root) before the first entry under
/// them; paths are absolute in the image (`/usr/local/bin/olm-rs`).
pub struct LayerBuilder {
    tar: tar::Builder<Vec<u8>>,
    dirs: BTreeSet<String>,
}

impl Default for LayerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl LayerBuilder {
    pub fn new() -> Self {
        LayerBuilder {
            tar: tar::Builder::new(Vec::new()),
            dirs: BTreeSet::new(),
        }
    }

    /// A directory owned by root.
    pub fn dir(&mut self, path: &str, mode: u32) -> anyhow::Result<&mut Self> {
        self.dir_owned(path, mode, 0)
    }

    /// A directory owned by `uid` (and the group of the same number).
    pub fn dir_owned(&mut self, path: &str, mode: u32, uid: u64) -> anyhow::Result<&mut Self> {
        let name = relative(path)?;
        self.parents(&name)?;
        if self.dirs.insert(name.clone()) {
            let mut header = header(tar::EntryType::Directory, mode, 0);
            header.set_uid(uid);
            header.set_gid(uid);
            self.tar.append_data(&mut header, &name, std::io::empty())?;
        }
        Ok(self)
    }

    pub fn file(&mut self, path: &str, data: &[u8], mode: u32) -> anyhow::Result<&mut Self> {
        let name = relative(path)?;
        self.parents(&name)?;
        let mut header = header(tar::EntryType::Regular, mode, data.len() as u64);
        self.tar.append_data(&mut header, &name, data)?;
        Ok(self)
    }

    /// `path` → `target` (a symlink's target is kept as written).
    pub fn symlink(&mut self, path: &str, target: &str) -> anyhow::Result<&mut Self> {
        let name = relative(path)?;
        self.parents(&name)?;
        let mut header = header(tar::EntryType::Symlink, 0o777, 0);
        self.tar.append_link(&mut header, &name, target)?;
        Ok(self)
    }

    /// A file of this machine (symlinks followed) at `path` in the image.
    pub fn copy(&mut self, from: &Path, path: &str, mode: u32) -> anyhow::Result<&mut Self> {
        let data = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        self.file(path, &data, mode)
    }

    /// The directory tree `from` under `path`: directories 0755, files 0644 (0755 when
    /// executable here), symlinks kept.
    pub fn tree(&mut self, from: &Path, path: &str) -> anyhow::Result<&mut Self> {
        use std::os::unix::fs::PermissionsExt as _;
        self.dir(path, 0o755)?;
        let mut entries: Vec<PathBuf> = std::fs::read_dir(from)
            .with_context(|| format!("reading {}", from.display()))?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        entries.sort();
        for entry in entries {
            let name = entry.file_name().map(|n| n.to_string_lossy().into_owned());
            let Some(name) = name else { continue };
            let at = format!("{}/{name}", path.trim_end_matches('/'));
            let meta = std::fs::symlink_metadata(&entry)?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&entry)?;
                self.symlink(&at, &target.to_string_lossy())?;
            } else if meta.is_dir() {
                self.tree(&entry, &at)?;
            } else {
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                };
                self.copy(&entry, &at, mode)?;
            }
        }
        Ok(self)
    }

    /// The program `from` at `path` (0755, debug sections stripped: a debug build is mostly
    /// line tables) and each shared library it links (`ldd`), with the loader, at the path
    /// `ldd` names — where the loader looks for them without an `ld.so.cache`.
    pub fn program(&mut self, from: &Path, path: &str) -> anyhow::Result<&mut Self> {
        let stripped = tempfile::NamedTempFile::new()?;
        let status = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(stripped.path())
            .arg(from)
            .status()
            .context("running strip (binutils)")?;
        ensure!(
            status.success(),
            "strip --strip-debug {}: {status}",
            from.display()
        );
        self.copy(stripped.path(), path, 0o755)?;
        for library in linked_libraries(from)? {
            let at = library.to_string_lossy().into_owned();
            self.copy(&library, &at, 0o755)?;
        }
        Ok(self)
    }

    pub fn finish(self) -> anyhow::Result<Layer> {
        Ok(Layer {
            tar: self.tar.into_inner()?,
        })
    }

    fn parents(&mut self, name: &str) -> anyhow::Result<()> {
        let mut parent = String::new();
        let parts: Vec<&str> = name.split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(part);
            if !self.dirs.contains(&parent) {
                self.dir(&format!("/{parent}"), 0o755)?;
            }
        }
        Ok(())
    }
}

/// `/a/b` → `a/b`; refuses `..` and empty paths.
fn relative(path: &str) -> anyhow::Result<String> {
    let name = path.trim_matches('/');
    ensure!(
        !name.is_empty() && !name.split('/').any(|p| p == ".." || p.is_empty()),
        "{path:?} is not a path inside an image"
    );
    Ok(name.to_string())
}

/// A header with fixed time and owner, so that layers are reproducible.
fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// The shared libraries and the loader of a dynamically linked program, from `ldd`'s output
/// (none for a static one).
pub fn linked_libraries(program: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = Command::new("ldd")
        .arg(program)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // `not a dynamic executable` (glibc's ldd exits 1 for a static program).
        let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        if all.contains("not a dynamic executable") || all.contains("statically linked") {
            return Ok(Vec::new());
        }
        bail!("ldd {}: {}", program.display(), all.trim());
    }
    parse_ldd(&text)
}

/// `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` and `/lib64/ld-linux-x86-64.so.2
/// (0x…)` name files; `linux-vdso.so.1 (0x…)` is the kernel's. A library `ldd` cannot find
/// is an error: the image would not start.
pub fn parse_ldd(text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.contains("statically linked") {
            continue;
        }
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    bail!("ldd: {} not found", name.trim());
                }
                rest.split_whitespace().next()
            }
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            out.push(PathBuf::from(path));
        }
    }
    Ok(out)
}

/// What a container of the image starts with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub user: String,
    /// `8080/tcp`, …
    pub exposed_ports: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    pub working_dir: String,
}

#[derive(Debug, Clone)]
pub struct Image {
    pub layers: Vec<Layer>,
    pub config: ImageConfig,
}

impl Image {
    /// The OCI image config (application/vnd.oci.image.config.v1+json).
    pub fn config_json(&self) -> Value {
        let c = &self.config;
        let mut config = Map::new();
        let mut put = |key: &str, value: Value, present: bool| {
            if present {
                config.insert(key.to_string(), value);
            }
        };
        put("Entrypoint", json!(c.entrypoint), !c.entrypoint.is_empty());
        put("Cmd", json!(c.cmd), !c.cmd.is_empty());
        put("User", json!(c.user), !c.user.is_empty());
        let ports: Map<String, Value> = c
            .exposed_ports
            .iter()
            .map(|p| (p.clone(), json!({})))
            .collect();
        put(
            "ExposedPorts",
            Value::Object(ports),
            !c.exposed_ports.is_empty(),
        );
        put("Labels", json!(c.labels), !c.labels.is_empty());
        put("Env", json!(c.env), !c.env.is_empty());
        put(
            "WorkingDir",
            json!(c.working_dir),
            !c.working_dir.is_empty(),
        );
        let diff_ids: Vec<String> = self.layers.iter().map(Layer::diff_id).collect();
        json!({
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        })
    }

    /// Pushes the image to `registry` as `repo:tag` (any name: `registry.k8s.io/pause` may be
    /// mirrored as `pause:3.10`); returns `host/repo@sha256:…`.
    pub async fn push(
        &self,
        registry: &TestRegistry,
        repo: &str,
        tag: &str,
    ) -> anyhow::Result<String> {
        let reference: Reference = format!("{}/{repo}:{tag}", registry.host()).parse()?;
        let layers = self
            .layers
            .iter()
            .map(|l| {
                Ok(ImageLayer::new(
                    l.gzip()?,
                    LAYER_MEDIA_TYPE.to_string(),
                    None,
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let config = Config::oci_v1(serde_json::to_vec(&self.config_json())?, None);
        let client = registry.push_client();
        let auth = registry.push_auth();
        client
            .push(&reference, &layers, config, &auth, None)
            .await
            .with_context(|| format!("pushing {reference}"))?;
        let digest = client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .with_context(|| format!("the digest of {reference}"))?;
        Ok(format!("{}/{repo}@{digest}", registry.host()))
    }
}

/// The sandbox ("pause") image: Debian's static busybox (`apt-get install busybox-static`)
/// sleeping until it is told to stop. As `registry.k8s.io/pause` does, it exits at SIGTERM or
/// SIGINT — a bare `sleep` as PID 1 ignores them, and every pod running it as a container would
/// wait its whole grace period to be deleted — and runs as 65535.
pub fn pause_image() -> anyhow::Result<Image> {
    ensure!(
        Path::new(BUSYBOX).is_file(),
        "{BUSYBOX} is missing (apt-get install busybox-static)"
    );
    let mut layer = LayerBuilder::new();
    layer
        .copy(Path::new(BUSYBOX), BUSYBOX, 0o755)?
        .symlink("/bin/sh", "busybox")?
        .symlink("/bin/sleep", "busybox")?;
    Ok(Image {
        layers: vec![layer.finish()?],
        config: ImageConfig {
            entrypoint: [
                BUSYBOX,
                "sh",
                "-c",
                "trap 'exit 0' TERM INT; sleep 2147483647 & wait",
            ]
            .map(String::from)
            .to_vec(),
            user: PAUSE_USER.to_string(),
            env: vec!["PATH=/bin".to_string()],
            working_dir: "/".to_string(),
            ..ImageConfig::default()
        },
    })
}

/// What distroless `static:nonroot` gives a program: `/etc/passwd` and `/etc/group` naming
/// `nonroot` (65532), its home, `/tmp` (1777), the hosts lookup order and this machine's CA
/// bundle when it has one.
fn nonroot_base_layer() -> anyhow::Result<Layer> {
    let mut layer = LayerBuilder::new();
    layer
        .file(
            "/etc/passwd",
            b"root:x:0:0:root:/root:/sbin/nologin\n\
              nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
            0o644,
        )?
        .file("/etc/group", b"root:x:0:\nnonroot:x:65532:\n", 0o644)?
        .file("/etc/nsswitch.conf", b"hosts: files dns\n", 0o644)?
        .dir_owned("/home/nonroot", 0o700, 65532)?
        .dir("/tmp", 0o1777)?;
    if Path::new(CA_BUNDLE).is_file() {
        layer.copy(Path::new(CA_BUNDLE), CA_BUNDLE, 0o644)?;
    }
    layer.finish()
}

fn program_image(program: &Path, at: &str, ports: &[&str]) -> anyhow::Result<Image> {
    let mut layer = LayerBuilder::new();
    layer.program(program, at)?;
    let mut env = vec![PATH_ENV.to_string()];
    if Path::new(CA_BUNDLE).is_file() {
        env.push(format!("SSL_CERT_FILE={CA_BUNDLE}"));
    }
    Ok(Image {
        layers: vec![nonroot_base_layer()?, layer.finish()?],
        config: ImageConfig {
            entrypoint: vec![at.to_string()],
            user: NONROOT.to_string(),
            exposed_ports: ports.iter().map(|p| p.to_string()).collect(),
            env,
            working_dir: "/".to_string(),
            ..ImageConfig::default()
        },
    })
}

/// The olm-rs image of `binary`, as the `Dockerfile` makes it: `/usr/local/bin/olm-rs`,
/// entrypoint `olm-rs`, command `run`, user 65532, ports 8080 (probes, metrics) and 50051
/// (catalog gRPC). Nothing is written to its file system, so it runs read-only.
pub fn olm_rs_image(binary: &Path) -> anyhow::Result<Image> {
    let mut image = program_image(binary, OLM_RS_PATH, &["8080/tcp", "50051/tcp"])?;
    image.config.cmd = vec!["run".to_string()];
    Ok(image)
}

/// A catalog image as `e2e/catalog.Dockerfile` builds it: `base` (the olm-rs image) plus the
/// file-based catalog `fbc_dir` at `/configs`, labelled for OLM, serving it over gRPC on 50051.
pub fn catalog_image(base: &Image, fbc_dir: &Path) -> anyhow::Result<Image> {
    let mut layer = LayerBuilder::new();
    layer.tree(fbc_dir, "/configs")?;
    let mut image = base.clone();
    image.layers.push(layer.finish()?);
    image.config.entrypoint = vec![OLM_RS_PATH.to_string()];
    image.config.cmd = ["catalog", "serve", "/configs"].map(String::from).to_vec();
    if !image.config.exposed_ports.iter().any(|p| p == "50051/tcp") {
        image.config.exposed_ports.push("50051/tcp".to_string());
    }
    image
        .config
        .labels
        .insert(CONFIGS_LABEL.to_string(), "/configs".to_string());
    Ok(image)
}

/// A registry+v1 bundle image (`FROM scratch`): `manifests/` and `metadata/` of `dir` in one
/// layer, labelled with the `operators.operatorframework.io.bundle.*` annotations of
/// `metadata/annotations.yaml`, as `opm` and `operator-sdk` build them.
pub fn bundle_image(dir: &Path) -> anyhow::Result<Image> {
    let annotations_file = dir.join("metadata/annotations.yaml");
    let text = std::fs::read_to_string(&annotations_file)
        .with_context(|| format!("reading {}", annotations_file.display()))?;
    #[derive(serde::Deserialize)]
    struct Annotations {
        annotations: BTreeMap<String, String>,
    }
    let annotations: Annotations = serde_yaml_ng::from_str(&text)
        .with_context(|| format!("parsing {}", annotations_file.display()))?;
    let mut layer = LayerBuilder::new();
    layer
        .tree(&dir.join("manifests"), "/manifests")?
        .tree(&dir.join("metadata"), "/metadata")?;
    Ok(Image {
        layers: vec![layer.finish()?],
        config: ImageConfig {
            labels: annotations
                .annotations
                .into_iter()
                .filter(|(k, _)| k.starts_with("operators.operatorframework.io.bundle."))
                .collect(),
            ..ImageConfig::default()
        },
    })
}

/// The test operator (tests/test_operator/) of `binary`: user 65532, health on 8081, webhooks
/// on 9443, the aggregated API on 8443; its flags come from the CSV's `args`/`env`.
pub fn operator_image(binary: &Path) -> anyhow::Result<Image> {
    program_image(
        binary,
        TEST_OPERATOR_PATH,
        &["8081/tcp", "8443/tcp", "9443/tcp"],
    )
}

/// The test operator's package (e2e/testop/README.md): its image under the repository and tags
/// its CSVs name, relative to the registry (`example.com/olm-rs-test-operator:<version>`, the
/// node mirroring `example.com` to the test registry).
pub const TEST_OPERATOR_REPO: &str = "olm-rs-test-operator";
pub const TEST_OPERATOR_PACKAGE: &str = "e2e/testop";

/// What [`push_test_operator_package`] pushed, each as `host/repo@sha256:…`.
#[derive(Debug, Clone)]
pub struct TestOperatorPackage {
    /// Version → the test operator image tagged with it.
    pub operator: BTreeMap<String, String>,
    /// Version → its bundle image (`olm-rs-testop-bundle:<version>`).
    pub bundles: BTreeMap<String, String>,
    /// The catalog image serving `e2e/testop/catalog` (`olm-rs-testop-catalog:latest`).
    pub catalog: String,
}

/// Pushes everything the journeys with the test operator pull: the operator image of
/// `operator_binary` under each version's tag, a bundle image per version, and a catalog image
/// of `olm_rs` (the [`olm_rs_image`]) serving the package's catalog.
pub async fn push_test_operator_package(
    registry: &TestRegistry,
    olm_rs: &Image,
    operator_binary: &Path,
) -> anyhow::Result<TestOperatorPackage> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(TEST_OPERATOR_PACKAGE);
    let bundles_dir = root.join("bundles/olm-rs-testop");
    let mut versions: Vec<(String, PathBuf)> = std::fs::read_dir(&bundles_dir)
        .with_context(|| format!("reading {}", bundles_dir.display()))?
        .map(|e| {
            let path = e?.path();
            let version = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok((version, path))
        })
        .collect::<anyhow::Result<_>>()?;
    versions.sort();
    let operator = operator_image(operator_binary)?;
    let mut package = TestOperatorPackage {
        operator: BTreeMap::new(),
        bundles: BTreeMap::new(),
        catalog: String::new(),
    };
    for (version, dir) in versions {
        let pushed = operator
            .push(registry, TEST_OPERATOR_REPO, &version)
            .await?;
        package.operator.insert(version.clone(), pushed);
        let bundle = bundle_image(&dir)?
            .push(registry, "olm-rs-testop-bundle", &version)
            .await?;
        package.bundles.insert(version, bundle);
    }
    package.catalog = catalog_image(olm_rs, &root.join("catalog"))?
        .push(registry, "olm-rs-testop-catalog", "latest")
        .await?;
    Ok(package)
}
