//! "Does this Secret need new certificates?" (docs/certificates.md §6.1), with the reason in plain words.

use jiff::Timestamp;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::x509::X509Version;

use super::issue::from_asn1;
use super::keys::key_from_pem;
use super::secret::{OLM_CA_KEY, TLS_CRT_KEY, TLS_KEY_KEY};
use super::{CertSecretData, ROTATION_MARGIN};

/// The lifetimes read from a Secret that is still good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertValidity {
    /// When the serving certificate was issued (its notBefore): `status.certsLastUpdated`.
    pub issued_at: Timestamp,
    pub ca_not_after: Timestamp,
    pub serving_not_after: Timestamp,
    /// 24 h before the earlier expiry: `status.certsRotateAt`, derived from the certificates
    /// actually in the Secret (docs/certificates.md §10.1).
    pub rotate_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RotationVerdict {
    /// Keep the Secret as it is.
    Valid(CertValidity),
    /// Issue new certificates.
    Rotate(RotationReason),
}

/// Why a Secret's certificates must be replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RotationReason {
    #[error("the certificate Secret does not exist")]
    SecretMissing,
    #[error("the Secret has no {key} entry")]
    EntryMissing { key: &'static str },
    #[error("{key} does not hold a PEM certificate: {detail}")]
    NotACertificate { key: &'static str, detail: String },
    #[error("the CA certificate is not valid before {not_before}")]
    CaNotYetValid { not_before: Timestamp },
    #[error("the CA certificate expired at {not_after}")]
    CaExpired { not_after: Timestamp },
    #[error("the serving certificate is not valid before {not_before}")]
    ServingNotYetValid { not_before: Timestamp },
    #[error("the serving certificate expired at {not_after}")]
    ServingExpired { not_after: Timestamp },
    #[error("the certificates expire within 24 hours (rotation was due at {rotate_at})")]
    RotationDue { rotate_at: Timestamp },
    #[error("the certificate in olmCAKey cannot sign certificates: {detail}")]
    NotACa { detail: String },
    #[error("the serving certificate was not signed by the CA in olmCAKey: {detail}")]
    NotSignedByCa { detail: String },
    #[error("the serving certificate is not meant for TLS servers")]
    NotForServerAuth,
    #[error("the serving certificate does not cover the host name {host}")]
    HostNotCovered { host: String },
    #[error("tls.key cannot be used: {detail}")]
    UnusableKey { detail: String },
    #[error("tls.key does not belong to the certificate in tls.crt")]
    KeyDoesNotMatch,
}

/// Why the cert Secret of `service` must be (re-)issued at `now`, if it must
/// (docs/certificates.md §6.1; a missing Secret counts): the one rotation question, asked by a
/// CSV's sync for each cert deployment (`csv::certs::check::rotation_due`).
pub fn rotation_due(
    existing: Option<&CertSecretData>,
    service: &super::ServiceName,
    now: Timestamp,
) -> Option<RotationReason> {
    match existing {
        None => Some(RotationReason::SecretMissing),
        Some(data) => match needs_rotation(data, &service.checked_hosts(), now) {
            RotationVerdict::Valid(_) => None,
            RotationVerdict::Rotate(reason) => Some(reason),
        },
    }
}

/// Whether the certificates in `data` must be re-issued at `now`, checking what OLM checks —
/// both certificates present, parsable and inside their validity window, `now` not past
/// (notAfter − 24 h) for either, the serving certificate verifying against the CA for every
/// host in `hosts` — and, beyond OLM, that `tls.key` is present and belongs to `tls.crt`
/// (without it the operator cannot serve TLS at all).
pub fn needs_rotation(data: &CertSecretData, hosts: &[String], now: Timestamp) -> RotationVerdict {
    match check(data, hosts, now) {
        Ok(validity) => RotationVerdict::Valid(validity),
        Err(reason) => RotationVerdict::Rotate(reason),
    }
}

fn check(
    data: &CertSecretData,
    hosts: &[String],
    now: Timestamp,
) -> Result<CertValidity, RotationReason> {
    let ca_pem = present(&data.olm_ca_key, OLM_CA_KEY)?;
    let crt_pem = present(&data.tls_crt, TLS_CRT_KEY)?;
    let key_pem = present(&data.tls_key, TLS_KEY_KEY)?;
    let ca_der = certificate_der(ca_pem, OLM_CA_KEY)?;
    let crt_der = certificate_der(crt_pem, TLS_CRT_KEY)?;
    let ca = parse(&ca_der, OLM_CA_KEY)?;
    let crt = parse(&crt_der, TLS_CRT_KEY)?;

    let (ca_not_before, ca_not_after) = window(&ca, OLM_CA_KEY)?;
    let (crt_not_before, crt_not_after) = window(&crt, TLS_CRT_KEY)?;
    if now < ca_not_before {
        return Err(RotationReason::CaNotYetValid {
            not_before: ca_not_before,
        });
    }
    if now > ca_not_after {
        return Err(RotationReason::CaExpired {
            not_after: ca_not_after,
        });
    }
    if now < crt_not_before {
        return Err(RotationReason::ServingNotYetValid {
            not_before: crt_not_before,
        });
    }
    if now > crt_not_after {
        return Err(RotationReason::ServingExpired {
            not_after: crt_not_after,
        });
    }
    let rotate_at = ca_not_after.min(crt_not_after) - ROTATION_MARGIN;
    if now > rotate_at {
        return Err(RotationReason::RotationDue { rotate_at });
    }

    check_ca(&ca)?;
    if crt.issuer().as_raw() != ca.subject().as_raw() {
        return Err(RotationReason::NotSignedByCa {
            detail: format!("issuer is {}, CA is {}", crt.issuer(), ca.subject()),
        });
    }
    crt.verify_signature(Some(ca.public_key()))
        .map_err(|e| RotationReason::NotSignedByCa {
            detail: e.to_string(),
        })?;
    if !server_auth_allowed(&ca) || !server_auth_allowed(&crt) {
        return Err(RotationReason::NotForServerAuth);
    }
    let dns_names = dns_names(&crt);
    if let Some(host) = hosts
        .iter()
        .find(|h| !dns_names.iter().any(|n| host_matches(n, h)))
    {
        return Err(RotationReason::HostNotCovered { host: host.clone() });
    }

    let key = key_from_pem(key_pem).map_err(|e| RotationReason::UnusableKey {
        detail: e.to_string(),
    })?;
    if key.public_key_raw() != crt.public_key().subject_public_key.data.as_ref() {
        return Err(RotationReason::KeyDoesNotMatch);
    }
    Ok(CertValidity {
        issued_at: crt_not_before,
        ca_not_after,
        serving_not_after: crt_not_after,
        rotate_at,
    })
}

fn present<'a>(value: &'a Option<Vec<u8>>, key: &'static str) -> Result<&'a [u8], RotationReason> {
    value.as_deref().ok_or(RotationReason::EntryMissing { key })
}

/// The first PEM block, which must be a `CERTIFICATE` (OLM reads only the first).
/// Whether `pem_bytes` holds a PEM `CERTIFICATE` block that parses as X.509 (the caBundle and
/// `tls.crt` checks of docs/certificates.md §7).
pub fn is_certificate_pem(pem_bytes: &[u8]) -> bool {
    certificate_der(pem_bytes, "certificate").is_ok_and(|der| parse(&der, "certificate").is_ok())
}

fn certificate_der(pem_bytes: &[u8], key: &'static str) -> Result<Vec<u8>, RotationReason> {
    let not_cert = |detail: String| RotationReason::NotACertificate { key, detail };
    let block = pem::parse(pem_bytes).map_err(|e| not_cert(e.to_string()))?;
    if block.tag() != "CERTIFICATE" {
        return Err(not_cert(format!("found a {} block", block.tag())));
    }
    Ok(block.into_contents())
}

fn parse<'a>(der: &'a [u8], key: &'static str) -> Result<X509Certificate<'a>, RotationReason> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, cert)| cert)
        .map_err(|e| RotationReason::NotACertificate {
            key,
            detail: e.to_string(),
        })
}

