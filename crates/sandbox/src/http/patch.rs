//! PATCH: the patch semantics live in `sandbox::patch`; this file picks the patch type from the
//! `Content-Type`, runs it against the stored object and stores the result through the normal
//! update (or, for an apply to a missing object, create) path.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use serde_json::Value;

use super::body;
use super::ctx::{Ctx, field_manager};
use super::response;
use crate::error::ApiError;
use crate::meta;
use crate::objects::{self, Part, present};
use crate::patch::{self, GroupVersionKindRef, PatchError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

fn patch_type(content_type: Option<&str>) -> Result<PatchType, ApiError> {
    let media = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    match media {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
        other => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
        ))),
    }
}

fn patch_error(err: PatchError, ctx: &Ctx, name: &str) -> ApiError {
    match err {
        PatchError::Invalid(msg) => ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{} \"{name}\" is invalid: {msg}", ctx.res.kind),
            details: None,
        },
        PatchError::UnsupportedMediaType(msg) => ApiError::unsupported_media_type(msg),
        conflict @ PatchError::Conflict { .. } => ApiError {
            code: 409,
            reason: "Conflict",
            message: conflict.to_string(),
            details: None,
        },
    }
}

/// Server-side apply of `doc` to the part of the object the request addresses. Without a
/// status subresource `status` belongs to the main resource, so it is applied there too.
#[allow(clippy::too_many_arguments)]
fn apply(
    ctx: &Ctx,
    live: Option<&Value>,
    doc: &Value,
    manager: &str,
    force: bool,
    gvk: &GroupVersionKindRef,
    now: &str,
    part: Part,
) -> Result<Value, PatchError> {
    if part == Part::Status {
        return patch::server_side_apply_status(live, doc, manager, force, gvk, now);
    }
    let main = patch::server_side_apply(live, doc, manager, force, gvk, now)?;
    if ctx.res.status_subresource || doc.get("status").is_none() {
        return Ok(main);
    }
    patch::server_side_apply_status(Some(&main), doc, manager, force, gvk, now)
}

pub async fn patch(ctx: &Ctx, name: &str, part: Part, body: Body) -> Result<Response, ApiError> {
    let kind = patch_type(ctx.content_type.as_deref())?;
    let bytes = body::read(body).await?;
    let doc = body::decode(
        &bytes,
        if kind == PatchType::Apply {
            Some("yaml")
        } else {
            None
        },
    )?;
    let opts = body::write_options(&ctx.query);
    let manager = match (kind, ctx.query.get("fieldManager")) {
        (_, Some(m)) => m.to_string(),
        (PatchType::Apply, None) => {
            return Err(ApiError::invalid(
                &ctx.res,
                "",
                "fieldManager",
                "Required value: is required for apply patch",
            ));
        }
        _ => field_manager(ctx),
    };
    if kind == PatchType::Apply
        && let Some(body_name) = meta::name(&doc)
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let force = ctx.query.flag("force");
    let gvk = GroupVersionKindRef {
        group: &ctx.res.group,
        version: &ctx.res.version,
        kind: &ctx.res.kind,
    };
    let ns = ctx.namespace.as_deref();
    let gr = ctx.res.group_resource();
    let now = meta::now_rfc3339();
    let (obj, created): (Arc<Value>, bool) = ctx.server.write(|s| {
        let live = s
            .store
            .get(&gr, ns.unwrap_or_default(), name)
            .map(|o| present(o, &ctx.res));
        let Some(live) = live else {
            if kind != PatchType::Apply || part != Part::Main {
                return Err(ApiError::not_found(&ctx.res, name));
            }
            let mut fresh = apply(ctx, None, &doc, &manager, force, &gvk, &now, part)
                .map_err(|e| patch_error(e, ctx, name))?;
            meta::set_str(&mut fresh, "name", name);
            return Ok((objects::create(s, &ctx.res, ns, fresh, &opts)?, true));
        };
        let mut next = match kind {
            PatchType::Apply => apply(ctx, Some(&live), &doc, &manager, force, &gvk, &now, part),
            PatchType::Merge => {
                let mut o = live.clone();
                patch::apply_merge_patch(&mut o, &doc);
                Ok(o)
            }
            PatchType::Json => {
                let mut o = live.clone();
                patch::apply_json_patch(&mut o, &doc).map(|()| o)
            }
            PatchType::Strategic => {
                if ctx.res.custom {
                    Err(PatchError::UnsupportedMediaType(
                        patch::UNSUPPORTED_FOR_CUSTOM_RESOURCES.to_string(),
                    ))
                } else {
                    let mut o = live.clone();
                    patch::apply_strategic_merge_patch(&mut o, &doc, &gvk).map(|()| o)
                }
            }
        }
        .map_err(|e| patch_error(e, ctx, name))?;
        if kind != PatchType::Apply {
            match part {
                Part::Status => patch::record_status_update(Some(&live), &mut next, &manager, &now),
                _ => patch::record_update(Some(&live), &mut next, &manager, &now),
            }
        }
        Ok((
            objects::update(s, &ctx.res, ns, name, next, part, &opts)?,
            false,
        ))
    })?;
    Ok(response::json(
        if created { 201 } else { 200 },
        &ctx.render.object(&obj, true),
    ))
}
