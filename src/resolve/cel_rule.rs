//! The `cel` form of `olm.constraint` (docs/resolution.md §6): a CEL expression over the
//! candidate's `properties`, with OLM's extra function `semver_compare(a, b)`.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use crate::catalog::semver_range::{compare, parse_tolerant};

/// A compiled rule.
pub struct CelRule {
    source: String,
    program: Program,
}

impl std::fmt::Debug for CelRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CelRule").field(&self.source).finish()
    }
}

impl CelRule {
    /// Compiles `rule`. A rule that does not compile, or that does not give a boolean for a
    /// candidate without properties, is an error (OLM's type checker refuses non-bool rules;
    /// this interpreter is dynamically typed, so the empty candidate stands in for the check).
    pub fn compile(rule: &str) -> Result<CelRule, String> {
        if rule.trim().is_empty() {
            return Err("the CEL rule is empty".into());
        }
        let program = Program::compile(rule)
            .map_err(|e| format!("the CEL rule {rule:?} does not compile: {e}"))?;
        let compiled = CelRule {
            source: rule.to_owned(),
            program,
        };
        if let Ok(other) = compiled.run(Value::Array(Vec::new()))
            && !matches!(other, CelValue::Bool(_))
        {
            return Err(format!(
                "the CEL rule {rule:?} gives {other:?}, not a boolean"
            ));
        }
        Ok(compiled)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the rule holds for `properties` (a JSON list of `{type, value}`); an evaluation
    /// error or a non-boolean result is "no".
    pub fn evaluate(&self, properties: Value) -> bool {
        matches!(self.run(properties), Ok(CelValue::Bool(true)))
    }

    fn run(&self, properties: Value) -> Result<CelValue, String> {
        let mut context = Context::default();
        let value = cel::to_value(properties).map_err(|e| e.to_string())?;
        context.add_variable_from_value("properties", value);
        context
            .add_function("semver_compare", semver_compare)
            .map_err(|e| e.to_string())?;
        self.program.execute(&context).map_err(|e| e.to_string())
    }
}

/// -1, 0 or 1 as `a` is lower than, equal to or higher than `b` (tolerant parsing, as OLM's);
/// an unparsable version is an evaluation error.
fn semver_compare(a: Arc<String>, b: Arc<String>) -> cel::ResolveResult {
    let parse = |s: &str| {
        parse_tolerant(s)
            .map_err(|e| cel::ExecutionError::function_error("semver_compare", e.to_string()))
    };
    let ordering = compare(&parse(&a)?, &parse(&b)?);
    Ok(CelValue::Int(match ordering {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }))
}
