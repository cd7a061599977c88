//! The `cel` form of `olm.constraint` (docs/resolution.md §6): a CEL expression over the
//! candidate's `properties`, with OLM's extra function `semver_compare(a, b)`.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use crate::catalog::semver_range::{compare, parse_tolerant};

/// Why a CEL rule is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("the CEL rule is empty")]
    Empty,
    /// `message` is the parser's (its errors are neither `Clone` nor comparable).
    #[error("the CEL rule {rule:?} does not compile: {message}")]
    DoesNotCompile { rule: String, message: String },
    /// `gives` is the value it gives, as CEL shows it.
    #[error("the CEL rule {rule:?} gives {gives}, not a boolean")]
    NotBoolean { rule: String, gives: String },
}

/// Why a rule could not be evaluated for a candidate (the candidate does not satisfy it).
#[derive(Debug, thiserror::Error)]
enum EvalError {
    #[error(transparent)]
    Properties(#[from] cel::SerializationError),
    #[error(transparent)]
    Function(#[from] cel::DeclarationError),
    #[error(transparent)]
    Execution(#[from] cel::ExecutionError),
}

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
    pub fn compile(rule: &str) -> Result<CelRule, CelError> {
        if rule.trim().is_empty() {
            return Err(CelError::Empty);
        }
        let program = Program::compile(rule).map_err(|e| CelError::DoesNotCompile {
            rule: rule.to_owned(),
            message: e.to_string(),
        })?;
        let compiled = CelRule {
            source: rule.to_owned(),
            program,
        };
        if let Ok(other) = compiled.run(Value::Array(Vec::new()))
            && !matches!(other, CelValue::Bool(_))
        {
            return Err(CelError::NotBoolean {
                rule: rule.to_owned(),
                gives: format!("{other:?}"),
            });
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

    fn run(&self, properties: Value) -> Result<CelValue, EvalError> {
        let mut context = Context::default();
        let value = cel::to_value(properties)?;
        context.add_variable_from_value("properties", value);
        context.add_function("semver_compare", semver_compare)?;
        Ok(self.program.execute(&context)?)
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
