//! The package API's serving certificate and its APIService's `caBundle`
//! (docs/packagemanifests.md §9).
//!
//! The certificate lives in the Secret `<service>-cert` (the same CA + serving certificate
//! pair olm-rs makes for operators' APIServices, `certs::plan_certs`): created when missing,
//! re-issued 24 h before it expires. Every replica runs this loop, but only the leader writes
//! (its client is fenced, docs/leader-election.md §2); writes are also guarded (create,
//! or a patch at the read resourceVersion), so two replicas never keep two different CAs: the
//! loser of a race re-reads and serves the winner's. The APIService
//! `v1.packages.operators.coreos.com` gets the CA as `caBundle` only when it points at
//! olm-rs's Service; one that points elsewhere (OLM's packageserver) is reported and left alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Client;
use kube::api::Api;
use serde_json::json;

use super::auth::RequestHeaderConfig;
use super::tls::TlsState;
use crate::certs::{CertSecretData, SECRET_TYPE_TLS, ServiceName, plan_certs};
use crate::k8s::clock::Clock;
use crate::k8s::read;
use crate::k8s::write::{self, ObjectKey};
use crate::package_manifest::types::{GROUP, VERSION};

/// `v1.packages.operators.coreos.com`.
pub fn apiservice_name() -> String {
    format!("{VERSION}.{GROUP}")
}

/// What to do about the APIService (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiServiceAction {
    /// None exists (the chart's is turned off): nothing to keep.
    Absent,
    /// It points at another Service (OLM's packageserver): report, never touch.
    Foreign {
        service: String,
    },
    UpToDate,
    /// Ours, with another (or no) caBundle: set it, at this resourceVersion.
    SetCaBundle {
        resource_version: Option<String>,
    },
}

pub fn apiservice_action(
    existing: Option<&APIService>,
    ours: &ServiceName,
    ca_pem: &[u8],
) -> ApiServiceAction {
    let Some(existing) = existing else {
        return ApiServiceAction::Absent;
    };
    let spec = existing.spec.as_ref();
    let service = spec.and_then(|s| s.service.as_ref());
    let points_at_us = service.is_some_and(|s| {
        s.name.as_deref() == Some(ours.service())
            && s.namespace.as_deref() == Some(ours.namespace())
    });
    if !points_at_us {
        return ApiServiceAction::Foreign {
            service: service
                .map(|s| {
                    format!(
                        "{}/{}",
                        s.namespace.as_deref().unwrap_or(""),
                        s.name.as_deref().unwrap_or("")
                    )
                })
                .unwrap_or_else(|| "no Service (served locally)".to_owned()),
        };
    }
    if spec
        .and_then(|s| s.ca_bundle.as_ref())
        .map(|b| b.0.as_slice())
        == Some(ca_pem)
    {
        ApiServiceAction::UpToDate
    } else {
        ApiServiceAction::SetCaBundle {
            resource_version: existing.metadata.resource_version.clone(),
        }
    }
}

/// Why one pass of the keeper failed (it retries on the next).
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error(transparent)]
    Api(#[from] write::ApiError),
    #[error(transparent)]
    Certs(#[from] crate::certs::CertError),
    #[error(transparent)]
    Tls(#[from] super::tls::TlsSetupError),
    #[error(
        "ConfigMap kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: the API server runs without --requestheader-client-ca-file, so it cannot call aggregated APIs"
    )]
    NoRequestHeaderCa,
    #[error("Secret {0} has no tls.crt or tls.key")]
    IncompleteSecret(String),
}

const AUTH_CONFIG_NAMESPACE: &str = "kube-system";
const AUTH_CONFIG_NAME: &str = "extension-apiserver-authentication";

/// How often the Secret, the front-proxy settings and the APIService are checked.
const PERIOD: Duration = Duration::from_secs(30);
/// How soon a pass whose write was fenced (this replica did not lead) runs again.
const FENCED_RETRY: Duration = Duration::from_secs(2);

pub struct CertKeeper {
    pub client: Client,
    pub service: ServiceName,
    pub clock: Arc<dyn Clock>,
    pub tls: Arc<TlsState>,
}

impl CertKeeper {
    /// Runs until the process stops.
    pub async fn run(self) {
        let mut reported_foreign = None;
        loop {
            let mut wait = PERIOD;
            match self.pass().await {
                Ok(ApiServiceAction::Foreign { service }) => {
                    if reported_foreign.as_ref() != Some(&service) {
                        tracing::warn!(
                            apiservice = %apiservice_name(),
                            %service,
                            "the APIService for packagemanifests points at another server (OLM's packageserver?); olm-rs leaves it alone and does not answer through it"
                        );
                        reported_foreign = Some(service);
                    }
                }
                Ok(_) => reported_foreign = None,
                // A standby does not write (docs/leader-election.md §2): the leader issues the
                // certificate and this replica serves it once it is there. Looked at again soon:
                // this replica may be about to lead, and then it issues it.
                Err(error) if crate::leader_election::Fenced::in_chain(&error) => {
                    tracing::debug!(%error, "package API certificate: left to the leader");
                    wait = FENCED_RETRY;
                }
                Err(error) => tracing::warn!(%error, "package API certificate"),
            }
            tokio::time::sleep(wait).await;
        }
    }

