//! Bundle images for the flow tests, on the registry harness of `registry_support` (the real
//! `docker-registry`, started by the test): layers built here from manifests, including
//! malicious tar entries that `tar::Builder` refuses to write.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::registry_support::{Kind, TestRegistry};

pub use crate::registry_support::{PASSWORD, USER};

/// A running registry (plain HTTP, or htpasswd basic auth with [`USER`]/[`PASSWORD`]).
pub struct Registry(TestRegistry);

impl Registry {
    /// Starts a registry; without the registry binary the test is skipped (failed in CI).
    pub fn start(auth: bool) -> Registry {
        let kind = if auth { Kind::BasicAuth } else { Kind::Plain };
        Registry(TestRegistry::start(kind))
    }

    /// `127.0.0.1:<port>`
    pub fn host(&self) -> String {
        self.0.host()
    }

    pub fn stop(&mut self) {
        self.0.stop();
    }

    /// Back on the same port with the same content.
    pub fn restart(&mut self) {
        self.0.restart();
    }

    /// Pushes a one-layer image as `repo:tag`; returns `host/repo:tag`.
    pub async fn push(&self, repo: &str, tag: &str, layer: Vec<u8>) -> String {
        self.0
            .push_layers(
                repo,
                tag,
                vec![(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
            )
            .await;
        format!("{}/{repo}:{tag}", self.host())
    }

    /// A registries.conf (written into `dir`) letting olm-rs use this registry over plain HTTP.
    pub fn registries_conf(&self, dir: &Path) -> PathBuf {
        self.0.write_client_files(dir).0
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
