//! Reuse or re-issue the cert Secret of one deployment (docs/certificates.md §6.3), computing the status
//! times from the certificates that end up in the Secret (docs/certificates.md §10.1).

use jiff::Timestamp;

use super::rotation::{RotationReason, RotationVerdict, needs_rotation};
use super::secret::olm_ca_hash;
use super::{
    CertError, CertSecretData, ROTATION_MARGIN, ServiceName, issue_ca, issue_serving_cert,
};

/// What the cert Secret of one deployment should hold after an install attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct CertPlan {
    /// `tls.crt`, `tls.key`, `olmCAKey`, all present.
    pub secret_data: CertSecretData,
    /// CA PEM bytes exactly as in `olmCAKey`: the caBundle of APIServices, webhooks and CRD
    /// conversion for this deployment.
    pub ca_pem: Vec<u8>,
    /// `olmcahash` for the Secret and the pod template: SHA-256 hex of `ca_pem`.
    pub ca_hash: String,
    /// `status.certsLastUpdated`: when the serving certificate in the Secret was issued.
    pub certs_last_updated: Timestamp,
    /// `status.certsRotateAt`: 24 h before the earlier of the two expiries.
    pub certs_rotate_at: Timestamp,
    /// True when the existing Secret (its CA and serving certificate) is kept byte for byte;
    /// nothing needs writing and pods keep their `olmcahash`.
    pub reused: bool,
    /// Why new certificates were issued; `None` when reused.
    pub reissue_reason: Option<RotationReason>,
}

/// Keeps `existing` when it still passes [`needs_rotation`] for the Service's hosts at `now`;
/// otherwise issues a new CA and serving certificate. A CA is generated only when it will be
/// used (OLM makes one per install attempt even when every Secret is reused, docs/certificates.md §10.3).
pub fn plan_certs(
    existing: Option<&CertSecretData>,
    service: &ServiceName,
    now: Timestamp,
) -> Result<CertPlan, CertError> {
    let reason = match existing {
        None => RotationReason::SecretMissing,
        Some(data) => match needs_rotation(data, &service.checked_hosts(), now) {
            RotationVerdict::Valid(validity) => {
                let ca_pem = data.olm_ca_key.clone().unwrap_or_default();
                return Ok(CertPlan {
                    secret_data: data.clone(),
                    ca_hash: olm_ca_hash(&ca_pem),
                    ca_pem,
                    certs_last_updated: validity.issued_at,
                    certs_rotate_at: validity.rotate_at,
                    reused: true,
                    reissue_reason: None,
                });
            }
            RotationVerdict::Rotate(reason) => reason,
        },
    };
    let ca = issue_ca(now)?;
    let serving = issue_serving_cert(&ca, service, now)?;
    let ca_pem = ca.cert_pem().as_bytes().to_vec();
    Ok(CertPlan {
        secret_data: CertSecretData {
            tls_crt: Some(serving.cert_pem.into_bytes()),
            tls_key: Some(serving.key_pem.into_bytes()),
            olm_ca_key: Some(ca_pem.clone()),
        },
        ca_hash: olm_ca_hash(&ca_pem),
        ca_pem,
        certs_last_updated: serving.not_before,
        certs_rotate_at: ca.not_after() - ROTATION_MARGIN,
        reused: false,
        reissue_reason: Some(reason),
    })
}
