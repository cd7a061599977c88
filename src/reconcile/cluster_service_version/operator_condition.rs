//! Writes a CSV's OperatorCondition, its Role and RoleBinding, and the status copied from what
//! the operator reported, as [`crate::csv::operator_condition::plan`] decided.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Client;
use kube::api::Api;

use crate::api::OperatorCondition;
use crate::csv::operator_condition::OperatorConditionWrites;
use crate::k8s::write::{self, Ownership, apply_status};

use super::ReconcileError;

pub async fn write(
    client: &Client,
    ns: &str,
    name: &str,
    writes: &OperatorConditionWrites,
) -> Result<(), ReconcileError> {
    let conditions: Api<OperatorCondition> = Api::namespaced(client.clone(), ns);
    if let Some(condition) = &writes.condition {
        write::apply(&conditions, condition, Ownership::Force).await?;
    }
    if let Some(role) = &writes.role {
        let roles: Api<Role> = Api::namespaced(client.clone(), ns);
        write::apply(&roles, role, Ownership::Force).await?;
    }
    if let Some(binding) = &writes.role_binding {
        let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), ns);
        write::apply(&bindings, binding, Ownership::Force).await?;
    }
    if let Some(status) = &writes.status {
        apply_status(&conditions, name, status).await?;
    }
    Ok(())
}
