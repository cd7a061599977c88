//! Waiting at start-up until the API server serves every OLM kind.
//!
//! A real API server lists a new CRD's group in discovery before each of its versions answers:
//! right after `kubectl apply -f crds/`, `/apis/operators.coreos.com/v1alpha1` can still say
//! `404 page not found` for a moment. So a 404 (or 503) on a version, or a kind not listed yet,
//! means "wait", never "give up": the controller keeps `/readyz` not ready, naming each CRD it
//! waits for, and starts its reconcilers once all are served. Only a server that cannot be
//! reached at all (no TCP connection, TLS failure, time-outs) for [`UNREACHABLE_GRACE`] is
//! fatal, and a refusal (401/403) is fatal at once with the words of the server, since waiting
//! would only hide a wrong credential or a missing RBAC rule (docs/controller-startup.md).

use std::collections::BTreeSet;
use std::time::Duration;

use kube::Client;
use tokio::time::Instant;

use crate::health::Readiness;
use crate::k8s::errors::{ApiFailure, is_not_served_yet};

/// The API group every OLM kind lives in.
pub const OLM_GROUP: &str = "operators.coreos.com";

/// Kinds the controller cannot work without, with the CRD a user must install for each.
pub const REQUIRED_KINDS: [(&str, &str); 6] = [
    (
        "ClusterServiceVersion",
        "clusterserviceversions.operators.coreos.com",
    ),
    ("OperatorGroup", "operatorgroups.operators.coreos.com"),
    ("Subscription", "subscriptions.operators.coreos.com"),
    ("InstallPlan", "installplans.operators.coreos.com"),
    ("CatalogSource", "catalogsources.operators.coreos.com"),
    // The CSV controller keeps one per CSV and reads the replaced CSV's before an upgrade.
    (
        "OperatorCondition",
        "operatorconditions.operators.coreos.com",
    ),
];

/// How long a server that cannot be reached is retried before the process gives up.
pub const UNREACHABLE_GRACE: Duration = Duration::from_secs(30);
/// Back-off between checks: from [`FIRST_RETRY`] doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(2);
/// The wait is logged at most this often, not on every check.
const LOG_EVERY: Duration = Duration::from_secs(5);

/// Why start-up stopped waiting without success.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot reach the Kubernetes API server (retried for {}s): {source}", .waited.as_secs())]
    Unreachable {
        waited: Duration,
        #[source]
        source: kube::Error,
    },
    #[error(
        "the Kubernetes API server refused {what} (HTTP {code}): {message}; check olm-rs's \
         credentials and that its ClusterRole grants this"
    )]
    Refused {
        what: String,
        code: u16,
        message: String,
    },
    /// SelfSubjectAccessReviews say olm-rs's identity lacks permissions its watches need.
    #[error("{}", crate::access_review::missing_message(.missing))]
    MissingPermissions {
        missing: Vec<crate::access_review::Missing>,
    },
}

/// What one look at discovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Served {
    /// Kinds of the OLM group listed by the versions that answered.
    pub kinds: BTreeSet<String>,
    /// Versions listed for the group that did not answer yet (404/503 while being established).
    pub pending_versions: Vec<String>,
}

/// The CRD names of required kinds not in `served`, in [`REQUIRED_KINDS`] order.
pub fn missing_crds(served: &BTreeSet<String>) -> Vec<&'static str> {
    REQUIRED_KINDS
        .iter()
        .filter(|(kind, _)| !served.contains(*kind))
        .map(|(_, crd)| *crd)
        .collect()
}

/// The readiness line while CRDs are missing.
pub fn waiting_message(missing: &[&str], pending_versions: &[String]) -> String {
    let mut text = format!(
        "waiting for the CRDs {} to be served (install them with `olm-rs crds | kubectl apply \
         --server-side -f -`)",
        missing.join(", ")
    );
    if !pending_versions.is_empty() {
        text.push_str(&format!(
            "; {OLM_GROUP} lists versions {} that do not answer yet",
            pending_versions.join(", ")
        ));
    }
    text
}

