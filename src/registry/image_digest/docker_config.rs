//! Pull secrets (`.dockerconfigjson`) as credentials by registry host.

use std::collections::BTreeMap;

use base64::Engine as _;

use super::super::image_ref::DOCKER_HUB_DOMAIN;
use super::{RegistryCredential, RegistryCredentials};

/// Parses the `.dockerconfigjson` of a pull secret into credentials by host. Entries keyed by
/// URL (`https://index.docker.io/v1/`) are reduced to their host; Docker Hub's legacy names map
/// to `docker.io`. Unusable entries are skipped: a pull secret for another purpose must not
/// break digest checks.
pub fn parse_docker_config(json: &[u8]) -> RegistryCredentials {
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default)]
        auths: BTreeMap<String, Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        auth: Option<String>,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        password: Option<String>,
    }
    let Ok(config) = serde_json::from_slice::<Config>(json) else {
        return RegistryCredentials::new();
    };
    let mut out = RegistryCredentials::new();
    for (key, entry) in config.auths {
        let credential = match (entry.username, entry.password, entry.auth) {
            (Some(username), Some(password), _) if !username.is_empty() => {
                RegistryCredential { username, password }
            }
            (_, _, Some(auth)) => {
                let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(auth.trim())
                else {
                    continue;
                };
                let Ok(text) = String::from_utf8(decoded) else {
                    continue;
                };
                let Some((username, password)) = text.split_once(':') else {
                    continue;
                };
                RegistryCredential {
                    username: username.to_owned(),
                    password: password.to_owned(),
                }
            }
            _ => continue,
        };
        out.insert(registry_host(&key), credential);
    }
    out
}

/// `https://index.docker.io/v1/` → `docker.io`; `quay.io/org` → `quay.io`.
fn registry_host(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = without_scheme.split('/').next().unwrap_or(without_scheme);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB_DOMAIN.to_owned()
        }
        other => other.to_owned(),
    }
}
