//! The aggregation expression language, as far as `$expr` and find projections need it today:
//! field paths, `$$ROOT`/`$$CURRENT`, literals, comparison, boolean, arithmetic, `$cond`,
//! `$ifNull`, `$size`, `$in`, `$concat`, `$toLower`/`$toUpper`, `$type`. The aggregation
//! pipeline grows this module; an unknown operator is always an error, never a literal.
//!
//! Values are owned `Bson`; a missing field is `None` (distinct from null, as in mongod: it
//! compares below null and a projection omits it). Comparisons here are not type-bracketed:
//! they use the one total order of `storage::order`.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::limits::EXPR_DEPTH_MAX;
use crate::query::types;
use bson::{Bson, Document, RawDocument};
use std::cmp::Ordering;
use storage::order;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Literal(Bson),
    /// `$a.b`: a path from the current document.
    Field(Vec<String>),
    /// `$$ROOT` / `$$CURRENT` with an optional path after them.
    Root(Vec<String>),
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
    Op(Operator, Vec<Expr>),
}

/// The operators this module knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
    Cmp,
    And,
    Or,
    Not,
    Add,
    Subtract,
    Multiply,
    Divide,
    Mod,
    Abs,
    Cond,
    IfNull,
    Size,
    In,
    Concat,
    ToLower,
    ToUpper,
    Type,
}

/// `(name, operator, exact argument count or None for variadic)`.
const OPERATORS: &[(&str, Operator, Option<usize>)] = &[
    ("$eq", Operator::Eq, Some(2)),
    ("$ne", Operator::Ne, Some(2)),
    ("$gt", Operator::Gt, Some(2)),
    ("$gte", Operator::Gte, Some(2)),
    ("$lt", Operator::Lt, Some(2)),
    ("$lte", Operator::Lte, Some(2)),
    ("$cmp", Operator::Cmp, Some(2)),
    ("$and", Operator::And, None),
    ("$or", Operator::Or, None),
    ("$not", Operator::Not, Some(1)),
    ("$add", Operator::Add, None),
    ("$subtract", Operator::Subtract, Some(2)),
    ("$multiply", Operator::Multiply, None),
    ("$divide", Operator::Divide, Some(2)),
    ("$mod", Operator::Mod, Some(2)),
    ("$abs", Operator::Abs, Some(1)),
    ("$cond", Operator::Cond, Some(3)),
    ("$ifNull", Operator::IfNull, None),
    ("$size", Operator::Size, Some(1)),
    ("$in", Operator::In, Some(2)),
    ("$concat", Operator::Concat, None),
    ("$toLower", Operator::ToLower, Some(1)),
    ("$toUpper", Operator::ToUpper, Some(1)),
    ("$type", Operator::Type, Some(1)),
];

impl Expr {
    /// Parses an expression value (`"$a"`, `{$add: [...]}`, a literal, ...).
    pub fn parse(v: &Bson) -> CommandResult<Expr> {
        parse(v, 0)
    }

    /// True when the expression refers to no document field (a constant).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Literal(_) => true,
            Expr::Field(_) | Expr::Root(_) => false,
            Expr::Object(fields) => fields.iter().all(|(_, e)| e.is_constant()),
            Expr::Array(items) | Expr::Op(_, items) => items.iter().all(Expr::is_constant),
        }
    }

    /// Evaluates against `root`; a missing result reads as null.
    pub fn evaluate(&self, root: &RawDocument) -> CommandResult<Bson> {
        Ok(self.evaluate_value(root)?.unwrap_or(Bson::Null))
    }

    /// Evaluates against `root`; `None` means "missing".
    pub fn evaluate_value(&self, root: &RawDocument) -> CommandResult<Option<Bson>> {
        match self {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Field(path) | Expr::Root(path) => {
                if path.is_empty() {
                    return Ok(Some(Bson::Document(
                        Document::try_from(root).unwrap_or_default(),
                    )));
                }
                let top = root.get(&path[0]).ok().flatten().map(types::to_owned);
                Ok(top.and_then(|v| field_path(&v, &path[1..])))
            }
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.evaluate_value(root)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    // Missing values inside an array literal become null.
                    out.push(e.evaluate(root)?);
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(op, args) => eval_op(*op, args, root),
        }
    }
}

/// Aggregation path semantics: through arrays, collecting each element's value.
fn field_path(v: &Bson, rest: &[String]) -> Option<Bson> {
    let Some(first) = rest.first() else {
        return Some(v.clone());
    };
    match v {
        Bson::Document(d) => d.get(first).and_then(|x| field_path(x, &rest[1..])),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| field_path(e, rest))
                .collect(),
        )),
        _ => None,
    }
}

fn parse(v: &Bson, depth: usize) -> CommandResult<Expr> {
    if depth > EXPR_DEPTH_MAX {
        return Err(err(ErrorCode::BadValue, "expression nesting is too deep"));
    }
    match v {
        Bson::String(s) if s.starts_with("$$") => parse_variable(&s[2..]),
        Bson::String(s) if s.starts_with('$') => {
            let path = &s[1..];
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("'{s}' is not a valid field path"),
                ));
            }
            Ok(Expr::Field(path.split('.').map(str::to_string).collect()))
        }
        Bson::Array(items) => Ok(Expr::Array(
            items
                .iter()
                .map(|i| parse(i, depth + 1))
                .collect::<CommandResult<_>>()?,
        )),
        Bson::Document(d) => parse_document(d, depth),
        other => Ok(Expr::Literal(other.clone())),
    }
}

