//! containers-policy.json, read as containers/image reads it for the `docker` transport: the
//! global `default`, the `transports.docker` scopes and the requirement types
//! (docs/image-signatures.md §2–§4). Unknown fields and unknown types are errors, as there;
//! requirement types olm-rs does not verify (GPG `signedBy`, keyless `fulcio`, `pki`, Rekor
//! SETs, `signedBaseLayer`) load, and refuse every pull they govern. Pure: files named by
//! `keyPath` are read through the function given.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Map, Value};

use super::identity::{SignedIdentity, valid_remap_prefix};
use super::keys::PublicKey;
use super::reference::DockerRef;

/// One requirement of a scope; every requirement of the scope must accept the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    InsecureAcceptAnything,
    Reject,
    /// A sigstore signature by one of `keys`, for an identity `identity` accepts.
    SigstoreSigned {
        keys: Vec<PublicKey>,
        identity: SignedIdentity,
    },
    /// A requirement olm-rs cannot verify: it never accepts (fail closed).
    Unsupported {
        what: String,
    },
}

/// Where the requirements of an image came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `transports.docker."<scope>"`.
    Docker(String),
    /// `transports.docker.""`, the transport's default.
    DockerDefault,
    /// The global `default`.
    Default,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Docker(s) => write!(f, "transports.docker.{s:?}"),
            Scope::DockerDefault => f.write_str("transports.docker.\"\""),
            Scope::Default => f.write_str("default"),
        }
    }
}

/// A parsed policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub file: PathBuf,
    default: Vec<Requirement>,
    docker: BTreeMap<String, Vec<Requirement>>,
}

/// A policy file that cannot be used: the file, the field (`transports.docker."quay.io"[0].keyPath`)
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("image policy {}: {field}: {reason}", file.display())]
pub struct PolicyError {
    pub file: PathBuf,
    pub field: String,
    pub reason: String,
}

/// Reads a file a policy names (`keyPath`).
pub type ReadFile<'a> = &'a dyn Fn(&Path) -> std::io::Result<Vec<u8>>;

impl Policy {
    /// Parses the text of `file`; `read` opens the key files it names.
    pub fn parse(file: &Path, text: &str, read: ReadFile<'_>) -> Result<Policy, PolicyError> {
        let p = Parser { file, read };
        let value: Value = serde_json::from_str(text).map_err(|e| p.err("(file)", e))?;
        let top = p.object(&value, "(top level)")?;
        p.only(top, "(top level)", &["default", "transports"])?;
        let default = match top.get("default") {
            Some(v) => p.requirements(v, "default")?,
            None => return Err(p.err("default", "is missing (every policy needs one)")),
        };
        let mut docker = BTreeMap::new();
        if let Some(t) = top.get("transports") {
            for (transport, scopes) in p.object(t, "transports")? {
                let field = format!("transports.{transport}");
                let scopes = p.object(scopes, &field)?;
                // Only the docker transport is pulled from; the others are still checked.
                for (scope, reqs) in scopes {
                    let reqs = p.requirements(reqs, &format!("{field}.{scope:?}"))?;
                    if transport == "docker" {
                        docker.insert(scope.clone(), reqs);
                    }
                }
            }
        }
        Ok(Policy {
            file: file.to_path_buf(),
            default,
            docker,
        })
    }

    /// The requirements for `image` and the scope they come from: the identity, then each
    /// namespace (most specific first), then `transports.docker.""`, then `default`.
    pub fn requirements_for(&self, image: &DockerRef) -> (Scope, &[Requirement]) {
        for scope in image.scopes() {
            if let Some(reqs) = self.docker.get(&scope) {
                return (Scope::Docker(scope), reqs);
            }
        }
        match self.docker.get("") {
            Some(reqs) => (Scope::DockerDefault, reqs),
            None => (Scope::Default, &self.default),
        }
    }
}

struct Parser<'a> {
    file: &'a Path,
    read: ReadFile<'a>,
}

