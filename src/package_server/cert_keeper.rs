//! The package API's serving certificate and its APIService's `caBundle`
//! (docs/packagemanifests.md §9).
//!
//! The certificate lives in the Secret `<service>-cert` (the same CA + serving certificate
//! pair olm-rs makes for operators' APIServices, `certs::plan_certs`): created when missing,
//! re-issued 24 h before it expires. One controller shape: each pass observes the Secret, the
//! front-proxy settings and the APIService, [`decide`]s, and carries the decision out through
//! the one executor, on the one engine. Every replica runs it, but only the leader writes
//! (its client is fenced, docs/leader-election.md §2); writes are also guarded (create,
//! or a patch at the read resourceVersion), so two replicas never keep two different CAs: the
//! loser of a race reads and serves the winner's on its next pass. The APIService
//! `v1.packages.operators.coreos.com` gets the CA as `caBundle` only when it points at
//! olm-rs's Service; one that points elsewhere (OLM's packageserver) is reported and left alone.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Client;
use kube::api::Api;

use super::auth::RequestHeaderConfig;
use super::tls::TlsState;
use crate::certs::ServiceName;
use crate::certs::api_service::{self, ApiServiceAction};
use crate::k8s::clock::Clock;
use crate::k8s::effects::{Effects, execute};
use crate::k8s::errors::{DECISION, ReconcileFailure};
use crate::k8s::events::EventPublisher;
use crate::k8s::read;
use crate::k8s::write;
use crate::package_manifest::types::{GROUP, VERSION};
use crate::reconcile::work_queue::{Loop, Next, WorkQueue, run_workers};

/// `v1.packages.operators.coreos.com`.
pub fn apiservice_name() -> String {
    format!("{VERSION}.{GROUP}")
}

/// Why one pass of the keeper failed (the engine retries it with back-off).
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
}

impl ReconcileFailure for KeeperError {
    fn error_label(&self) -> &'static str {
        match self {
            KeeperError::Api(e) => e.metric_label(),
            KeeperError::Certs(_) | KeeperError::Tls(_) | KeeperError::NoRequestHeaderCa => {
                DECISION
            }
        }
    }
}

const AUTH_CONFIG_NAMESPACE: &str = "kube-system";
const AUTH_CONFIG_NAME: &str = "extension-apiserver-authentication";

/// How often the Secret, the front-proxy settings and the APIService are checked.
const PERIOD: Duration = Duration::from_secs(30);
/// How soon a pass whose write was fenced (this replica did not lead) runs again.
const FENCED_RETRY: Duration = Duration::from_secs(2);
/// How soon a pass whose write met another replica's runs again (it then serves the winner's).
const RACED_RETRY: Duration = Duration::from_secs(1);

/// What one pass reads (live: no store holds these three objects).
#[derive(Debug, Default)]
pub struct Observed {
    pub secret: Option<Secret>,
    pub auth_config: Option<ConfigMap>,
    pub apiservice: Option<APIService>,
}

/// What one pass does, decided from [`Observed`] and the time.
#[derive(Debug)]
pub struct KeeperDecision {
    /// The Secret's creation or re-issue, when its certificate is missing or due.
    pub secret: Effects,
    /// What this replica serves once `secret` is written.
    pub serve: Serve,
    /// Then the APIService's `caBundle`, when it is ours and out of date.
    pub apiservice: Effects,
    pub action: ApiServiceAction,
    /// Why a certificate is issued (`None`: the Secret's is kept).
    pub issued: Option<crate::certs::RotationReason>,
}

/// The serving certificate and the front-proxy settings requests are checked against.
#[derive(Debug)]
pub struct Serve {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub request_header: RequestHeaderConfig,
}

