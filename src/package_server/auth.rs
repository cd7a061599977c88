//! Who is asking, and may they: delegated authentication and authorization, as aggregated API
//! servers do it (docs/packagemanifests.md §8).
//!
//! Authentication: the API server's aggregator presents its front-proxy client certificate
//! (checked in `tls.rs` against the request-header CA from
//! `kube-system/extension-apiserver-authentication`) and names the user in `X-Remote-User`,
//! `X-Remote-Group` and `X-Remote-Extra-*`. Authorization: a SubjectAccessReview per
//! (user, verb, namespace, name), remembered for a short while so a busy `kubectl` does not
//! cost one review per request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::response::Response;
use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::Api;

use super::responses::status;
use crate::package_manifest::types::{GROUP, RESOURCE};

/// The caller, as the front proxy named it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What a request does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    pub verb: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Access {
    pub fn new(
        verb: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        subresource: Option<&str>,
    ) -> Access {
        Access {
            verb: verb.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: subresource.map(str::to_owned),
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("Unauthorized")]
    Unauthenticated,
    #[error(
        "{resource} is forbidden: User \"{user}\" cannot {verb} resource \"{plural}\" in API group \"{group}\"{scope}{reason}"
    )]
    Forbidden {
        resource: String,
        user: String,
        verb: String,
        plural: String,
        group: String,
        scope: String,
        reason: String,
    },
    #[error("cannot check access: {0}")]
    ReviewFailed(String),
}

impl Refusal {
    fn forbidden(identity: &Identity, access: &Access, reason: &str) -> Refusal {
        let plural = match &access.subresource {
            Some(sub) => format!("{RESOURCE}/{sub}"),
            None => RESOURCE.to_owned(),
        };
        Refusal::Forbidden {
            resource: match &access.name {
                Some(name) => format!("{RESOURCE}.{GROUP} \"{name}\""),
                None => format!("{RESOURCE}.{GROUP}"),
            },
            user: identity.user.clone(),
            verb: access.verb.clone(),
            plural,
            group: GROUP.to_owned(),
            scope: match &access.namespace {
                Some(ns) => format!(" in the namespace \"{ns}\""),
                None => " at the cluster scope".to_owned(),
            },
            reason: if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            },
        }
    }

    pub fn response(&self) -> Response {
        match self {
            Refusal::Unauthenticated => status(401, "Unauthorized", "Unauthorized", None),
            Refusal::Forbidden { .. } => status(403, "Forbidden", &self.to_string(), None),
            Refusal::ReviewFailed(_) => status(500, "InternalError", &self.to_string(), None),
        }
    }
}

/// Decides whether a request may go on.
pub trait Authorizer: Send + Sync {
    fn authorize<'a>(
        &'a self,
        identity: Option<&'a Identity>,
        access: &'a Access,
    ) -> BoxFuture<'a, Result<(), Refusal>>;
}

/// Everyone may read: the embedded API server of `olm-rs sandbox`, which authorizes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize<'a>(
        &'a self,
        _identity: Option<&'a Identity>,
        _access: &'a Access,
    ) -> BoxFuture<'a, Result<(), Refusal>> {
        Box::pin(async { Ok(()) })
    }
}

/// How long an answer of the API server is reused (client-go's delegating authorizer keeps
/// allowed answers 10 s and denied ones 10 s too, by default).
const REVIEW_TTL: Duration = Duration::from_secs(10);

/// An answer and when it was given.
type Remembered = (Instant, Result<(), Refusal>);

/// Asks the API server (SubjectAccessReview), remembering answers for [`REVIEW_TTL`].
pub struct SubjectAccessReviewer {
    client: Client,
    answers: Mutex<HashMap<(Identity, Access), Remembered>>,
}

impl SubjectAccessReviewer {
    pub fn new(client: Client) -> SubjectAccessReviewer {
        SubjectAccessReviewer {
            client,
            answers: Mutex::default(),
        }
    }

    async fn review(&self, identity: &Identity, access: &Access) -> Result<(), Refusal> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(identity.user.clone()),
                groups: Some(identity.groups.clone()),
                extra: (!identity.extra.is_empty()).then(|| identity.extra.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.to_owned()),
                    resource: Some(RESOURCE.to_owned()),
                    verb: Some(access.verb.clone()),
                    namespace: access.namespace.clone(),
                    name: access.name.clone(),
                    subresource: access.subresource.clone(),
                    version: Some("v1".to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&crate::k8s::post_params(), &review)
            .await
            .map_err(|e| Refusal::ReviewFailed(e.to_string()))?;
        let status = answer.status.unwrap_or_default();
        if status.allowed {
            Ok(())
        } else {
            Err(Refusal::forbidden(
                identity,
                access,
                status.reason.as_deref().unwrap_or(""),
            ))
        }
    }
}

