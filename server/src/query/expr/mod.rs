//! The aggregation expression language used by `$expr`, find projections and the pipeline:
//! field paths, variables (`$$ROOT`, `$$CURRENT`, `$$REMOVE`, `$$NOW` and names bound by
//! `$let`, `$map`, `$filter`, `$reduce`), literals, and operators (comparison, boolean,
//! arithmetic and math, conditionals, arrays, strings, conversions, objects, date parts). An
//! unknown operator or an unbound variable is a parse error, never a literal.
//!
//! Values are owned `Bson`; a missing value is `None` (distinct from null, as in mongod: it
//! compares below null and a projection omits it). Comparisons are not type-bracketed: they
//! use the one total order of `storage::order`.

mod calendar;
mod date_math;
mod date_parts;
mod date_string;
mod dates;
mod extra;
mod more;
mod ops;
mod parse;
mod special;
#[cfg(test)]
mod tests;
mod tz;
#[cfg(test)]
mod tz_tests;

use crate::error::CommandResult;
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
    /// `$$name.path` for a variable bound by an enclosing `$let/$map/$filter/$reduce`, or the
    /// system variables `REMOVE` (missing) and `NOW`.
    Var(String, Vec<String>),
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
    Op(Operator, Vec<Expr>),
    /// Operators that bind variables or take named arguments.
    Special(Box<Special>),
}

/// Operators whose arguments are named or that bind variables.
#[derive(Debug, Clone, PartialEq)]
pub enum Special {
    Let {
        vars: Vec<(String, Expr)>,
        body: Expr,
    },
    Map {
        input: Expr,
        name: String,
        body: Expr,
    },
    Filter {
        input: Expr,
        name: String,
        cond: Expr,
        limit: Option<Expr>,
    },
    Reduce {
        input: Expr,
        initial: Expr,
        body: Expr,
    },
    Switch {
        branches: Vec<(Expr, Expr)>,
        default: Option<Expr>,
    },
    GetField {
        field: Expr,
        input: Expr,
    },
    Trim {
        input: Expr,
        chars: Option<Expr>,
        left: bool,
        right: bool,
    },
    /// Named-argument operators evaluated in `extra.rs`; `args` follow the table's order.
    Named {
        op: NamedOp,
        args: Vec<Option<Expr>>,
    },
    DateToString {
        date: Expr,
        format: Option<Expr>,
        on_null: Option<Expr>,
        timezone: Option<Expr>,
    },
}

/// Named-argument operators (`{$regexMatch: {input, regex}}` and the like).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamedOp {
    RegexMatch,
    RegexFind,
    RegexFindAll,
    ReplaceOne,
    ReplaceAll,
    SortArray,
    Convert,
    DateAdd,
    DateSubtract,
    DateDiff,
    DateToParts,
    DateFromParts,
    DateFromString,
    DateTrunc,
    SetField,
    UnsetField,
    Zip,
}

/// The positional-argument operators this module knows.
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
    // Math.
    Floor,
    Ceil,
    Trunc,
    Round,
    Sqrt,
    Pow,
    Exp,
    Ln,
    Log10,
    Log,
    Sum,
    Avg,
    Min,
    Max,
    // Arrays.
    ArrayElemAt,
    ConcatArrays,
    First,
    Last,
    IsArray,
    ReverseArray,
    Slice,
    IndexOfArray,
    Range,
    ArrayToObject,
    ObjectToArray,
    AnyElementTrue,
    AllElementsTrue,
    // Strings.
    StrLenBytes,
    StrLenCp,
    Substr,
    SubstrCp,
    Split,
    StrCaseCmp,
    IndexOfBytes,
    // Conversions and types.
    ToString,
    ToInt,
    ToLong,
    ToDouble,
    ToDecimal,
    ToBool,
    IsNumber,
    // Objects.
    MergeObjects,
    // Date parts (`$year: date` or `$year: {date, timezone}`).
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    // Sets and more conversions.
    SetUnion,
    SetIntersection,
    SetDifference,
    SetEquals,
    SetIsSubset,
    ToObjectId,
    ToDate,
    IndexOfCp,
    Rand,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
}

/// Bound variables, innermost last.
pub(crate) type Scope = Vec<(String, Option<Bson>)>;

impl Expr {
    /// Parses an expression value (`"$a"`, `{$add: [...]}`, a literal, ...).
    pub fn parse(v: &Bson) -> CommandResult<Expr> {
        parse::parse_top(v)
    }

