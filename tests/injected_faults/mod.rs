//! The transient faults injected between a controller and an API server (issue 36 item 4,
//! docs/reliability.md §1): which requests fail, and how the API server words each failure.
//! Shared by the embedded API server's tests (tests/integration/subscription_faults.rs) and
//! the real API server's fault proxy (tests/e2e_faults/fault_proxy.rs).

/// A well-mixed 64-bit value of `n` (splitmix64), so the faults fall where no pattern of the
/// controllers' requests can follow them.
pub fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One injected failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injected {
    /// An answer with this status code and the API server's `Status` body.
    Answer {
        code: u16,
        reason: &'static str,
        message: &'static str,
    },
    /// No answer: the connection is dropped.
    Dropped,
}

impl Injected {
    /// The `n`-th failure: 429, 500 (`etcdserver: request timed out`), 504 and a dropped
    /// connection in turn.
    pub fn nth(n: u64) -> Self {
        match n % 4 {
            0 => Injected::Answer {
                code: 429,
                reason: "TooManyRequests",
                message: "the server has received too many requests",
            },
            1 => Injected::Answer {
                code: 500,
                reason: "InternalError",
                message: "etcdserver: request timed out",
            },
            2 => Injected::Answer {
                code: 504,
                reason: "Timeout",
                message: "the server was unable to return a response in time",
            },
            _ => Injected::Dropped,
        }
    }

    /// The `Status` body of an answer.
    pub fn body(code: u16, reason: &str, message: &str) -> String {
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "code": code, "reason": reason, "message": message})
        .to_string()
    }
}

/// Whether a request's query asks for a watch: watches are never failed (a broken watch is the
/// watcher's business, it relists).
pub fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}