impl Authorizer for SubjectAccessReviewer {
    fn authorize<'a>(
        &'a self,
        identity: Option<&'a Identity>,
        access: &'a Access,
    ) -> BoxFuture<'a, Result<(), Refusal>> {
        Box::pin(async move {
            let identity = identity.ok_or(Refusal::Unauthenticated)?;
            let key = (identity.clone(), access.clone());
            let now = Instant::now();
            {
                let mut answers = self.answers.lock().unwrap_or_else(|p| p.into_inner());
                answers.retain(|_, (at, _)| now.duration_since(*at) < REVIEW_TTL);
                if let Some((_, answer)) = answers.get(&key) {
                    return answer.clone();
                }
            }
            let answer = self.review(identity, access).await;
            if !matches!(answer, Err(Refusal::ReviewFailed(_))) {
                self.answers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, (now, answer.clone()));
            }
            answer
        })
    }
}

/// The request-header settings of `extension-apiserver-authentication`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// PEM: the CA that signs the front proxy's client certificate.
    pub client_ca_pem: String,
    /// Common names the front proxy's certificate may have (empty: any signed by the CA).
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_header_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// Reads the ConfigMap's data (`requestheader-*` keys hold JSON string lists).
    pub fn from_config_map(data: &BTreeMap<String, String>) -> Option<RequestHeaderConfig> {
        let list = |key: &str| -> Vec<String> {
            data.get(key)
                .and_then(|v| serde_json::from_str(v).ok())
                .unwrap_or_default()
        };
        let client_ca_pem = data.get("requestheader-client-ca-file")?.clone();
        Some(RequestHeaderConfig {
            client_ca_pem,
            allowed_names: list("requestheader-allowed-names"),
            username_headers: list("requestheader-username-headers"),
            group_headers: list("requestheader-group-headers"),
            extra_header_prefixes: list("requestheader-extra-headers-prefix"),
        })
    }

    /// The caller the front proxy names, given the common name of its (already verified)
    /// client certificate; `None` when the certificate's name is not allowed or no user is
    /// named.
    pub fn identity(&self, cert_common_name: &str, headers: &http::HeaderMap) -> Option<Identity> {
        if !self.allowed_names.is_empty()
            && !self.allowed_names.iter().any(|n| n == cert_common_name)
        {
            return None;
        }
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned)
                .collect()
        };
        let user = self
            .username_headers
            .iter()
            .flat_map(|h| values(h))
            .find(|u| !u.is_empty())?;
        let groups = self.group_headers.iter().flat_map(|h| values(h)).collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            for prefix in &self.extra_header_prefixes {
                let name = name.as_str();
                if name.len() > prefix.len()
                    && name[..prefix.len()].eq_ignore_ascii_case(prefix)
                    && let Ok(v) = value.to_str()
                {
                    extra
                        .entry(name[prefix.len()..].to_lowercase())
                        .or_default()
                        .push(v.to_owned());
                }
            }
        }
        Some(Identity {
            user,
            groups,
            extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RequestHeaderConfig {
        let data: BTreeMap<String, String> = [
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#,
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        RequestHeaderConfig::from_config_map(&data).unwrap()
    }

    #[test]
    fn the_front_proxy_names_the_user_only_with_an_allowed_certificate() {
        let mut headers = http::HeaderMap::new();
        headers.insert("x-remote-user", "alice".parse().unwrap());
        headers.append("x-remote-group", "devs".parse().unwrap());
        headers.append("x-remote-group", "system:authenticated".parse().unwrap());
        headers.insert("x-remote-extra-scopes", "a".parse().unwrap());
        let id = config().identity("front-proxy-client", &headers).unwrap();
        assert_eq!(id.user, "alice");
        assert_eq!(id.groups, ["devs", "system:authenticated"]);
        assert_eq!(id.extra["scopes"], ["a"]);
        assert_eq!(config().identity("someone-else", &headers), None);
        assert_eq!(
            config().identity("front-proxy-client", &http::HeaderMap::new()),
            None
        );
    }

    #[test]
    fn a_refusal_reads_like_the_api_servers() {
        let id = Identity {
            user: "bob".into(),
            groups: vec![],
            extra: BTreeMap::new(),
        };
        let refusal = Refusal::forbidden(&id, &Access::new("list", Some("team-a"), None, None), "");
        assert_eq!(
            refusal.to_string(),
            "packagemanifests.packages.operators.coreos.com is forbidden: User \"bob\" cannot list resource \"packagemanifests\" in API group \"packages.operators.coreos.com\" in the namespace \"team-a\""
        );
    }
}
