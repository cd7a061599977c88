//! A real OCI registry for tests: Debian's `docker-registry` (the CNCF distribution registry
//! 2.8), started by the test on 127.0.0.1 with a temporary storage directory and a generated
//! config — plain HTTP, htpasswd basic auth, or TLS from a test CA — and bundle images pushed to
//! it by test code (one gzip layer holding `manifests/` and `metadata/`, an OCI manifest).
//!
//! Without `/usr/bin/docker-registry` a test that starts one is skipped, saying so, except in CI
//! (`CI=true`), where `.ci/run` installs it and a missing binary is a failure
//! (tests/real_control_plane/skip.rs).

#![allow(dead_code)] // each test module uses a subset

pub mod token;

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::manifest::{
    ImageIndexEntry, OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciImageIndex,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";
pub const USER: &str = "bundle-puller";
pub const PASSWORD: &str = "s3cret-pa55";

/// How the registry is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Plain,
    BasicAuth,
    Tls,
    /// Bearer tokens from a token service (`token::TokenServer`), as public registries do.
    Token,
}

/// A running registry; stopped when dropped.
pub struct TestRegistry {
    pub kind: Kind,
    pub addr: SocketAddr,
    /// The test CA (PEM) for `Kind::Tls`.
    pub ca_pem: Option<String>,
    child: Child,
    dir: tempfile::TempDir,
    /// The token service of `Kind::Token`.
    token: Option<token::TokenServer>,
}

/// The registry binary (`$OLM_RS_DOCKER_REGISTRY`, else Debian's), or why there is none.
pub fn registry_binary() -> Result<PathBuf, String> {
    let bin = std::env::var_os("OLM_RS_DOCKER_REGISTRY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(REGISTRY_BIN));
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(format!(
            "needs {} (apt-get install docker-registry)",
            bin.display()
        ))
    }
}

