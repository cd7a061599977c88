//! What an API call failed with, in the few kinds a reconciler decides on: absent (404) is
//! often fine, a conflict (409) means "computed from an old copy, sync again", forbidden (403)
//! is a missing RBAC rule to name, the rest are retried with back-off. One place matches status
//! codes; reconcilers ask [`is_not_found`], [`is_conflict`] or call [`AbsentOk::absent_ok`].

use std::error::Error as StdError;

/// The kinds of API failure a reconciler tells apart; also the `error` label of
/// `olm_rs_reconcile_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiFailure {
    /// 404: the object (or its kind) is not there.
    NotFound,
    /// 409: a resourceVersion precondition failed, or a create found the name taken.
    Conflict,
    /// 403: the identity lacks an RBAC rule.
    Forbidden,
    /// 401: the credentials were refused.
    Unauthorized,
    /// 422 / 400: the server refused the object as invalid.
    Invalid,
    /// 5xx, or 429: the server could not answer now.
    ServerError,
    /// No answer at all: connection refused, reset, timed out.
    Unreachable,
    /// Anything else (decoding, a bug).
    Other,
}

impl ApiFailure {
    /// The failure behind a kube error.
    pub fn of(err: &kube::Error) -> ApiFailure {
        match err {
            // etcd's own time-outs reach clients with varying codes (500, 504, and from some
            // aggregated servers 400 or 403): the words decide (OLM #1565).
            kube::Error::Api(status)
                if ETCD_TRANSIENT.iter().any(|m| status.message.contains(m)) =>
            {
                ApiFailure::ServerError
            }
            kube::Error::Api(status) => match status.code {
                404 => ApiFailure::NotFound,
                409 => ApiFailure::Conflict,
                403 => ApiFailure::Forbidden,
                401 => ApiFailure::Unauthorized,
                400 | 422 => ApiFailure::Invalid,
                // 408: the request timed out before the server read it whole.
                408 | 429 | 500..=599 => ApiFailure::ServerError,
                _ if TRANSIENT_REASONS.contains(&status.reason.as_str()) => ApiFailure::ServerError,
                _ => ApiFailure::Other,
            },
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
                ApiFailure::Unreachable
            }
            _ => ApiFailure::Other,
        }
    }

    /// Whether the same call may succeed later without anyone changing anything: the server was
    /// busy, timed out or could not be reached, or the object changed since it was read. Such a
    /// failure is waited out with back-off and never ends an InstallPlan
    /// (docs/install-plans.md §6.2); every other one is the request's own fault.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            ApiFailure::Conflict | ApiFailure::ServerError | ApiFailure::Unreachable
        )
    }

    /// 401 or 403: the server refuses olm-rs's identity; retrying will not help.
    pub fn is_refusal(self) -> bool {
        matches!(self, ApiFailure::Unauthorized | ApiFailure::Forbidden)
    }

    /// The metric label.
    pub fn metric_label(self) -> &'static str {
        match self {
            ApiFailure::NotFound => "not_found",
            ApiFailure::Conflict => CONFLICT,
            ApiFailure::Forbidden => "forbidden",
            ApiFailure::Unauthorized => "unauthorized",
            ApiFailure::Invalid => "invalid",
            ApiFailure::ServerError => "server_error",
            ApiFailure::Unreachable => "unreachable",
            ApiFailure::Other => "other",
        }
    }
}

/// What etcd answers through the API server when it could not commit in time; transient
/// whatever the status code.
const ETCD_TRANSIENT: [&str; 3] = [
    "etcdserver: request timed out",
    "etcdserver: leader changed",
    "etcdserver: too many requests",
];

/// `Status.reason`s that mean "try again" (the code is usually 429 or 5xx already).
const TRANSIENT_REASONS: [&str; 3] = ["ServerTimeout", "Timeout", "TooManyRequests"];

/// Whether retrying `err` unchanged can succeed ([`ApiFailure::is_transient`]).
pub fn is_transient(err: &kube::Error) -> bool {
    ApiFailure::of(err).is_transient()
}

/// The `error` label of a write refused with 409: it was computed from an older copy.
pub const CONFLICT: &str = "conflict";

/// The `error` label of a reconcile the core refused: the object itself cannot be reconciled
/// (a bad spec, a CSV not ready yet).
pub const DECISION: &str = "decision";

/// The `error` label of a reconcile stopped by the controller's shutdown (its stores ended).
pub const SHUTDOWN: &str = "shutdown";

/// An error a reconcile fails with, as `olm_rs_reconcile_errors_total{kind,error}` counts it.
/// Each controller's error type says, variant by variant, what kind of failure it is: an API
/// call's ([`ApiFailure::metric_label`]: `conflict`, `forbidden`, …), a [`DECISION`], or a
/// [`SHUTDOWN`]. A new variant does not compile until it is classified.
pub trait ReconcileFailure: StdError {
    /// The `error` label.
    fn error_label(&self) -> &'static str;
}

/// 404.
pub fn is_not_found(err: &kube::Error) -> bool {
    ApiFailure::of(err) == ApiFailure::NotFound
}

