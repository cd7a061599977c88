//! Image names as the container tools read them (`quay.io/org/bundle:v1`,
//! `reg:5000/x@sha256:…`, `busybox` → `docker.io/library/busybox:latest`). Pure.

use std::fmt;

use oci_client::Reference;

/// A parsed image reference, with the text it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageName {
    given: String,
    reference: Reference,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("image reference {image:?} is not valid: {reason}")]
pub struct ImageNameError {
    pub image: String,
    pub reason: String,
}

impl ImageName {
    pub fn parse(image: &str) -> Result<ImageName, ImageNameError> {
        let trimmed = image.trim();
        let reference: Reference = trimmed.parse().map_err(|e| ImageNameError {
            image: image.to_string(),
            reason: format!("{e}"),
        })?;
        Ok(ImageName {
            given: trimmed.to_string(),
            reference,
        })
    }

    /// The reference as given (before normalisation).
    pub fn given(&self) -> &str {
        &self.given
    }

    /// `registry/repository`, normalised (`docker.io/library/busybox`).
    pub fn name(&self) -> String {
        format!(
            "{}/{}",
            self.reference.registry(),
            self.reference.repository()
        )
    }

    /// The registry host (with port), normalised (`docker.io`, `localhost:5000`).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    pub fn tag(&self) -> Option<&str> {
        self.reference.tag()
    }

    /// The pinned digest (`sha256:…`), when the reference has one.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    pub fn reference(&self) -> &Reference {
        &self.reference
    }

    /// The same tag or digest under another name (a mirror's location).
    pub fn with_name(&self, name: &str) -> Result<ImageName, ImageNameError> {
        let text = match (self.digest(), self.tag()) {
            (Some(d), _) => format!("{name}@{d}"),
            (None, Some(t)) => format!("{name}:{t}"),
            (None, None) => name.to_string(),
        };
        ImageName::parse(&text)
    }

    /// The same repository, pinned to `digest`.
    pub fn with_digest(&self, digest: &str) -> ImageName {
        let reference = Reference::with_digest(
            self.reference.registry().to_string(),
            self.reference.repository().to_string(),
            digest.to_string(),
        );
        ImageName {
            given: reference.whole(),
            reference,
        }
    }
}

impl fmt::Display for ImageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn names_are_normalised_as_docker_does() {
        let cases = [
            ("busybox", "docker.io/library/busybox", Some("latest"), None),
            ("quay.io/org/b:v1", "quay.io/org/b", Some("v1"), None),
            (
                &format!("localhost:5000/x/y@{DIGEST}") as &str,
                "localhost:5000/x/y",
                None,
                Some(DIGEST),
            ),
        ];
        for (given, name, tag, digest) in cases {
            let n = ImageName::parse(given).unwrap();
            assert_eq!(n.name(), name, "{given}");
            assert_eq!(n.tag(), tag, "{given}");
            assert_eq!(n.digest(), digest, "{given}");
            assert_eq!(n.to_string(), given);
        }
    }

    #[test]
    fn with_name_keeps_the_tag_or_digest() {
        let n = ImageName::parse(&format!("quay.io/org/b@{DIGEST}")).unwrap();
        let m = n.with_name("mirror.local:5000/org/b").unwrap();
        assert_eq!(m.registry(), "mirror.local:5000");
        assert_eq!(m.digest(), Some(DIGEST));
        let t = ImageName::parse("quay.io/org/b:v2").unwrap();
        assert_eq!(
            t.with_name("m.local/b").unwrap().to_string(),
            "m.local/b:v2"
        );
    }

    #[test]
    fn bad_references_name_the_image() {
        let e = ImageName::parse("quay.io/Org/B:v1").unwrap_err();
        assert!(e.to_string().contains("quay.io/Org/B:v1"), "{e}");
        assert!(ImageName::parse("x@sha256:short").is_err());
    }
}
