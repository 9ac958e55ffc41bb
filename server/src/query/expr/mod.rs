//! The aggregation expression language used by `$expr`, find projections and the pipeline:
//! field paths, variables (`$$ROOT`, `$$CURRENT`, `$$REMOVE`, `$$NOW` and names bound by
//! `$let`, `$map`, `$filter`, `$reduce`), literals, and operators (comparison, boolean,
//! arithmetic and math, conditionals, arrays, strings, conversions, objects, date parts). An
//! unknown operator or an unbound variable is a parse error, never a literal.
//!
//! Values are owned `Bson`; a missing value is `None` (distinct from null, as in mongod: it
//! compares below null and a projection omits it). Comparisons are not type-bracketed: they
//! use the one total order of `storage::order`.

// One file per topic; `apply`, `apply_named` and `eval_special` below are the dispatch tables.
mod args;
mod arithmetic;
pub(crate) mod array_n;
mod arrays;
mod bindata;
mod bindata_numeric;
mod bson_values;
#[cfg(test)]
mod code_tests;
mod comparison;
mod control;
mod convert;
mod date_math;
mod date_parts;
mod date_string;
mod dates;
#[cfg(test)]
mod decimal_tests;
mod objects;
pub mod outer;
mod parse;
pub(crate) mod quantile;
mod sets;
mod shapes;
mod strings;
#[cfg(test)]
mod tests;
mod trig;
mod tz;
#[cfg(test)]
mod tz_tests;
mod variables;

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::path::value_at_path;
use crate::query::types;
use args::Value;
use bson::{Bson, Document, RawDocument};

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
    /// Server-side JavaScript (`$function`, and `$where` with `this` bound to the document).
    Js {
        source: String,
        this_root: bool,
        args: Vec<Expr>,
        /// Variables the function sees (`$where` code-with-scope, mapReduce's `scope`).
        scope: Option<Document>,
    },
    /// `$_internalJsEmit` (mapReduce's map): the `{k, v}` pairs `source` emits for `this`.
    JsEmit {
        source: String,
        this: Expr,
        scope: Option<Document>,
    },
    DateToString {
        date: Expr,
        format: Option<Expr>,
        on_null: Option<Expr>,
        timezone: Option<Expr>,
    },
    /// `$firstN`/`$lastN`/`$maxN`/`$minN` over an array.
    ArrayN {
        op: array_n::ArrayNOp,
        n: Expr,
        input: Expr,
    },
    /// `$percentile` / `$median` over an array or a number; `ps` are constant.
    Quantile {
        op: quantile::QuantileOp,
        ps: Vec<f64>,
        input: Expr,
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
    // Trigonometry.
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
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
    ToUuid,
    IndexOfCp,
    Rand,
    Week,
    IsoWeek,
    IsoWeekYear,
    IsoDayOfWeek,
    // BSON shapes and timestamps.
    BsonSize,
    BinarySize,
    TsSecond,
    TsIncrement,
    // Statistics over the arguments (or one array argument).
    StdDevPop,
    StdDevSamp,
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
        // A yield point per node (a real check every `TICKS_PER_CHECK`): `$map`, `$reduce`
        // and `$filter` over long arrays evaluate their bodies millions of times.
        crate::interrupt::tick()?;
        match self {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Field(path) | Expr::Root(path) => {
                if path.is_empty() {
                    return Ok(Some(Bson::Document(
                        Document::try_from(root).unwrap_or_default(),
                    )));
                }
                let top = root.get(&path[0]).ok().flatten().map(types::to_owned);
                Ok(top.and_then(|v| value_at_path(&v, &path[1..])))
            }
            Expr::Var(name, path) => {
                Ok(lookup_var(scope, name).and_then(|v| value_at_path(&v, path)))
            }
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
            Expr::Special(s) => eval_special(s, root, scope),
        }
    }
}

