//! Container image references (`quay.io/org/catalog:v4.20`, `busybox`, `reg:5000/x@sha256:…`)
//! split the way the Docker/OCI tooling splits them, so the OCI distribution API can be asked
//! for a tag's digest. Pure: no I/O.

use std::fmt;

/// Registry host Docker Hub references resolve to.
pub const DOCKER_HUB_DOMAIN: &str = "docker.io";
/// Where Docker Hub's distribution API actually lives.
pub const DOCKER_HUB_API_HOST: &str = "registry-1.docker.io";

/// A parsed image reference. `tag` defaults to `latest` when neither tag nor digest is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    /// Registry host (with port when given), e.g. `quay.io`, `localhost:5000`, `docker.io`.
    pub domain: String,
    /// Repository path inside the registry, e.g. `operatorhubio/catalog`, `library/busybox`.
    pub repository: String,
    pub tag: Option<String>,
    /// `sha256:<hex>` when the reference pins a digest.
    pub digest: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageReferenceError {
    #[error("image reference is empty")]
    Empty,
    #[error("image reference {image:?}: {problem}")]
    Invalid { image: String, problem: String },
}

impl ImageReference {
    pub fn parse(image: &str) -> Result<ImageReference, ImageReferenceError> {
        if image.is_empty() {
            return Err(ImageReferenceError::Empty);
        }
        let invalid = |problem: &str| ImageReferenceError::Invalid {
            image: image.to_owned(),
            problem: problem.to_owned(),
        };
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => {
                check_digest(digest).map_err(|p| invalid(&p))?;
                (rest, Some(digest.to_owned()))
            }
            None => (image, None),
        };
        // A tag is a `:` after the last `/` (a `:` before it belongs to the registry port).
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&rest[..at], Some(rest[at + 1..].to_owned()))
            }
            None => (rest, None),
        };
        if let Some(tag) = &tag {
            check_tag(tag).map_err(|p| invalid(&p))?;
        }
        let (domain, repository) = split_domain(name);
        if repository.is_empty() {
            return Err(invalid("repository name is empty"));
        }
        for component in repository.split('/') {
            check_path_component(component).map_err(|p| invalid(&p))?;
        }
        if domain.is_empty() {
            return Err(invalid("registry host is empty"));
        }
        let tag = if tag.is_none() && digest.is_none() {
            Some("latest".to_owned())
        } else {
            tag
        };
        Ok(ImageReference {
            domain,
            repository,
            tag,
            digest,
        })
    }

    /// The host the distribution API is served on (Docker Hub's API is not on `docker.io`).
    pub fn api_host(&self) -> &str {
        if self.domain == DOCKER_HUB_DOMAIN {
            DOCKER_HUB_API_HOST
        } else {
            &self.domain
        }
    }

    /// What to put after `/manifests/`: the digest when pinned, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.domain, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// The first component is a registry host when it looks like one (has `.` or `:`, or is
/// `localhost`); otherwise the reference is on Docker Hub, where one-component names live under
/// `library/`.
fn split_domain(name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            let domain = if first == "index.docker.io" {
                DOCKER_HUB_DOMAIN
            } else {
                first
            };
            let repository = if domain == DOCKER_HUB_DOMAIN && !rest.contains('/') {
                format!("library/{rest}")
            } else {
                rest.to_owned()
            };
            (domain.to_owned(), repository)
        }
        Some(_) => (DOCKER_HUB_DOMAIN.to_owned(), name.to_owned()),
        None => (DOCKER_HUB_DOMAIN.to_owned(), format!("library/{name}")),
    }
}

fn check_digest(digest: &str) -> Result<(), String> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(format!("digest {digest:?} has no algorithm"));
    };
    let valid_hex = !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit());
    let valid_length = algorithm != "sha256" || hex.len() == 64;
    if algorithm.is_empty() || !valid_hex || !valid_length {
        return Err(format!("digest {digest:?} is not <algorithm>:<hex>"));
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<(), String> {
    let valid = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(format!("tag {tag:?} is not valid"))
    }
}

fn check_path_component(component: &str) -> Result<(), String> {
    let valid = !component.is_empty()
        && component.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        && component
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && component
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "repository component {component:?} must be lowercase letters, digits and separators"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(image: &str) -> (String, String, Option<String>, Option<String>) {
        let r = ImageReference::parse(image).unwrap();
        (r.domain, r.repository, r.tag, r.digest)
    }

    #[test]
    fn splits_references_like_docker_does() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let cases = [
            (
                "busybox",
                ("docker.io", "library/busybox", Some("latest"), None),
            ),
            ("org/img:1.0", ("docker.io", "org/img", Some("1.0"), None)),
            (
                "quay.io/operatorhubio/catalog:latest",
                ("quay.io", "operatorhubio/catalog", Some("latest"), None),
            ),
            (
                "localhost:5000/cat",
                ("localhost:5000", "cat", Some("latest"), None),
            ),
            ("localhost/a/b:v2", ("localhost", "a/b", Some("v2"), None)),
            (
                "index.docker.io/nginx:1",
                ("docker.io", "library/nginx", Some("1"), None),
            ),
        ];
        for (image, (domain, repo, tag, dig)) in cases {
            assert_eq!(
                parts(image),
                (
                    domain.to_owned(),
                    repo.to_owned(),
                    tag.map(str::to_owned),
                    dig
                ),
                "{image}"
            );
        }
        let pinned = ImageReference::parse(&format!("reg.io:443/x/y@{digest}")).unwrap();
        assert_eq!(pinned.domain, "reg.io:443");
        assert_eq!(pinned.tag, None);
        assert_eq!(pinned.manifest_reference(), digest);
        let both = ImageReference::parse(&format!("reg.io/x:v1@{digest}")).unwrap();
        assert_eq!(both.tag.as_deref(), Some("v1"));
        assert_eq!(both.manifest_reference(), digest);
    }

    #[test]
    fn docker_hub_is_asked_on_its_api_host() {
        assert_eq!(
            ImageReference::parse("busybox").unwrap().api_host(),
            "registry-1.docker.io"
        );
        assert_eq!(
            ImageReference::parse("quay.io/a/b").unwrap().api_host(),
            "quay.io"
        );
    }

    #[test]
    fn rejects_malformed_references_with_the_reason() {
        for (image, needle) in [
            ("Quay.io/A/b", "lowercase"),
            ("quay.io/a/b:", "tag"),
            ("quay.io/a/b@sha256:xyz", "digest"),
            ("quay.io/a/b@sha256:abc", "digest"),
            ("quay.io/", "empty"),
            ("quay.io/a//b", "component"),
        ] {
            let err = ImageReference::parse(image).unwrap_err().to_string();
            assert!(err.contains(needle), "{image}: {err}");
            assert!(err.contains(image), "{image}: {err}");
        }
        assert_eq!(ImageReference::parse(""), Err(ImageReferenceError::Empty));
    }

    #[test]
    fn display_round_trips_normalised_form() {
        let r = ImageReference::parse("busybox").unwrap();
        assert_eq!(r.to_string(), "docker.io/library/busybox:latest");
    }
}
