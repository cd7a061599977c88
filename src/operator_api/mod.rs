//! The Operator API (docs/operator-api.md): which objects make up an installed operator, and
//! what its `operators.coreos.com/v1` Operator says of them. Pure: the shell
//! (`reconcile::operator`) observes, [`decision::decide`] returns the writes.
//!
//! An operator's objects carry its component label, `operators.coreos.com/<name>` with an
//! empty value; the Operator's status lists every object that carries it. [`names`] spells
//! the names and the label, [`component`] is what the decision sees of one object, [`operands`]
//! which operands' watches an Operator needs and which operands still lack its label.

pub mod component;
pub mod decision;
pub mod names;
pub mod operands;

pub use component::{Component, CsvOwner, SubscriptionView};
pub use decision::{Observed, decide};
pub use names::{component_label_key, operator_name, operator_names};
