//! The sandbox ("pause") image the node starts every pod with, assembled here without a
//! container engine: Debian's static busybox sleeping forever, one layer, pushed to the node's
//! registry.

use anyhow::Context as _;
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::registry_support::TestRegistry;

const BUSYBOX: &str = "/bin/busybox";

/// Pushes the pause image as `repo:tag`.
pub async fn push_pause(registry: &TestRegistry, repo: &str, tag: &str) -> anyhow::Result<()> {
    let busybox = std::fs::read(BUSYBOX)
        .with_context(|| format!("reading {BUSYBOX} (apt-get install busybox-static)"))?;
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(busybox.len() as u64);
    header.set_mode(0o755);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, "bin/busybox", busybox.as_slice())?;
    let tar = tar.into_inner()?;
    let diff_id = format!("sha256:{:x}", Sha256::digest(&tar));
    let layer = crate::registry_support::gzip(&tar);
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": ["/bin/busybox", "sleep", "2147483647"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    });
    let reference: Reference = format!("{}/{repo}:{tag}", registry.host()).parse()?;
    registry
        .push_client()
        .push(
            &reference,
            &[ImageLayer::new(
                layer,
                "application/vnd.oci.image.layer.v1.tar+gzip".to_owned(),
                None,
            )],
            Config::oci_v1(serde_json::to_vec(&config)?, None),
            &registry.push_auth(),
            None,
        )
        .await
        .with_context(|| format!("pushing {reference}"))?;
    Ok(())
}
