//! What one install attempt writes for certificates (docs/certificates.md §6.3, §3, §4): per cert
//! deployment its Service, Secret (reused while valid, else re-issued) and RBAC, then every CA
//! consumer of the CSV. Pure: the reconciler applies the result.

use std::collections::BTreeMap;
use std::fmt;

use jiff::Timestamp;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceConversion;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::{
    ClusterServiceVersion, InstallModeType, OperatorGroup, WebhookAdmissionType, WebhookDescription,
};
use crate::certs::{CertError, CertPlan, plan_certs};
use crate::olm_hash::{GoJsonError, webhook_description_hash};

use super::super::identity::name;
use super::super::observed::Observed;
use super::super::ownership::api_service_adoptable;
use super::super::strategy::{StrategyError, certificate_deployments, deployment_strategy};
use super::inject::{
    api_service, api_service_port, crd_conversion, mutating_configuration,
    validating_configuration, webhook_client_config, webhook_labels, webhook_lookup_labels,
    webhook_namespace_selector,
};
use super::{service_of, webhooks};
use crate::certs::deployment::service_account_of;
use crate::certs::objects::{
    PortSpec, auth_delegator_binding, auth_reader_binding, secret, secret_reader_binding,
    secret_reader_role, service,
};

/// Why the certificate part of an install cannot be done; the CSV goes
/// `Failed / InstallComponentFailed` "install strategy failed: <this>" and is retried.
#[derive(Debug, thiserror::Error)]
pub enum CertInstallError {
    #[error(transparent)]
    Strategy(#[from] StrategyError),
    #[error(
        "deployment {deployment} named by an owned APIService or webhook is not in the install strategy"
    )]
    DeploymentNotInStrategy { deployment: String },
    #[error("{what} {name} names no deploymentName")]
    NoDeployment { what: &'static str, name: String },
    // docs/certificates.md §10.7: OLM silently wires such webhooks to a Service that does not exist.
    #[error(
        "webhook {webhook}: deploymentName {deployment:?} contains '.', which cannot name the webhook's Service"
    )]
    DottedWebhookDeployment { webhook: String, deployment: String },
    #[error("certificates for deployment {deployment}: {source}")]
    Cert {
        deployment: String,
        #[source]
        source: CertError,
    },
    #[error("pre-existing APIService {0} is not adoptable")]
    NotAdoptable(String),
    #[error("webhook {webhook}: cannot hash its description: {detail}")]
    Hash { webhook: String, detail: String },
    #[error("unable to manage conversion webhook: {0}")]
    Conversion(String),
}

/// The objects of one cert deployment. `Debug` shows names only: the Secret holds a key.
#[derive(Clone, PartialEq)]
pub struct CertDeployment {
    pub deployment: String,
    pub service_account: String,
    pub certs: CertPlan,
    pub service: Service,
    pub secret: Secret,
    pub role: Role,
    pub role_binding: RoleBinding,
    pub cluster_role_binding: ClusterRoleBinding,
    pub auth_reader_binding: RoleBinding,
}

impl fmt::Debug for CertDeployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertDeployment")
            .field("deployment", &self.deployment)
            .field("service_account", &self.service_account)
            .field("ca_hash", &self.certs.ca_hash)
            .field("reused", &self.certs.reused)
            .field("reissue_reason", &self.certs.reissue_reason)
            .finish_non_exhaustive()
    }
}

/// A webhook configuration to write: with `metadata.name` to update the existing one, with
/// `metadata.generateName` only to create it.
#[derive(Clone, Debug, PartialEq)]
pub enum WebhookConfiguration {
    Validating(ValidatingWebhookConfiguration),
    Mutating(MutatingWebhookConfiguration),
}

/// `spec.conversion` for one CRD.
#[derive(Clone, Debug, PartialEq)]
pub struct CrdConversion {
    pub crd: String,
    pub conversion: CustomResourceConversion,
}

/// Everything an install attempt writes for certificates, in write order.
#[derive(Clone, Debug, PartialEq)]
pub struct CertInstall {
    pub deployments: Vec<CertDeployment>,
    pub api_services: Vec<APIService>,
    pub webhooks: Vec<WebhookConfiguration>,
    pub conversions: Vec<CrdConversion>,
}

impl CertInstall {
    /// `olmcahash` per cert deployment, for the Deployment specs.
    pub fn ca_hashes(&self) -> BTreeMap<String, String> {
        self.deployments
            .iter()
            .map(|d| (d.deployment.clone(), d.certs.ca_hash.clone()))
            .collect()
    }

