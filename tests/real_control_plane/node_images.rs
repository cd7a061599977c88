//! The images the real node runs, assembled here without a container engine or a base image:
//! files of this machine in one gzip layer, an OCI config and manifest, pushed to the node's
//! registry. The sandbox ("pause") image is Debian's static busybox sleeping forever; the olm-rs
//! image is this build's binary with the libraries it links, as the Dockerfile lays it out.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, ensure};
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::registry_support::TestRegistry;

const BUSYBOX: &str = "/bin/busybox";
/// The olm-rs image's user, as the Dockerfile's (distroless `nonroot`).
pub const NONROOT: &str = "65532:65532";

/// One file of a layer.
pub struct File {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// What an image is: its files and the config its containers start with.
#[derive(Default)]
pub struct Image {
    pub files: Vec<File>,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub user: String,
    pub ports: Vec<String>,
    pub labels: Vec<(String, String)>,
}

impl Image {
    /// The layer (uncompressed tar) and the OCI config naming it.
    fn assemble(&self) -> anyhow::Result<(Vec<u8>, Value)> {
        let mut tar = tar::Builder::new(Vec::new());
        for file in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(file.data.len() as u64);
            header.set_mode(file.mode);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(
                &mut header,
                file.path.trim_start_matches('/'),
                file.data.as_slice(),
            )?;
        }
        let tar = tar.into_inner()?;
        let diff_id = format!("sha256:{:x}", Sha256::digest(&tar));
        let ports: serde_json::Map<String, Value> =
            self.ports.iter().map(|p| (p.clone(), json!({}))).collect();
        let labels: serde_json::Map<String, Value> = self
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        let config = json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Entrypoint": self.entrypoint,
                "Cmd": self.cmd,
                "User": self.user,
                "ExposedPorts": ports,
                "Labels": labels,
            },
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        });
        Ok((tar, config))
    }

    /// Pushes the image as `repo:tag`; returns `host/repo@digest`.
    pub async fn push(
        &self,
        registry: &TestRegistry,
        repo: &str,
        tag: &str,
    ) -> anyhow::Result<String> {
        let (tar, config) = self.assemble()?;
        let layer = crate::registry_support::gzip(&tar);
        let reference: Reference = format!("{}/{repo}:{tag}", registry.host()).parse()?;
        let client = registry.push_client();
        let auth = registry.push_auth();
        client
            .push(
                &reference,
                &[ImageLayer::new(
                    layer,
                    "application/vnd.oci.image.layer.v1.tar+gzip".to_owned(),
                    None,
                )],
                Config::oci_v1(serde_json::to_vec(&config)?, None),
                &auth,
                None,
            )
            .await
            .with_context(|| format!("pushing {reference}"))?;
        let digest = client
            .fetch_manifest_digest(&reference, &auth)
            .await
            .with_context(|| format!("digest of {reference}"))?;
        Ok(format!("{}/{repo}@{digest}", registry.host()))
    }
}

/// The sandbox image: busybox sleeping forever (also a shell for check pods).
pub fn pause() -> anyhow::Result<Image> {
    let busybox = std::fs::read(BUSYBOX)
        .with_context(|| format!("reading {BUSYBOX} (apt-get install busybox-static)"))?;
    Ok(Image {
        files: vec![File {
            path: BUSYBOX.to_owned(),
            data: busybox,
            mode: 0o755,
        }],
        entrypoint: ["/bin/busybox", "sleep", "2147483647"]
            .map(String::from)
            .to_vec(),
        user: "65535:65535".to_owned(),
        ..Image::default()
    })
}

/// The olm-rs image of `binary` (stripped of its debug sections) with the shared libraries it
/// links, user 65532, entrypoint `olm-rs`, command `run`, ports 8080 and 50051 — the
/// Dockerfile's layout.
pub fn olm_rs(binary: &Path) -> anyhow::Result<Image> {
    let mut files = program_with_libraries(binary, "/usr/local/bin/olm-rs")?;
    // distroless carries the CA bundle; without it olm-rs cannot set up a registry client.
    let certs = "/etc/ssl/certs/ca-certificates.crt";
    files.push(File {
        path: certs.to_owned(),
        data: std::fs::read(certs).with_context(|| format!("reading {certs}"))?,
        mode: 0o644,
    });
    files.push(File {
        path: "/etc/passwd".to_owned(),
        data: b"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n".to_vec(),
        mode: 0o644,
    });
    Ok(Image {
        files,
        entrypoint: vec!["/usr/local/bin/olm-rs".to_owned()],
        cmd: vec!["run".to_owned()],
        user: NONROOT.to_owned(),
        ports: vec!["8080/tcp".to_owned(), "50051/tcp".to_owned()],
        ..Image::default()
    })
}

/// A catalog image: `base` plus the file-based catalog `dir` under `/configs`, labelled as OLM
/// finds it, serving it with `olm-rs catalog serve` (e2e/catalog.Dockerfile's layout).
pub fn catalog(mut base: Image, dir: &Path) -> anyhow::Result<Image> {
    for entry in walk(dir)? {
        let relative = entry.strip_prefix(dir)?.display().to_string();
        base.files.push(File {
            path: format!("/configs/{relative}"),
            data: std::fs::read(&entry)?,
            mode: 0o644,
        });
    }
    base.cmd = ["catalog", "serve", "/configs"].map(String::from).to_vec();
    base.labels.push((
        "operators.operatorframework.io.index.configs.v1".to_owned(),
        "/configs".to_owned(),
    ));
    Ok(base)
}

fn walk(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(walk(&path)?);
        } else {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// `binary` at `at` (without debug sections: a debug build is mostly line tables) and every
/// library `ldd` says it links, at the same paths.
fn program_with_libraries(binary: &Path, at: &str) -> anyhow::Result<Vec<File>> {
    let stripped = tempfile::NamedTempFile::new()?;
    let status = Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(stripped.path())
        .arg(binary)
        .status()
        .context("running strip (binutils)")?;
    ensure!(status.success(), "strip {}: {status}", binary.display());
    let mut files = vec![File {
        path: at.to_owned(),
        data: std::fs::read(stripped.path())?,
        mode: 0o755,
    }];
    let ldd = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running ldd")?;
    let text = String::from_utf8_lossy(&ldd.stdout);
    for line in text.lines() {
        // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)` or `/lib64/ld-linux-x86-64.so.2 (0x…)`
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else {
            continue;
        };
        let data = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        files.push(File {
            path: path.to_owned(),
            data,
            mode: 0o755,
        });
    }
    Ok(files)
}
