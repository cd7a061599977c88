//! Issuing the CA and serving certificates (docs/certificates.md §2).
//!
//! Impurity: key generation (ring's system RNG, inside rcgen) and serial numbers (`rand`) are
//! the only non-deterministic inputs; they stay inside these functions. Time comes in as `now`.

use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};

use super::keys::{SEC1_PEM_TAG, key_from_pem, pem_text, sec1_der};
use super::{CA_VALIDITY, CertError, ServiceName};

/// Organisation written into every subject (docs/certificates.md §2).
pub const ORGANIZATION: &str = "Red Hat, Inc.";

/// A CA able to sign serving certificates. OLM discards the CA key after the install attempt;
/// the bundle lives as long as the caller keeps it.
pub struct CaBundle {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
    not_before: Timestamp,
    not_after: Timestamp,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl CaBundle {
    /// The CA certificate (`CERTIFICATE` PEM): the caBundle and the Secret's `olmCAKey`.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }
    pub fn not_before(&self) -> Timestamp {
        self.not_before
    }
    pub fn not_after(&self) -> Timestamp {
        self.not_after
    }
}

/// A serving certificate and its key, ready for the Secret's `tls.crt` / `tls.key`.
#[derive(Debug, Clone)]
pub struct ServingCert {
    /// `CERTIFICATE` PEM of the leaf only.
    pub cert_pem: String,
    /// `EC PRIVATE KEY` PEM (SEC1), the encoding OLM writes.
    pub key_pem: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

/// A fresh self-signed CA: P-256, CN `olm-selfsigned-<serial hex>`, O `Red Hat, Inc.`, valid
/// from `now` for 730 days, basicConstraints CA:TRUE, keyUsage certSign only.
pub fn issue_ca(now: Timestamp) -> Result<CaBundle, CertError> {
    let not_before = whole_second(now);
    let not_after = not_before
        .checked_add(CA_VALIDITY)
        .map_err(|_| CertError::TimeOutOfRange(not_before))?;
    let serial = random_serial();
    let mut params = CertificateParams::default();
    params.distinguished_name = subject(&format!("olm-selfsigned-{serial:x}"));
    params.serial_number = Some(serial_number(serial));
    params.not_before = to_offset(not_before)?;
    params.not_after = to_offset(not_after)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let key = generate_key("CA key")?;
    let cert = params
        .self_signed(&key)
        .map_err(|source| CertError::Generate {
            what: "CA certificate",
            source,
        })?;
    Ok(CaBundle {
        cert_pem: cert.pem(),
        issuer: Issuer::new(params, key),
        not_before,
        not_after,
    })
}

/// A serving certificate for `service`, signed by `ca`: fresh P-256 key, CN = first host name,
/// DNS names `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local` (OLM's three) plus
/// the bare `<svc>`, valid from `now` until the CA expires, basicConstraints CA:FALSE,
/// extKeyUsage serverAuth and keyUsage digitalSignature (OLM writes no keyUsage; an ECDSA TLS
/// server needs exactly this one, and clients that check key usage then accept it).
pub fn issue_serving_cert(
    ca: &CaBundle,
    service: &ServiceName,
    now: Timestamp,
) -> Result<ServingCert, CertError> {
    let not_before = whole_second(now);
    if not_before >= ca.not_after {
        return Err(CertError::CaExpired {
            not_after: ca.not_after,
            now,
        });
    }
    let hosts = service.dns_names();
    let mut params = CertificateParams::default();
    // CommonName = the first host name OLM uses, `<svc>.<ns>`.
    params.distinguished_name = subject(&format!("{}.{}", service.service(), service.namespace()));
    params.serial_number = Some(serial_number(random_serial()));
    params.not_before = to_offset(not_before)?;
    params.not_after = to_offset(ca.not_after)?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.subject_alt_names = hosts
        .iter()
        .map(|host| {
            host.clone()
                .try_into()
                .map(SanType::DnsName)
                .map_err(|source| CertError::BadHostName {
                    host: host.clone(),
                    source,
                })
        })
        .collect::<Result<_, _>>()?;
    let key = generate_key("serving key")?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(|source| CertError::Generate {
            what: "serving certificate",
            source,
        })?;
    Ok(ServingCert {
        cert_pem: cert.pem(),
        key_pem: pem_text(SEC1_PEM_TAG, sec1_der(&key)?),
        not_before,
        not_after: ca.not_after,
    })
}

/// A CA from its certificate and key PEM (SEC1 or PKCS#8), e.g. one kept by the caller.
pub fn parse_ca(cert_pem: &str, key_pem: &str) -> Result<CaBundle, CertError> {
    let key = key_from_pem(key_pem.as_bytes())?;
    let block = pem::parse(cert_pem).map_err(|e| CertError::Parse {
        what: "CA certificate PEM",
        detail: e.to_string(),
    })?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(block.contents()).map_err(|e| CertError::Parse {
            what: "CA certificate",
            detail: e.to_string(),
        })?;
    if x509.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(CertError::Parse {
            what: "CA key",
            detail: "the key does not belong to the certificate".to_owned(),
        });
    }
    let validity = x509.validity();
    let not_before = from_asn1(validity.not_before.timestamp(), "CA notBefore")?;
    let not_after = from_asn1(validity.not_after.timestamp(), "CA notAfter")?;
    let issuer =
        Issuer::from_ca_cert_der(&block.contents().to_vec().into(), key).map_err(|source| {
            CertError::Generate {
                what: "CA issuer",
                source,
            }
        })?;
    Ok(CaBundle {
        cert_pem: cert_pem.to_owned(),
        issuer,
        not_before,
        not_after,
    })
}

fn subject(common_name: &str) -> DistinguishedName {
    // Go writes O before CN (pkix.Name.ToRDNSequence order).
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, ORGANIZATION);
    name.push(DnType::CommonName, common_name);
    name
}

fn generate_key(what: &'static str) -> Result<KeyPair, CertError> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .map_err(|source| CertError::Generate { what, source })
}

/// Random serial in [1, 2^63 − 1): OLM draws from [0, 2^63 − 1); zero is skipped because
/// RFC 5280 wants positive serials.
fn random_serial() -> u64 {
    rand::random_range(1..i64::MAX as u64)
}

fn serial_number(serial: u64) -> SerialNumber {
    let bytes = serial.to_be_bytes();
    let first = bytes
        .iter()
        .position(|b| *b != 0)
        .unwrap_or(bytes.len() - 1);
    SerialNumber::from_slice(&bytes[first..])
}

/// X.509 times have whole seconds; dropping the fraction keeps notBefore ≤ now.
fn whole_second(ts: Timestamp) -> Timestamp {
    Timestamp::from_second(ts.as_second()).unwrap_or(ts)
}

fn to_offset(ts: Timestamp) -> Result<time::OffsetDateTime, CertError> {
    time::OffsetDateTime::from_unix_timestamp(ts.as_second())
        .map_err(|_| CertError::TimeOutOfRange(ts))
}

pub(crate) fn from_asn1(seconds: i64, what: &'static str) -> Result<Timestamp, CertError> {
    Timestamp::from_second(seconds).map_err(|e| CertError::Parse {
        what,
        detail: e.to_string(),
    })
}