fn window(
    cert: &X509Certificate<'_>,
    key: &'static str,
) -> Result<(Timestamp, Timestamp), RotationReason> {
    let validity = cert.validity();
    let to_ts = |seconds| {
        from_asn1(seconds, "validity").map_err(|e| RotationReason::NotACertificate {
            key,
            detail: e.to_string(),
        })
    };
    Ok((
        to_ts(validity.not_before.timestamp())?,
        to_ts(validity.not_after.timestamp())?,
    ))
}

/// Go's parent checks: a v3 parent needs basicConstraints CA:TRUE, and a keyUsage, when
/// present, must allow certSign.
fn check_ca(ca: &X509Certificate<'_>) -> Result<(), RotationReason> {
    let not_ca = |detail: &str| RotationReason::NotACa {
        detail: detail.to_owned(),
    };
    let constraints = ca.basic_constraints().map_err(|e| not_ca(&e.to_string()))?;
    match constraints {
        Some(bc) if !bc.value.ca => return Err(not_ca("basicConstraints says CA:FALSE")),
        None if ca.version() == X509Version::V3 => {
            return Err(not_ca("no basicConstraints extension"));
        }
        _ => {}
    }
    if let Some(usage) = ca.key_usage().map_err(|e| not_ca(&e.to_string()))?
        && !usage.value.key_cert_sign()
    {
        return Err(not_ca("keyUsage does not allow certSign"));
    }
    Ok(())
}

/// No extKeyUsage means any use (Go); otherwise serverAuth or anyExtendedKeyUsage is needed.
fn server_auth_allowed(cert: &X509Certificate<'_>) -> bool {
    match cert.extended_key_usage() {
        Ok(None) => true,
        Ok(Some(eku)) => eku.value.any || eku.value.server_auth,
        Err(_) => false,
    }
}

fn dns_names<'a>(cert: &'a X509Certificate<'_>) -> Vec<&'a str> {
    match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(*dns),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Go's host matching: case-insensitive, a trailing dot ignored, and a leading `*.` label
/// standing for exactly one label. The CommonName is not consulted (Go ≥ 1.15).
fn host_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    let host = host.trim_end_matches('.');
    if let Some(rest) = pattern.strip_prefix("*.") {
        return host
            .split_once('.')
            .is_some_and(|(label, tail)| !label.is_empty() && tail.eq_ignore_ascii_case(rest));
    }
    pattern.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_matching_like_go() {
        assert!(host_matches("svc.ns.svc", "SVC.ns.svc"));
        assert!(host_matches("svc.ns.svc.", "svc.ns.svc"));
        assert!(host_matches("*.ns.svc", "svc.ns.svc"));
        assert!(!host_matches("*.svc", "svc.ns.svc"));
        assert!(!host_matches("svc.ns", "svc.ns.svc"));
    }
}
