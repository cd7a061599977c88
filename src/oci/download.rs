//! Layer downloads shared by bundle and catalog pulls: the manifest's layer count and sizes
//! checked before anything is fetched, each blob capped while it arrives (its digest is
//! verified by `oci-client`).

use std::pin::Pin;
use std::task::{Context, Poll};

use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::classify::{Failure, classify};
use super::error::PullError;
use super::layers::{LayerBlob, Limits};

/// Downloads every layer of `manifest` into memory, refusing more layers or bigger ones than
/// `limits` allow.
/// The downloaded layers as the layer checks read them.
pub(super) fn layer_blobs(blobs: &[(OciDescriptor, Vec<u8>)]) -> Vec<LayerBlob<'_>> {
    blobs
        .iter()
        .map(|(d, data)| LayerBlob {
            digest: &d.digest,
            media_type: &d.media_type,
            data,
        })
        .collect()
}

pub(super) async fn download_layers(
    image: &str,
    registry: &str,
    client: &oci_client::Client,
    reference: &Reference,
    manifest: &OciImageManifest,
    limits: &Limits,
) -> Result<Vec<(OciDescriptor, Vec<u8>)>, Failure> {
    check_layers(image, manifest, limits).map_err(Failure::Other)?;
    let max = limits.max_layer_bytes;
    let downloads = manifest.layers.iter().map(|layer| {
        let client = client.clone();
        async move {
            let mut sink = CappedSink::new(max);
            client
                .pull_blob(reference, layer, &mut sink)
                .await
                .map_err(|e| {
                    if sink.exceeded {
                        Failure::Other(PullError::InvalidContent {
                            image: image.to_string(),
                            file: format!("layer {}", layer.digest),
                            reason: format!("is larger than the {max} bytes allowed for a layer"),
                        })
                    } else {
                        classify(image, registry, &format!("layer {}", layer.digest), e)
                    }
                })?;
            Ok::<_, Failure>((layer.clone(), sink.data))
        }
    });
    futures::future::try_join_all(downloads).await
}

fn check_layers(
    image: &str,
    manifest: &OciImageManifest,
    limits: &Limits,
) -> Result<(), PullError> {
    if manifest.layers.len() > limits.max_layers {
        return Err(PullError::InvalidContent {
            image: image.to_string(),
            file: "image manifest".into(),
            reason: format!(
                "{} layers, more than the {} allowed",
                manifest.layers.len(),
                limits.max_layers
            ),
        });
    }
    for layer in &manifest.layers {
        if layer.size < 0 || layer.size as u64 > limits.max_layer_bytes {
            return Err(PullError::InvalidContent {
                image: image.to_string(),
                file: format!("layer {}", layer.digest),
                reason: format!(
                    "is {} bytes, more than the {} allowed for a layer",
                    layer.size, limits.max_layer_bytes
                ),
            });
        }
    }
    Ok(())
}

/// Collects a blob in memory, refusing more than `limit` bytes.
pub(super) struct CappedSink {
    pub(super) data: Vec<u8>,
    limit: u64,
    pub(super) exceeded: bool,
}

impl CappedSink {
    pub(super) fn new(limit: u64) -> CappedSink {
        CappedSink {
            data: Vec::new(),
            limit,
            exceeded: false,
        }
    }
}

impl tokio::io::AsyncWrite for CappedSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if (self.data.len() + buf.len()) as u64 > self.limit {
            self.exceeded = true;
            return Poll::Ready(Err(std::io::Error::other("layer size limit exceeded")));
        }
        self.data.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
