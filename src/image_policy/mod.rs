//! The image policy of in-process pulls (docs/image-signatures.md): containers-policy.json and
//! registries.d, read with containers/image's semantics for the `docker` transport, so that an
//! image the node's policy would refuse is refused by olm-rs too — sigstore signatures
//! verified with the policy's public keys, failing closed. Pure: the files come in as text
//! (`oci::signatures` reads them and fetches the signatures).

mod identity;
mod keys;
mod lookaside;
mod policy;
mod reference;
mod registries_d;
mod sigstore;
mod verdict;

#[cfg(test)]
mod policy_tests;

pub use identity::SignedIdentity;
pub use keys::{KeyError, PublicKey};
pub use lookaside::{
    BlobError, Lookaside, LookasideBlob, LookasideError, MAX_LOOKASIDE_SIGNATURES,
    SignatureLocation, parse_blob,
};
pub use policy::{Policy, PolicyError, ReadFile, Requirement, Scope};
pub use reference::{DockerRef, DockerRefError};
pub use registries_d::{Attachments, RegistriesD, RegistriesDError};
pub use sigstore::{
    Claims, PAYLOAD_MEDIA_TYPE, SIGNATURE_ANNOTATION, SignatureFormatError, UntrustedSignature,
    attachment_tag, parse_payload, payload_for,
};
pub use verdict::{Refusal, SignatureProblem, Signatures, evaluate, needs_signatures};

/// What in-process pulls obey: a policy (or none: OLM's behaviour, anything accepted) and
/// where signatures are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImagePolicy {
    policy: Option<Policy>,
    registries: RegistriesD,
}

impl ImagePolicy {
    /// No policy: every image is accepted, as OLM v0 does.
    pub fn accept_anything() -> ImagePolicy {
        ImagePolicy::default()
    }

    pub fn new(policy: Policy, registries: RegistriesD) -> ImagePolicy {
        ImagePolicy {
            policy: Some(policy),
            registries,
        }
    }

    /// Whether a policy is enforced (`olm_rs_image_policy_enforced`).
    pub fn enforced(&self) -> bool {
        self.policy.is_some()
    }

    /// The policy file, when one is enforced.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.policy.as_ref().map(|p| p.file.as_path())
    }

    /// Whether `image` is accepted whatever it carries: no policy is enforced, or every
    /// requirement of its scope is `insecureAcceptAnything`. Only such an image may be pulled by
    /// the node in olm-rs's stead (an unpack pod): nothing olm-rs would verify is skipped.
    pub fn accepts_unverified(&self, image: &str) -> bool {
        let Some(policy) = &self.policy else {
            return true;
        };
        let Ok(reference) = DockerRef::parse(image) else {
            return false;
        };
        let (_, requirements) = policy.requirements_for(&reference);
        !requirements.is_empty()
            && requirements
                .iter()
                .all(|r| *r == Requirement::InsecureAcceptAnything)
    }

    /// The scope and requirements for `image`; `None` when no policy is enforced.
    pub fn requirements_for(&self, image: &DockerRef) -> Option<(Scope, &[Requirement])> {
        self.policy.as_ref().map(|p| p.requirements_for(image))
    }

    /// Whether `image`'s sigstore attachments are read (registries.d).
    pub fn attachments(&self, image: &DockerRef) -> Attachments {
        self.registries.attachments(image)
    }

    /// Where `image`'s lookaside signatures are read (registries.d).
    pub fn lookaside(&self, image: &DockerRef) -> Lookaside {
        self.registries.lookaside_for(image)
    }
}
