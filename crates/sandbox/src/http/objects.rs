//! Handlers for object and collection URLs: get, create, update, delete, delete-collection;
//! list/watch and patch live in their own files.

use axum::body::Body;
use axum::response::Response;
use http::Method;
use serde_json::json;

use super::body;
use super::ctx::{Ctx, field_manager};
use super::list_watch;
use super::patch;
use super::render::Renderer;
use super::response;
use super::route::{Format, Query, ResourcePath};
use crate::error::ApiError;
use crate::meta;
use crate::objects::{self, Part};
use crate::patch as patch_semantics;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::server::ApiServer;
use crate::table::IncludeObject;

pub struct Req {
    pub method: Method,
    pub target: ResourcePath,
    pub query: Query,
    pub format: Format,
    pub content_type: Option<String>,
    pub user_agent: Option<String>,
    pub path: String,
}

pub async fn handle(server: ApiServer, req: Req, body: Body) -> Response {
    match dispatch(server, req, body).await {
        Ok(resp) => resp,
        Err(err) => response::error(&err),
    }
}

async fn dispatch(server: ApiServer, req: Req, body: Body) -> Result<Response, ApiError> {
    let t = &req.target;
    let res = server
        .read(|s| s.resolve(&t.group, &t.version, &t.plural))
        .ok_or_else(|| ApiError::no_route(&req.path))?;
    if t.namespace.is_some() && !res.namespaced {
        return Err(ApiError::no_route(&req.path));
    }
    let part = match t.subresource.as_deref() {
        None => Part::Main,
        Some("status") if res.status_subresource => Part::Status,
        Some("finalize") if res.group.is_empty() && res.kind == "Namespace" => Part::Finalize,
        Some(_) => return Err(ApiError::no_route(&req.path)),
    };
    let watch = t.watch_prefix || req.query.flag("watch");
    let ctx = Ctx {
        server,
        render: Renderer {
            res: res.clone(),
            format: req.format,
            include: IncludeObject::parse(req.query.get("includeObject")),
        },
        res,
        namespace: t.namespace.clone(),
        query: req.query.clone(),
        content_type: req.content_type.clone(),
        user_agent: req.user_agent.clone(),
    };
    let name = t.name.clone();
    let warning = ctx.res.deprecation_warning.clone();
    let result = match (&req.method, name) {
        (&Method::GET, None) if watch => list_watch::watch(ctx, None),
        (&Method::GET, Some(name)) if watch => list_watch::watch(ctx, Some(name)),
        (&Method::GET, None) => list_watch::list(&ctx),
        (&Method::GET, Some(name)) => get(&ctx, &name),
        (&Method::POST, None) => create(&ctx, body).await,
        (&Method::PUT, Some(name)) => update(&ctx, &name, part, body).await,
        (&Method::PATCH, Some(name)) => patch::patch(&ctx, &name, part, body).await,
        (&Method::DELETE, Some(name)) if part == Part::Main => delete(&ctx, &name, body).await,
        (&Method::DELETE, None) => delete_collection(&ctx, body).await,
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({m} {})",
            req.path
        ))),
    };
    match warning {
        Some(text) => Ok(with_warning(
            result.unwrap_or_else(|e| response::error(&e)),
            &text,
        )),
        None => result,
    }
}

/// Adds `Warning: 299 - "<text>"` (RFC 7234 §5.5, the form Kubernetes uses).
fn with_warning(mut response: Response, text: &str) -> Response {
    let quoted = text.replace('\\', "\\\\").replace('"', "\\\"");
    if let Ok(value) = http::HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
        response.headers_mut().append(http::header::WARNING, value);
    }
    response
}

fn get(ctx: &Ctx, name: &str) -> Result<Response, ApiError> {
    let ns = ctx.namespace.as_deref().unwrap_or_default();
    let obj = ctx
        .server
        .read(|s| s.store.get(&ctx.res.group_resource(), ns, name).cloned())
        .ok_or_else(|| ApiError::not_found(&ctx.res, name))?;
    Ok(response::json(200, &ctx.render.object(&obj, true)))
}

