//! The decision on one image: the scope's requirements, each of which must accept it
//! (docs/image-signatures.md §4). A `sigstoreSigned` requirement accepts when one signature
//! verifies with one of its keys, names the pulled manifest's digest and claims an identity
//! its `signedIdentity` accepts — checked in that order, as containers/image does. Pure.

use std::fmt;

use super::policy::Requirement;
use super::reference::DockerRef;
use super::sigstore::{SignatureFormatError, UntrustedSignature, parse_payload, signature_bytes};

/// The signatures found for the image, and where they were looked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signatures {
    /// Sigstore signatures, from the attachment and the lookaside.
    pub found: Vec<UntrustedSignature>,
    /// Each place looked at, in words (`the sigstore attachment sha256-….sig`, `lookaside
    /// file:///…`, `no attachments (registries.d: none)`).
    pub searched: Vec<String>,
    /// Signatures of formats `sigstoreSigned` does not read (GPG simple signing, sigstore
    /// attachments that are not signatures), as containers/image counts them.
    pub other_formats: usize,
}

/// Why one signature was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureProblem {
    /// Malformed: no annotation, not base64, an unreadable payload.
    Malformed(SignatureFormatError),
    /// No key of the requirement verifies it.
    WrongKey,
    /// It signs another manifest.
    OtherDigest { signed: String },
    /// It claims an identity the rule refuses.
    IdentityMismatch { signed: String, rule: &'static str },
}

impl fmt::Display for SignatureProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureProblem::Malformed(why) => write!(f, "malformed signature: {why}"),
            SignatureProblem::WrongKey => {
                f.write_str("signed by a key the policy does not trust (wrong key)")
            }
            SignatureProblem::OtherDigest { signed } => {
                write!(f, "signature is for another manifest ({signed})")
            }
            SignatureProblem::IdentityMismatch { signed, rule } => {
                write!(
                    f,
                    "identity mismatch: signed as {signed}, which {rule} does not accept"
                )
            }
        }
    }
}

/// Why the policy refuses an image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the scope rejects every image (reject)")]
    Rejected,
    #[error("requirement {what} is not supported by olm-rs, so nothing it governs is accepted")]
    Unsupported { what: String },
    #[error("no signature: no sigstore signature of {digest} in {}{}", .searched.join(", "), others(*.other_formats))]
    NoSignature {
        digest: String,
        searched: Vec<String>,
        other_formats: usize,
    },
    #[error("no signature accepted: {}", list(.problems))]
    NotAccepted { problems: Vec<SignatureProblem> },
}

fn others(count: usize) -> String {
    if count == 0 {
        String::new()
    } else {
        format!(
            " ({count} signatures of other formats, GPG say, which sigstoreSigned does not read)"
        )
    }
}

fn list(problems: &[SignatureProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Refusal {
    /// A CamelCase word for the kind (event reasons, metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::Rejected => "Rejected",
            Refusal::Unsupported { .. } => "UnsupportedRequirement",
            Refusal::NoSignature { .. } => "NoSignature",
            Refusal::NotAccepted { problems } => {
                let is = |f: fn(&SignatureProblem) -> bool| problems.iter().any(f);
                if is(|p| matches!(p, SignatureProblem::IdentityMismatch { .. })) {
                    "IdentityMismatch"
                } else if is(|p| matches!(p, SignatureProblem::OtherDigest { .. })) {
                    "DigestMismatch"
                } else if is(|p| matches!(p, SignatureProblem::WrongKey)) {
                    "WrongKey"
                } else {
                    "MalformedSignature"
                }
            }
        }
    }
}

/// Whether any requirement needs the signatures (the shell fetches them only then).
pub fn needs_signatures(requirements: &[Requirement]) -> bool {
    // A scope that refuses anyway is not worth a fetch.
    let refuses = requirements
        .iter()
        .any(|r| matches!(r, Requirement::Reject | Requirement::Unsupported { .. }));
    !refuses
        && requirements
            .iter()
            .any(|r| matches!(r, Requirement::SigstoreSigned { .. }))
}