/// Looks once at what the API server serves of the OLM group. A group or version that is not
/// served yet is an empty answer, not an error.
pub async fn look(client: &Client) -> Result<Served, kube::Error> {
    let mut served = Served::default();
    let groups = client.list_api_groups().await?;
    let Some(group) = groups.groups.iter().find(|g| g.name == OLM_GROUP) else {
        return Ok(served);
    };
    // Every version, not only the preferred one: OperatorGroup's preferred version is v1
    // while the other kinds exist only in v1alpha1.
    for version in &group.versions {
        match client
            .list_api_group_resources(&version.group_version)
            .await
        {
            Ok(list) => served.kinds.extend(
                list.resources
                    .into_iter()
                    .filter(|r| !r.name.contains('/'))
                    .map(|r| r.kind),
            ),
            Err(e) if is_not_served_yet(&e) => {
                served.pending_versions.push(version.version.clone());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(served)
}

/// Waits until the API server answers and serves every required kind, keeping `readiness`'s
/// `api-server` and `crds` checks up to date. Returns only on success or a fatal error; the
/// caller races it against shutdown.
pub async fn wait_until_served(client: &Client, readiness: &Readiness) -> Result<(), StartupError> {
    let mut waits: u32 = 0;
    let mut unreachable_since: Option<Instant> = None;
    let mut last_log: Option<Instant> = None;
    let mut connected = false;
    loop {
        let step = async {
            if !connected {
                let version = client.apiserver_version().await?;
                tracing::info!(git_version = %version.git_version, "connected to the API server");
            }
            look(client).await
        };
        match step.await {
            Ok(served) => {
                connected = true;
                unreachable_since = None;
                readiness.set_ready("api-server");
                let missing = missing_crds(&served.kinds);
                if missing.is_empty() {
                    readiness.set_ready("crds");
                    return Ok(());
                }
                let message = waiting_message(&missing, &served.pending_versions);
                if last_log.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
                    tracing::warn!("{message}");
                    last_log = Some(Instant::now());
                }
                readiness.set_not_ready("crds", message);
            }
            // Refused (401, 403): say so and stop.
            Err(error) if ApiFailure::of(&error).is_refusal() => {
                let (code, message) = match &error {
                    kube::Error::Api(s) => (s.code, s.message.clone()),
                    other => (0, other.to_string()),
                };
                let what = if connected {
                    format!("the discovery of {OLM_GROUP}")
                } else {
                    "the version request".to_owned()
                };
                return Err(StartupError::Refused {
                    what,
                    code,
                    message,
                });
            }
            // Anything else — not served yet (404, 503 while a version is being established),
            // nothing answering, a server error — is retried for a while.
            Err(error) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                let waited = since.elapsed();
                if waited >= UNREACHABLE_GRACE {
                    return Err(StartupError::Unreachable {
                        waited,
                        source: error,
                    });
                }
                readiness.set_not_ready("api-server", format!("cannot reach: {error}"));
                if last_log.is_none_or(|at| at.elapsed() >= LOG_EVERY) {
                    tracing::warn!(%error, "the API server does not answer yet; retrying");
                    last_log = Some(Instant::now());
                }
            }
        }
        waits = waits.saturating_add(1);
        tokio::time::sleep(crate::backoff::delay(waits, FIRST_RETRY, MAX_RETRY)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("no", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_version_still_being_established_means_wait() {
        let refused = |code| ApiFailure::of(&api_error(code)).is_refusal();
        assert!(!refused(404) && !refused(503) && !refused(500));
        assert!(refused(403) && refused(401));
        assert!(is_not_served_yet(&api_error(404)) && is_not_served_yet(&api_error(503)));
        assert!(!is_not_served_yet(&api_error(500)) && !is_not_served_yet(&api_error(403)));
    }

    #[test]
    fn missing_crds_names_each_absent_kind_by_crd_name() {
        let served: BTreeSet<String> = ["Subscription", "CatalogSource"]
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            missing_crds(&served),
            vec![
                "clusterserviceversions.operators.coreos.com",
                "operatorgroups.operators.coreos.com",
                "installplans.operators.coreos.com",
                "operatorconditions.operators.coreos.com",
            ]
        );
        let all = REQUIRED_KINDS.iter().map(|(k, _)| k.to_string()).collect();
        assert!(missing_crds(&all).is_empty());
    }

    #[test]
    fn the_waiting_message_names_crds_versions_and_the_fix() {
        let text = waiting_message(
            &["subscriptions.operators.coreos.com"],
            &["v1alpha1".to_owned()],
        );
        assert!(
            text.contains("subscriptions.operators.coreos.com"),
            "{text}"
        );
        assert!(text.contains("olm-rs crds"), "{text}");
        assert!(text.contains("v1alpha1"), "{text}");
    }
}
