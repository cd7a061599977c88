//! Every reconciler of `olm-rs run` together (`controller::run_reconcilers`) watches each kind
//! (and label selector) exactly once, also the kinds several of them read
//! (docs/controller-startup.md, "One reconciler shape"): the requests reaching the API server
//! are counted.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use olm_rs::k8s::clock::SystemClock;
use olm_rs::reconcile::{Context, ControllerOptions};
use olm_rs::sandbox::ApiServer;

/// The embedded API server's router, noting the path and label selector of every watch.
#[derive(Clone)]
struct CountingWatches {
    router: axum::Router,
    watches: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl tower::Service<http::Request<kube::client::Body>> for CountingWatches {
    type Response = http::Response<axum::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let uri = request.uri();
        let query: Vec<(String, String)> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.to_owned(), percent_decoded(v)))
            .collect();
        if query.iter().any(|(k, v)| k == "watch" && v == "true") {
            let selector = query
                .iter()
                .find(|(k, _)| k == "labelSelector")
                .map(|(_, v)| format!("?{v}"))
                .unwrap_or_default();
            let key = format!("{}{selector}", uri.path());
            *self.watches.lock().unwrap().entry(key).or_default() += 1;
        }
        let mut router = self.router.clone();
        Box::pin(async move { tower::Service::call(&mut router, request).await })
    }
}

fn percent_decoded(text: &str) -> String {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex: String = bytes.by_ref().take(2).map(char::from).collect();
                out.push(u8::from_str_radix(&hex, 16).unwrap());
            }
            b'+' => out.push(b' '),
            other => out.push(other),
        }
    }
    String::from_utf8(out).unwrap()
}

/// The kinds several controllers read, as their watches' paths (and label selector).
const SHARED: &[&str] = &[
    "/api/v1/namespaces",
    "/apis/operators.coreos.com/v1/operatorgroups",
    "/apis/operators.coreos.com/v1alpha1/subscriptions",
    "/api/v1/serviceaccounts",
    "/apis/rbac.authorization.k8s.io/v1/roles",
    "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/apis/apiregistration.k8s.io/v1/apiservices",
    "/api/v1/services?olm.managed=true",
    "/apis/operators.coreos.com/v1alpha1/clusterserviceversions?!olm.copiedFrom",
    "/apis/operators.coreos.com/v1alpha1/installplans",
    "/apis/apps/v1/deployments?olm.managed=true",
    "/api/v1/secrets?olm.managed=true",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/apis/operators.coreos.com/v2/operatorconditions",
    "/apis/operators.coreos.com/v1/operators",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations?olm.managed=true",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations?olm.managed=true",
];

#[tokio::test]
async fn every_kind_is_watched_once_by_all_reconcilers_together() {
    let server = ApiServer::new();
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    for crd in olm_rs::api::crd::all().unwrap() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let watches = Arc::new(Mutex::new(BTreeMap::new()));
    let client = kube::Client::new(
        CountingWatches {
            router: server.service(),
            watches: Arc::clone(&watches),
        },
        "default",
    );
    let ctx = Arc::new(Context::new(
        client,
        Arc::new(SystemClock),
        ControllerOptions::default(),
    ));
    let running = tokio::spawn(olm_rs::controller::run_reconcilers(ctx));

    let seen = || watches.lock().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !SHARED.iter().all(|kind| seen().contains_key(*kind)) {
        assert!(
            Instant::now() < deadline,
            "not every shared kind was watched: {:?}",
            seen()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Time for a second watch of a kind, were any controller to open one of its own.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = seen();
    running.abort();
    for (kind, watches) in &seen {
        assert_eq!(*watches, 1, "{kind} in {seen:#?}");
    }
}