/// The keeper's decision: the certificate, the Secret's and the APIService's writes are
/// decided in `certs::api_service` (docs/certificates.md); this adds the front-proxy settings
/// requests are checked against, which this replica needs to serve at all.
pub fn decide(
    seen: &Observed,
    service: &ServiceName,
    now: jiff::Timestamp,
) -> Result<KeeperDecision, KeeperError> {
    let certs = api_service::decide(
        seen.secret.as_ref(),
        seen.apiservice.as_ref(),
        &apiservice_name(),
        service,
        now,
    )?;
    let request_header = seen
        .auth_config
        .as_ref()
        .and_then(|m| m.data.as_ref())
        .and_then(RequestHeaderConfig::from_config_map)
        .ok_or(KeeperError::NoRequestHeaderCa)?;
    Ok(KeeperDecision {
        secret: certs.secret,
        serve: Serve {
            cert: certs.cert,
            key: certs.key,
            request_header,
        },
        apiservice: certs.apiservice,
        action: certs.action,
        issued: certs.issued,
    })
}

/// The keeper of one replica. Every replica runs it, on the one engine
/// (`reconcile::work_queue`, kind `PackageAPICertificate` in the reconcile metrics), but only
/// the leader's writes are sent (its client is fenced, docs/leader-election.md §2).
pub struct CertKeeper {
    pub client: Client,
    pub service: ServiceName,
    pub clock: Arc<dyn Clock>,
    pub tls: Arc<TlsState>,
    pub events: EventPublisher,
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl CertKeeper {
    /// Runs until the process stops: one key, looked at every [`PERIOD`].
    pub async fn run(self) {
        let queue: WorkQueue<String> = WorkQueue::new();
        queue.add(self.service.secret_name());
        let spec = Loop {
            kind: "PackageAPICertificate",
            workers: 1,
            metrics: Arc::clone(&self.metrics),
        };
        let keeper = Arc::new(Keeper {
            inner: self,
            reported_foreign: std::sync::Mutex::new(None),
        });
        run_workers(spec, queue, move |_key: String| {
            let keeper = Arc::clone(&keeper);
            async move { keeper.sync().await }
        })
        .await;
    }
}

struct Keeper {
    inner: CertKeeper,
    /// The foreign Service last warned about (warned once, not every pass).
    reported_foreign: std::sync::Mutex<Option<String>>,
}

impl Keeper {
    async fn sync(&self) -> Result<Next, KeeperError> {
        let k = &self.inner;
        let seen = self.observe().await?;
        let decision = decide(&seen, &k.service, k.clock.now())?;
        if let Some(next) = self.carry_out(&decision.secret).await? {
            return Ok(next);
        }
        if let Some(reason) = &decision.issued {
            tracing::info!(secret = %k.service.secret_name(), ?reason, "package API serving certificate issued");
        }
        let Serve {
            cert,
            key,
            request_header,
        } = &decision.serve;
        k.tls.update(cert, key, request_header.clone())?;
        if let Some(next) = self.carry_out(&decision.apiservice).await? {
            return Ok(next);
        }
        let mut reported = self
            .reported_foreign
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match &decision.action {
            ApiServiceAction::Foreign { service } if reported.as_ref() != Some(service) => {
                tracing::warn!(
                    apiservice = %apiservice_name(),
                    %service,
                    "the APIService for packagemanifests points at another server (OLM's packageserver?); olm-rs leaves it alone and does not answer through it"
                );
                *reported = Some(service.clone());
            }
            ApiServiceAction::Foreign { .. } => {}
            ApiServiceAction::SetCaBundle { .. } => {
                tracing::info!(apiservice = %apiservice_name(), "caBundle set to the package API's CA");
                *reported = None;
            }
            ApiServiceAction::Absent | ApiServiceAction::UpToDate => *reported = None,
        }
        Ok(Next::After(PERIOD))
    }

