//! Certificates of a CSV that owns APIServices or webhooks (docs/certificates.md), as pure decisions:
//! which objects an install attempt writes ([`install::plan_cert_install`]), what the
//! deployments gain ([`deployment`]), and the checks a running CSV passes ([`check`]).
//! Key material comes from [`crate::certs`]; the reconciler only reads, calls and writes.

pub mod check;
pub mod inject;
pub mod install;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::RoleBinding;

use crate::api::{ClusterServiceVersion, WebhookDescription};
use crate::certs::objects::Owner;
use crate::certs::{SeenSecret, ServiceName, olm_ca_hash};

use super::identity::{managed_owner_labels, namespace, owner_reference};
use super::strategy::certificate_deployments;

pub use install::{
    CertDeployment, CertInstall, CertInstallError, WebhookConfiguration, plan_cert_install,
};

/// The cert-related objects of one CSV's namespace (plus its cluster-scoped webhook
/// configurations and the `kube-system` auth-reader bindings), read from the reconciler's
/// caches of `olm.managed` objects.
#[derive(Clone, Debug, Default)]
pub struct CertObjects {
    pub secrets: Vec<SeenSecret>,
    pub services: Vec<Arc<Service>>,
    pub validating_webhooks: Vec<Arc<ValidatingWebhookConfiguration>>,
    pub mutating_webhooks: Vec<Arc<MutatingWebhookConfiguration>>,
    /// RoleBindings in `kube-system`.
    pub auth_reader_bindings: Vec<Arc<RoleBinding>>,
}

impl CertObjects {
    pub fn secret(&self, name: &str) -> Option<&SeenSecret> {
        self.secrets.iter().find(|s| s.name == name)
    }

    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services
            .iter()
            .map(Arc::as_ref)
            .find(|s| s.metadata.name.as_deref() == Some(name))
    }
}

/// The CSV as the owner of its cert deployments' objects (`certs::objects`).
pub fn owner_of(csv: &ClusterServiceVersion) -> Owner {
    Owner {
        namespace: namespace(csv).to_owned(),
        reference: owner_reference(csv),
        labels: managed_owner_labels(csv),
    }
}

/// The Service (and so Secret) names of a cert deployment in the CSV's namespace.
pub fn service_of(csv: &ClusterServiceVersion, deployment: &str) -> ServiceName {
    ServiceName::for_deployment(deployment, namespace(csv))
}

/// `olmcahash` per cert deployment, from the CA in each live Secret: the pod template
/// annotation the running Deployments must carry (docs/csv-phases.md §7.3 "cert data taken from the live
/// Secret"). Deployments whose Secret is missing or has no CA are left out.
pub fn live_ca_hashes(
    csv: &ClusterServiceVersion,
    certs: &CertObjects,
) -> BTreeMap<String, String> {
    certificate_deployments(csv)
        .into_iter()
        .filter_map(|d| {
            let secret = certs.secret(&service_of(csv, &d).secret_name())?;
            let ca = secret.data.olm_ca_key.as_deref()?;
            Some((d, olm_ca_hash(ca)))
        })
        .collect()
}

/// The webhook definitions of the CSV.
pub fn webhooks(csv: &ClusterServiceVersion) -> impl Iterator<Item = &WebhookDescription> {
    csv.spec.webhook_definitions.iter().flatten()
}
