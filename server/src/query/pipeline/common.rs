//! Pieces every stage shares: the expression wrapper that resolves pipeline variables, the
//! run context, and memory accounting. (Paths over owned documents: `crate::query::path`.)
//!
//! Variables: `crate::query::expr` binds only its own names (`$let`, `$map`, ...), so before
//! an expression is parsed every `$$name` whose value the pipeline knows (`$$NOW`,
//! `$$CLUSTER_TIME`, `let` constants) is
//! replaced by `{$literal: value}`; a path into a variable that reaches nothing becomes a field
//! path no document can have (its name holds a NUL byte, which BSON keys cannot), which
//! evaluates to "missing". Names bound by `$let`/`$map`/`$filter`/`$reduce` hide pipeline
//! variables inside their bodies. `$$REMOVE` and `$$ROOT` are left to the expression module.

use super::ParseContext;
use super::PipelineEnv;
use super::codes::{self, perr};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::expr::Expr;
use bson::{Bson, Document, RawDocument, RawDocumentBuf};

/// A field path that is missing in every document (see the module note).
const REMOVE_PATH: &str = "$\u{0}REMOVE";

/// What a stage may use while running.
#[derive(Clone, Copy)]
pub struct RunCx<'a> {
    pub env: &'a dyn PipelineEnv,
    pub allow_disk_use: bool,
    pub memory_max_bytes: usize,
}

