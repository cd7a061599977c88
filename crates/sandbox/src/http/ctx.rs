//! What a handler knows about the addressed resource, shared by every handler module.

use std::sync::Arc;

use super::render::Renderer;
use super::route::Query;
use crate::resources::ResourceInfo;
use crate::server::ApiServer;

/// What a handler needs about the addressed resource.
pub struct Ctx {
    pub server: ApiServer,
    pub res: Arc<ResourceInfo>,
    pub namespace: Option<String>,
    pub query: Query,
    pub render: Renderer,
    pub content_type: Option<String>,
    pub user_agent: Option<String>,
}

/// The field manager of a non-apply write: `?fieldManager=`, else the client's User-Agent up to
/// the first `/` (as the real server derives it), else `unknown`.
pub fn field_manager(ctx: &Ctx) -> String {
    if let Some(m) = ctx.query.get("fieldManager") {
        return m.to_string();
    }
    ctx.user_agent
        .as_deref()
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}