    /// `status.certsLastUpdated` and `status.certsRotateAt`, from the certificates that end up
    /// in the Secrets (docs/certificates.md §10.1): the newest issue time and the earliest
    /// rotation time.
    pub fn status_times(&self) -> Option<(Timestamp, Timestamp)> {
        let last = self
            .deployments
            .iter()
            .map(|d| d.certs.certs_last_updated)
            .max()?;
        let rotate = self
            .deployments
            .iter()
            .map(|d| d.certs.certs_rotate_at)
            .min()?;
        Some((last, rotate))
    }

    /// Deployments whose Secret gets new certificates, with why.
    pub fn reissued(&self) -> Vec<(String, String)> {
        self.deployments
            .iter()
            .filter_map(|d| {
                d.certs
                    .reissue_reason
                    .as_ref()
                    .map(|r| (d.deployment.clone(), r.to_string()))
            })
            .collect()
    }
}

/// Plans the certificate part of installing `csv` at `now`; `None` when it owns no
/// APIServices and no webhooks.
pub fn plan_cert_install(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    group: &OperatorGroup,
    now: Timestamp,
) -> Result<Option<CertInstall>, CertInstallError> {
    let cert_deployments = certificate_deployments(csv);
    if cert_deployments.is_empty() && !super::super::strategy::needs_certificates(csv) {
        return Ok(None);
    }
    for desc in webhooks(csv) {
        let deployment = desc.deployment_name.clone().unwrap_or_default();
        if deployment.is_empty() {
            return Err(CertInstallError::NoDeployment {
                what: "webhook",
                name: desc.generate_name.clone(),
            });
        }
        if deployment.contains('.') {
            return Err(CertInstallError::DottedWebhookDeployment {
                webhook: desc.generate_name.clone(),
                deployment,
            });
        }
    }
    let strategy = deployment_strategy(csv)?;
    let owned_apis: Vec<_> = csv
        .spec
        .api_service_definitions
        .as_ref()
        .and_then(|d| d.owned.as_ref())
        .into_iter()
        .flatten()
        .collect();

    let owner = super::owner_of(csv);
    let mut deployments = Vec::new();
    for d in &cert_deployments {
        let entry = strategy
            .deployments
            .iter()
            .find(|e| &e.name == d)
            .ok_or_else(|| CertInstallError::DeploymentNotInStrategy {
                deployment: d.clone(),
            })?;
        let svc = service_of(csv, d);
        let ports: Vec<PortSpec> = owned_apis
            .iter()
            .filter(|a| a.deployment_name.as_deref() == Some(d.as_str()))
            .map(|a| {
                let port = api_service_port(a);
                PortSpec {
                    port,
                    target: IntOrString::Int(port),
                }
            })
            .chain(
                webhooks(csv)
                    .filter(|w| w.deployment_name.as_deref() == Some(d.as_str()))
                    .map(|w| {
                        let port = w.effective_container_port();
                        PortSpec {
                            port,
                            target: w.target_port.clone().unwrap_or(IntOrString::Int(port)),
                        }
                    }),
            )
            .collect();
        let existing = seen.certs.secret(&svc.secret_name()).map(|s| &s.data);
        let certs = plan_certs(existing, &svc, now).map_err(|source| CertInstallError::Cert {
            deployment: d.clone(),
            source,
        })?;
        let sa = service_account_of(&entry.spec);
        deployments.push(CertDeployment {
            deployment: d.clone(),
            service: service(&owner, &svc, &entry.spec, &ports),
            secret: secret(&owner, &svc, &certs),
            role: secret_reader_role(&owner, &svc),
            role_binding: secret_reader_binding(&owner, &svc, &sa),
            cluster_role_binding: auth_delegator_binding(&owner, &svc, &sa),
            auth_reader_binding: auth_reader_binding(&owner, &svc, &sa),
            service_account: sa,
            certs,
        });
    }
    let ca_of = |deployment: &str| {
        deployments
            .iter()
            .find(|c| c.deployment == deployment)
            .map(|c| c.certs.ca_pem.clone())
            .unwrap_or_default()
    };

    let annotations = seen
        .subscription_config(name(csv))
        .and_then(|c| c.annotations.as_ref());
    let mut api_services = Vec::new();
    for desc in &owned_apis {
        let api_name = desc.api_service_name();
        let d = desc.deployment_name.as_deref().unwrap_or_default();
        if d.is_empty() {
            return Err(CertInstallError::NoDeployment {
                what: "APIService",
                name: api_name,
            });
        }
        let existing = seen.api_service(&api_name);
        if existing.is_some_and(|a| !api_service_adoptable(csv, a, seen)) {
            return Err(CertInstallError::NotAdoptable(api_name));
        }
        api_services.push(api_service(
            csv,
            desc,
            &service_of(csv, d),
            &ca_of(d),
            existing,
            annotations,
        ));
    }

    let selector = webhook_namespace_selector(group);
    let mut configurations = Vec::new();
    let mut conversions = Vec::new();
    for desc in webhooks(csv) {
        let d = desc.deployment_name.as_deref().unwrap_or_default();
        let ca = ca_of(d);
        match desc.type_ {
            WebhookAdmissionType::ConversionWebhook => {
                check_conversion(csv, seen, desc)?;
                for crd in desc.conversion_crds.iter().flatten() {
                    conversions.push(CrdConversion {
                        crd: crd.clone(),
                        conversion: crd_conversion(csv, desc, &ca),
                    });
                }
            }
            WebhookAdmissionType::MutatingAdmissionWebhook => {
                let labels = webhook_labels(csv, desc, &description_hash(desc)?);
                let lookup = webhook_lookup_labels(csv, desc);
                let names = existing_names(
                    seen.certs.mutating_webhooks.iter().map(|w| &w.metadata),
                    &lookup,
                );
                for name in names {
                    configurations.push(WebhookConfiguration::Mutating(mutating_configuration(
                        desc,
                        name.as_deref(),
                        labels.clone(),
                        webhook_client_config(csv, desc, &ca),
                        selector.clone(),
                    )));
                }
            }
            // Validating, and any type the CRD's enum may grow: OLM treats unknown as validating.
            _ => {
                let labels = webhook_labels(csv, desc, &description_hash(desc)?);
                let lookup = webhook_lookup_labels(csv, desc);
                let names = existing_names(
                    seen.certs.validating_webhooks.iter().map(|w| &w.metadata),
                    &lookup,
                );
                for name in names {
                    configurations.push(WebhookConfiguration::Validating(
                        validating_configuration(
                            desc,
                            name.as_deref(),
                            labels.clone(),
                            webhook_client_config(csv, desc, &ca),
                            selector.clone(),
                        ),
                    ));
                }
            }
        }
    }
    Ok(Some(CertInstall {
        deployments,
        api_services,
        webhooks: configurations,
        conversions,
    }))
}

