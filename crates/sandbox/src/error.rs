//! API errors as the Kubernetes API server reports them: a `metav1.Status` with the HTTP code,
//! a machine-readable `reason` and a message phrased the way `kubectl` users know it.

use serde_json::{Value, json};

use super::resources::ResourceInfo;

/// One failed API request. Rendered as a `Status` object (HTTP body, or watch `ERROR` event).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details.name` / `details.group` / `details.kind` as the real server fills them.
    pub details: Option<ErrorDetails>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ErrorDetails {
    pub name: String,
    pub group: String,
    /// The resource's plural name (the real server puts the resource here, not the Kind).
    pub kind: String,
}

/// `deployments.apps` / `configmaps`: how the server names a resource in messages.
fn qualified(res: &ResourceInfo) -> String {
    if res.group.is_empty() {
        res.plural.clone()
    } else {
        format!("{}.{}", res.plural, res.group)
    }
}

fn details(res: &ResourceInfo, name: &str) -> Option<ErrorDetails> {
    Some(ErrorDetails {
        name: name.to_string(),
        group: res.group.clone(),
        kind: res.plural.clone(),
    })
}

impl ApiError {
    fn plain(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        ApiError {
            details: details(res, name),
            ..Self::plain(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", qualified(res)),
            )
        }
    }

    /// 404 for a URL that names no resource at all.
    pub fn no_route(path: &str) -> Self {
        Self::plain(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    pub fn already_exists(res: &ResourceInfo, name: &str) -> Self {
        ApiError {
            details: details(res, name),
            ..Self::plain(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", qualified(res)),
            )
        }
    }

    /// 409 on a stale `resourceVersion` (optimistic concurrency) or a failed precondition.
    pub fn conflict(res: &ResourceInfo, name: &str, why: &str) -> Self {
        ApiError {
            details: details(res, name),
            ..Self::plain(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    qualified(res)
                ),
            )
        }
    }

    pub fn stale(res: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422: the object fails validation; `field` is the JSON path of the bad field.
    pub fn invalid(res: &ResourceInfo, name: &str, field: &str, why: &str) -> Self {
        ApiError {
            details: details(res, name),
            ..Self::plain(
                422,
                "Invalid",
                format!("{} \"{name}\" is invalid: {field}: {why}", res.kind),
            )
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::plain(400, "BadRequest", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::plain(403, "Forbidden", message)
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::plain(410, "Expired", message)
    }

    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::plain(405, "MethodNotAllowed", message)
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::plain(415, "UnsupportedMediaType", message)
    }

    /// The `metav1.Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            let mut details = json!({ "name": d.name, "kind": d.kind });
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            status["details"] = details;
        }
        status
    }
}
