//! The unpack pod: how a bundle image that only the node can pull (a registry reached through
//! the node's mirrors or credentials) is unpacked, as OLM does it, by a pod that runs the image
//! itself (docs/bundle-images.md). The pod copies the bundle out and hands its files back in its
//! log (`handback`), where they meet every archive and size check an in-process pull has
//! (`crate::oci`'s layer checks).

pub mod handback;
pub mod unpack_pod;
