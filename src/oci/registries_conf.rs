//! `registries.conf` (containers-registries.conf(5), version 2), the file podman, skopeo and
//! CRI-O read: which registry an image is really pulled from (`location`), which mirrors are
//! tried first, which registries speak plain HTTP (`insecure`) and which are `blocked`. Pure:
//! the text comes in, pull sources come out.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::reference::{ImageName, ImageNameError};

#[derive(Debug, thiserror::Error)]
pub enum RegistriesConfError {
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a containers-registries.conf v2 file: {message}", file.display())]
    Parse { file: PathBuf, message: String },
    #[error("{}: [[registry]] {entry}: {message}", file.display())]
    Entry {
        file: PathBuf,
        entry: String,
        message: String,
    },
}

/// Where to try pulling an image from, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSource {
    /// The image under this source's name (a mirror's, or the rewritten `location`).
    pub image: ImageName,
    /// `insecure = true`: the registry is reached over plain HTTP.
    pub insecure: bool,
    pub mirror: bool,
}

/// The `[[registry]]` entry that blocks an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedBy {
    pub prefix: String,
}

#[derive(Debug, Clone, Default)]
pub struct RegistriesConf {
    file: Option<PathBuf>,
    registries: Vec<Entry>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    registry: Vec<RawEntry>,
    /// v1 files have a `[registries.search]`/`[registries.insecure]` table instead.
    #[serde(default)]
    registries: Option<toml::Value>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawEntry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    mirror: Vec<RawMirror>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct RawMirror {
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PullFromMirror {
    All,
    DigestOnly,
    TagOnly,
}

#[derive(Debug, Clone)]
struct Mirror {
    location: String,
    insecure: bool,
    pull_from: PullFromMirror,
}

#[derive(Debug, Clone)]
struct Entry {
    /// `host/ns/repo`, or `*.host` for a wildcard entry.
    prefix: String,
    location: String,
    insecure: bool,
    blocked: bool,
    mirrors: Vec<Mirror>,
}

impl RegistriesConf {
    /// Reads and checks a registries.conf file.
    pub fn from_file(file: &Path) -> Result<RegistriesConf, RegistriesConfError> {
        let text = std::fs::read_to_string(file).map_err(|source| RegistriesConfError::Read {
            file: file.to_path_buf(),
            source,
        })?;
        RegistriesConf::parse(&text, file)
    }

    /// Parses registries.conf text; `file` names it in errors.
    pub fn parse(text: &str, file: &Path) -> Result<RegistriesConf, RegistriesConfError> {
        let raw: File = toml::from_str(text).map_err(|e| RegistriesConfError::Parse {
            file: file.to_path_buf(),
            message: e.message().to_string(),
        })?;
        if raw.registries.is_some() {
            return Err(RegistriesConfError::Parse {
                file: file.to_path_buf(),
                message: "the v1 [registries.*] tables are not supported; use [[registry]] \
                          entries (version 2)"
                    .into(),
            });
        }
        let mut registries = Vec::new();
        for (i, r) in raw.registry.into_iter().enumerate() {
            let entry_error = |message: String| RegistriesConfError::Entry {
                file: file.to_path_buf(),
                entry: if r.prefix.is_empty() {
                    format!("#{} (location {:?})", i + 1, r.location)
                } else {
                    format!("prefix {:?}", r.prefix)
                },
                message,
            };
            let prefix = if r.prefix.is_empty() {
                r.location.clone()
            } else {
                r.prefix.clone()
            };
            if prefix.is_empty() {
                return Err(entry_error("needs a prefix or a location".into()));
            }
            if prefix.starts_with("*.") {
                if !r.location.is_empty() {
                    return Err(entry_error(
                        "a wildcard prefix (*.host) cannot have a location".into(),
                    ));
                }
            } else {
                check_name(&prefix).map_err(|m| entry_error(format!("prefix: {m}")))?;
            }
            let location = if r.location.is_empty() {
                prefix.clone()
            } else {
                check_name(&r.location).map_err(|m| entry_error(format!("location: {m}")))?;
                r.location.clone()
            };
            let mut mirrors = Vec::new();
            for m in &r.mirror {
                check_name(&m.location)
                    .map_err(|e| entry_error(format!("mirror location: {e}")))?;
                let pull_from = match m.pull_from_mirror.as_deref() {
                    None | Some("") | Some("all") if r.mirror_by_digest_only => {
                        PullFromMirror::DigestOnly
                    }
                    None | Some("") | Some("all") => PullFromMirror::All,
                    Some("digest-only") => PullFromMirror::DigestOnly,
                    Some("tag-only") => PullFromMirror::TagOnly,
                    Some(other) => {
                        return Err(entry_error(format!(
                            "mirror {:?}: pull-from-mirror {other:?} is not one of all, \
                             digest-only, tag-only",
                            m.location
                        )));
                    }
                };
                mirrors.push(Mirror {
                    location: m.location.clone(),
                    insecure: m.insecure,
                    pull_from,
                });
            }
            registries.push(Entry {
                prefix,
                location,
                insecure: r.insecure,
                blocked: r.blocked,
                mirrors,
            });
        }
        Ok(RegistriesConf {
            file: Some(file.to_path_buf()),
            registries,
        })
    }

    /// The file this configuration came from.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Hosts (with port) that are reached over plain HTTP.
    pub fn insecure_hosts(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.registries {
            if r.insecure && !r.prefix.starts_with("*.") {
                out.push(host_of(&r.location).to_string());
            }
            for m in r.mirrors.iter().filter(|m| m.insecure) {
                out.push(host_of(&m.location).to_string());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The entry whose prefix matches `name` (`host/repo`) longest; wildcard entries match
    /// the host's subdomains.
    fn entry_for(&self, name: &str) -> Option<&Entry> {
        let host = host_of(name);
        self.registries
            .iter()
            .filter_map(|r| {
                let matched_len = match r.prefix.strip_prefix('*') {
                    Some(suffix) => host.ends_with(suffix).then_some(suffix.len()),
                    None => prefix_matches(&r.prefix, name).then_some(r.prefix.len()),
                };
                matched_len.map(|len| (len, r))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, r)| r)
    }

    /// Where to pull `image` from, in order: the mirrors that apply, then the (rewritten)
    /// location. Refused when the matching entry is `blocked`.
    pub fn pull_sources(&self, image: &ImageName) -> Result<Vec<PullSource>, PullSourcesError> {
        let name = image.name();
        let Some(entry) = self.entry_for(&name) else {
            return Ok(vec![PullSource {
                image: image.clone(),
                insecure: false,
                mirror: false,
            }]);
        };
        if entry.blocked {
            return Err(PullSourcesError::Blocked(BlockedBy {
                prefix: entry.prefix.clone(),
            }));
        }
        // A wildcard entry only sets flags; the name stays as it is.
        let rest = if entry.prefix.starts_with("*.") {
            None
        } else {
            Some(&name[entry.prefix.len()..])
        };
        let rewrite = |location: &str| -> Result<ImageName, PullSourcesError> {
            match rest {
                Some(rest) => image
                    .with_name(&format!("{location}{rest}"))
                    .map_err(PullSourcesError::BadRewrite),
                None => Ok(image.clone()),
            }
        };
        let by_digest = image.digest().is_some();
        let mut out = Vec::new();
        for m in &entry.mirrors {
            let applies = match m.pull_from {
                PullFromMirror::All => true,
                PullFromMirror::DigestOnly => by_digest,
                PullFromMirror::TagOnly => !by_digest,
            };
            if applies && rest.is_some() {
                out.push(PullSource {
                    image: rewrite(&m.location)?,
                    insecure: m.insecure,
                    mirror: true,
                });
            }
        }
        out.push(PullSource {
            image: rewrite(&entry.location)?,
            insecure: entry.insecure,
            mirror: false,
        });
        Ok(out)
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum PullSourcesError {
    #[error("blocked by the registries.conf entry with prefix {:?}", .0.prefix)]
    Blocked(BlockedBy),
    #[error("registries.conf rewrites it to an invalid name: {0}")]
    BadRewrite(ImageNameError),
}

/// A prefix matches a name at a path boundary: `quay.io/org` matches `quay.io/org/x`, not
/// `quay.io/organisation`.
fn prefix_matches(prefix: &str, name: &str) -> bool {
    match name.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with(['/', ':', '@']),
        None => false,
    }
}

fn host_of(name: &str) -> &str {
    name.split('/').next().unwrap_or(name)
}

/// A registry name in `registries.conf` that is not `host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryNameError {
    #[error("{0:?} must not have a scheme (http://…)")]
    Scheme(String),
    #[error("{0:?} is not host[:port][/path]")]
    NotHostPath(String),
}

fn check_name(name: &str) -> Result<(), RegistryNameError> {
    if name.contains("://") {
        return Err(RegistryNameError::Scheme(name.to_owned()));
    }
    if name.is_empty() || name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Err(RegistryNameError::NotHostPath(name.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn conf(text: &str) -> RegistriesConf {
        RegistriesConf::parse(text, Path::new("registries.conf")).unwrap()
    }

    fn sources(c: &RegistriesConf, image: &str) -> Vec<String> {
        c.pull_sources(&ImageName::parse(image).unwrap())
            .unwrap()
            .into_iter()
            .map(|s| format!("{}{}", s.image, if s.insecure { " (http)" } else { "" }))
            .collect()
    }

    #[test]
    fn mirrors_come_first_then_the_location() {
        let c = conf(
            r#"
            [[registry]]
            prefix = "quay.io/operatorhubio"
            location = "quay.io/operatorhubio"
            [[registry.mirror]]
            location = "mirror.local:5000/ohio"
            insecure = true
            "#,
        );
        assert_eq!(
            sources(&c, &format!("quay.io/operatorhubio/kube-green@{DIGEST}")),
            vec![
                format!("mirror.local:5000/ohio/kube-green@{DIGEST} (http)"),
                format!("quay.io/operatorhubio/kube-green@{DIGEST}"),
            ]
        );
        // Another namespace on the same host is not matched.
        assert_eq!(
            sources(&c, "quay.io/operatorhubiox/a:v1"),
            vec!["quay.io/operatorhubiox/a:v1"]
        );
        assert_eq!(c.insecure_hosts(), vec!["mirror.local:5000"]);
    }

    #[test]
    fn longest_prefix_wins_and_location_rewrites() {
        let c = conf(
            r#"
            [[registry]]
            location = "quay.io"
            blocked = true
            [[registry]]
            prefix = "quay.io/allowed"
            location = "internal.local/quay-allowed"
            "#,
        );
        assert_eq!(
            sources(&c, "quay.io/allowed/b:v1"),
            vec!["internal.local/quay-allowed/b:v1"]
        );
        let err = c
            .pull_sources(&ImageName::parse("quay.io/other/b:v1").unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("prefix \"quay.io\""), "{err}");
    }

    #[test]
    fn digest_only_mirrors_are_skipped_for_tags() {
        let c = conf(
            r#"
            [[registry]]
            location = "registry.example.com"
            mirror-by-digest-only = true
            [[registry.mirror]]
            location = "m1.local"
            [[registry.mirror]]
            location = "m2.local"
            pull-from-mirror = "tag-only"
            "#,
        );
        assert_eq!(
            sources(&c, "registry.example.com/a:v1"),
            vec!["m2.local/a:v1", "registry.example.com/a:v1"]
        );
        assert_eq!(
            sources(&c, &format!("registry.example.com/a@{DIGEST}")),
            vec![
                format!("m1.local/a@{DIGEST}"),
                format!("registry.example.com/a@{DIGEST}")
            ]
        );
    }

    #[test]
    fn wildcard_prefixes_set_flags_on_subdomains() {
        let c = conf(
            r#"
            [[registry]]
            prefix = "*.corp.example"
            insecure = true
            "#,
        );
        assert_eq!(
            sources(&c, "reg.corp.example/a:v1"),
            vec!["reg.corp.example/a:v1 (http)"]
        );
        assert_eq!(sources(&c, "corp.example/a:v1"), vec!["corp.example/a:v1"]);
    }

    #[test]
    fn bad_files_name_the_file_and_the_entry() {
        let cases = [
            (
                "[[registry]]\ninsecure = true\n",
                "needs a prefix or a location",
            ),
            (
                "[[registry]]\nprefix = \"*.x.io\"\nlocation = \"y.io\"\n",
                "wildcard",
            ),
            ("[[registry]]\nlocation = \"https://x.io\"\n", "scheme"),
            ("[registries.search]\nregistries = [\"x\"]\n", "v1"),
            ("[[registry]\n", "not a containers-registries.conf"),
            (
                "[[registry]]\nlocation = \"x.io\"\n[[registry.mirror]]\nlocation = \"m.io\"\npull-from-mirror = \"sometimes\"\n",
                "pull-from-mirror",
            ),
        ];
        for (text, want) in cases {
            let e = RegistriesConf::parse(text, Path::new("/etc/containers/registries.conf"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("/etc/containers/registries.conf"), "{e}");
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