fn parse_variable(rest: &str) -> CommandResult<Expr> {
    let mut parts = rest.split('.');
    let name = parts.next().unwrap_or("");
    let path: Vec<String> = parts.map(str::to_string).collect();
    match name {
        "ROOT" | "CURRENT" => Ok(Expr::Root(path)),
        _ => Err(err(
            ErrorCode::Location17276,
            format!("Use of undefined variable: {name}"),
        )),
    }
}

fn parse_document(d: &Document, depth: usize) -> CommandResult<Expr> {
    let Some(first) = d.keys().next() else {
        return Ok(Expr::Object(Vec::new()));
    };
    if !first.starts_with('$') {
        let mut fields = Vec::with_capacity(d.len());
        for (k, v) in d {
            if k.starts_with('$') {
                return Err(err(
                    ErrorCode::Location16410,
                    "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
                ));
            }
            fields.push((k.clone(), parse(v, depth + 1)?));
        }
        return Ok(Expr::Object(fields));
    }
    if d.len() != 1 {
        return Err(err(
            ErrorCode::Location15983,
            format!(
                "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {d}",
                d.len()
            ),
        ));
    }
    let arg = d.get(first).unwrap_or(&Bson::Null);
    if first == "$literal" {
        return Ok(Expr::Literal(arg.clone()));
    }
    let Some((name, op, arity)) = OPERATORS.iter().find(|(n, _, _)| n == first) else {
        return Err(err(
            ErrorCode::InvalidPipelineOperator,
            format!("Unrecognized expression '{first}'"),
        ));
    };
    let args = parse_args(*op, arg, depth)?;
    if let Some(n) = arity
        && args.len() != *n
    {
        return Err(err(
            ErrorCode::Location16020,
            format!(
                "Expression {name} takes exactly {n} arguments. {} were passed in.",
                args.len()
            ),
        ));
    }
    if *op == Operator::IfNull && args.len() < 2 {
        return Err(err(
            ErrorCode::Location16020,
            "$ifNull needs at least two arguments",
        ));
    }
    Ok(Expr::Op(*op, args))
}

fn parse_args(op: Operator, arg: &Bson, depth: usize) -> CommandResult<Vec<Expr>> {
    match (op, arg) {
        (Operator::Cond, Bson::Document(d))
            if !d.keys().next().is_some_and(|k| k.starts_with('$')) =>
        {
            let mut parts = Vec::with_capacity(3);
            for key in ["if", "then", "else"] {
                match d.get(key) {
                    Some(v) => parts.push(parse(v, depth + 1)?),
                    None => {
                        return Err(err(
                            ErrorCode::Location17080,
                            format!("Missing '{key}' parameter to $cond"),
                        ));
                    }
                }
            }
            if let Some(extra) = d
                .keys()
                .find(|k| !matches!(k.as_str(), "if" | "then" | "else"))
            {
                return Err(err(
                    ErrorCode::Location17080,
                    format!("Unrecognized parameter to $cond: {extra}"),
                ));
            }
            Ok(parts)
        }
        (_, Bson::Array(items)) => items.iter().map(|i| parse(i, depth + 1)).collect(),
        (_, single) => Ok(vec![parse(single, depth + 1)?]),
    }
}

/// Missing reads as undefined in comparisons, which orders it just below null.
fn cmp_values(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    let undefined = Bson::Undefined;
    order::compare_bson(
        a.as_ref().unwrap_or(&undefined),
        b.as_ref().unwrap_or(&undefined),
    )
}

fn eval_op(op: Operator, args: &[Expr], root: &RawDocument) -> CommandResult<Option<Bson>> {
    let arg = |i: usize| args.get(i).map_or(Ok(None), |e| e.evaluate_value(root));
    let boolean = |b: bool| Ok(Some(Bson::Boolean(b)));
    match op {
        Operator::Eq => boolean(cmp_values(&arg(0)?, &arg(1)?) == Ordering::Equal),
        Operator::Ne => boolean(cmp_values(&arg(0)?, &arg(1)?) != Ordering::Equal),
        Operator::Gt => boolean(cmp_values(&arg(0)?, &arg(1)?) == Ordering::Greater),
        Operator::Gte => boolean(cmp_values(&arg(0)?, &arg(1)?) != Ordering::Less),
        Operator::Lt => boolean(cmp_values(&arg(0)?, &arg(1)?) == Ordering::Less),
        Operator::Lte => boolean(cmp_values(&arg(0)?, &arg(1)?) != Ordering::Greater),
        Operator::Cmp => Ok(Some(Bson::Int32(match cmp_values(&arg(0)?, &arg(1)?) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }))),
        Operator::And => {
            for e in args {
                if !truthy(&e.evaluate_value(root)?) {
                    return boolean(false);
                }
            }
            boolean(true)
        }
        Operator::Or => {
            for e in args {
                if truthy(&e.evaluate_value(root)?) {
                    return boolean(true);
                }
            }
            boolean(false)
        }
        Operator::Not => boolean(!truthy(&arg(0)?)),
        Operator::Cond => {
            if truthy(&arg(0)?) {
                arg(1)
            } else {
                arg(2)
            }
        }
        Operator::IfNull => {
            for e in &args[..args.len().saturating_sub(1)] {
                if let Some(v) = e.evaluate_value(root)?
                    && !matches!(v, Bson::Null | Bson::Undefined)
                {
                    return Ok(Some(v));
                }
            }
            arg(args.len().saturating_sub(1))
        }
        _ => {
            let values = args
                .iter()
                .map(|e| e.evaluate_value(root))
                .collect::<CommandResult<Vec<_>>>()?;
            super::expr_ops::apply(op, values)
        }
    }
}

fn truthy(v: &Option<Bson>) -> bool {
    v.as_ref().is_some_and(types::is_truthy)
}