impl Parser<'_> {
    fn err(&self, field: &str, reason: impl fmt::Display) -> PolicyError {
        PolicyError {
            file: self.file.to_path_buf(),
            field: field.to_string(),
            reason: reason.to_string(),
        }
    }

    fn object<'v>(&self, v: &'v Value, field: &str) -> Result<&'v Map<String, Value>, PolicyError> {
        v.as_object()
            .ok_or_else(|| self.err(field, "is not a JSON object"))
    }

    fn string<'v>(
        &self,
        o: &'v Map<String, Value>,
        field: &str,
        key: &str,
    ) -> Result<Option<&'v str>, PolicyError> {
        match o.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.err(&format!("{field}.{key}"), "is not a string")),
        }
    }

    fn only(
        &self,
        o: &Map<String, Value>,
        field: &str,
        allowed: &[&str],
    ) -> Result<(), PolicyError> {
        match o.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(self.err(&format!("{field}.{k}"), "is not a known field here")),
            None => Ok(()),
        }
    }

    fn requirements(&self, v: &Value, field: &str) -> Result<Vec<Requirement>, PolicyError> {
        let list = v
            .as_array()
            .ok_or_else(|| self.err(field, "is not a list of requirements"))?;
        if list.is_empty() {
            return Err(self.err(
                field,
                "is an empty list (say insecureAcceptAnything or reject)",
            ));
        }
        list.iter()
            .enumerate()
            .map(|(i, r)| self.requirement(r, &format!("{field}[{i}]")))
            .collect()
    }

    fn requirement(&self, v: &Value, field: &str) -> Result<Requirement, PolicyError> {
        let o = self.object(v, field)?;
        let Some(ty) = self.string(o, field, "type")? else {
            return Err(self.err(&format!("{field}.type"), "is missing"));
        };
        let unsupported = |what: &str| Requirement::Unsupported { what: what.into() };
        match ty {
            "insecureAcceptAnything" => {
                self.only(o, field, &["type"])?;
                Ok(Requirement::InsecureAcceptAnything)
            }
            "reject" => {
                self.only(o, field, &["type"])?;
                Ok(Requirement::Reject)
            }
            "signedBy" => Ok(unsupported("signedBy (GPG simple signing)")),
            "signedBaseLayer" => Ok(unsupported("signedBaseLayer")),
            "sigstoreSigned" => self.sigstore_signed(o, field),
            other => Err(self.err(
                &format!("{field}.type"),
                format!("unknown requirement type {other:?}"),
            )),
        }
    }

    fn sigstore_signed(
        &self,
        o: &Map<String, Value>,
        field: &str,
    ) -> Result<Requirement, PolicyError> {
        const KEY_SOURCES: [&str; 6] = [
            "keyPath", "keyPaths", "keyData", "keyDatas", "fulcio", "pki",
        ];
        const REKOR: [&str; 4] = [
            "rekorPublicKeyPath",
            "rekorPublicKeyPaths",
            "rekorPublicKeyData",
            "rekorPublicKeyDatas",
        ];
        let mut allowed = vec!["type", "signedIdentity"];
        allowed.extend(KEY_SOURCES);
        allowed.extend(REKOR);
        self.only(o, field, &allowed)?;
        let given: Vec<&str> = KEY_SOURCES
            .into_iter()
            .filter(|k| o.contains_key(*k))
            .collect();
        if given.len() != 1 {
            return Err(self.err(
                field,
                format!(
                    "exactly one of {} must be given (found {})",
                    KEY_SOURCES.join(", "),
                    if given.is_empty() {
                        "none".to_string()
                    } else {
                        given.join(", ")
                    }
                ),
            ));
        }
        let identity = match o.get("signedIdentity") {
            Some(v) => self.signed_identity(v, &format!("{field}.signedIdentity"))?,
            None => SignedIdentity::default(),
        };
        let source = given[0];
        if source == "fulcio" || source == "pki" {
            return Ok(Requirement::Unsupported {
                what: format!("sigstoreSigned with {source} (certificate-based, keyless signing)"),
            });
        }
        if let Some(r) = REKOR.into_iter().find(|k| o.contains_key(*k)) {
            return Ok(Requirement::Unsupported {
                what: format!("sigstoreSigned with {r} (Rekor transparency-log checks)"),
            });
        }
        let at = format!("{field}.{source}");
        let keys = match source {
            "keyPath" => {
                let path = self.string(o, field, source)?.unwrap_or_default();
                self.key_file(path, &at)?
            }
            "keyPaths" => {
                let mut keys = Vec::new();
                for (i, p) in self.list(o, source, &at)?.iter().enumerate() {
                    let path = p
                        .as_str()
                        .ok_or_else(|| self.err(&format!("{at}[{i}]"), "is not a string"))?;
                    keys.extend(self.key_file(path, &format!("{at}[{i}]"))?);
                }
                keys
            }
            "keyData" => {
                let data = self.string(o, field, source)?.unwrap_or_default();
                self.key_data(data, &at)?
            }
            _ => {
                let mut keys = Vec::new();
                for (i, d) in self.list(o, source, &at)?.iter().enumerate() {
                    let data = d
                        .as_str()
                        .ok_or_else(|| self.err(&format!("{at}[{i}]"), "is not a string"))?;
                    keys.extend(self.key_data(data, &format!("{at}[{i}]"))?);
                }
                keys
            }
        };
        Ok(Requirement::SigstoreSigned { keys, identity })
    }

    fn list<'v>(
        &self,
        o: &'v Map<String, Value>,
        key: &str,
        at: &str,
    ) -> Result<&'v Vec<Value>, PolicyError> {
        match o.get(key).and_then(Value::as_array) {
            Some(l) if !l.is_empty() => Ok(l),
            Some(_) => Err(self.err(at, "is an empty list")),
            None => Err(self.err(at, "is not a list")),
        }
    }

    fn key_file(&self, path: &str, at: &str) -> Result<Vec<PublicKey>, PolicyError> {
        if path.is_empty() {
            return Err(self.err(at, "is empty"));
        }
        let pem = (self.read)(Path::new(path))
            .map_err(|e| self.err(at, format!("key file {path}: {e}")))?;
        PublicKey::parse_pem(&format!("keyPath {path}"), &pem)
            .map_err(|e| self.err(at, format!("key file {path}: {e}")))
    }

    /// `keyData` is the PEM file's bytes in base64 (a Go `[]byte` in JSON).
    fn key_data(&self, data: &str, at: &str) -> Result<Vec<PublicKey>, PolicyError> {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| self.err(at, format!("is not base64: {e}")))?;
        PublicKey::parse_pem("keyData", &pem).map_err(|e| self.err(at, e))
    }

    fn signed_identity(&self, v: &Value, field: &str) -> Result<SignedIdentity, PolicyError> {
        let o = self.object(v, field)?;
        let Some(ty) = self.string(o, field, "type")? else {
            return Err(self.err(&format!("{field}.type"), "is missing"));
        };
        let reference = |key: &str| -> Result<DockerRef, PolicyError> {
            let at = format!("{field}.{key}");
            let text = self
                .string(o, field, key)?
                .ok_or_else(|| self.err(&at, "is missing"))?;
            DockerRef::parse(text).map_err(|e| self.err(&at, e))
        };
        let identity = match ty {
            "matchExact" => SignedIdentity::MatchExact,
            "matchRepoDigestOrExact" => SignedIdentity::MatchRepoDigestOrExact,
            "matchRepository" => SignedIdentity::MatchRepository,
            "exactReference" => {
                self.only(o, field, &["type", "dockerReference"])?;
                let r = reference("dockerReference")?;
                if r.is_name_only() {
                    return Err(self.err(
                        &format!("{field}.dockerReference"),
                        format!("{r} has neither a tag nor a digest"),
                    ));
                }
                return Ok(SignedIdentity::ExactReference(r));
            }
            "exactRepository" => {
                self.only(o, field, &["type", "dockerRepository"])?;
                return Ok(SignedIdentity::ExactRepository(reference(
                    "dockerRepository",
                )?));
            }
            "remapIdentity" => {
                self.only(o, field, &["type", "prefix", "signedPrefix"])?;
                let mut prefixes = Vec::new();
                for key in ["prefix", "signedPrefix"] {
                    let at = format!("{field}.{key}");
                    let p = self
                        .string(o, field, key)?
                        .ok_or_else(|| self.err(&at, "is missing"))?;
                    if !valid_remap_prefix(p) {
                        return Err(self.err(&at, format!("{p:?} is not a host or a host/path")));
                    }
                    prefixes.push(p.to_string());
                }
                let signed_prefix = prefixes.pop().unwrap_or_default();
                let prefix = prefixes.pop().unwrap_or_default();
                return Ok(SignedIdentity::RemapIdentity {
                    prefix,
                    signed_prefix,
                });
            }
            other => {
                return Err(self.err(
                    &format!("{field}.type"),
                    format!("unknown signedIdentity type {other:?}"),
                ));
            }
        };
        self.only(o, field, &["type"])?;
        Ok(identity)
    }
}