/// `olm.webhook-description-hash` of one description.
pub fn description_hash(desc: &WebhookDescription) -> Result<String, CertInstallError> {
    let hash_err = |detail: String| CertInstallError::Hash {
        webhook: desc.generate_name.clone(),
        detail,
    };
    let value = serde_json::to_value(desc).map_err(|e| hash_err(e.to_string()))?;
    webhook_description_hash(&value).map_err(|e: GoJsonError| hash_err(e.to_string()))
}

/// Names of the configurations carrying `lookup`; `[None]` (create one) when there are none.
fn existing_names<'a>(
    metas: impl Iterator<Item = &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    lookup: &BTreeMap<String, String>,
) -> Vec<Option<String>> {
    let mut names: Vec<Option<String>> = metas
        .filter(|m| {
            let labels = m.labels.clone().unwrap_or_default();
            lookup.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter_map(|m| m.name.clone())
        .map(Some)
        .collect();
    names.sort();
    if names.is_empty() {
        names.push(None);
    }
    names
}

/// docs/certificates.md §4.3 preconditions, with OLM's messages.
fn check_conversion(
    csv: &ClusterServiceVersion,
    seen: &Observed,
    desc: &WebhookDescription,
) -> Result<(), CertInstallError> {
    let modes: Vec<&InstallModeType> = csv
        .spec
        .install_modes
        .iter()
        .flatten()
        .filter(|m| m.supported)
        .map(|m| &m.type_)
        .collect();
    if modes.is_empty() || modes.iter().any(|m| **m != InstallModeType::AllNamespaces) {
        return Err(CertInstallError::Conversion(
            "CSVs with conversion webhooks must support only AllNamespaces".to_owned(),
        ));
    }
    let crds = desc.conversion_crds.as_deref().unwrap_or_default();
    if crds.is_empty() {
        return Err(CertInstallError::Conversion(
            "conversion webhook must have at least one CRD specified".to_owned(),
        ));
    }
    let owned: Vec<&str> = csv
        .spec
        .custom_resource_definitions
        .as_ref()
        .and_then(|c| c.owned.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    for crd in crds {
        let Some(found) = seen.crd(crd) else {
            return Err(CertInstallError::Conversion(format!(
                "CRD {crd} does not exist"
            )));
        };
        if !owned.contains(&crd.as_str()) {
            return Err(CertInstallError::Conversion(format!(
                "csv {} does not own CRD {crd}",
                name(csv)
            )));
        }
        if found.spec.preserve_unknown_fields == Some(true) {
            return Err(CertInstallError::Conversion(format!(
                "CRD {crd} sets spec.preserveUnknownFields: true, which conversion webhooks do not allow"
            )));
        }
    }
    Ok(())
}
