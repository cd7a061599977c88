//! Docker references as the policy reads them: the normalised repository name
//! (`docker.io/library/busybox`), an optional tag and digest, and the scopes a reference is
//! looked up under, most specific first (docs/image-signatures.md §2). Pure.

use std::fmt;

use oci_client::Reference;

/// A docker reference: `name[:tag][@digest]`, the name normalised as docker does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerRef {
    name: String,
    tag: Option<String>,
    digest: Option<String>,
}

/// Why a reference cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a docker reference: {reason}")]
pub struct DockerRefError {
    pub text: String,
    pub reason: String,
}

impl DockerRef {
    /// Parses `text`; a reference with neither tag nor digest stays name-only (no `latest` is
    /// added: a name-only signed identity matches nothing but a repository rule).
    pub fn parse(text: &str) -> Result<DockerRef, DockerRefError> {
        let text = text.trim();
        let err = |reason: String| DockerRefError {
            text: text.to_string(),
            reason,
        };
        if text.is_empty() {
            return Err(err("it is empty".into()));
        }
        let parsed: Reference = text.parse().map_err(|e| err(format!("{e}")))?;
        let last = text.rsplit('/').next().unwrap_or(text);
        let name_only = !last.contains(':') && !last.contains('@');
        let tag = if name_only {
            None
        } else {
            parsed.tag().map(str::to_string)
        };
        Ok(DockerRef {
            name: format!("{}/{}", parsed.registry(), parsed.repository()),
            tag,
            digest: parsed.digest().map(str::to_string),
        })
    }

    /// The same repository, pinned to `digest` (the tag dropped).
    pub fn with_digest(&self, digest: &str) -> DockerRef {
        DockerRef {
            name: self.name.clone(),
            tag: None,
            digest: Some(digest.to_string()),
        }
    }

    /// `registry/repository`, normalised.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    pub fn is_name_only(&self) -> bool {
        self.tag.is_none() && self.digest.is_none()
    }

    /// The repository path without the registry (`library/busybox`).
    pub fn path(&self) -> &str {
        self.name.split_once('/').map_or("", |(_, p)| p)
    }

    /// The most specific scope: `name:tag`, or `name@digest` when there is no tag. containers/
    /// image refuses a reference with both here; olm-rs pulls such a reference by its digest,
    /// so the digest names it.
    pub fn identity(&self) -> String {
        match (&self.tag, &self.digest) {
            (_, Some(d)) => format!("{}@{d}", self.name),
            (Some(t), None) => format!("{}:{t}", self.name),
            (None, None) => self.name.clone(),
        }
    }

    /// The less specific scopes, in lookup order: the repository, each parent namespace up to
    /// the registry (with its port), then the wildcard domains of the host without its port
    /// (`*.example.com`, `*.com`).
    pub fn namespaces(&self) -> Vec<String> {
        let mut scopes = Vec::new();
        let mut name = self.name.as_str();
        loop {
            scopes.push(name.to_string());
            match name.rfind('/') {
                Some(i) => name = &name[..i],
                None => break,
            }
        }
        let mut host = name.split(':').next().unwrap_or(name);
        while let Some(i) = host.find('.') {
            host = &host[i + 1..];
            scopes.push(format!("*.{host}"));
        }
        scopes
    }

    /// Every scope, most specific first (identity, then namespaces).
    pub fn scopes(&self) -> Vec<String> {
        let mut all = vec![self.identity()];
        all.extend(self.namespaces());
        all
    }
}

impl fmt::Display for DockerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn references_are_normalised_and_name_only_stays_name_only() {
        let pinned = format!("r.io/x@{D}");
        let cases: [(&str, &str, Option<&str>, Option<&str>); 5] = [
            ("busybox", "docker.io/library/busybox", None, None),
            ("busybox:1", "docker.io/library/busybox", Some("1"), None),
            ("quay.io/a/b:v1", "quay.io/a/b", Some("v1"), None),
            ("localhost:5000/x", "localhost:5000/x", None, None),
            (&pinned, "r.io/x", None, Some(D)),
        ];
        for (text, name, tag, digest) in cases {
            let r = DockerRef::parse(text).unwrap();
            assert_eq!(
                (r.name(), r.tag(), r.digest()),
                (name, tag, digest),
                "{text}"
            );
        }
        assert!(DockerRef::parse("Quay.io/A/B").is_err());
        assert!(DockerRef::parse("").is_err());
    }

    // containers/image's documented lookup order (containers-policy.json(5), "Policy
    // Requirements" for the docker transport): identity, repository, namespaces, host,
    // wildcard domains without the port.
    #[test]
    fn scopes_go_from_most_to_least_specific() {
        let r = DockerRef::parse("registry.example.com:8443/ns/sub/repo:v1").unwrap();
        assert_eq!(
            r.scopes(),
            [
                "registry.example.com:8443/ns/sub/repo:v1",
                "registry.example.com:8443/ns/sub/repo",
                "registry.example.com:8443/ns/sub",
                "registry.example.com:8443/ns",
                "registry.example.com:8443",
                "*.example.com",
                "*.com",
            ]
        );
        let d = DockerRef::parse(&format!("busybox@{D}")).unwrap();
        assert_eq!(
            d.scopes(),
            [
                format!("docker.io/library/busybox@{D}"),
                "docker.io/library/busybox".into(),
                "docker.io/library".into(),
                "docker.io".into(),
                "*.io".into(),
            ]
        );
        assert_eq!(
            DockerRef::parse("localhost:5000/a:b").unwrap().namespaces(),
            ["localhost:5000/a", "localhost:5000"]
        );
    }
}