    /// True when the expression refers to no document field or variable (a constant).
    pub fn is_constant(&self) -> bool {
        match self {
            Expr::Literal(_) => true,
            Expr::Field(_) | Expr::Root(_) | Expr::Var(..) | Expr::Special(_) => false,
            Expr::Object(fields) => fields.iter().all(|(_, e)| e.is_constant()),
            Expr::Op(Operator::Rand, _) => false,
            Expr::Array(items) | Expr::Op(_, items) => items.iter().all(Expr::is_constant),
        }
    }

    /// Evaluates against `root`; a missing result reads as null.
    pub fn evaluate(&self, root: &RawDocument) -> CommandResult<Bson> {
        Ok(self.evaluate_value(root)?.unwrap_or(Bson::Null))
    }

    /// Evaluates against `root`; `None` means "missing".
    pub fn evaluate_value(&self, root: &RawDocument) -> CommandResult<Option<Bson>> {
        self.eval(root, &mut Scope::new())
    }

    pub(crate) fn eval(
        &self,
        root: &RawDocument,
        scope: &mut Scope,
    ) -> CommandResult<Option<Bson>> {
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
            Expr::Var(name, path) => Ok(lookup_var(scope, name).and_then(|v| field_path(&v, path))),
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(root, scope)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    // Missing values inside an array literal become null.
                    out.push(e.eval(root, scope)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Op(op, args) => eval_op(*op, args, root, scope),
            Expr::Special(s) => special::eval_special(s, root, scope),
        }
    }
}

fn lookup_var(scope: &Scope, name: &str) -> Option<Bson> {
    if let Some((_, v)) = scope.iter().rev().find(|(n, _)| n == name) {
        return v.clone();
    }
    match name {
        "NOW" => Some(Bson::DateTime(bson::DateTime::now())),
        _ => None,
    }
}

/// Aggregation path semantics: through arrays, collecting each element's value.
pub(crate) fn field_path(v: &Bson, rest: &[String]) -> Option<Bson> {
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

/// Missing reads as undefined in comparisons, which orders it just below null.
fn cmp_values(a: &Option<Bson>, b: &Option<Bson>) -> Ordering {
    let undefined = Bson::Undefined;
    order::compare_bson(
        a.as_ref().unwrap_or(&undefined),
        b.as_ref().unwrap_or(&undefined),
    )
}

fn eval_op(
    op: Operator,
    args: &[Expr],
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Option<Bson>> {
    let boolean = |b: bool| Ok(Some(Bson::Boolean(b)));
    // Short-circuiting operators evaluate their arguments lazily.
    match op {
        Operator::And | Operator::Or => {
            let want = op == Operator::Or;
            for e in args {
                if truthy(&e.eval(root, scope)?) == want {
                    return boolean(want);
                }
            }
            return boolean(!want);
        }
        Operator::Cond => {
            let branch = if truthy(&args[0].eval(root, scope)?) {
                &args[1]
            } else {
                &args[2]
            };
            return branch.eval(root, scope);
        }
        Operator::IfNull => {
            for e in &args[..args.len().saturating_sub(1)] {
                if let Some(v) = e.eval(root, scope)?
                    && !matches!(v, Bson::Null | Bson::Undefined)
                {
                    return Ok(Some(v));
                }
            }
            return match args.last() {
                Some(e) => e.eval(root, scope),
                None => Ok(None),
            };
        }
        _ => {}
    }
    let mut values = Vec::with_capacity(args.len());
    for e in args {
        values.push(e.eval(root, scope)?);
    }
    let cmp = |v: &[Option<Bson>]| cmp_values(&v[0], &v[1]);
    match op {
        Operator::Eq => boolean(cmp(&values) == Ordering::Equal),
        Operator::Ne => boolean(cmp(&values) != Ordering::Equal),
        Operator::Gt => boolean(cmp(&values) == Ordering::Greater),
        Operator::Gte => boolean(cmp(&values) != Ordering::Less),
        Operator::Lt => boolean(cmp(&values) == Ordering::Less),
        Operator::Lte => boolean(cmp(&values) != Ordering::Greater),
        Operator::Cmp => Ok(Some(Bson::Int32(match cmp(&values) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }))),
        Operator::Not => boolean(!truthy(&values[0])),
        _ => ops::apply(op, values),
    }
}

pub(crate) fn truthy(v: &Option<Bson>) -> bool {
    v.as_ref().is_some_and(types::is_truthy)
}
