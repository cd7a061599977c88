//! The HTTP face of the PackageManifest API: discovery, list, get, the `icon` subresource,
//! Table output, and the refusals OLM's package server gives (watch: 405; any write: 405).
//! Shared by `olm-rs run` (behind TLS and delegated auth, `tls.rs`) and `olm-rs sandbox`
//! (routed by the embedded API server). docs/packagemanifests.md §4–§7.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::json;

use super::auth::{Access, Authorizer, Identity};
use super::discovery;
use super::responses::{json_response, status};
use super::sync::FeedSlot;
use crate::k8s::clock::Clock;
use crate::package_manifest::icon::icon_response;
use crate::package_manifest::table::{self, IncludeObject};
use crate::package_manifest::types::{API_VERSION, GROUP, LIST_KIND, RESOURCE, VERSION};
use crate::package_manifest::{LabelSelector, ManifestStore, Scope, name_from_field_selector};

/// What every request handler shares.
#[derive(Clone)]
pub struct PackageApi {
    pub store: Arc<ManifestStore>,
    /// Brings `store` up to the catalogs' current content before a read (`sync.rs`).
    pub feed: FeedSlot,
    pub authorizer: Arc<dyn Authorizer>,
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for PackageApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackageApi").finish_non_exhaustive()
    }
}

pub fn router(api: PackageApi) -> Router {
    Router::new().fallback(handle).with_state(api)
}

/// A parsed request target under `/apis/packages.operators.coreos.com/v1`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Groups,
    Group,
    Resources,
    Health,
    List { namespace: Option<String> },
    Get { namespace: String, name: String },
    Icon { namespace: String, name: String },
}

fn parse(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let ns = |s: &str| s.to_owned();
    match segs.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Some(Target::Health),
        ["apis"] => Some(Target::Groups),
        ["apis", g] if *g == GROUP => Some(Target::Group),
        ["apis", g, v] if *g == GROUP && *v == VERSION => Some(Target::Resources),
        ["apis", g, v, rest @ ..] if *g == GROUP && *v == VERSION => match rest {
            [r] if *r == RESOURCE => Some(Target::List { namespace: None }),
            ["namespaces", n, r] if *r == RESOURCE => Some(Target::List {
                namespace: Some(ns(n)),
            }),
            ["namespaces", n, r, name] if *r == RESOURCE => Some(Target::Get {
                namespace: ns(n),
                name: ns(name),
            }),
            ["namespaces", n, r, name, "icon"] if *r == RESOURCE => Some(Target::Icon {
                namespace: ns(n),
                name: ns(name),
            }),
            _ => None,
        },
        _ => None,
    }
}

