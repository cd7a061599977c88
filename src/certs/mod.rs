//! Certificates for owned APIServices and webhooks (docs/certificates.md): the CA and serving certificate
//! of each cert deployment, the Secret that carries them, and the decision to reuse or
//! re-issue that Secret.
//!
//! Pure apart from key generation and serial numbers, which need randomness (issue.rs);
//! the clock always comes in as a `now: jiff::Timestamp` argument.

pub mod api_service;
pub mod deployment;
mod error;
mod issue;
mod keys;
pub mod objects;
mod plan;
mod rotation;
mod secret;

use jiff::SignedDuration;

pub use error::CertError;
pub use issue::{CaBundle, ORGANIZATION, ServingCert, issue_ca, issue_serving_cert, parse_ca};
pub use plan::{CertPlan, plan_certs};
pub use rotation::{
    CertValidity, RotationReason, RotationVerdict, is_certificate_pem, needs_rotation, rotation_due,
};
pub use secret::{
    CertSecretData, OLM_CA_HASH_ANNOTATION, OLM_CA_KEY, SECRET_TYPE_TLS, SeenSecret, TLS_CRT_KEY,
    TLS_KEY_KEY, olm_ca_hash,
};

/// Lifetime of every CA and serving certificate: 730 days (docs/certificates.md §2).
pub const CA_VALIDITY: SignedDuration = SignedDuration::from_hours(730 * 24);

/// Certificates are replaced once less than this is left ("min fresh", docs/certificates.md §2, §6.1).
pub const ROTATION_MARGIN: SignedDuration = SignedDuration::from_hours(24);

/// The Service a cert deployment is reached through, `<deployment>-service` (docs/certificates.md §1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceName {
    service: String,
    namespace: String,
}

impl ServiceName {
    /// The Service OLM creates for deployment `deployment` in `namespace`.
    pub fn for_deployment(deployment: &str, namespace: &str) -> Self {
        Self::new(&format!("{deployment}-service"), namespace)
    }

    pub fn new(service: &str, namespace: &str) -> Self {
        Self {
            service: service.to_owned(),
            namespace: namespace.to_owned(),
        }
    }

    pub fn service(&self) -> &str {
        &self.service
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `<service>-cert`: the Secret (and Role/RoleBinding) name.
    pub fn secret_name(&self) -> String {
        format!("{}-cert", self.service)
    }

    /// The host names OLM checks a serving certificate against (docs/certificates.md §6.1); the first is
    /// the certificate's CommonName.
    pub fn checked_hosts(&self) -> Vec<String> {
        let base = format!("{}.{}", self.service, self.namespace);
        let svc = format!("{base}.svc");
        let cluster_local = format!("{svc}.cluster.local");
        vec![base, svc, cluster_local]
    }

    /// Every DNS name olm-rs writes into a serving certificate: OLM's three, then the bare
    /// Service name for clients inside the namespace.
    pub fn dns_names(&self) -> Vec<String> {
        let mut names = self.checked_hosts();
        names.push(self.service.clone());
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_deployment() {
        let svc = ServiceName::for_deployment("demo-controller-manager", "demo");
        assert_eq!(svc.service(), "demo-controller-manager-service");
        assert_eq!(svc.secret_name(), "demo-controller-manager-service-cert");
        assert_eq!(
            svc.checked_hosts(),
            [
                "demo-controller-manager-service.demo",
                "demo-controller-manager-service.demo.svc",
                "demo-controller-manager-service.demo.svc.cluster.local",
            ]
        );
        assert_eq!(
            svc.dns_names().last().map(String::as_str),
            Some("demo-controller-manager-service")
        );
    }

    #[test]
    fn constants_match_olm() {
        assert_eq!(CA_VALIDITY.as_secs(), 730 * 86_400);
        assert_eq!(ROTATION_MARGIN.as_secs(), 86_400);
    }
}