    async fn pass(&self) -> Result<ApiServiceAction, KeeperError> {
        let data = self.ensure_secret().await?;
        let request_header = self.request_header().await?;
        let (Some(cert), Some(key)) = (&data.tls_crt, &data.tls_key) else {
            return Err(KeeperError::IncompleteSecret(self.service.secret_name()));
        };
        self.tls.update(cert, key, request_header)?;
        let ca = data.olm_ca_key.clone().unwrap_or_default();
        let apis: Api<APIService> = Api::all(self.client.clone());
        let existing = read::get(&apis, &apiservice_name()).await?;
        let action = apiservice_action(existing.as_ref(), &self.service, &ca);
        if let ApiServiceAction::SetCaBundle { resource_version } = &action {
            use base64::Engine as _;
            let bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
            write::merge_patch(
                &self.client,
                &ObjectKey::new::<APIService>(None, &apiservice_name()),
                &json!({"spec": {"caBundle": bundle}}),
                resource_version.as_deref(),
            )
            .await?;
            tracing::info!(apiservice = %apiservice_name(), "caBundle set to the package API's CA");
        }
        Ok(action)
    }

    /// The Secret's certificates, issued or re-issued when needed.
    async fn ensure_secret(&self) -> Result<CertSecretData, KeeperError> {
        let name = self.service.secret_name();
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), self.service.namespace());
        let existing = read::get(&secrets, &name).await?;
        let data = existing
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .map(CertSecretData::from_secret_data);
        let plan = plan_certs(data.as_ref(), &self.service, self.clock.now())?;
        if plan.reused {
            return Ok(plan.secret_data);
        }
        let written = match &existing {
            None => {
                let mut secret = Secret {
                    type_: Some(SECRET_TYPE_TLS.to_owned()),
                    data: Some(plan.secret_data.to_secret_data()),
                    ..Secret::default()
                };
                secret.metadata.name = Some(name.clone());
                secret.metadata.namespace = Some(self.service.namespace().to_owned());
                secret.metadata.labels = Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "olm-rs".to_owned(),
                )]));
                write::create(&secrets, &secret).await.map(|_| ())
            }
            Some(old) => {
                use base64::Engine as _;
                let encoded: BTreeMap<String, String> = plan
                    .secret_data
                    .to_secret_data()
                    .into_iter()
                    .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v.0)))
                    .collect();
                write::merge_patch(
                    &self.client,
                    &ObjectKey::new::<Secret>(Some(self.service.namespace()), &name),
                    &json!({"data": encoded}),
                    old.metadata.resource_version.as_deref(),
                )
                .await
                .map(|_| ())
            }
        };
        match written {
            Ok(()) => {
                tracing::info!(secret = %name, reason = ?plan.reissue_reason, "package API serving certificate issued");
                Ok(plan.secret_data)
            }
            // Another replica wrote first: serve what it wrote.
            Err(e) if e.is_conflict() => {
                let again = read::get(&secrets, &name).await?;
                Ok(again
                    .and_then(|s| s.data)
                    .map(|d| CertSecretData::from_secret_data(&d))
                    .unwrap_or_default())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn request_header(&self) -> Result<RequestHeaderConfig, KeeperError> {
        let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), AUTH_CONFIG_NAMESPACE);
        let map = read::get(&maps, AUTH_CONFIG_NAME).await?;
        map.and_then(|m| m.data)
            .and_then(|d| RequestHeaderConfig::from_config_map(&d))
            .ok_or(KeeperError::NoRequestHeaderCa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::{
        APIServiceSpec, ServiceReference,
    };

    fn apiservice(ns: &str, name: &str, ca: Option<&[u8]>) -> APIService {
        let mut a = APIService {
            spec: Some(APIServiceSpec {
                service: Some(ServiceReference {
                    namespace: Some(ns.into()),
                    name: Some(name.into()),
                    port: Some(443),
                }),
                ca_bundle: ca.map(|c| ByteString(c.to_vec())),
                group: Some(GROUP.into()),
                version: Some(VERSION.into()),
                group_priority_minimum: 2000,
                version_priority: 15,
                ..APIServiceSpec::default()
            }),
            ..APIService::default()
        };
        a.metadata.resource_version = Some("7".into());
        a
    }

    #[test]
    fn only_our_apiservice_gets_our_ca() {
        let ours = ServiceName::new("olm-rs-packageserver", "olm-rs");
        assert_eq!(
            apiservice_action(None, &ours, b"CA"),
            ApiServiceAction::Absent
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm", "packageserver-service", None)),
                &ours,
                b"CA"
            ),
            ApiServiceAction::Foreign {
                service: "olm/packageserver-service".into()
            }
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm-rs", "olm-rs-packageserver", Some(b"old"))),
                &ours,
                b"CA"
            ),
            ApiServiceAction::SetCaBundle {
                resource_version: Some("7".into())
            }
        );
        assert_eq!(
            apiservice_action(
                Some(&apiservice("olm-rs", "olm-rs-packageserver", Some(b"CA"))),
                &ours,
                b"CA"
            ),
            ApiServiceAction::UpToDate
        );
    }
}
