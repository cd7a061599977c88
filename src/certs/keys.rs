//! Private key encodings. rcgen and ring speak PKCS#8; OLM stores `tls.key` as SEC1
//! (`EC PRIVATE KEY`, Go's `x509.MarshalECPrivateKey`, docs/certificates.md §2), whose curve parameters
//! Go requires when it loads the key, so conversion goes both ways here.

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
use yasna::Tag;
use yasna::models::ObjectIdentifier;

use super::CertError;

/// id-ecPublicKey
const EC_PUBLIC_KEY_OID: &[u64] = &[1, 2, 840, 10045, 2, 1];
/// prime256v1 / secp256r1
const P256_OID: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];

pub(crate) const SEC1_PEM_TAG: &str = "EC PRIVATE KEY";
pub(crate) const PKCS8_PEM_TAG: &str = "PRIVATE KEY";

fn parse_error(what: &'static str, detail: impl ToString) -> CertError {
    CertError::Parse {
        what,
        detail: detail.to_string(),
    }
}

/// SEC1 DER of a P-256 key pair made by rcgen: version 1, the private scalar, the named curve
/// and the public point, like Go writes it.
pub(crate) fn sec1_der(key: &KeyPair) -> Result<Vec<u8>, CertError> {
    let pkcs8 = key.serialize_der();
    let inner = yasna::parse_der(&pkcs8, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            r.next().read_der()?; // algorithm identifier
            let inner = r.next().read_bytes()?;
            r.read_optional(|r| r.read_der())?; // [0] attributes
            r.read_optional(|r| r.read_der())?; // [1] public key (PKCS#8 v2)
            Ok(inner)
        })
    })
    .map_err(|e| parse_error("PKCS#8 key from rcgen", e))?;
    let private = yasna::parse_der(&inner, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            let private = r.next().read_bytes()?;
            r.read_optional(|r| r.read_der())?;
            r.read_optional(|r| r.read_der())?;
            Ok(private)
        })
    })
    .map_err(|e| parse_error("EC private key from rcgen", e))?;
    let public = key.public_key_raw();
    Ok(yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_u8(1);
            w.next().write_bytes(&private);
            w.next().write_tagged(Tag::context(0), |w| {
                w.write_oid(&ObjectIdentifier::from_slice(P256_OID))
            });
            w.next().write_tagged(Tag::context(1), |w| {
                w.write_bitvec_bytes(public, public.len() * 8)
            });
        })
    }))
}

/// PKCS#8 wrapping of a SEC1 P-256 key, so ring can load it.
fn sec1_to_pkcs8(sec1: &[u8]) -> Result<Vec<u8>, CertError> {
    let curve = yasna::parse_der(sec1, |r| {
        r.read_sequence(|r| {
            let version = r.next().read_u8()?;
            if version != 1 {
                return Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid));
            }
            r.next().read_bytes()?;
            let curve = r.read_optional(|r| r.read_tagged(Tag::context(0), |r| r.read_oid()))?;
            r.read_optional(|r| r.read_der())?;
            Ok(curve)
        })
    })
    .map_err(|e| parse_error("EC private key", e))?;
    if let Some(curve) = curve
        && curve.components().as_slice() != P256_OID
    {
        return Err(parse_error(
            "EC private key",
            format!("curve {curve} is not P-256"),
        ));
    }
    Ok(yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_u8(0);
            w.next().write_sequence(|w| {
                w.next()
                    .write_oid(&ObjectIdentifier::from_slice(EC_PUBLIC_KEY_OID));
                w.next().write_oid(&ObjectIdentifier::from_slice(P256_OID));
            });
            w.next().write_bytes(sec1);
        })
    }))
}

/// Loads a private key from PEM: SEC1 (`EC PRIVATE KEY`, P-256) or PKCS#8 (`PRIVATE KEY`).
pub(crate) fn key_from_pem(pem_bytes: &[u8]) -> Result<KeyPair, CertError> {
    let block = pem::parse(pem_bytes).map_err(|e| parse_error("private key PEM", e))?;
    match block.tag() {
        SEC1_PEM_TAG => {
            let pkcs8 = sec1_to_pkcs8(block.contents())?;
            KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8.as_slice().into(), &PKCS_ECDSA_P256_SHA256)
                .map_err(|e| parse_error("EC private key", e))
        }
        PKCS8_PEM_TAG => {
            KeyPair::try_from(block.contents()).map_err(|e| parse_error("PKCS#8 private key", e))
        }
        other => Err(parse_error(
            "private key PEM",
            format!("unexpected block {other:?}"),
        )),
    }
}

/// PEM text with LF line endings and 64-character lines, as Go's `pem.Encode` writes.
pub(crate) fn pem_text(tag: &str, der: Vec<u8>) -> String {
    pem::encode_config(
        &pem::Pem::new(tag, der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sec1_round_trip_keeps_the_key() {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("key");
        let pem = pem_text(SEC1_PEM_TAG, sec1_der(&key).expect("sec1"));
        assert!(pem.starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
        let loaded = key_from_pem(pem.as_bytes()).expect("loads");
        assert_eq!(loaded.public_key_raw(), key.public_key_raw());
    }

    #[test]
    fn sec1_carries_the_named_curve_like_go() {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("key");
        let der = sec1_der(&key).expect("sec1");
        let (curve, public_len) = yasna::parse_der(&der, |r| {
            r.read_sequence(|r| {
                assert_eq!(r.next().read_u8()?, 1);
                assert_eq!(r.next().read_bytes()?.len(), 32);
                let curve = r.next().read_tagged(Tag::context(0), |r| r.read_oid())?;
                let (public, bits) = r
                    .next()
                    .read_tagged(Tag::context(1), |r| r.read_bitvec_bytes())?;
                assert_eq!(bits, public.len() * 8);
                Ok((curve, public.len()))
            })
        })
        .expect("valid SEC1");
        assert_eq!(curve.components().as_slice(), P256_OID);
        assert_eq!(public_len, 65);
    }

    #[test]
    fn pkcs8_pem_is_accepted_too() {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("key");
        let loaded = key_from_pem(key.serialize_pem().as_bytes()).expect("loads");
        assert_eq!(loaded.public_key_raw(), key.public_key_raw());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(key_from_pem(b"not pem").is_err());
        let wrong = pem_text(SEC1_PEM_TAG, vec![0x30, 0x03, 0x02, 0x01, 0x07]);
        assert!(key_from_pem(wrong.as_bytes()).is_err());
        let cert_block = pem_text("CERTIFICATE", vec![1, 2, 3]);
        assert!(key_from_pem(cert_block.as_bytes()).is_err());
    }
}
