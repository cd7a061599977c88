//! Registry logins from pull secrets (`kubernetes.io/dockerconfigjson`,
//! `kubernetes.io/dockercfg`) and auth files (`$REGISTRY_AUTH_FILE`, `~/.docker/config.json`).
//! Each login remembers where it came from (`namespace/name`, or the file) so messages can say
//! which were tried; their content is never shown. Pure apart from reading an auth file.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use serde::Deserialize;

use super::reference::ImageName;

pub const SECRET_TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
pub const SECRET_TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "pull secret {source_name}: type {type_:?} holds no registry credentials (want {SECRET_TYPE_DOCKER_CONFIG_JSON} or {SECRET_TYPE_DOCKERCFG})"
    )]
    UnsupportedType { source_name: String, type_: String },
    #[error("pull secret {source_name}: data key {key} is missing")]
    MissingKey { source_name: String, key: String },
    #[error("{source_name}: not a docker config file: {reason}")]
    Invalid { source_name: String, reason: String },
    #[error("{source_name}: the entry for {registry} has no usable login ({reason})")]
    BadEntry {
        source_name: String,
        registry: String,
        reason: String,
    },
    #[error("{source_name}: {reason}")]
    Read { source_name: String, reason: String },
}

/// What a login gives the registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Basic {
        username: String,
        password: String,
    },
    /// Docker's `registrytoken`: a bearer token used as it is.
    Bearer(String),
}

/// One login that applies to an image, and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryLogin {
    /// `namespace/name` of the pull secret, or the auth file's path.
    pub source: String,
    /// The key it was found under (`quay.io`, `quay.io/org`).
    pub registry_key: String,
    pub secret: Secret,
}

impl std::fmt::Debug for RegistryLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryLogin")
            .field("source", &self.source)
            .field("registry_key", &self.registry_key)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Registry logins from pull secrets and auth files, in the order they were added.
#[derive(Clone, Default, Debug)]
pub struct Credentials {
    logins: Vec<RegistryLogin>,
    /// Every source added, even one with no entry for the image being pulled.
    sources: Vec<String>,
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerEntry>,
}

#[derive(Deserialize, Default)]
struct DockerEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

impl Credentials {
    /// No login: only anonymous pulls.
    pub fn anonymous() -> Credentials {
        Credentials::default()
    }

    /// Adds the logins of a pull secret (`data` as in the Secret, already base64-decoded).
    pub fn add_secret(
        &mut self,
        namespace: &str,
        name: &str,
        type_: &str,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), CredentialsError> {
        let source_name = format!("{namespace}/{name}");
        let (key, wrapped) = match type_ {
            SECRET_TYPE_DOCKER_CONFIG_JSON => (".dockerconfigjson", true),
            SECRET_TYPE_DOCKERCFG => (".dockercfg", false),
            other => {
                return Err(CredentialsError::UnsupportedType {
                    source_name,
                    type_: other.to_string(),
                });
            }
        };
        let bytes = data.get(key).ok_or_else(|| CredentialsError::MissingKey {
            source_name: source_name.clone(),
            key: key.to_string(),
        })?;
        self.add_json(&source_name, bytes, wrapped)
    }

    /// Reads an auth file (`auth.json` of podman/skopeo, or docker's `config.json`).
    pub fn from_auth_file(path: &Path) -> Result<Credentials, CredentialsError> {
        let mut out = Credentials::default();
        out.add_auth_file(path)?;
        Ok(out)
    }