/// 409.
pub fn is_conflict(err: &kube::Error) -> bool {
    ApiFailure::of(err) == ApiFailure::Conflict
}

/// 403.
pub fn is_forbidden(err: &kube::Error) -> bool {
    ApiFailure::of(err) == ApiFailure::Forbidden
}

/// A group-version being established (404, 503) or discovery not answering yet: wait for it.
pub fn is_not_served_yet(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 404 || status.code == 503,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}

/// The 403 a terminating namespace answers a create with (`… because it is being terminated`).
pub fn is_namespace_terminating(err: &kube::Error) -> bool {
    is_forbidden(err)
        && matches!(err, kube::Error::Api(status) if status.message.contains("being terminated"))
}

/// A read or delete where "not there" is an answer, not an error.
pub trait AbsentOk<T> {
    type Error;
    /// `Ok(Some(value))`, `Ok(None)` on 404, other errors unchanged.
    fn absent_ok(self) -> Result<Option<T>, Self::Error>;
}

impl<T> AbsentOk<T> for Result<T, kube::Error> {
    type Error = kube::Error;
    fn absent_ok(self) -> Result<Option<T>, kube::Error> {
        match self {
            Ok(value) => Ok(Some(value)),
            Err(err) if is_not_found(&err) => Ok(None),
            Err(err) => Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("test", "Test")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn status_codes_map_to_the_kinds_reconcilers_decide_on() {
        let cases = [
            (404, ApiFailure::NotFound),
            (409, ApiFailure::Conflict),
            (403, ApiFailure::Forbidden),
            (401, ApiFailure::Unauthorized),
            (422, ApiFailure::Invalid),
            (503, ApiFailure::ServerError),
            (429, ApiFailure::ServerError),
            (418, ApiFailure::Other),
        ];
        for (code, kind) in cases {
            assert_eq!(ApiFailure::of(&api(code)), kind, "{code}");
        }
        assert!(is_not_found(&api(404)) && !is_not_found(&api(409)));
        assert!(is_conflict(&api(409)) && !is_conflict(&api(404)));
        assert!(is_forbidden(&api(403)) && !is_namespace_terminating(&api(403)));
        let terminating = kube::Error::Api(
            kube::core::Status::failure(
                "configmaps \"x\" is forbidden: unable to create new content in namespace a because it is being terminated",
                "Forbidden",
            )
            .with_code(403)
            .boxed(),
        );
        assert!(is_namespace_terminating(&terminating));
    }

    fn status(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn transient_failures_are_the_ones_a_retry_can_cure() {
        let io = |kind| kube::Error::ReadEvents(std::io::Error::from(kind));
        let service = |text: &str| kube::Error::Service(text.to_owned().into());
        let cases: Vec<(&str, kube::Error, bool)> = vec![
            (
                "throttled",
                status(429, "TooManyRequests", "slow down"),
                true,
            ),
            ("internal error", status(500, "InternalError", "boom"), true),
            ("bad gateway", api(502), true),
            ("unavailable", api(503), true),
            ("gateway timeout", status(504, "Timeout", "timed out"), true),
            ("request timeout", api(408), true),
            (
                "etcd timeout as a 500",
                status(500, "InternalError", "etcdserver: request timed out"),
                true,
            ),
            (
                "etcd timeout under another code",
                status(
                    400,
                    "BadRequest",
                    "rpc error: etcdserver: request timed out",
                ),
                true,
            ),
            (
                "etcd leader change",
                status(500, "InternalError", "etcdserver: leader changed"),
                true,
            ),
            (
                "server timeout reason",
                status(418, "ServerTimeout", "later"),
                true,
            ),
            (
                "conflict",
                status(409, "Conflict", "the object has been modified"),
                true,
            ),
            (
                "connection reset",
                io(std::io::ErrorKind::ConnectionReset),
                true,
            ),
            (
                "connection dropped",
                service("connection closed before message completed"),
                true,
            ),
            ("not found", api(404), false),
            ("forbidden", api(403), false),
            ("unauthorized", api(401), false),
            (
                "invalid",
                status(422, "Invalid", "spec.x: Required value"),
                false,
            ),
            (
                "bad request",
                status(400, "BadRequest", "cannot decode"),
                false,
            ),
            ("teapot", api(418), false),
            (
                "undecodable answer",
                kube::Error::SerdeError(serde_json::from_str::<u8>("x").unwrap_err()),
                false,
            ),
        ];
        for (case, error, transient) in cases {
            assert_eq!(is_transient(&error), transient, "{case}: {error}");
        }
    }

    #[test]
    fn absent_is_an_answer_and_other_errors_stay() {
        let found: Result<u8, kube::Error> = Ok(1);
        assert_eq!(found.absent_ok().unwrap(), Some(1));
        let gone: Result<u8, kube::Error> = Err(api(404));
        assert_eq!(gone.absent_ok().unwrap(), None);
        let refused: Result<u8, kube::Error> = Err(api(403));
        assert!(refused.absent_ok().is_err());
    }
}
