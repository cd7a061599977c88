//! A client that acts as a ServiceAccount (scoped installs, subscription-installplan.md §10).
//!
//! OLM fetches the account's token; olm-rs impersonates it instead (`Impersonate-User` and the
//! account's groups), which needs no Secret and keeps no token in memory. The controller's
//! ClusterRole must allow `impersonate` on `serviceaccounts`.

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
    let all = HeaderValue::from_static("system:serviceaccounts");
    let own = HeaderValue::from_str(&format!("system:serviceaccounts:{namespace}"))?;
    let authenticated = HeaderValue::from_static("system:authenticated");
    let inner = client.clone();
    let service = tower::service_fn(move |mut request: Request<Body>| {
        let headers = request.headers_mut();
        headers.insert("Impersonate-User", user.clone());
        headers.append("Impersonate-Group", all.clone());
        headers.append("Impersonate-Group", own.clone());
        headers.append("Impersonate-Group", authenticated.clone());
        let inner = inner.clone();
        async move { inner.send(request).await }.boxed()
    });
    Ok(Client::new(service, namespace.to_owned()))
}
