//! Public keys of `sigstoreSigned` requirements: PEM `PUBLIC KEY` blocks (PKIX), ECDSA on
//! P-256 — what `cosign generate-key-pair` and `skopeo generate-sigstore-key` write — and the
//! one check made with them: an ASN.1 ECDSA signature over the SHA-256 of the payload
//! (docs/image-signatures.md §3). Pure.

use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;

/// An ECDSA P-256 public key, with where it came from (for messages).
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// `keyPath /etc/pki/cosign.pub`, `keyData`, …
    pub source: String,
    /// The uncompressed point (65 bytes).
    point: Vec<u8>,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({})", self.source)
    }
}

/// Why a key file or `keyData` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("not PEM: {0}")]
    NotPem(String),
    #[error("holds no PUBLIC KEY block")]
    NoPublicKey,
    #[error("a PUBLIC KEY block is not a PKIX public key: {0}")]
    BadKey(String),
    /// RSA, Ed25519 or another curve: containers/image accepts them, olm-rs does not yet.
    #[error("holds a {0} key; olm-rs verifies ECDSA P-256 keys only")]
    Unsupported(String),
}

impl PublicKey {
    /// Every `PUBLIC KEY` block of `pem` (a file may hold several); at least one.
    pub fn parse_pem(source: &str, pem: &[u8]) -> Result<Vec<PublicKey>, KeyError> {
        let blocks = pem::parse_many(pem).map_err(|e| KeyError::NotPem(e.to_string()))?;
        let keys = blocks
            .iter()
            .filter(|b| b.tag() == "PUBLIC KEY")
            .map(|b| PublicKey::from_spki(source, b.contents()))
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(KeyError::NoPublicKey);
        }
        Ok(keys)
    }

    fn from_spki(source: &str, der: &[u8]) -> Result<PublicKey, KeyError> {
        let (_, spki) =
            SubjectPublicKeyInfo::from_der(der).map_err(|e| KeyError::BadKey(e.to_string()))?;
        let alg = &spki.algorithm;
        if alg.algorithm != OID_KEY_TYPE_EC_PUBLIC_KEY {
            return Err(KeyError::Unsupported(format!(
                "non-ECDSA ({})",
                alg.algorithm.to_id_string()
            )));
        }
        let curve = alg
            .parameters
            .as_ref()
            .and_then(|p| x509_parser::der_parser::oid::Oid::try_from(p).ok());
        if curve.as_ref() != Some(&OID_EC_P256) {
            let named = curve.map_or("unnamed curve".to_string(), |c| c.to_id_string());
            return Err(KeyError::Unsupported(format!("ECDSA {named}")));
        }
        let point = spki.subject_public_key.data.to_vec();
        if point.len() != 65 || point[0] != 4 {
            return Err(KeyError::BadKey(
                "the P-256 point is not an uncompressed point".into(),
            ));
        }
        Ok(PublicKey {
            source: source.to_string(),
            point,
        })
    }

    /// Whether `signature` (ASN.1 DER) is this key's ECDSA-SHA256 signature of `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(payload, signature)
            .is_ok()
    }
}

#[cfg(test)]
pub(crate) mod test_keys {
    //! Keys made in the test: ring signs, the PKIX wrapping of a P-256 point is fixed.
    use base64::Engine as _;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

    /// The DER prefix of a P-256 SubjectPublicKeyInfo, before the 65-byte point.
    const SPKI_P256_PREFIX: [u8; 26] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08,
        0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ];

    pub struct TestKey(EcdsaKeyPair);

    impl TestKey {
        pub fn generate() -> TestKey {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
            TestKey(
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap(),
            )
        }

        pub fn public_pem(&self) -> String {
            let mut der = SPKI_P256_PREFIX.to_vec();
            der.extend_from_slice(self.0.public_key().as_ref());
            pem::encode(&pem::Pem::new("PUBLIC KEY", der))
        }

        /// The base64 of the signature, as the cosign annotation holds it.
        pub fn sign_b64(&self, payload: &[u8]) -> String {
            let sig = self.0.sign(&SystemRandom::new(), payload).unwrap();
            base64::engine::general_purpose::STANDARD.encode(sig.as_ref())
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::test_keys::TestKey;
    use super::*;

    #[test]
    fn a_p256_key_verifies_its_own_signatures_only() {
        let (k1, k2) = (TestKey::generate(), TestKey::generate());
        let keys = PublicKey::parse_pem("keyPath a.pub", k1.public_pem().as_bytes()).unwrap();
        assert_eq!(keys.len(), 1);
        let sig = base64::engine::general_purpose::STANDARD
            .decode(k1.sign_b64(b"payload"))
            .unwrap();
        assert!(keys[0].verifies(b"payload", &sig));
        assert!(!keys[0].verifies(b"payload2", &sig));
        let other = base64::engine::general_purpose::STANDARD
            .decode(k2.sign_b64(b"payload"))
            .unwrap();
        assert!(!keys[0].verifies(b"payload", &other));
        let both = format!("{}{}", k1.public_pem(), k2.public_pem());
        assert_eq!(PublicKey::parse_pem("x", both.as_bytes()).unwrap().len(), 2);
    }

    #[test]
    fn other_files_are_refused_with_the_reason() {
        assert_eq!(
            PublicKey::parse_pem(
                "x",
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
            ),
            Err(KeyError::NoPublicKey)
        );
        assert!(matches!(
            PublicKey::parse_pem(
                "x",
                b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
            ),
            Err(KeyError::BadKey(_))
        ));
        // An Ed25519 key (RFC 8410's example).
        let ed = b"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n-----END PUBLIC KEY-----\n";
        assert!(matches!(
            PublicKey::parse_pem("x", ed),
            Err(KeyError::Unsupported(_))
        ));
    }
}
