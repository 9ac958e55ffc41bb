//! Pipeline variables in expressions: `AggExpr`, the expression wrapper that resolves the
//! variables the pipeline knows, and the check of user variable names.
//!
//! `crate::query::expr` binds only its own names (`$let`, `$map`, ...), so before
//! an expression is parsed every `$$name` whose value the pipeline knows (`$$NOW`,
//! `$$CLUSTER_TIME`, `let` constants) is
//! replaced by `{$literal: value}`; a path into a variable that reaches nothing becomes a field
//! path no document can have (its name holds a NUL byte, which BSON keys cannot), which
//! evaluates to "missing". Names bound by `$let`/`$map`/`$filter`/`$reduce` hide pipeline
//! variables inside their bodies. `$$REMOVE` and `$$ROOT` are left to the expression module.

use super::ParseContext;
use super::values::to_raw;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::expr::Expr;
use bson::{Bson, Document, RawBsonRef, RawDocument};

/// A field path that is missing in every document (see the module note).
const REMOVE_PATH: &str = "$\u{0}REMOVE";

/// An aggregation expression with pipeline variables already resolved.
#[derive(Debug, Clone)]
pub struct AggExpr {
    expr: Expr,
}

/// What an expression gave for one document: a value read in place from the raw document, a
/// computed value, or "missing".
#[derive(Debug)]
pub enum Value<'d> {
    Missing,
    Raw(RawBsonRef<'d>),
    Owned(Bson),
}

impl Value<'_> {
    /// The value as an owned `Bson` (`None`: missing).
    pub fn into_owned(self) -> Option<Bson> {
        match self {
            Value::Missing => None,
            Value::Raw(r) => Some(crate::query::types::to_owned(r)),
            Value::Owned(v) => Some(v),
        }
    }
}

impl AggExpr {
    pub fn parse(spec: &Bson, ctx: &ParseContext) -> CommandResult<AggExpr> {
        let resolved = substitute(spec, &ctx.variables);
        Ok(AggExpr {
            expr: Expr::parse(&resolved)?,
        })
    }

    /// True when the expression is a constant (no field or variable read).
    pub fn is_constant(&self) -> bool {
        self.expr.is_constant()
    }

    /// Evaluates without decoding the document when the expression is a field path (`$a.b`)
    /// that descends through sub-documents only: the value is then borrowed from `root`. A
    /// path that meets an array before its end maps over the array's elements (aggregation
    /// path semantics), which builds a new value, so it goes through the general evaluation.
    pub fn eval_raw<'d>(&self, root: &'d RawDocument) -> CommandResult<Value<'d>> {
        let path = match &self.expr {
            Expr::Field(p) | Expr::Root(p) if !p.is_empty() => p,
            Expr::Literal(v) => return Ok(Value::Owned(v.clone())),
            _ => return Ok(self.eval(root)?.map_or(Value::Missing, Value::Owned)),
        };
        let mut current = RawBsonRef::Document(root);
        for component in path {
            current = match current {
                RawBsonRef::Document(d) => match d.get(component) {
                    Ok(Some(v)) => v,
                    Ok(None) => return Ok(Value::Missing),
                    // A malformed element: let the general evaluation report it as it does.
                    Err(_) => return Ok(self.eval(root)?.map_or(Value::Missing, Value::Owned)),
                },
                RawBsonRef::Array(_) => {
                    return Ok(self.eval(root)?.map_or(Value::Missing, Value::Owned));
                }
                _ => return Ok(Value::Missing),
            };
        }
        Ok(Value::Raw(current))
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