fn lookup_var(scope: &Scope, name: &str) -> Option<Bson> {
    if let Some((_, v)) = scope.iter().rev().find(|(n, _)| n == name) {
        return v.clone();
    }
    match name {
        "NOW" => Some(Bson::DateTime(bson::DateTime::now())),
        _ => outer::value(name),
    }
}

fn eval_op(
    op: Operator,
    args: &[Expr],
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Option<Bson>> {
    // Short-circuiting operators evaluate their arguments lazily.
    match op {
        Operator::And | Operator::Or => return control::and_or(op, args, root, scope),
        Operator::Cond => return control::cond(args, root, scope),
        Operator::IfNull => return control::if_null(args, root, scope),
        _ => {}
    }
    let mut values = Vec::with_capacity(args.len());
    for e in args {
        values.push(e.eval(root, scope)?);
    }
    apply(op, values)
}

/// The one dispatch table of the positional-argument operators: each operator and the topic
/// file that applies it to its evaluated arguments (`$and`, `$or`, `$cond` and `$ifNull`
/// evaluate their own arguments, in `eval_op`).
fn apply(op: Operator, values: Vec<Value>) -> CommandResult<Value> {
    use Operator::*;
    match op {
        Eq | Ne | Gt | Gte | Lt | Lte | Cmp => comparison::compare(op, &values),
        Not => control::not(&values),
        Add => arithmetic::add(&values),
        Subtract => arithmetic::subtract(&values),
        Multiply => arithmetic::multiply(&values),
        Divide => arithmetic::divide(&values),
        Mod => arithmetic::modulo(&values),
        Abs => arithmetic::abs(&values),
        Floor | Ceil | Sqrt | Exp | Ln | Log10 | Trunc | Round | Pow | Log => {
            arithmetic::math(op, &values)
        }
        Sin | Cos | Tan | Asin | Acos | Atan | Atan2 | Sinh | Cosh | Tanh | Asinh | Acosh
        | Atanh | DegreesToRadians | RadiansToDegrees => trig::trig(op, &values),
        Sum | Avg | Min | Max | StdDevPop | StdDevSamp => arithmetic::accumulate(op, values),
        BsonSize | BinarySize | TsSecond | TsIncrement => bson_values::apply(op, &values[0]),
        Rand => arithmetic::rand(),
        Size => arrays::size(&values),
        In => arrays::in_array(&values),
        ArrayElemAt | ConcatArrays | First | Last | IsArray | ReverseArray | Slice
        | IndexOfArray | Range | ArrayToObject | ObjectToArray | AnyElementTrue
        | AllElementsTrue => arrays::arrays(op, values),
        Concat => strings::concat(&values),
        ToLower | ToUpper => strings::change_case(op, &values),
        StrLenBytes | StrLenCp | Substr | SubstrCp | Split | StrCaseCmp | IndexOfBytes => {
            strings::strings(op, &values)
        }
        IndexOfCp => strings::index_of_cp(&values),
        Type => convert::type_of(&values),
        ToString | ToInt | ToLong | ToDouble | ToDecimal | ToBool | IsNumber => {
            convert::convert(op, &values[0])
        }
        ToObjectId => convert::to_object_id(&values[0]),
        ToDate => convert::to_date(&values[0]),
        ToUuid => bindata::to_uuid(&values[0]),
        MergeObjects => objects::merge_objects(values),
        Year | Month | DayOfMonth | Hour | Minute | Second | Millisecond | DayOfWeek
        | DayOfYear | Week | IsoWeek | IsoWeekYear | IsoDayOfWeek => dates::date_part(op, &values),
        SetUnion | SetIntersection | SetDifference | SetEquals | SetIsSubset => {
            sets::sets(op, &values)
        }
        And | Or | Cond | IfNull => Err(err(
            ErrorCode::InternalError,
            format!("operator {op:?} has no implementation"),
        )),
    }
}

/// The dispatch table of the named-argument operators; `values[i]` is `None` when argument `i`
/// (in the parser's table order) was not given.
fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    match op {
        NamedOp::RegexMatch | NamedOp::RegexFind | NamedOp::RegexFindAll => {
            strings::regex_op(op, arg(0), arg(1), arg(2))
        }
        NamedOp::ReplaceOne | NamedOp::ReplaceAll => strings::replace(op, arg(0), arg(1), arg(2)),
        NamedOp::SortArray => arrays::sort_array(arg(0), arg(1)),
        NamedOp::Convert => convert::convert_named(&values),
        NamedOp::DateAdd | NamedOp::DateSubtract | NamedOp::DateDiff | NamedOp::DateTrunc => {
            date_math::apply_named(op, values)
        }
        NamedOp::DateToParts | NamedOp::DateFromParts | NamedOp::DateFromString => {
            date_parts::apply_named(op, values)
        }
        NamedOp::SetField | NamedOp::UnsetField => objects::set_field(op, &values),
        NamedOp::Zip => arrays::zip(arg(0), arg(1), arg(2)),
    }
}