    async fn observe(&self) -> Result<Observed, KeeperError> {
        let k = &self.inner;
        let secrets: Api<Secret> = Api::namespaced(k.client.clone(), k.service.namespace());
        let maps: Api<ConfigMap> = Api::namespaced(k.client.clone(), AUTH_CONFIG_NAMESPACE);
        let apis: Api<APIService> = Api::all(k.client.clone());
        Ok(Observed {
            secret: read::get(&secrets, &k.service.secret_name()).await?,
            auth_config: read::get(&maps, AUTH_CONFIG_NAME).await?,
            apiservice: read::get(&apis, &apiservice_name()).await?,
        })
    }

    /// Executes `effects`; `Some(next)` when this pass stops here without failing.
    async fn carry_out(&self, effects: &Effects) -> Result<Option<Next>, KeeperError> {
        if effects.writes.is_empty() {
            return Ok(None);
        }
        match execute(&self.inner.client, &self.inner.events, effects).await {
            Ok(_) => Ok(None),
            // A standby does not write (docs/leader-election.md §2): the leader issues the
            // certificate and this replica serves it once it is there. Looked at again soon:
            // this replica may be about to lead, and then it writes.
            Err(error) if crate::leader_election::Fenced::in_chain(&error) => {
                tracing::debug!(%error, "package API certificate: left to the leader");
                Ok(Some(Next::After(FENCED_RETRY)))
            }
            // Another replica wrote first: the next pass reads and serves what it wrote.
            Err(error) if error.is_conflict() => Ok(Some(Next::After(RACED_RETRY))),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::api_service::tests::apiservice;
    use crate::certs::plan_certs;
    use crate::k8s::effects::Write;
    use std::collections::BTreeMap;

    fn auth_config() -> ConfigMap {
        ConfigMap {
            data: Some(BTreeMap::from([(
                "requestheader-client-ca-file".to_owned(),
                "PEM".to_owned(),
            )])),
            ..ConfigMap::default()
        }
    }

    fn now() -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000).unwrap()
    }

    #[test]
    fn a_missing_secret_is_created_then_kept_and_our_apiservice_gets_its_ca() {
        let ours = ServiceName::new("olm-rs-packageserver", "olm-rs");
        let first = Observed {
            secret: None,
            auth_config: Some(auth_config()),
            apiservice: None,
        };
        let issued = decide(&first, &ours, now()).unwrap();
        assert!(matches!(
            issued.secret.writes.as_slice(),
            [Write::Create { key, .. }] if key.name == "olm-rs-packageserver-cert"
        ));
        assert!(issued.issued.is_some());
        assert_eq!(issued.action, ApiServiceAction::Absent);
        assert!(issued.apiservice.writes.is_empty());
        assert_eq!(issued.serve.request_header.client_ca_pem, "PEM");

        // The Secret as the API server keeps it, an hour later: kept, and served as it is.
        let plan = plan_certs(None, &ours, now()).unwrap();
        let mut secret = Secret {
            data: Some(plan.secret_data.to_secret_data()),
            ..Secret::default()
        };
        secret.metadata.resource_version = Some("3".into());
        let later = Observed {
            secret: Some(secret),
            auth_config: Some(auth_config()),
            apiservice: Some(apiservice("olm-rs", "olm-rs-packageserver", Some(b"old"))),
        };
        let kept = decide(&later, &ours, now() + jiff::SignedDuration::from_hours(1)).unwrap();
        assert!(kept.secret.writes.is_empty(), "a valid certificate is kept");
        assert!(kept.issued.is_none());
        assert_eq!(
            Some(&kept.serve.cert),
            plan.secret_data.tls_crt.as_ref(),
            "what is served is the Secret's"
        );
        assert!(matches!(
            kept.apiservice.writes.as_slice(),
            [Write::MergePatch { resource_version: Some(v), .. }] if v == "7"
        ));
    }

    #[test]
    fn without_front_proxy_settings_nothing_is_served() {
        let ours = ServiceName::new("olm-rs-packageserver", "olm-rs");
        let err = decide(&Observed::default(), &ours, now()).unwrap_err();
        assert!(matches!(err, KeeperError::NoRequestHeaderCa), "{err}");
        assert_eq!(err.error_label(), DECISION);
    }
}
