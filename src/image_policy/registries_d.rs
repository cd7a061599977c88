//! registries.d: where the signatures of an image are (docs/image-signatures.md §5). Each
//! `*.yaml` file of the directory may hold `default-docker` (once in the whole directory) and
//! `docker` scopes (each scope once); a scope is looked up as policy scopes are, most specific
//! first, then `default-docker`. olm-rs reads `use-sigstore-attachments` (the `.sig` tag beside
//! the image) and `lookaside` (or `sigstore`: separate signature storage, `lookaside.rs`);
//! `lookaside-staging` is for writing and not read. Unknown keys are ignored, as
//! containers/image ignores them. Pure: the caller reads the files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::lookaside::{BUILTIN_LOOKASIDE, Lookaside};
use super::reference::DockerRef;

/// One scope's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Namespace {
    #[serde(default)]
    pub lookaside: Option<String>,
    /// The older name of `lookaside`.
    #[serde(default)]
    pub sigstore: Option<String>,
    #[serde(default, rename = "use-sigstore-attachments")]
    pub use_sigstore_attachments: Option<bool>,
}

impl Namespace {
    fn lookaside_url(&self) -> Option<&str> {
        // An empty value is unset (containers/image's `signatureTopLevel`).
        fn set(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|u| !u.is_empty())
        }
        set(&self.lookaside).or(set(&self.sigstore))
    }
}

#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default, rename = "default-docker")]
    default_docker: Option<Namespace>,
    #[serde(default)]
    docker: Option<BTreeMap<String, Namespace>>,
}

/// The merged directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistriesD {
    default_docker: Option<Namespace>,
    docker: BTreeMap<String, (Namespace, PathBuf)>,
}

/// A file of the directory that cannot be used: the file, the field, why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("registries.d file {}: {field}: {reason}", file.display())]
pub struct RegistriesDError {
    pub file: PathBuf,
    pub field: String,
    pub reason: String,
}

/// Whether the sigstore attachments of an image are read, and which setting said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachments {
    pub enabled: bool,
    /// `docker."quay.io/org"`, `default-docker`, or `none` (not set anywhere: off).
    pub setting: String,
}

impl RegistriesD {
    /// Merges the files (path, text) of one directory.
    pub fn parse(files: &[(PathBuf, String)]) -> Result<RegistriesD, RegistriesDError> {
        let mut merged = RegistriesD::default();
        let mut default_from: Option<&Path> = None;
        for (path, text) in files {
            let err = |field: String, reason: String| RegistriesDError {
                file: path.clone(),
                field,
                reason,
            };
            let de = serde_yaml_ng::Deserializer::from_str(text);
            let file: Option<File> = serde_path_to_error::deserialize(de).map_err(|e| {
                let field = e.path().to_string();
                err(
                    if field == "." { "(file)".into() } else { field },
                    e.into_inner().to_string(),
                )
            })?;
            let file = file.unwrap_or_default();
            if let Some(d) = file.default_docker {
                if let Some(first) = default_from {
                    return Err(err(
                        "default-docker".into(),
                        format!("is also defined in {}", first.display()),
                    ));
                }
                merged.default_docker = Some(d);
                default_from = Some(path.as_path());
            }
            for (scope, ns) in file.docker.unwrap_or_default() {
                if let Some((_, first)) = merged.docker.get(&scope) {
                    return Err(err(
                        format!("docker.{scope:?}"),
                        format!("is also defined in {}", first.display()),
                    ));
                }
                merged.docker.insert(scope, (ns, path.clone()));
            }
        }
        Ok(merged)
    }

    /// Whether to read `image`'s sigstore attachments: the most specific scope that sets
    /// `use-sigstore-attachments`, then `default-docker`; off when nothing sets it.
    pub fn attachments(&self, image: &DockerRef) -> Attachments {
        for scope in image.scopes() {
            if let Some(enabled) = self
                .docker
                .get(&scope)
                .and_then(|(ns, _)| ns.use_sigstore_attachments)
            {
                return Attachments {
                    enabled,
                    setting: format!("docker.{scope:?}"),
                };
            }
        }
        match self
            .default_docker
            .as_ref()
            .and_then(|d| d.use_sigstore_attachments)
        {
            Some(enabled) => Attachments {
                enabled,
                setting: "default-docker".into(),
            },
            None => Attachments {
                enabled: false,
                setting: "none".into(),
            },
        }
    }

    /// The lookaside URL configured for `image`, if any (most specific scope that names one).
    pub fn lookaside(&self, image: &DockerRef) -> Option<&str> {
        self.configured_lookaside(image).map(|(url, _)| url)
    }

    fn configured_lookaside(&self, image: &DockerRef) -> Option<(&str, String)> {
        image
            .scopes()
            .iter()
            .find_map(|s| {
                self.docker
                    .get(s)
                    .and_then(|(ns, _)| ns.lookaside_url())
                    .map(|url| (url, format!("docker.{s:?}")))
            })
            .or_else(|| {
                self.default_docker
                    .as_ref()
                    .and_then(Namespace::lookaside_url)
                    .map(|url| (url, "default-docker".to_string()))
            })
    }

