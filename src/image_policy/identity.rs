//! `signedIdentity`: which identity a signature may claim (`critical.identity.docker-reference`)
//! for the image being pulled, as containers/image's reference-match rules define it
//! (docs/image-signatures.md §4). Pure.

use super::reference::DockerRef;

/// A `signedIdentity` rule; `MatchRepoDigestOrExact` when the requirement names none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SignedIdentity {
    /// Same repository and tag, or same repository when the image is pulled by digest.
    #[default]
    MatchRepoDigestOrExact,
    /// The same repository, any tag or digest.
    MatchRepository,
    /// The same reference, tag or digest included.
    MatchExact,
    /// The signature names exactly this reference (the image's own name is not looked at).
    ExactReference(DockerRef),
    /// The signature names this repository.
    ExactRepository(DockerRef),
    /// The image's name with `prefix` replaced by `signed_prefix`, then as
    /// `MatchRepoDigestOrExact` (a mirror whose images were signed under their origin's name).
    RemapIdentity {
        prefix: String,
        signed_prefix: String,
    },
}

impl SignedIdentity {
    /// The policy's `type` for this rule.
    pub fn type_name(&self) -> &'static str {
        match self {
            SignedIdentity::MatchRepoDigestOrExact => "matchRepoDigestOrExact",
            SignedIdentity::MatchRepository => "matchRepository",
            SignedIdentity::MatchExact => "matchExact",
            SignedIdentity::ExactReference(_) => "exactReference",
            SignedIdentity::ExactRepository(_) => "exactRepository",
            SignedIdentity::RemapIdentity { .. } => "remapIdentity",
        }
    }

    /// Whether a signature claiming `signed` is accepted for pulling `intended`. An identity
    /// that does not parse matches nothing.
    pub fn matches(&self, intended: &DockerRef, signed: &str) -> bool {
        let Ok(signed) = DockerRef::parse(signed) else {
            return false;
        };
        match self {
            SignedIdentity::MatchRepoDigestOrExact => repo_digest_or_exact(intended, &signed),
            SignedIdentity::MatchRepository => signed.name() == intended.name(),
            SignedIdentity::MatchExact => exact(intended, &signed),
            SignedIdentity::ExactReference(wanted) => exact(wanted, &signed),
            SignedIdentity::ExactRepository(wanted) => signed.name() == wanted.name(),
            SignedIdentity::RemapIdentity {
                prefix,
                signed_prefix,
            } => match remap(intended, prefix, signed_prefix) {
                Some(remapped) => repo_digest_or_exact(&remapped, &signed),
                None => false,
            },
        }
    }
}

fn exact(a: &DockerRef, b: &DockerRef) -> bool {
    !a.is_name_only() && !b.is_name_only() && a.to_string() == b.to_string()
}

fn repo_digest_or_exact(intended: &DockerRef, signed: &DockerRef) -> bool {
    if signed.is_name_only() {
        return false;
    }
    if intended.tag().is_some() {
        signed.to_string() == intended.to_string()
    } else if intended.digest().is_some() {
        signed.name() == intended.name()
    } else {
        false
    }
}

/// `intended` with `prefix` (a host, namespace or repository, matched on a path boundary)
/// replaced; unchanged when it does not start with `prefix`. `None` when the result is not a
/// reference.
fn remap(intended: &DockerRef, prefix: &str, signed_prefix: &str) -> Option<DockerRef> {
    let name = intended.name();
    let under = name == prefix
        || (name.len() > prefix.len()
            && name.starts_with(prefix)
            && name.as_bytes()[prefix.len()] == b'/');
    if !under {
        return Some(intended.clone());
    }
    let text = intended.to_string().replacen(prefix, signed_prefix, 1);
    DockerRef::parse(&text).ok()
}