    /// Adds the logins of an auth file.
    pub fn add_auth_file(&mut self, path: &Path) -> Result<(), CredentialsError> {
        let source_name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| CredentialsError::Read {
            source_name: source_name.clone(),
            reason: e.to_string(),
        })?;
        self.add_json(&source_name, &bytes, true)
    }

    fn add_json(
        &mut self,
        source_name: &str,
        bytes: &[u8],
        wrapped: bool,
    ) -> Result<(), CredentialsError> {
        // serde_json's messages quote no input, only line and column: safe to show.
        let invalid = |e: serde_json::Error| CredentialsError::Invalid {
            source_name: source_name.to_string(),
            reason: e.to_string(),
        };
        let auths = if wrapped {
            serde_json::from_slice::<DockerConfig>(bytes)
                .map_err(invalid)?
                .auths
        } else {
            serde_json::from_slice::<BTreeMap<String, DockerEntry>>(bytes).map_err(invalid)?
        };
        let mut logins = Vec::new();
        for (raw_key, entry) in auths {
            let registry_key = normalise_key(&raw_key);
            let bad = |reason: &str| CredentialsError::BadEntry {
                source_name: source_name.to_string(),
                registry: raw_key.clone(),
                reason: reason.to_string(),
            };
            let secret = match entry {
                DockerEntry {
                    username: Some(username),
                    password: Some(password),
                    ..
                } if !username.is_empty() => Secret::Basic { username, password },
                DockerEntry {
                    auth: Some(auth), ..
                } if !auth.trim().is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|_| bad("auth is not base64"))?;
                    let text = String::from_utf8(decoded).map_err(|_| bad("auth is not text"))?;
                    let (username, password) = text
                        .split_once(':')
                        .ok_or_else(|| bad("auth is not user:password"))?;
                    Secret::Basic {
                        username: username.to_string(),
                        password: password.to_string(),
                    }
                }
                DockerEntry {
                    registrytoken: Some(token),
                    ..
                } if !token.is_empty() => Secret::Bearer(token),
                // An entry kept only for a credential helper (`{}`), or an identity token
                // olm-rs cannot exchange: nothing to try.
                _ => continue,
            };
            logins.push(RegistryLogin {
                source: source_name.to_string(),
                registry_key,
                secret,
            });
        }
        self.logins.extend(logins);
        self.sources.push(source_name.to_string());
        Ok(())
    }

    /// Adds every login of `other` after these.
    pub fn extend(&mut self, other: &Credentials) {
        self.logins.extend(other.logins.iter().cloned());
        self.sources.extend(other.sources.iter().cloned());
    }

    /// The sources added (`namespace/name` or file paths), in order.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    pub fn is_empty(&self) -> bool {
        self.logins.is_empty()
    }

    /// The logins that apply to `image`, in order: per source, the most specific key
    /// (`quay.io/org/repo` before `quay.io/org` before `quay.io`) as podman picks them.
    pub fn logins_for(&self, image: &ImageName) -> Vec<&RegistryLogin> {
        let name = image.name();
        let mut out: Vec<(usize, usize, &RegistryLogin)> = Vec::new();
        for (i, login) in self.logins.iter().enumerate() {
            if key_matches(&login.registry_key, &name) {
                let source_rank = self
                    .sources
                    .iter()
                    .position(|s| *s == login.source)
                    .unwrap_or(usize::MAX);
                out.push((
                    source_rank,
                    usize::MAX - login.registry_key.len(),
                    &self.logins[i],
                ));
            }
        }
        out.sort_by_key(|(source, specificity, _)| (*source, *specificity));
        let mut seen: Vec<&str> = Vec::new();
        out.into_iter()
            .filter(|(_, _, l)| {
                // One login per source: its most specific entry.
                if seen.contains(&l.source.as_str()) {
                    false
                } else {
                    seen.push(&l.source);
                    true
                }
            })
            .map(|(_, _, l)| l)
            .collect()
    }
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://reg:5000/` → `reg:5000`; namespaced
/// keys (`quay.io/org`) keep their path.
fn normalise_key(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let trimmed = without_scheme.trim_end_matches('/');
    let (host, path) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    let host = match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => "docker.io",
        other => other,
    };
    // Docker Hub's legacy key carries an API version (`/v1/`), not a namespace.
    if path.is_empty() || path == "v1" || path == "v2" {
        host.to_string()
    } else {
        format!("{host}/{path}")
    }
}