impl RunCx<'_> {
    /// Fails with mongod's 292 once `used_bytes` passes the bound and disk use is not allowed,
    /// and gives the environment its chance to interrupt (blocking stages call this per document).
    pub fn charge(&self, used_bytes: usize, stage: &str) -> CommandResult<()> {
        self.env.check_interrupt()?;
        if used_bytes > self.memory_max_bytes && !self.allow_disk_use {
            return Err(perr(
                codes::MEMORY_NO_DISK_USE,
                format!(
                    "{stage} exceeded memory limit of {} bytes, but did not opt in to external sorting.",
                    self.memory_max_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// An aggregation expression with pipeline variables already resolved.
#[derive(Debug, Clone)]
pub struct AggExpr {
    expr: Expr,
}

impl AggExpr {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<AggExpr> {
        let resolved = substitute(spec, &ctx.variables);
        Ok(AggExpr {
            expr: Expr::parse(&resolved)?,
        })
    }

    /// Evaluates against a raw document; `None` is "missing".
    pub fn eval(&self, root: &RawDocument) -> CommandResult<Option<Bson>> {
        self.expr.evaluate_value(root)
    }

    /// Evaluates against an owned document (encodes it first).
    pub fn eval_on(&self, doc: &Document) -> CommandResult<Option<Bson>> {
        self.eval(&to_raw(doc)?)
    }
}

/// Replaces known `$$variables` in an expression specification (see the module note).
pub fn substitute(spec: &Bson, vars: &Document) -> Bson {
    match spec {
        Bson::String(s) if s.starts_with("$$") => {
            let rest = &s[2..];
            let (name, path) = match rest.split_once('.') {
                Some((n, p)) => (n, Some(p)),
                None => (rest, None),
            };
            let Some(value) = vars.get(name) else {
                return spec.clone();
            };
            let value = match path {
                None => Some(value.clone()),
                Some(p) => {
                    crate::query::path::value_at_path(value, &p.split('.').collect::<Vec<_>>())
                }
            };
            match value {
                Some(v) => Bson::Document(bson::doc! {"$literal": v}),
                None => Bson::String(REMOVE_PATH.to_string()),
            }
        }
        Bson::Array(items) => Bson::Array(items.iter().map(|i| substitute(i, vars)).collect()),
        Bson::Document(d) => {
            if d.len() == 1 && d.contains_key("$literal") {
                return spec.clone();
            }
            if let Some(scoped) = substitute_binder(d, vars) {
                return scoped;
            }
            let mut out = Document::new();
            for (k, v) in d {
                out.insert(k.clone(), substitute(v, vars));
            }
            Bson::Document(out)
        }
        other => other.clone(),
    }
}

/// `$let`, `$map`, `$filter` and `$reduce` bind names that hide pipeline variables of the
/// same name inside their bodies; this substitutes around them. `None` for other documents.
fn substitute_binder(d: &Document, vars: &Document) -> Option<Bson> {
    let (op, Bson::Document(arg)) = d.iter().next()? else {
        return None;
    };
    if d.len() != 1 {
        return None;
    }
    let as_name = || match arg.get("as") {
        Some(Bson::String(s)) => s.clone(),
        _ => "this".to_string(),
    };
    let (hidden, body_keys): (Vec<String>, &[&str]) = match op.as_str() {
        "$let" => match arg.get("vars") {
            Some(Bson::Document(v)) => (v.keys().cloned().collect(), &["in"]),
            _ => return None,
        },
        "$map" => (vec![as_name()], &["in"]),
        "$filter" => (vec![as_name()], &["cond"]),
        "$reduce" => (vec!["this".to_string(), "value".to_string()], &["in"]),
        _ => return None,
    };
    let mut inner = vars.clone();
    for name in &hidden {
        inner.remove(name);
    }
    let mut out = Document::new();
    for (k, v) in arg {
        let scope = if body_keys.contains(&k.as_str()) {
            &inner
        } else {
            vars
        };
        out.insert(k.clone(), substitute(v, scope));
    }
    let mut wrapper = Document::new();
    wrapper.insert(op.clone(), out);
    Some(Bson::Document(wrapper))
}

/// User variable names start with a lowercase letter and hold letters, digits and `_`.
pub fn check_variable_name(name: &str) -> CommandResult<()> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || !c.is_ascii())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii());
    if ok {
        Ok(())
    } else {
        Err(err(
            ErrorCode::FailedToParse,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ))
    }
}

/// Encodes an owned document so that expressions and filters can read it.
pub fn to_raw(doc: &Document) -> CommandResult<RawDocumentBuf> {
    RawDocumentBuf::try_from(doc).map_err(|e| {
        err(
            ErrorCode::BadValue,
            format!("document cannot be encoded: {e}"),
        )
    })
}

/// Splits and checks a field path written without `$` (`a.b.c`).
pub fn split_field_path(path: &str) -> CommandResult<Vec<String>> {
    if path.is_empty() {
        return Err(perr(
            codes::FIELD_PATH_NULL_STRING,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.ends_with('.') {
        return Err(perr(
            codes::FIELD_PATH_TRAILING_DOT,
            "FieldPath must not end with a '.'.",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(perr(
            codes::FIELD_PATH_EMPTY,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if parts[0].starts_with('$') {
        return Err(perr(
            codes::FIELD_PATH_DOLLAR,
            format!("FieldPath field names may not start with '$'. Given FieldPath: {path}"),
        ));
    }
    Ok(parts)
}

/// An estimate of the memory a value holds, for the blocking-stage bound.
pub fn value_size_bytes(v: &Bson) -> usize {
    match v {
        Bson::String(s) => s.len() + 16,
        Bson::Document(d) => doc_size_bytes(d),
        Bson::Array(items) => items.iter().map(value_size_bytes).sum::<usize>() + 16,
        Bson::Binary(b) => b.bytes.len() + 16,
        _ => 16,
    }
}

pub fn doc_size_bytes(d: &Document) -> usize {
    d.iter()
        .map(|(k, v)| k.len() + value_size_bytes(v))
        .sum::<usize>()
        + 16
}

/// mongod's type name of a value, for error messages.
pub fn type_name(v: &Bson) -> &'static str {
    crate::query::types::type_name(crate::query::types::type_code(v))
}

/// A numeric argument as an i64 when it is integral (`5`, `5.0`, `NumberLong(5)`).
pub fn integral(v: &Bson) -> Option<i64> {
    crate::query::types::as_i64_exact(v)
}

/// A byte key equal for values that `storage::order` calls equal (1, 1.0 and 1L share one),
/// used to hash group keys and set members.
pub fn value_key(v: &Bson) -> Vec<u8> {
    let mut out = Vec::new();
    if let Ok(raw) = bson::RawBson::try_from(v.clone()) {
        storage::keycode::encode_value(&mut out, raw.as_raw_bson_ref());
    }
    out
}
