//! A client that acts as a ServiceAccount: scoped installs (docs/install-plans.md §10) and an
//! operator's operands (docs/operator-api.md §2).
//!
//! OLM fetches the account's token; olm-rs impersonates it instead (`Impersonate-User`), which
//! needs no Secret and keeps no token in memory. The API server gives an impersonated service
//! account its groups (`system:serviceaccounts`, `system:serviceaccounts:<namespace>`,
//! `system:authenticated`) by itself, so olm-rs names none: the controller's ClusterRole needs
//! `impersonate` on `serviceaccounts` only — never on `groups`, which would let it act as any
//! group (docs/install-plans.md §10).

use futures::FutureExt;
use http::{HeaderValue, Request};
use kube::Client;
use kube::client::Body;

/// `client`, with every request made as `system:serviceaccount:<namespace>:<name>`.
pub fn impersonating(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Client, http::header::InvalidHeaderValue> {
    let user = HeaderValue::from_str(&format!("system:serviceaccount:{namespace}:{name}"))?;
    let inner = client.clone();
    let service = tower::service_fn(move |mut request: Request<Body>| {
        request
            .headers_mut()
            .insert("Impersonate-User", user.clone());
        let inner = inner.clone();
        async move { inner.send(request).await }.boxed()
    });
    Ok(Client::new(service, namespace.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn requests_carry_the_service_account_identity() {
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let record = seen.clone();
        let backend = tower::service_fn(move |request: Request<Body>| {
            let mut headers = record.lock().unwrap();
            for (name, value) in request.headers() {
                if name.as_str().starts_with("impersonate-") {
                    headers.push((name.to_string(), value.to_str().unwrap().to_owned()));
                }
            }
            let body = r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#;
            async move {
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(
                    body.as_bytes().to_vec(),
                )))
            }
        });
        let client = Client::new(backend, "default");
        let scoped = impersonating(&client, "ops", "installer").unwrap();
        scoped.apiserver_version().await.expect("answered");
        let seen = seen.lock().unwrap().clone();
        // The user only: no group headers, which would need `impersonate` on `groups`.
        assert_eq!(
            seen,
            [(
                "impersonate-user".to_owned(),
                "system:serviceaccount:ops:installer".to_owned()
            )]
        );
    }
}