    /// Where `image`'s lookaside signatures are read: the most specific scope's `lookaside`
    /// (or `sigstore`), then `default-docker`'s, else containers/image's built-in directory
    /// (docs/image-signatures.md §5).
    pub fn lookaside_for(&self, image: &DockerRef) -> Lookaside {
        match self.configured_lookaside(image) {
            Some((url, setting)) => Lookaside {
                base: url.to_string(),
                setting,
            },
            None => Lookaside {
                base: BUILTIN_LOOKASIDE.to_string(),
                setting: "built-in default".to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
        list.iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect()
    }

    // containers-registries.d(5)'s example, with attachments turned on for one registry.
    const EXAMPLE: &str = r#"
docker:
  privateregistry.com:
    lookaside: http://privateregistry.com/sigstore/
    lookaside-staging: /mnt/nfs/privateregistry/sigstore
    use-sigstore-attachments: true
  privateregistry.com/team:
    use-sigstore-attachments: false
default-docker:
  lookaside: file:///var/lib/containers/sigstore
"#;

    #[test]
    fn the_most_specific_scope_that_sets_attachments_wins() {
        let d = RegistriesD::parse(&files(&[(
            "/etc/containers/registries.d/default.yaml",
            EXAMPLE,
        )]))
        .unwrap();
        let at = |r: &str| d.attachments(&DockerRef::parse(r).unwrap());
        assert_eq!(
            at("privateregistry.com/app:v1"),
            Attachments {
                enabled: true,
                setting: "docker.\"privateregistry.com\"".into()
            }
        );
        assert_eq!(
            at("privateregistry.com/team/app:v1"),
            Attachments {
                enabled: false,
                setting: "docker.\"privateregistry.com/team\"".into()
            }
        );
        // default-docker sets no attachments: off.
        assert_eq!(
            at("quay.io/x:v1"),
            Attachments {
                enabled: false,
                setting: "none".into()
            }
        );
        assert_eq!(
            d.lookaside(&DockerRef::parse("privateregistry.com/team/app:v1").unwrap()),
            Some("http://privateregistry.com/sigstore/")
        );
        assert_eq!(
            d.lookaside(&DockerRef::parse("quay.io/x:v1").unwrap()),
            Some("file:///var/lib/containers/sigstore")
        );
        // The staging URL is for writing: the read URL of the scope is used.
        assert_eq!(
            d.lookaside_for(&DockerRef::parse("privateregistry.com/app:v1").unwrap()),
            Lookaside {
                base: "http://privateregistry.com/sigstore/".into(),
                setting: "docker.\"privateregistry.com\"".into()
            }
        );
        // Nothing configured anywhere: containers/image's built-in directory.
        assert_eq!(
            RegistriesD::default().lookaside_for(&DockerRef::parse("quay.io/x:v1").unwrap()),
            Lookaside {
                base: BUILTIN_LOOKASIDE.into(),
                setting: "built-in default".into()
            }
        );
    }

    #[test]
    fn duplicates_across_files_and_bad_fields_name_the_file_and_field() {
        let dup = RegistriesD::parse(&files(&[
            (
                "/d/a.yaml",
                "default-docker:\n  use-sigstore-attachments: true\n",
            ),
            (
                "/d/b.yaml",
                "default-docker:\n  use-sigstore-attachments: false\n",
            ),
        ]))
        .unwrap_err();
        assert_eq!(
            (dup.file.to_str(), dup.field.as_str()),
            (Some("/d/b.yaml"), "default-docker")
        );
        assert!(dup.to_string().contains("/d/a.yaml"), "{dup}");
        let dup = RegistriesD::parse(&files(&[
            (
                "/d/a.yaml",
                "docker:\n  quay.io:\n    use-sigstore-attachments: true\n",
            ),
            (
                "/d/b.yaml",
                "docker:\n  quay.io:\n    lookaside: https://x\n",
            ),
        ]))
        .unwrap_err();
        assert_eq!(dup.field, "docker.\"quay.io\"");
        let bad = RegistriesD::parse(&files(&[(
            "/d/c.yaml",
            "docker:\n  quay.io:\n    use-sigstore-attachments: maybe\n",
        )]))
        .unwrap_err();
        assert_eq!(bad.file, PathBuf::from("/d/c.yaml"));
        assert_eq!(
            bad.field, "docker.quay.io.use-sigstore-attachments",
            "{bad}"
        );
        // An empty file and unknown keys are fine.
        let ok = RegistriesD::parse(&files(&[("/d/e.yaml", ""), ("/d/f.yaml", "other: 1\n")]));
        assert!(ok.is_ok(), "{ok:?}");
    }
}