async fn create(ctx: &Ctx, body: Body) -> Result<Response, ApiError> {
    let mut obj = body::decode(&body::read(body).await?, ctx.content_type.as_deref())?;
    let opts = body::write_options(&ctx.query);
    patch_semantics::record_update(None, &mut obj, &field_manager(ctx), &meta::now_rfc3339());
    let created = ctx
        .server
        .write(|s| objects::create(s, &ctx.res, ctx.namespace.as_deref(), obj, &opts))?;
    Ok(response::json(201, &ctx.render.object(&created, true)))
}

async fn update(ctx: &Ctx, name: &str, part: Part, body: Body) -> Result<Response, ApiError> {
    let mut obj = body::decode(&body::read(body).await?, ctx.content_type.as_deref())?;
    let opts = body::write_options(&ctx.query);
    let manager = field_manager(ctx);
    let ns = ctx.namespace.as_deref();
    let updated = ctx.server.write(|s| {
        let old = s
            .store
            .get(&ctx.res.group_resource(), ns.unwrap_or_default(), name)
            .map(|o| objects::present_ref(o, &ctx.res));
        let now = meta::now_rfc3339();
        match (&old, part) {
            (None, _) => {}
            (Some(_), Part::Status) => {
                patch_semantics::record_status_update(old.as_deref(), &mut obj, &manager, &now)
            }
            (Some(_), _) => {
                patch_semantics::record_update(old.as_deref(), &mut obj, &manager, &now)
            }
        }
        drop(old);
        objects::update(s, &ctx.res, ns, name, obj, part, &opts)
    })?;
    Ok(response::json(200, &ctx.render.object(&updated, true)))
}

/// 200 with the object when it is gone, 202 with it while finalizers hold it.
async fn delete(ctx: &Ctx, name: &str, body: Body) -> Result<Response, ApiError> {
    let opts = body::delete_options(&ctx.query, &body::read(body).await?)?;
    let ns = ctx.namespace.as_deref();
    let (obj, still_there) = ctx.server.write(|s| {
        let obj = objects::delete(s, &ctx.res, ns, name, &opts)?;
        let still_there = s
            .store
            .get(&ctx.res.group_resource(), ns.unwrap_or_default(), name)
            .is_some();
        Ok::<_, ApiError>((obj, still_there))
    })?;
    let code = if still_there && !opts.write.dry_run {
        202
    } else {
        200
    };
    Ok(response::json(code, &ctx.render.object(&obj, true)))
}

/// Deletes every object the selectors match; answers with the list of what was deleted.
async fn delete_collection(ctx: &Ctx, body: Body) -> Result<Response, ApiError> {
    let opts = body::delete_options(&ctx.query, &body::read(body).await?)?;
    let labels = LabelSelector::parse(ctx.query.get("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields = FieldSelector::parse(ctx.query.get("fieldSelector").unwrap_or_default(), &ctx.res)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let gr = ctx.res.group_resource();
    let deleted = ctx.server.write(|s| {
        let targets: Vec<(String, String)> = s
            .store
            .list(&gr, ctx.namespace.as_deref())
            .filter(|o| labels.matches(o) && fields.matches(o))
            .map(|o| {
                (
                    meta::namespace(o).unwrap_or_default().to_string(),
                    meta::name(o).unwrap_or_default().to_string(),
                )
            })
            .collect();
        let mut deleted = Vec::new();
        for (ns, name) in targets {
            deleted.push(objects::delete(s, &ctx.res, Some(&ns), &name, &opts)?);
        }
        let rv = s.store.current_rv();
        Ok::<_, ApiError>((deleted, rv))
    });
    let (deleted, rv) = deleted?;
    let list = ctx
        .render
        .list(&deleted, json!({"resourceVersion": rv.to_string()}));
    Ok(response::json(200, &list))
}