fn key_matches(key: &str, name: &str) -> bool {
    match name.strip_prefix(key) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(json: &str) -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([(".dockerconfigjson".to_string(), json.as_bytes().to_vec())])
    }

    fn users(c: &Credentials, image: &str) -> Vec<String> {
        c.logins_for(&ImageName::parse(image).unwrap())
            .into_iter()
            .map(|l| match &l.secret {
                Secret::Basic { username, .. } => format!("{}:{username}", l.source),
                Secret::Bearer(_) => format!("{}:bearer", l.source),
            })
            .collect()
    }

    #[test]
    fn secrets_give_logins_by_most_specific_key_in_source_order() {
        let mut c = Credentials::anonymous();
        let first = format!(
            r#"{{"auths":{{"quay.io":{{"auth":"{}"}},"quay.io/org":{{"username":"org","password":"p"}},"https://index.docker.io/v1/":{{"auth":"{}"}}}}}}"#,
            b64("any:x"),
            b64("hub:y")
        );
        c.add_secret(
            "olm",
            "first",
            SECRET_TYPE_DOCKER_CONFIG_JSON,
            &secret(&first),
        )
        .unwrap();
        let cfg = BTreeMap::from([(
            ".dockercfg".to_string(),
            format!(r#"{{"quay.io":{{"auth":"{}"}}}}"#, b64("legacy:z")).into_bytes(),
        )]);
        c.add_secret("ns", "old", SECRET_TYPE_DOCKERCFG, &cfg)
            .unwrap();
        assert_eq!(
            users(&c, "quay.io/org/bundle:v1"),
            vec!["olm/first:org", "ns/old:legacy"]
        );
        assert_eq!(
            users(&c, "quay.io/other/bundle:v1"),
            vec!["olm/first:any", "ns/old:legacy"]
        );
        assert_eq!(users(&c, "busybox"), vec!["olm/first:hub"]);
        assert!(users(&c, "ghcr.io/x/y:v1").is_empty());
        assert_eq!(c.sources(), ["olm/first", "ns/old"]);
    }

    #[test]
    fn errors_name_the_secret_never_its_content() {
        let mut c = Credentials::anonymous();
        let e = c
            .add_secret("ns", "tls", "kubernetes.io/tls", &BTreeMap::new())
            .unwrap_err();
        assert!(e.to_string().contains("ns/tls"), "{e}");
        let e = c
            .add_secret("ns", "s", SECRET_TYPE_DOCKER_CONFIG_JSON, &BTreeMap::new())
            .unwrap_err();
        assert!(e.to_string().contains(".dockerconfigjson"), "{e}");
        let e = c
            .add_secret(
                "ns",
                "s",
                SECRET_TYPE_DOCKER_CONFIG_JSON,
                &secret(r#"{"auths":{"quay.io":{"auth":"c2VjcmV0LXBhc3N3b3Jk"}}}"#),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("ns/s") && e.contains("quay.io"), "{e}");
        assert!(
            !e.contains("secret-password") && !e.contains("c2VjcmV0"),
            "{e}"
        );
        let e = c
            .add_secret(
                "ns",
                "s",
                SECRET_TYPE_DOCKER_CONFIG_JSON,
                &secret("{hunter2"),
            )
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let mut c = Credentials::anonymous();
        c.add_secret(
            "ns",
            "s",
            SECRET_TYPE_DOCKER_CONFIG_JSON,
            &secret(r#"{"auths":{"r.io":{"username":"u","password":"hunter2"}}}"#),
        )
        .unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn auth_files_are_read_like_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        std::fs::write(
            &file,
            format!(
                r#"{{"auths":{{"localhost:5000":{{"auth":"{}"}}}},"credHelpers":{{}}}}"#,
                b64("u:p")
            ),
        )
        .unwrap();
        let c = Credentials::from_auth_file(&file).unwrap();
        assert_eq!(
            users(&c, "localhost:5000/x:v1"),
            vec![format!("{}:u", file.display())]
        );
        let e = Credentials::from_auth_file(&dir.path().join("missing.json")).unwrap_err();
        assert!(e.to_string().contains("missing.json"), "{e}");
    }
}