/// The dispatch of the forms with named arguments or bound variables.
fn eval_special(s: &Special, root: &RawDocument, scope: &mut Scope) -> CommandResult<Value> {
    match s {
        Special::Let { vars, body } => variables::let_vars(vars, body, root, scope),
        Special::Map { input, name, body }
        | Special::Filter {
            input,
            name,
            cond: body,
            ..
        } => variables::map_filter(s, input, name, body, root, scope),
        Special::Reduce {
            input,
            initial,
            body,
        } => variables::reduce(input, initial, body, root, scope),
        Special::Switch { branches, default } => {
            control::switch(branches, default.as_ref(), root, scope)
        }
        Special::GetField { field, input } => objects::get_field(field, input, root, scope),
        Special::Js {
            source,
            this_root,
            args,
            scope: js_scope,
        } => {
            let this = match this_root {
                true => Some(
                    Document::try_from(root)
                        .map_err(|e| err(ErrorCode::BadValue, format!("invalid document: {e}")))?,
                ),
                false => None,
            };
            let mut vals = Vec::with_capacity(args.len());
            for a in args {
                vals.push(a.eval(root, scope)?.unwrap_or(Bson::Null));
            }
            crate::query::js::call_scoped(source, js_scope.as_ref(), this.as_ref(), &vals).map(Some)
        }
        Special::JsEmit {
            source,
            this,
            scope: js_scope,
        } => {
            let this = match this.eval(root, scope)? {
                Some(Bson::Document(d)) => d,
                _ => {
                    return Err(err(
                        ErrorCode::BadValue,
                        "$_internalJsEmit 'this' must evaluate to an object",
                    ));
                }
            };
            crate::query::js::emits(source, js_scope.as_ref(), &this)
                .map(|pairs| Some(Bson::Array(pairs)))
        }
        Special::Trim {
            input,
            chars,
            left,
            right,
        } => strings::trim(input, chars.as_ref(), *left, *right, root, scope),
        Special::Named { op, args } => {
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(match a {
                    Some(e) => Some(e.eval(root, scope)?),
                    None => None,
                });
            }
            apply_named(*op, values)
        }
        Special::DateToString {
            date,
            format,
            on_null,
            timezone,
        } => dates::eval_date_to_string(
            date,
            format.as_ref(),
            on_null.as_ref(),
            timezone.as_ref(),
            root,
            scope,
        ),
        Special::ArrayN { op, n, input } => {
            let n = n.eval(root, scope)?;
            array_n::evaluate(*op, n, input.eval(root, scope)?)
        }
        Special::Quantile { op, ps, input } => {
            Ok(Some(quantile::evaluate(*op, ps, input.eval(root, scope)?)))
        }
    }
}

pub(crate) fn truthy(v: &Option<Bson>) -> bool {
    v.as_ref().is_some_and(types::is_truthy)
}
