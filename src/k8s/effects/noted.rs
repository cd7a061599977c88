//! The executor carrying out writes one by one and saying, write by write, what the API server
//! answered and warned: an InstallPlan records a status and the API server's warnings per step
//! (docs/install-plans.md §7.3), and keeps the steps written before a refused one.

use kube::Client;
use kube::core::DynamicObject;

use super::{Answers, Write, perform};
use crate::k8s::warnings::WarningLog;
use crate::k8s::write::ApiError;

/// One write carried out.
#[derive(Debug)]
pub struct NotedWrite {
    /// The server's answer (`None`: a delete of an object already gone, or a create-if-absent
    /// whose name was taken).
    pub answer: Option<DynamicObject>,
    /// The warnings the API server returned for it.
    pub warnings: Vec<String>,
}

/// The write that failed and stopped the rest.
#[derive(Debug)]
pub struct NotedFailure {
    pub error: ApiError,
    /// The warnings the API server returned with its refusal.
    pub warnings: Vec<String>,
}

/// What [`execute_noted`] did: the writes carried out, in order, and the failure that stopped
/// the rest, if one did (the write right after the last one done).
#[derive(Debug, Default)]
pub struct Noted {
    pub done: Vec<NotedWrite>,
    pub failed: Option<NotedFailure>,
}

/// Carries out `writes` in order with `client`, stopping at the first failure, as
/// [`super::execute`] does (a [`Write::StatusAfter`] refers to the answers of the writes before
/// it); `warnings` is the log `client` records into
/// (`k8s::warnings::recording`), emptied before each write so that each write's warnings are
/// its own.
pub async fn execute_noted(client: &Client, warnings: &WarningLog, writes: &[Write]) -> Noted {
    let mut noted = Noted::default();
    let mut answers = Answers::default();
    for one in writes {
        warnings.take();
        let done = match answers.resolve(one) {
            Ok(sent) => perform(client, &sent).await,
            Err(refused) => Err(refused),
        };
        match done {
            Ok(answer) => {
                answers.note(one, answer.as_ref());
                noted.done.push(NotedWrite {
                    answer,
                    warnings: warnings.take(),
                });
            }
            Err(error) => {
                noted.failed = Some(NotedFailure {
                    error,
                    warnings: warnings.take(),
                });
                break;
            }
        }
    }
    noted
}
