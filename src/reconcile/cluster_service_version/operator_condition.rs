//! Writes a CSV's OperatorCondition, its Role and RoleBinding, and the status copied from what
//! the operator reported, as [`crate::csv::operator_condition::plan`] decided.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::Api;

use crate::api::OperatorCondition;
use crate::csv::operator_condition::OperatorConditionWrites;
use crate::k8s::apply::{apply_owned, apply_status};

use super::ReconcileError;

pub async fn write(
    client: &Client,
    ns: &str,
    name: &str,
    writes: &OperatorConditionWrites,
) -> Result<(), ReconcileError> {
    let fail = |what: &str| {
        let what = format!("{what} {ns}/{name}");
        move |source| ReconcileError::Kube { what, source }
    };
    let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), ns);
    if let Some(condition) = &writes.condition {
        apply_owned(&conditions, condition)
            .await
            .map_err(fail("apply OperatorCondition"))?;
    }
    if let Some(role) = &writes.role {
        let roles: Api<Role> = Api::namespaced(client.clone(), ns);
        apply_owned(&roles, role)
            .await
            .map_err(fail("apply OperatorCondition Role"))?;
    }
    if let Some(binding) = &writes.role_binding {
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
        apply_owned(&bindings, binding)
            .await
            .map_err(fail("apply OperatorCondition RoleBinding"))?;
    }
    if let Some(status) = &writes.status {
        apply_status(&conditions, name, status)
            .await
            .map_err(fail("write status of OperatorCondition"))?;
    }
    Ok(())
}
