//! The HTTP face of the sandbox: one axum fallback handler that routes Kubernetes API paths
//! itself (the URL space is too irregular for path templates).

mod body;
mod ctx;
mod list_watch;
mod objects;
mod patch;
mod render;
mod response;
mod route;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use http::header;

use super::error::ApiError;
use super::server::ApiServer;
use super::{discovery, openapi};
use route::{Format, Query, Route};

pub fn router(server: ApiServer) -> Router {
    Router::new().fallback(handle).with_state(server)
}

async fn handle(State(server): State<ApiServer>, req: Request) -> Response {
    let aggregated = server.aggregated();
    if let Some(api) = aggregated.iter().find(|a| a.serves(req.uri().path())) {
        use tower::ServiceExt as _;
        return match api.router.clone().oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
    }
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let header_str = |name: header::HeaderName| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let format = route::format(header_str(header::ACCEPT).as_deref());
    let content_type = header_str(header::CONTENT_TYPE);
    let Some(route) = route::parse(&path) else {
        return response::error(&ApiError::no_route(&path));
    };
    let resources = || server.read(|s| s.all_resources());
    let established = || server.read(|s| s.established_resources());
    match route {
        Route::Version => response::json(200, &discovery::version(&server.options().git_version)),
        Route::Health => {
            let mut resp = Response::new(axum::body::Body::from("ok"));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            );
            resp
        }
        Route::OpenApiUnserved => response::error(&ApiError::no_route(&path)),
        Route::OpenApiRoot => response::json(200, &openapi::root(&resources())),
        Route::OpenApiGroupVersion { group, version } => {
            match openapi::group_version(&resources(), &group, &version) {
                Some(doc) => response::json(200, &doc),
                None => response::error(&ApiError::no_route(&path)),
            }
        }
        Route::CoreVersions if format == Format::AggregatedDiscovery => response::json_with_type(
            200,
            &discovery::aggregated(&resources(), true),
            discovery::AGGREGATED_CONTENT_TYPE,
        ),
        Route::CoreVersions => response::json(200, &discovery::core_versions()),
        Route::Groups if format == Format::AggregatedDiscovery => {
            let mut doc = discovery::aggregated(&resources(), false);
            if let Some(items) = doc["items"].as_array_mut() {
                items.extend(aggregated.iter().map(|a| a.aggregated_json()));
            }
            response::json_with_type(200, &doc, discovery::AGGREGATED_CONTENT_TYPE)
        }
        Route::Groups => {
            let mut doc = discovery::group_list(&resources());
            if let Some(groups) = doc["groups"].as_array_mut() {
                groups.extend(aggregated.iter().map(|a| a.group_json()));
            }
            response::json(200, &doc)
        }
        Route::Group(g) => match discovery::group(&resources(), &g) {
            Some(doc) => response::json(200, &doc),
            None => response::error(&ApiError::no_route(&path)),
        },
        Route::GroupVersion { group, version } => {
            match discovery::resource_list(&established(), &group, &version) {
                Some(doc) => response::json(200, &doc),
                None => response::error(&ApiError::no_route(&path)),
            }
        }
        Route::Resource(target) => {
            let req = objects::Req {
                method: parts.method,
                target,
                query,
                format,
                content_type,
                user_agent: header_str(header::USER_AGENT),
                path,
            };
            objects::handle(server, req, body).await
        }
    }
}