/// Decides on `image` (as the user named it) whose pulled manifest has `digest`, under
/// `requirements` from `scope`. `Ok` means every requirement accepts it.
pub fn evaluate(
    requirements: &[Requirement],
    image: &DockerRef,
    digest: &str,
    signatures: &Signatures,
) -> Result<(), Refusal> {
    // Refusals that need no signature come first, whatever their order in the list.
    for r in requirements {
        match r {
            Requirement::Reject => return Err(Refusal::Rejected),
            Requirement::Unsupported { what } => {
                return Err(Refusal::Unsupported { what: what.clone() });
            }
            _ => {}
        }
    }
    for r in requirements {
        if let Requirement::SigstoreSigned { keys, identity } = r {
            let found = &signatures.found;
            if found.is_empty() {
                return Err(Refusal::NoSignature {
                    digest: digest.to_string(),
                    searched: signatures.searched.clone(),
                    other_formats: signatures.other_formats,
                });
            }
            let mut problems = Vec::new();
            let accepted =
                found
                    .iter()
                    .any(|sig| match check_one(sig, keys, identity, image, digest) {
                        Ok(()) => true,
                        Err(p) => {
                            problems.push(p);
                            false
                        }
                    });
            if !accepted {
                return Err(Refusal::NotAccepted { problems });
            }
        }
    }
    Ok(())
}