/// Whether `prefix` is usable in `remapIdentity`: a host (`example.com`, `reg:5000`) or a
/// host and a path (`example.com/ns/repo`), no tag or digest.
pub(super) fn valid_remap_prefix(prefix: &str) -> bool {
    let mut parts = prefix.split('/');
    let host = parts.next().unwrap_or_default();
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    let path_ok = parts.all(|p| {
        !p.is_empty()
            && p.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_')
            })
    });
    host_ok && path_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn r(s: &str) -> DockerRef {
        DockerRef::parse(s).unwrap()
    }

    // The cases of containers/image's docs (containers-policy.json(5), "signedIdentity") and of
    // its reference-match table: intended image, signed identity, rule → accepted?
    #[test]
    fn each_rule_accepts_what_containers_image_accepts() {
        use SignedIdentity::*;
        let dig = format!("example.com/ns/repo@{D}");
        let mirror_dig = format!("mirror.local/ns/repo@{D}");
        let other_dig = format!("example.com/ns/other@{D}");
        let remap = RemapIdentity {
            prefix: "mirror.local/ns".into(),
            signed_prefix: "example.com/ns".into(),
        };
        let cases: Vec<(SignedIdentity, &str, &str, bool)> = vec![
            (
                MatchRepoDigestOrExact,
                "example.com/ns/repo:v1",
                "example.com/ns/repo:v1",
                true,
            ),
            (
                MatchRepoDigestOrExact,
                "example.com/ns/repo:v1",
                "example.com/ns/repo:v2",
                false,
            ),
            (MatchRepoDigestOrExact, &dig, "example.com/ns/repo:v2", true),
            (MatchRepoDigestOrExact, &dig, &other_dig, false),
            (MatchRepoDigestOrExact, &dig, "example.com/ns/repo", false),
            (
                MatchRepository,
                "example.com/ns/repo:v1",
                "example.com/ns/repo:v2",
                true,
            ),
            (
                MatchRepository,
                "example.com/ns/repo:v1",
                "example.com/ns/repo",
                true,
            ),
            (
                MatchRepository,
                "example.com/ns/repo:v1",
                "example.com/ns/other:v1",
                false,
            ),
            (
                MatchExact,
                "example.com/ns/repo:v1",
                "example.com/ns/repo:v1",
                true,
            ),
            (MatchExact, &dig, "example.com/ns/repo:v1", false),
            (MatchExact, &dig, &dig, true),
            (
                MatchRepoDigestOrExact,
                "busybox:1",
                "docker.io/library/busybox:1",
                true,
            ),
            (
                ExactReference(r("example.com/signed:v1")),
                "other.io/x:v9",
                "example.com/signed:v1",
                true,
            ),
            (
                ExactReference(r("example.com/signed:v1")),
                "example.com/signed:v1",
                "example.com/signed:v2",
                false,
            ),
            (
                ExactRepository(r("example.com/signed")),
                "other.io/x:v9",
                "example.com/signed:v7",
                true,
            ),
            (
                ExactRepository(r("example.com/signed")),
                "other.io/x:v9",
                "example.com/signed2:v7",
                false,
            ),
            (
                remap.clone(),
                "mirror.local/ns/repo:v1",
                "example.com/ns/repo:v1",
                true,
            ),
            (
                remap.clone(),
                "mirror.local/ns/repo:v1",
                "mirror.local/ns/repo:v1",
                false,
            ),
            (
                remap.clone(),
                "mirror.local/nsx/repo:v1",
                "mirror.local/nsx/repo:v1",
                true,
            ),
            (remap.clone(), &mirror_dig, "example.com/ns/repo:v3", true),
            (
                MatchRepository,
                "example.com/ns/repo:v1",
                "Not A Reference",
                false,
            ),
        ];
        for (rule, intended, signed, want) in cases {
            assert_eq!(
                rule.matches(&r(intended), signed),
                want,
                "{rule:?}: pulling {intended}, signature claims {signed}"
            );
        }
    }

    #[test]
    fn remap_prefixes_are_hosts_or_host_paths() {
        for ok in [
            "example.com",
            "reg:5000",
            "example.com/ns",
            "example.com/ns/repo",
        ] {
            assert!(valid_remap_prefix(ok), "{ok}");
        }
        for bad in [
            "",
            "example.com/",
            "example.com/NS",
            "example.com/ns:v1",
            "a b",
        ] {
            assert!(!valid_remap_prefix(bad), "{bad}");
        }
    }
}