fn free_port(ip: &str) -> u16 {
    let l = TcpListener::bind(format!("{ip}:0")).expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

impl TestRegistry {
    /// Starts a registry on 127.0.0.1; a test is skipped when the binary is absent (a failure
    /// in CI).
    pub fn start(kind: Kind) -> TestRegistry {
        Self::try_start(kind).unwrap_or_else(|why| super::common::skip(&why))
    }

    /// Starts a registry on 127.0.0.1, or says why there is no registry binary.
    pub fn try_start(kind: Kind) -> Result<TestRegistry, String> {
        Self::try_start_on(kind, "127.0.0.1")
    }

    /// [`Self::try_start`] on the address `ip` (a real node's, so that pods reach it too).
    pub fn try_start_on(kind: Kind, ip: &str) -> Result<TestRegistry, String> {
        let bin = registry_binary()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port(ip);
        let addr: SocketAddr = format!("{ip}:{port}").parse().expect("addr");
        let token = (kind == Kind::Token).then(token::TokenServer::start);
        let (extra, ca_pem) = match &token {
            Some(server) => (server.registry_config(dir.path()), None),
            None => Self::extra_config(kind, dir.path(), ip),
        };
        let config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{extra}",
            dir.path().join("storage").display()
        );
        let config_file = dir.path().join("config.yml");
        std::fs::write(&config_file, config).expect("write registry config");
        let log = std::fs::File::create(dir.path().join("registry.log")).expect("log");
        let child = Command::new(&bin)
            .arg("serve")
            .arg(&config_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let mut reg = TestRegistry {
            kind,
            addr,
            ca_pem,
            child,
            dir,
            token,
        };
        if !reg.wait_ready() {
            let log =
                std::fs::read_to_string(reg.dir.path().join("registry.log")).unwrap_or_default();
            panic!(
                "{} did not start listening on {addr} ({kind:?}); its log:\n{log}",
                bin.display()
            );
        }
        Ok(reg)
    }

    /// Stops the registry (as if it went down); `restart` brings it back on the same port with
    /// the same storage.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn restart(&mut self) {
        self.stop();
        let bin = registry_binary().expect("the registry binary started this registry");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("registry.log"))
            .expect("log");
        self.child = Command::new(&bin)
            .arg("serve")
            .arg(self.dir.path().join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("restart docker-registry");
        assert!(self.wait_ready(), "docker-registry did not restart");
    }

    fn extra_config(kind: Kind, dir: &Path, ip: &str) -> (String, Option<String>) {
        match kind {
            Kind::Plain => (String::new(), None),
            Kind::BasicAuth => {
                let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
                let file = dir.join("htpasswd");
                std::fs::write(&file, format!("{USER}:{hash}\n")).expect("htpasswd");
                (
                    format!(
                        "auth:\n  htpasswd:\n    realm: olm-rs-test\n    path: {}\n",
                        file.display()
                    ),
                    None,
                )
            }
            Kind::Token => unreachable!("configured by its token service"),
            Kind::Tls => {
                let (ca, cert, key) = test_ca_and_cert_for(ip);
                let cert_file = dir.join("server.crt");
                let key_file = dir.join("server.key");
                std::fs::write(&cert_file, cert).expect("cert");
                std::fs::write(&key_file, key).expect("key");
                (
                    format!(
                        "  tls:\n    certificate: {}\n    key: {}\n",
                        cert_file.display(),
                        key_file.display()
                    ),
                    Some(ca),
                )
            }
        }
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    /// A registries.conf marking this registry `insecure` (plain HTTP) unless it speaks TLS.
    pub fn registries_conf(&self) -> String {
        format!(
            "[[registry]]\nlocation = \"{}\"\ninsecure = {}\n",
            self.host(),
            self.kind != Kind::Tls
        )
    }

    /// Writes `registries_conf()` (and the CA, for TLS) into `dir`; returns their paths.
    pub fn write_client_files(&self, dir: &Path) -> (PathBuf, Option<PathBuf>) {
        let conf = dir.join(format!("registries-{}.conf", self.addr.port()));
        std::fs::write(&conf, self.registries_conf()).expect("registries.conf");
        let ca = self.ca_pem.as_ref().map(|pem| {
            let f = dir.join(format!("ca-{}.pem", self.addr.port()));
            std::fs::write(&f, pem).expect("ca");
            f
        });
        (conf, ca)
    }

    /// A client that can push here.
    pub fn push_client(&self) -> Client {
        // reqwest is built without its own crypto provider (see src/oci/puller.rs).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: if self.kind == Kind::Tls {
                ClientProtocol::Https
            } else {
                ClientProtocol::Http
            },
            extra_root_certificates: self
                .ca_pem
                .iter()
                .map(|pem| Certificate {
                    encoding: CertificateEncoding::Pem,
                    data: pem.as_bytes().to_vec(),
                })
                .collect(),
            ..ClientConfig::default()
        };
        Client::try_from(config).expect("push client")
    }

    pub fn push_auth(&self) -> RegistryAuth {
        match self.kind {
            Kind::BasicAuth | Kind::Token => RegistryAuth::Basic(USER.into(), PASSWORD.into()),
            _ => RegistryAuth::Anonymous,
        }
    }

    /// Pushes an image of the given layers (`(bytes, media type)`); returns
    /// `host/repo@digest` and the manifest digest.
    pub async fn push_layers(
        &self,
        repo: &str,
        tag: &str,
        layers: Vec<(Vec<u8>, &str)>,
    ) -> (String, String) {
        let client = self.push_client();
        let reference: Reference = format!("{}/{repo}:{tag}", self.host())
            .parse()
            .expect("reference");
        let layers: Vec<ImageLayer> = layers
            .into_iter()
            .map(|(data, media)| ImageLayer::new(data, media.to_string(), None))
            .collect();
        let config = Config::oci_v1(
            br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#
                .to_vec(),
            None,
        );
        let auth = self.push_auth();
        client
            .push(&reference, &layers, config, &auth, None)
            .await
            .unwrap_or_else(|e| panic!("push {reference}: {e}"));
        let digest = client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .expect("digest of the pushed manifest");
        (format!("{}/{repo}@{digest}", self.host()), digest)
    }

    /// Pushes an image of the given layers with the given image config (JSON); returns
    /// `host/repo@digest` and the manifest digest.
    pub async fn push_image(
        &self,
        repo: &str,
        tag: &str,
        layers: Vec<(Vec<u8>, &str)>,
        config: serde_json::Value,
    ) -> (String, String) {
        let client = self.push_client();
        let reference: Reference = format!("{}/{repo}:{tag}", self.host())
            .parse()
            .expect("reference");
        let layers: Vec<ImageLayer> = layers
            .into_iter()
            .map(|(data, media)| ImageLayer::new(data, media.to_string(), None))
            .collect();
        let config = Config::oci_v1(serde_json::to_vec(&config).expect("config"), None);
        let auth = self.push_auth();
        client
            .push(&reference, &layers, config, &auth, None)
            .await
            .unwrap_or_else(|e| panic!("push {reference}: {e}"));
        let digest = client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .expect("digest of the pushed manifest");
        (format!("{}/{repo}@{digest}", self.host()), digest)
    }

    /// Pushes a catalog image as `opm` builds them: the file-based catalog `files` (path →
    /// content, relative to the catalog root) under `/configs`, the label
    /// `operators.operatorframework.io.index.configs.v1=/configs` (or none when `label` is
    /// false), and a first layer standing for the `opm` base image. Returns `host/repo:tag`
    /// and the manifest digest.
    pub async fn push_catalog(
        &self,
        repo: &str,
        tag: &str,
        files: &[(String, Vec<u8>)],
        label: bool,
    ) -> (String, String) {
        let base = gzip(&tar_of(
            &[("bin/opm".to_string(), b"#!/bin/sh\n".to_vec())],
            "",
        ));
        let configs = gzip(&tar_of(files, "configs"));
        let labels = if label {
            serde_json::json!({"operators.operatorframework.io.index.configs.v1": "/configs"})
        } else {
            serde_json::json!({})
        };
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Labels": labels, "Entrypoint": ["/bin/opm"]},
            "rootfs": {"type": "layers", "diff_ids": []}
        });
        let media = "application/vnd.oci.image.layer.v1.tar+gzip";
        let (_, digest) = self
            .push_image(repo, tag, vec![(base, media), (configs, media)], config)
            .await;
        (format!("{}/{repo}:{tag}", self.host()), digest)
    }

    /// Pushes an image index (manifest list) as `repo:tag` whose entries are the images
    /// `repo@digest` already pushed, each declared for the `(os, architecture)` given, in that
    /// order; returns `host/repo:tag`.
    pub async fn push_index(
        &self,
        repo: &str,
        tag: &str,
        entries: &[(&str, &str, &str)],
    ) -> String {
        let client = self.push_client();
        let auth = self.push_auth();
        let mut manifests = Vec::new();
        for (digest, os, arch) in entries {
            let image: Reference = format!("{}/{repo}@{digest}", self.host())
                .parse()
                .expect("reference");
            let (raw, _) = client
                .pull_manifest_raw(&image, &auth, &[OCI_IMAGE_MEDIA_TYPE])
                .await
                .unwrap_or_else(|e| panic!("manifest of {image}: {e}"));
            manifests.push(ImageIndexEntry {
                media_type: OCI_IMAGE_MEDIA_TYPE.to_string(),
                digest: digest.to_string(),
                size: raw.len() as i64,
                platform: Some(
                    serde_json::from_value(serde_json::json!({"os": os, "architecture": arch}))
                        .expect("platform"),
                ),
                annotations: None,
                artifact_type: None,
            });
        }
        let index = OciImageIndex {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_INDEX_MEDIA_TYPE.to_string()),
            manifests,
            artifact_type: None,
            annotations: None,
        };
        let reference: Reference = format!("{}/{repo}:{tag}", self.host())
            .parse()
            .expect("reference");
        client
            .push_manifest_list(&reference, &auth, index)
            .await
            .unwrap_or_else(|e| panic!("push index {reference}: {e}"));
        reference.whole()
    }

    /// Pushes a bundle directory as a one-layer bundle image.
    pub async fn push_bundle_dir(&self, repo: &str, tag: &str, dir: &Path) -> (String, String) {
        let layer = gzip(&bundle_tar(dir));
        self.push_layers(
            repo,
            tag,
            vec![(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
        )
        .await
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `manifests/` and `metadata/` of a bundle directory as a tar archive (as `opm` or
/// `operator-sdk bundle` images lay them out).
pub fn bundle_tar(dir: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    b.mode(tar::HeaderMode::Deterministic);
    for sub in ["manifests", "metadata"] {
        b.append_dir_all(sub, dir.join(sub))
            .unwrap_or_else(|e| panic!("tar {}: {e}", dir.join(sub).display()));
    }
    b.into_inner().expect("tar")
}

/// A tar archive of `files` under `dir` ("" for the root).
pub fn tar_of(files: &[(String, Vec<u8>)], dir: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    b.mode(tar::HeaderMode::Deterministic);
    for (path, data) in files {
        let full = if dir.is_empty() {
            path.clone()
        } else {
            format!("{dir}/{path}")
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut header, &full, data.as_slice())
            .unwrap_or_else(|e| panic!("tar {full}: {e}"));
    }
    b.into_inner().expect("tar")
}

/// Every file of a directory, by path relative to it.
pub fn files_of(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read(&path).expect("read")));
            }
        }
    }
    out.sort();
    out
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

/// A CA, and a serving certificate for 127.0.0.1, localhost and `ip` (a real node's address,
/// so that its pods and kubectl plugins reach a TLS registry there) signed by it (PEM: CA,
/// cert, key).
pub fn test_ca_and_cert_for(ip: &str) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "olm-rs test registry CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    if !names.iter().any(|n| n == ip) {
        names.push(ip.to_owned());
    }
    let params = CertificateParams::new(names).expect("params");
    let cert = params.signed_by(&key, &issuer).expect("cert");
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

/// Bundle directories of the real catalog: the newest version of the first `count` packages.
pub fn real_bundle_dirs(count: usize) -> Vec<(String, PathBuf)> {
    let root = super::common::operators_dir();
    let mut packages: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_dir())
        .collect();
    packages.sort();
    let mut out = Vec::new();
    for p in packages {
        let mut versions: Vec<PathBuf> = std::fs::read_dir(&p)
            .into_iter()
            .flatten()
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|v| v.join("manifests").is_dir() && v.join("metadata").is_dir())
            .collect();
        versions.sort();
        if let Some(v) = versions.pop() {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push((name, v));
        }
        if out.len() == count {
            break;
        }
    }
    out
}
