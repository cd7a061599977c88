//! The cert Secret `<deployment>-service-cert` (docs/certificates.md §3.2).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use sha2::{Digest, Sha256};

/// Secret type OLM writes.
pub const SECRET_TYPE_TLS: &str = "kubernetes.io/tls";
/// Serving certificate PEM.
pub const TLS_CRT_KEY: &str = "tls.crt";
/// Serving key PEM (SEC1 `EC PRIVATE KEY`).
pub const TLS_KEY_KEY: &str = "tls.key";
/// The **CA certificate** PEM, despite the name: OLM stores no CA key (docs/certificates.md §3.2).
pub const OLM_CA_KEY: &str = "olmCAKey";
/// Annotation on the Secret and on the pod template: SHA-256 hex of the CA PEM.
pub const OLM_CA_HASH_ANNOTATION: &str = "olmcahash";

/// A cert Secret as a controller's store holds it: its name, `olmcahash` annotation, owner kinds
/// and the three data members. Debug output never shows the key (see [`CertSecretData`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeenSecret {
    pub name: String,
    pub ca_hash_annotation: Option<String>,
    pub data: CertSecretData,
}

/// The three data members of a cert Secret, each as stored (bytes, not base64). `Debug`
/// shows certificates but never the key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CertSecretData {
    pub tls_crt: Option<Vec<u8>>,
    pub tls_key: Option<Vec<u8>>,
    pub olm_ca_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for CertSecretData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text =
            |v: &Option<Vec<u8>>| v.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        f.debug_struct("CertSecretData")
            .field("tls_crt", &text(&self.tls_crt))
            .field(
                "tls_key",
                &self
                    .tls_key
                    .as_ref()
                    .map(|k| format!("<{} bytes redacted>", k.len())),
            )
            .field("olm_ca_key", &text(&self.olm_ca_key))
            .finish()
    }
}

impl CertSecretData {
    /// Reads `tls.crt`, `tls.key` and `olmCAKey` from a Secret's `data`; other keys are ignored.
    pub fn from_secret_data(data: &BTreeMap<String, ByteString>) -> Self {
        let get = |key: &str| data.get(key).map(|b| b.0.clone());
        Self {
            tls_crt: get(TLS_CRT_KEY),
            tls_key: get(TLS_KEY_KEY),
            olm_ca_key: get(OLM_CA_KEY),
        }
    }

    /// The Secret `data` map holding the members that are present.
    pub fn to_secret_data(&self) -> BTreeMap<String, ByteString> {
        [
            (TLS_CRT_KEY, &self.tls_crt),
            (TLS_KEY_KEY, &self.tls_key),
            (OLM_CA_KEY, &self.olm_ca_key),
        ]
        .into_iter()
        .filter_map(|(key, value)| {
            value
                .as_ref()
                .map(|v| (key.to_owned(), ByteString(v.clone())))
        })
        .collect()
    }
}

/// `olmcahash`: lowercase hex SHA-256 over the CA PEM bytes exactly as stored.
pub fn olm_ca_hash(ca_pem: &[u8]) -> String {
    Sha256::digest(ca_pem)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_hash_is_sha256_hex_of_the_exact_bytes() {
        // SHA-256("abc"), FIPS 180-2 test vector.
        assert_eq!(
            olm_ca_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(olm_ca_hash(b"abc\n"), olm_ca_hash(b"abc"));
        assert_eq!(olm_ca_hash(b"").len(), 64);
    }

    #[test]
    fn secret_data_round_trip() {
        let data = CertSecretData {
            tls_crt: Some(b"crt".to_vec()),
            tls_key: None,
            olm_ca_key: Some(b"ca".to_vec()),
        };
        let mut map = data.to_secret_data();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["olmCAKey", "tls.crt"]);
        map.insert("other".to_owned(), ByteString(b"x".to_vec()));
        assert_eq!(CertSecretData::from_secret_data(&map), data);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let data = CertSecretData {
            tls_crt: Some(b"CERT".to_vec()),
            tls_key: Some(b"-----BEGIN EC PRIVATE KEY-----SECRET".to_vec()),
            olm_ca_key: None,
        };
        let shown = format!("{data:?}");
        assert!(
            !shown.contains("SECRET") && !shown.contains("PRIVATE"),
            "{shown}"
        );
        assert!(
            shown.contains("CERT") && shown.contains("redacted"),
            "{shown}"
        );
    }
}