fn check_one(
    sig: &UntrustedSignature,
    keys: &[super::keys::PublicKey],
    identity: &super::identity::SignedIdentity,
    image: &DockerRef,
    digest: &str,
) -> Result<(), SignatureProblem> {
    let bytes = signature_bytes(sig).map_err(SignatureProblem::Malformed)?;
    if !keys.iter().any(|k| k.verifies(&sig.payload, &bytes)) {
        return Err(SignatureProblem::WrongKey);
    }
    let claims = parse_payload(&sig.payload).map_err(SignatureProblem::Malformed)?;
    if claims.manifest_digest != digest {
        return Err(SignatureProblem::OtherDigest {
            signed: claims.manifest_digest,
        });
    }
    if !identity.matches(image, &claims.docker_reference) {
        return Err(SignatureProblem::IdentityMismatch {
            signed: claims.docker_reference,
            rule: identity.type_name(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::identity::SignedIdentity;
    use super::super::keys::{PublicKey, test_keys::TestKey};
    use super::super::sigstore::payload_for;
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const D2: &str = "sha256:1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn signed_by(key: &TestKey, reference: &str, digest: &str) -> UntrustedSignature {
        let payload = payload_for(reference, digest);
        UntrustedSignature {
            base64_signature: Some(key.sign_b64(&payload)),
            payload,
        }
    }

    #[test]
    fn each_case_gets_the_verdict_and_the_words_it_deserves() {
        let (ours, theirs) = (TestKey::generate(), TestKey::generate());
        let keys = PublicKey::parse_pem("keyPath /k.pub", ours.public_pem().as_bytes()).unwrap();
        let sigstore = |identity| {
            vec![Requirement::SigstoreSigned {
                keys: keys.clone(),
                identity,
            }]
        };
        let default_id = sigstore(SignedIdentity::MatchRepoDigestOrExact);
        let image = DockerRef::parse("reg.local/ns/catalog:v1").unwrap();
        let good = signed_by(&ours, "reg.local/ns/catalog:v1", D);
        let found = |found: Vec<UntrustedSignature>| Signatures {
            found,
            searched: vec!["the sigstore attachment".into()],
            other_formats: 0,
        };
        let mut no_annotation = good.clone();
        no_annotation.base64_signature = None;
        let cases: Vec<(Vec<Requirement>, Signatures, Result<(), &str>)> = vec![
            (default_id.clone(), found(vec![good.clone()]), Ok(())),
            (
                vec![Requirement::InsecureAcceptAnything],
                found(vec![]),
                Ok(()),
            ),
            (
                default_id.clone(),
                found(vec![signed_by(&theirs, "reg.local/ns/catalog:v1", D)]),
                Err("WrongKey"),
            ),
            (default_id.clone(), found(vec![]), Err("NoSignature")),
            (
                default_id.clone(),
                Signatures {
                    found: vec![],
                    searched: vec!["no attachments (registries.d: none)".into()],
                    other_formats: 1,
                },
                Err("NoSignature"),
            ),
            (
                default_id.clone(),
                found(vec![signed_by(&ours, "reg.local/ns/catalog:v1", D2)]),
                Err("DigestMismatch"),
            ),
            // Re-tagged: signed as v2, pulled as v1.
            (
                default_id.clone(),
                found(vec![signed_by(&ours, "reg.local/ns/catalog:v2", D)]),
                Err("IdentityMismatch"),
            ),
            (
                sigstore(SignedIdentity::MatchRepository),
                found(vec![signed_by(&ours, "reg.local/ns/catalog:v2", D)]),
                Ok(()),
            ),
            // Copied to another repository: matchRepository refuses it.
            (
                sigstore(SignedIdentity::MatchRepository),
                found(vec![signed_by(&ours, "reg.local/other/catalog:v1", D)]),
                Err("IdentityMismatch"),
            ),
            (
                default_id.clone(),
                found(vec![no_annotation]),
                Err("MalformedSignature"),
            ),
            // One good signature among bad ones is enough.
            (
                default_id.clone(),
                found(vec![
                    signed_by(&theirs, "reg.local/ns/catalog:v1", D),
                    good.clone(),
                ]),
                Ok(()),
            ),
            (
                vec![Requirement::Reject],
                found(vec![good.clone()]),
                Err("Rejected"),
            ),
            (
                vec![
                    Requirement::InsecureAcceptAnything,
                    Requirement::Unsupported {
                        what: "signedBy (GPG simple signing)".into(),
                    },
                ],
                found(vec![good.clone()]),
                Err("UnsupportedRequirement"),
            ),
        ];
        for (i, (reqs, sigs, want)) in cases.into_iter().enumerate() {
            let got = evaluate(&reqs, &image, D, &sigs);
            match want {
                Ok(()) => assert_eq!(got, Ok(()), "case {i}"),
                Err(kind) => assert_eq!(
                    got.as_ref().map_err(Refusal::kind),
                    Err(kind),
                    "case {i}: {got:?}"
                ),
            }
        }
        // An unimplemented requirement refuses, naming its type, whatever else accepts.
        let unsupported = evaluate(
            &[
                Requirement::InsecureAcceptAnything,
                Requirement::Unsupported {
                    what: "signedBy (GPG simple signing)".into(),
                },
            ],
            &image,
            D,
            &found(vec![good.clone()]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            unsupported.contains("signedBy") && unsupported.contains("not supported"),
            "{unsupported}"
        );
        let words = evaluate(
            &default_id,
            &image,
            D,
            &found(vec![signed_by(&ours, "reg.local/ns/catalog:v2", D)]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            words.contains("reg.local/ns/catalog:v2") && words.contains("matchRepoDigestOrExact"),
            "{words}"
        );
    }

    #[test]
    fn no_signature_says_where_it_looked_and_what_else_it_found() {
        let keys = PublicKey::parse_pem("k", TestKey::generate().public_pem().as_bytes()).unwrap();
        let reqs = [Requirement::SigstoreSigned {
            keys,
            identity: SignedIdentity::default(),
        }];
        let image = DockerRef::parse("reg.local/ns/catalog:v1").unwrap();
        let looked = Signatures {
            found: vec![],
            searched: vec![
                "lookaside file:///var/lib/containers/sigstore/ns/catalog@sha256=01/signature-1 (built-in default)".into(),
                "the sigstore attachment sha256-01.sig".into(),
            ],
            other_formats: 2,
        };
        let words = evaluate(&reqs, &image, D, &looked).unwrap_err().to_string();
        assert!(
            words.starts_with("no signature: no sigstore signature of sha256:0123")
                && words.contains("lookaside file:///var/lib/containers/sigstore/ns/catalog@")
                && words.contains(", the sigstore attachment sha256-01.sig")
                && words.contains("2 signatures of other formats"),
            "{words}"
        );
    }

    #[test]
    fn signatures_are_fetched_only_when_a_requirement_reads_them() {
        let keys = PublicKey::parse_pem("k", TestKey::generate().public_pem().as_bytes()).unwrap();
        let signed = Requirement::SigstoreSigned {
            keys,
            identity: SignedIdentity::default(),
        };
        assert!(needs_signatures(std::slice::from_ref(&signed)));
        assert!(!needs_signatures(&[Requirement::InsecureAcceptAnything]));
        assert!(!needs_signatures(&[signed, Requirement::Reject]));
    }
}