fn query(uri: &http::Uri) -> HashMap<String, String> {
    uri.query()
        .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

async fn handle(State(api): State<PackageApi>, req: Request) -> Response {
    let (parts, _body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let Some(target) = parse(&path) else {
        return status(
            404,
            "NotFound",
            &format!("the server could not find the requested resource ({path})"),
            None,
        );
    };
    let q = query(&parts.uri);
    let identity = parts.extensions.get::<Identity>().cloned();
    let watch = q.get("watch").is_some_and(|w| w == "true" || w == "1");
    let access = match &target {
        Target::Groups | Target::Group | Target::Resources | Target::Health => None,
        Target::List { namespace } => Some(Access::new(
            if watch { "watch" } else { "list" },
            namespace.as_deref(),
            None,
            None,
        )),
        Target::Get { namespace, name } => {
            Some(Access::new("get", Some(namespace), Some(name), None))
        }
        Target::Icon { namespace, name } => Some(Access::new(
            "get",
            Some(namespace),
            Some(name),
            Some("icon"),
        )),
    };
    if let Some(access) = &access
        && let Err(refused) = api.authorizer.authorize(identity.as_ref(), access).await
    {
        return refused.response();
    }
    if parts.method != Method::GET {
        return method_not_supported(parts.method.as_str());
    }
    if matches!(
        target,
        Target::List { .. } | Target::Get { .. } | Target::Icon { .. }
    ) {
        api.feed.refresh();
    }
    let accept = parts
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match target {
        Target::Health => text(200, "ok"),
        Target::Groups => json_response(200, &discovery::group_list()),
        Target::Group => json_response(200, &discovery::group()),
        Target::Resources => json_response(200, &discovery::resource_list()),
        Target::List { .. } if watch => method_not_supported("watch"),
        Target::List { namespace } => list(&api, namespace.as_deref(), &q, accept),
        Target::Get { namespace, name } => match api.store.get(&namespace, &name) {
            Some((manifest, _)) if wants_table(accept) => json_response(
                200,
                &table::table(&[manifest], include_object(&q), api.clock.now()),
            ),
            Some((manifest, _)) => json_response(200, &manifest),
            None => not_found(&name),
        },
        Target::Icon { namespace, name } => match api.store.get(&namespace, &name) {
            Some((_, icon)) => {
                let icon = icon_response(icon.as_ref());
                let mut resp = Response::new(Body::from(icon.bytes));
                let headers = resp.headers_mut();
                if let Ok(v) = HeaderValue::from_str(&icon.media_type) {
                    headers.insert(header::CONTENT_TYPE, v);
                }
                if let Ok(v) = HeaderValue::from_str(&icon.etag) {
                    headers.insert(header::ETAG, v);
                }
                resp
            }
            // OLM answers a missing package's icon with a bare 404.
            None => {
                let mut resp = Response::new(Body::empty());
                *resp.status_mut() = StatusCode::NOT_FOUND;
                resp
            }
        },
    }
}

fn list(
    api: &PackageApi,
    namespace: Option<&str>,
    q: &HashMap<String, String>,
    accept: &str,
) -> Response {
    let labels = match LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str)) {
        Ok(l) => l,
        Err(e) => return status(400, "BadRequest", &e.to_string(), None),
    };
    // OLM's storage returns a plain error here, which the API server answers as a 500
    // (reason Unknown) with the error's words.
    let name = match name_from_field_selector(q.get("fieldSelector").map_or("", String::as_str)) {
        Ok(n) => n,
        Err(e) => return status(500, "", &e.to_string(), None),
    };
    let scope = match namespace {
        Some(ns) => Scope::Namespace(ns),
        None => Scope::AllNamespaces,
    };
    let items = api.store.list(scope, &labels, name.as_deref());
    if wants_table(accept) {
        return json_response(
            200,
            &table::table(&items, include_object(q), api.clock.now()),
        );
    }
    json_response(
        200,
        &json!({"kind": LIST_KIND, "apiVersion": API_VERSION, "metadata": {}, "items": items}),
    )
}

fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|part| part.contains("as=Table"))
}

fn include_object(q: &HashMap<String, String>) -> IncludeObject {
    IncludeObject::parse(q.get("includeObject").map(String::as_str))
}

fn text(code: u16, body: &'static str) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn qualified_resource() -> String {
    format!("{RESOURCE}.{GROUP}")
}

fn not_found(name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", qualified_resource()),
        Some(json!({"name": name, "group": GROUP, "kind": RESOURCE})),
    )
}

/// What the API server answers for a verb the storage does not implement (OLM's: watch and
/// every write).
fn method_not_supported(verb: &str) -> Response {
    status(
        405,
        "MethodNotAllowed",
        &format!(
            "{} is not supported on resources of kind \"{}\"",
            verb.to_lowercase(),
            qualified_resource()
        ),
        Some(json!({"group": GROUP, "kind": RESOURCE})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_target() {
        let base = "/apis/packages.operators.coreos.com/v1";
        assert_eq!(
            parse(&format!("{base}/packagemanifests")),
            Some(Target::List { namespace: None })
        );
        assert_eq!(
            parse(&format!("{base}/namespaces/a/packagemanifests/etcd/icon")),
            Some(Target::Icon {
                namespace: "a".into(),
                name: "etcd".into()
            })
        );
        assert_eq!(parse(&format!("{base}/namespaces/a/other")), None);
        assert_eq!(parse("/apis/operators.coreos.com/v1"), None);
        assert_eq!(parse(base), Some(Target::Resources));
    }
}
