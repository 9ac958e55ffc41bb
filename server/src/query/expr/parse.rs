//! Expression values -> [`Expr`], with mongod's errors. Variables are resolved against the
//! names bound by enclosing `$let/$map/$filter/$reduce` while parsing, so an unbound `$$x` is
//! refused up front (17276) rather than evaluating to nothing.

use super::{Expr, NamedOp, Operator, Special};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::limits::EXPR_DEPTH_MAX;
use bson::{Bson, Document};

/// How many positional arguments an operator takes.
#[derive(Clone, Copy)]
enum Arity {
    Exact(usize),
    Range(usize, usize),
    Any,
}

use Arity::{Any, Exact, Range};

const OPERATORS: &[(&str, Operator, Arity)] = &[
    ("$eq", Operator::Eq, Exact(2)),
    ("$ne", Operator::Ne, Exact(2)),
    ("$gt", Operator::Gt, Exact(2)),
    ("$gte", Operator::Gte, Exact(2)),
    ("$lt", Operator::Lt, Exact(2)),
    ("$lte", Operator::Lte, Exact(2)),
    ("$cmp", Operator::Cmp, Exact(2)),
    ("$and", Operator::And, Any),
    ("$or", Operator::Or, Any),
    ("$not", Operator::Not, Exact(1)),
    ("$add", Operator::Add, Any),
    ("$subtract", Operator::Subtract, Exact(2)),
    ("$multiply", Operator::Multiply, Any),
    ("$divide", Operator::Divide, Exact(2)),
    ("$mod", Operator::Mod, Exact(2)),
    ("$abs", Operator::Abs, Exact(1)),
    ("$cond", Operator::Cond, Exact(3)),
    ("$ifNull", Operator::IfNull, Range(2, usize::MAX)),
    ("$size", Operator::Size, Exact(1)),
    ("$in", Operator::In, Exact(2)),
    ("$concat", Operator::Concat, Any),
    ("$toLower", Operator::ToLower, Exact(1)),
    ("$toUpper", Operator::ToUpper, Exact(1)),
    ("$type", Operator::Type, Exact(1)),
    ("$floor", Operator::Floor, Exact(1)),
    ("$ceil", Operator::Ceil, Exact(1)),
    ("$trunc", Operator::Trunc, Range(1, 2)),
    ("$round", Operator::Round, Range(1, 2)),
    ("$sqrt", Operator::Sqrt, Exact(1)),
    ("$pow", Operator::Pow, Exact(2)),
    ("$exp", Operator::Exp, Exact(1)),
    ("$ln", Operator::Ln, Exact(1)),
    ("$log10", Operator::Log10, Exact(1)),
    ("$log", Operator::Log, Exact(2)),
    ("$sin", Operator::Sin, Exact(1)),
    ("$cos", Operator::Cos, Exact(1)),
    ("$tan", Operator::Tan, Exact(1)),
    ("$asin", Operator::Asin, Exact(1)),
    ("$acos", Operator::Acos, Exact(1)),
    ("$atan", Operator::Atan, Exact(1)),
    ("$sinh", Operator::Sinh, Exact(1)),
    ("$cosh", Operator::Cosh, Exact(1)),
    ("$tanh", Operator::Tanh, Exact(1)),
    ("$asinh", Operator::Asinh, Exact(1)),
    ("$acosh", Operator::Acosh, Exact(1)),
    ("$atanh", Operator::Atanh, Exact(1)),
    ("$degreesToRadians", Operator::DegreesToRadians, Exact(1)),
    ("$radiansToDegrees", Operator::RadiansToDegrees, Exact(1)),
    ("$atan2", Operator::Atan2, Exact(2)),
    ("$sum", Operator::Sum, Any),
    ("$avg", Operator::Avg, Any),
    ("$min", Operator::Min, Any),
    ("$max", Operator::Max, Any),
    ("$arrayElemAt", Operator::ArrayElemAt, Exact(2)),
    ("$concatArrays", Operator::ConcatArrays, Any),
    ("$first", Operator::First, Exact(1)),
    ("$last", Operator::Last, Exact(1)),
    ("$isArray", Operator::IsArray, Exact(1)),
    ("$reverseArray", Operator::ReverseArray, Exact(1)),
    ("$slice", Operator::Slice, Range(2, 3)),
    ("$indexOfArray", Operator::IndexOfArray, Range(2, 4)),
    ("$range", Operator::Range, Range(2, 3)),
    ("$arrayToObject", Operator::ArrayToObject, Exact(1)),
    ("$objectToArray", Operator::ObjectToArray, Exact(1)),
    ("$anyElementTrue", Operator::AnyElementTrue, Exact(1)),
    ("$allElementsTrue", Operator::AllElementsTrue, Exact(1)),
    ("$strLenBytes", Operator::StrLenBytes, Exact(1)),
    ("$strLenCP", Operator::StrLenCp, Exact(1)),
    ("$substr", Operator::Substr, Exact(3)),
    ("$substrBytes", Operator::Substr, Exact(3)),
    ("$substrCP", Operator::SubstrCp, Exact(3)),
    ("$split", Operator::Split, Exact(2)),
    ("$strcasecmp", Operator::StrCaseCmp, Exact(2)),
    ("$indexOfBytes", Operator::IndexOfBytes, Range(2, 4)),
    ("$toString", Operator::ToString, Exact(1)),
    ("$toInt", Operator::ToInt, Exact(1)),
    ("$toLong", Operator::ToLong, Exact(1)),
    ("$toDouble", Operator::ToDouble, Exact(1)),
    ("$toDecimal", Operator::ToDecimal, Exact(1)),
    ("$toBool", Operator::ToBool, Exact(1)),
    ("$isNumber", Operator::IsNumber, Exact(1)),
    ("$mergeObjects", Operator::MergeObjects, Any),
    ("$year", Operator::Year, Exact(1)),
    ("$month", Operator::Month, Exact(1)),
    ("$dayOfMonth", Operator::DayOfMonth, Exact(1)),
    ("$hour", Operator::Hour, Exact(1)),
    ("$minute", Operator::Minute, Exact(1)),
    ("$second", Operator::Second, Exact(1)),
    ("$millisecond", Operator::Millisecond, Exact(1)),
    ("$dayOfWeek", Operator::DayOfWeek, Exact(1)),
    ("$dayOfYear", Operator::DayOfYear, Exact(1)),
    ("$setUnion", Operator::SetUnion, Any),
    ("$setIntersection", Operator::SetIntersection, Any),
    ("$setDifference", Operator::SetDifference, Exact(2)),
    ("$setEquals", Operator::SetEquals, Range(2, usize::MAX)),
    ("$setIsSubset", Operator::SetIsSubset, Exact(2)),
    ("$toObjectId", Operator::ToObjectId, Exact(1)),
    ("$toDate", Operator::ToDate, Exact(1)),
    ("$toUUID", Operator::ToUuid, Exact(1)),
    ("$indexOfCP", Operator::IndexOfCp, Range(2, 4)),
    ("$rand", Operator::Rand, Exact(0)),
    ("$week", Operator::Week, Exact(1)),
    ("$isoWeek", Operator::IsoWeek, Exact(1)),
    ("$isoWeekYear", Operator::IsoWeekYear, Exact(1)),
    ("$isoDayOfWeek", Operator::IsoDayOfWeek, Exact(1)),
    ("$bsonSize", Operator::BsonSize, Exact(1)),
    ("$binarySize", Operator::BinarySize, Exact(1)),
    ("$tsSecond", Operator::TsSecond, Exact(1)),
    ("$tsIncrement", Operator::TsIncrement, Exact(1)),
    ("$stdDevPop", Operator::StdDevPop, Any),
    ("$stdDevSamp", Operator::StdDevSamp, Any),
];

/// The `$convert` shorthands: a wrong argument count is 50723, not the fixed-arity 16020.
const CONVERSION_ALIASES: &[&str] = &[
    "$toString",
    "$toObjectId",
    "$toDate",
    "$toDouble",
    "$toInt",
    "$toLong",
    "$toDecimal",
    "$toBool",
    "$toUUID",
];

/// `(name, operator, required arguments, optional arguments)` for named-argument operators.
const NAMED: &[(&str, NamedOp, &[&str], &[&str])] = &[
    (
        "$regexMatch",
        NamedOp::RegexMatch,
        &["input", "regex"],
        &["options"],
    ),
    (
        "$regexFind",
        NamedOp::RegexFind,
        &["input", "regex"],
        &["options"],
    ),
    (
        "$regexFindAll",
        NamedOp::RegexFindAll,
        &["input", "regex"],
        &["options"],
    ),
    (
        "$replaceOne",
        NamedOp::ReplaceOne,
        &["input", "find", "replacement"],
        &[],
    ),
    (
        "$replaceAll",
        NamedOp::ReplaceAll,
        &["input", "find", "replacement"],
        &[],
    ),
    ("$sortArray", NamedOp::SortArray, &["input", "sortBy"], &[]),
    (
        "$convert",
        NamedOp::Convert,
        &["input", "to"],
        &["onError", "onNull", "format", "byteOrder"],
    ),
    (
        "$dateAdd",
        NamedOp::DateAdd,
        &["startDate", "unit", "amount"],
        &["timezone"],
    ),
    (
        "$dateSubtract",
        NamedOp::DateSubtract,
        &["startDate", "unit", "amount"],
        &["timezone"],
    ),
    (
        "$dateDiff",
        NamedOp::DateDiff,
        &["startDate", "endDate", "unit"],
        &["timezone", "startOfWeek"],
    ),
    (
        "$dateToParts",
        NamedOp::DateToParts,
        &["date"],
        &["iso8601", "timezone"],
    ),
    (
        "$dateFromParts",
        NamedOp::DateFromParts,
        &[],
        &[
            "year",
            "month",
            "day",
            "hour",
            "minute",
            "second",
            "millisecond",
            "isoWeekYear",
            "isoWeek",
            "isoDayOfWeek",
            "timezone",
        ],
    ),
    (
        "$dateFromString",
        NamedOp::DateFromString,
        &["dateString"],
        &["format", "onError", "onNull", "timezone"],
    ),
    (
        "$dateTrunc",
        NamedOp::DateTrunc,
        &["date", "unit"],
        &["binSize", "startOfWeek", "timezone"],
    ),
    (
        "$setField",
        NamedOp::SetField,
        &["field", "input", "value"],
        &[],
    ),
    ("$unsetField", NamedOp::UnsetField, &["field", "input"], &[]),
    (
        "$zip",
        NamedOp::Zip,
        &["inputs"],
        &["useLongestLength", "defaults"],
    ),
];

/// Operators whose single argument is an array taken whole rather than an argument list
/// (`{$sum: [1, 2]}` sums the array's elements only when it is one expression).
const VARIADIC_ACCUMULATORS: &[Operator] = &[
    Operator::Sum,
    Operator::Avg,
    Operator::Min,
    Operator::Max,
    Operator::StdDevPop,
    Operator::StdDevSamp,
];

struct Parser {
    scope: Vec<String>,
}

pub(super) fn parse_top(v: &Bson) -> CommandResult<Expr> {
    Parser { scope: Vec::new() }.parse(v, 0)
}

fn bad_path(s: &str) -> crate::error::CommandError {
    err(
        ErrorCode::Location16410,
        format!("'{s}' is not a valid field path"),
    )
}

/// mongod's `FieldPath` checks, each with its own code.
fn field_path_ok(path: &str) -> CommandResult<()> {
    if path.is_empty() {
        return Err(err(
            ErrorCode::Location16872,
            "'$' by itself is not a valid FieldPath",
        ));
    }
    if path.ends_with('.') {
        return Err(err(
            ErrorCode::Location40353,
            "FieldPath must not end with a '.'.",
        ));
    }
    if path.split('.').any(str::is_empty) {
        return Err(err(
            ErrorCode::Location15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    Ok(())
}

impl Parser {
    fn parse(&mut self, v: &Bson, depth: usize) -> CommandResult<Expr> {
        if depth > EXPR_DEPTH_MAX {
            return Err(err(ErrorCode::BadValue, "expression nesting is too deep"));
        }
        match v {
            Bson::String(s) if s.starts_with("$$") => self.variable(&s[2..]),
            Bson::String(s) if s.starts_with('$') => {
                let path = &s[1..];
                field_path_ok(path)?;
                Ok(Expr::Field(path.split('.').map(str::to_string).collect()))
            }
            Bson::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.parse(i, depth + 1)?);
                }
                Ok(Expr::Array(out))
            }
            Bson::Document(d) => self.document(d, depth),
            other => Ok(Expr::Literal(other.clone())),
        }
    }

    fn variable(&self, rest: &str) -> CommandResult<Expr> {
        let mut parts = rest.split('.');
        let name = parts.next().unwrap_or("");
        let path: Vec<String> = parts.map(str::to_string).collect();
        if path.iter().any(String::is_empty) {
            return Err(bad_path(&format!("$${rest}")));
        }
        if self.scope.iter().any(|n| n == name) || super::outer::is_known(name) {
            return Ok(Expr::Var(name.to_string(), path));
        }
        match name {
            "ROOT" | "CURRENT" => Ok(Expr::Root(path)),
            "REMOVE" | "NOW" => Ok(Expr::Var(name.to_string(), path)),
            _ => Err(err(
                ErrorCode::Location17276,
                format!("Use of undefined variable: {name}"),
            )),
        }
    }

    fn document(&mut self, d: &Document, depth: usize) -> CommandResult<Expr> {
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
                fields.push((k.clone(), self.parse(v, depth + 1)?));
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
        if first == "$meta" {
            // The text score is a reserved field of the pipeline's document (`query::meta`).
            return Ok(if crate::query::meta::parse_kind(arg)? {
                Expr::Root(vec![crate::query::meta::TEXT_SCORE_FIELD.to_string()])
            } else {
                Expr::Var("REMOVE".to_string(), Vec::new())
            });
        }
        if let Some(special) = self.special(first, arg, depth)? {
            return Ok(Expr::Special(Box::new(special)));
        }
        let Some((name, op, arity)) = OPERATORS.iter().find(|(n, _, _)| n == first) else {
            return Err(err(
                ErrorCode::InvalidPipelineOperator,
                format!("Unrecognized expression '{first}'"),
            ));
        };
        if let Some(named) = self.date_part_named(name, *op, arg, depth)? {
            return Ok(named);
        }
        let args = self.args(*op, arg, depth)?;
        let ok = match arity {
            Exact(n) => args.len() == *n,
            Range(lo, hi) => (*lo..=*hi).contains(&args.len()),
            Any => true,
        };
        if !ok && CONVERSION_ALIASES.contains(name) {
            // mongod parses the `$to*` shorthands as `$convert` aliases with their own count check.
            return Err(err(
                ErrorCode::Location50723,
                format!("{name} requires a single argument, got {}", args.len()),
            ));
        }
        if !ok {
            let wanted = match arity {
                Exact(n) => format!("exactly {n}"),
                Range(lo, hi) if *hi == usize::MAX => format!("at least {lo}"),
                Range(lo, hi) => format!("between {lo} and {hi}"),
                Any => "any number of".to_string(),
            };
            return Err(err(
                ErrorCode::Location16020,
                format!(
                    "Expression {name} takes {wanted} arguments. {} were passed in.",
                    args.len()
                ),
            ));
        }
        Ok(Expr::Op(*op, args))
    }

    /// `{$year: {date, timezone}}`, the date-part operators' named form (an object whose first
    /// key is not an operator), parsed to `Op(op, [date, timezone])`.
    fn date_part_named(
        &mut self,
        name: &str,
        op: Operator,
        arg: &Bson,
        depth: usize,
    ) -> CommandResult<Option<Expr>> {
        use Operator::*;
        let Bson::Document(d) = arg else {
            return Ok(None);
        };
        let date_part = matches!(
            op,
            Year | Month
                | DayOfMonth
                | Hour
                | Minute
                | Second
                | Millisecond
                | DayOfWeek
                | DayOfYear
                | Week
                | IsoWeek
                | IsoWeekYear
                | IsoDayOfWeek
        );
        if !date_part || d.keys().next().is_some_and(|k| k.starts_with('$')) {
            return Ok(None);
        }
        if let Some(extra) = d.keys().find(|k| *k != "date" && *k != "timezone") {
            return Err(err(
                ErrorCode::Location40535,
                format!("unrecognized option to {name}: \"{extra}\""),
            ));
        }
        let Some(date) = d.get("date") else {
            return Err(err(
                ErrorCode::Location40539,
                format!("missing 'date' argument to {name}, provided: {d}"),
            ));
        };
        let mut args = vec![self.parse(date, depth + 1)?];
        if let Some(tz) = d.get("timezone") {
            args.push(self.parse(tz, depth + 1)?);
        }
        let timezone = [args.get(1).cloned()];
        super::dates::check_constant_args(name, ["timezone"].into_iter(), &timezone)?;
        Ok(Some(Expr::Op(op, args)))
    }

    fn args(&mut self, op: Operator, arg: &Bson, depth: usize) -> CommandResult<Vec<Expr>> {
        match (op, arg) {
            (Operator::Cond, Bson::Document(d))
                if !d.keys().next().is_some_and(|k| k.starts_with('$')) =>
            {
                // An unknown field is 17083 here (missing ones 17080, as `named` answers).
                if let Some(k) = d
                    .keys()
                    .find(|k| !matches!(k.as_str(), "if" | "then" | "else"))
                {
                    return Err(err(
                        ErrorCode::Location17083,
                        format!("Unrecognized parameter to $cond: {k}"),
                    ));
                }
                let parts = self.named(d, "$cond", &["if", "then", "else"], &[], depth)?;
                Ok(parts.into_iter().flatten().collect())
            }
            // `{$rand: {}}` takes no arguments.
            (Operator::Rand, Bson::Document(d)) if d.is_empty() => Ok(Vec::new()),
            (_, Bson::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for i in items {
                    out.push(self.parse(i, depth + 1)?);
                }
                Ok(out)
            }
            // `{$sum: "$xs"}`: one argument, which may itself be an array at run time.
            (op, single) if VARIADIC_ACCUMULATORS.contains(&op) => {
                Ok(vec![self.parse(single, depth + 1)?])
            }
            (_, single) => Ok(vec![self.parse(single, depth + 1)?]),
        }
    }

    /// Parses named arguments: `required` must be present, `optional` may be; others refused.
    fn named(
        &mut self,
        d: &Document,
        op: &str,
        required: &[&str],
        optional: &[&str],
        depth: usize,
    ) -> CommandResult<Vec<Option<Expr>>> {
        let codes = super::shapes::named_codes(op);
        if let Some(extra) = d
            .keys()
            .find(|k| !required.contains(&k.as_str()) && !optional.contains(&k.as_str()))
        {
            return Err(match &codes {
                Some(c) => c.unknown(op, extra),
                None => err(
                    ErrorCode::Location17080,
                    format!("Unrecognized parameter to {op}: {extra}"),
                ),
            });
        }
        // mongod looks at which fields are there before parsing any of them.
        if let Some(c) = &codes {
            c.check_missing(op, d)?;
        }
        if op == "$dateFromParts" {
            super::shapes::date_from_parts_fields(d)?;
        }
        let mut out = Vec::with_capacity(required.len() + optional.len());
        for key in required {
            match d.get(*key) {
                Some(v) => out.push(Some(self.parse(v, depth + 1)?)),
                None => {
                    return Err(err(
                        ErrorCode::Location17080,
                        format!("Missing '{key}' parameter to {op}"),
                    ));
                }
            }
        }
        for key in optional {
            out.push(match d.get(*key) {
                Some(v) => Some(self.parse(v, depth + 1)?),
                None => None,
            });
        }
        Ok(out)
    }

    fn object_arg<'d>(op: &str, arg: &'d Bson) -> CommandResult<&'d Document> {
        match arg {
            Bson::Document(d) => Ok(d),
            _ => Err(match super::shapes::named_codes(op) {
                Some(c) => c.not_object(op, arg),
                None => err(
                    ErrorCode::FailedToParse,
                    format!("{op} only supports an object as its argument"),
                ),
            }),
        }
    }

    /// Parses `body` with `names` bound.
    fn bound(&mut self, names: &[String], body: &Bson, depth: usize) -> CommandResult<Expr> {
        self.scope.extend(names.iter().cloned());
        let parsed = self.parse(body, depth + 1);
        self.scope.truncate(self.scope.len() - names.len());
        parsed
    }

    fn var_name(op: &str, v: Option<&Bson>, default: &str) -> CommandResult<String> {
        match v {
            None => Ok(default.to_string()),
            Some(Bson::String(s))
                if s.chars()
                    .next()
                    .is_some_and(|c| c.is_lowercase() || !c.is_ascii()) =>
            {
                Ok(s.clone())
            }
            Some(other) => Err(err(
                ErrorCode::FailedToParse,
                format!("{op}: invalid variable name {other}"),
            )),
        }
    }

    fn special(&mut self, op: &str, arg: &Bson, depth: usize) -> CommandResult<Option<Special>> {
        Ok(Some(match op {
            "$let" => {
                let d = super::shapes::spec_arg(op, arg)?;
                let (vars, body) = super::shapes::let_parts(d)?;
                let mut bound = Vec::with_capacity(vars.len());
                for (name, v) in vars {
                    let name = Self::var_name(op, Some(&Bson::String(name.clone())), "")?;
                    bound.push((name, self.parse(v, depth + 1)?));
                }
                let names: Vec<String> = bound.iter().map(|(n, _)| n.clone()).collect();
                Special::Let {
                    body: self.bound(&names, body, depth)?,
                    vars: bound,
                }
            }
            "$map" | "$filter" => {
                let d = super::shapes::spec_arg(op, arg)?;
                let (input, body) = super::shapes::map_filter_parts(op, d)?;
                let name = Self::var_name(op, d.get("as"), "this")?;
                let input = self.parse(input, depth + 1)?;
                let body = self.bound(std::slice::from_ref(&name), body, depth)?;
                if op == "$map" {
                    Special::Map { input, name, body }
                } else {
                    let limit = match d.get("limit") {
                        Some(l) => Some(self.parse(l, depth + 1)?),
                        None => None,
                    };
                    Special::Filter {
                        input,
                        name,
                        cond: body,
                        limit,
                    }
                }
            }
            "$reduce" => {
                let d = super::shapes::spec_arg(op, arg)?;
                let (input, initial, body) = super::shapes::reduce_parts(d)?;
                let input = self.parse(input, depth + 1)?;
                let initial = self.parse(initial, depth + 1)?;
                let body = self.bound(&["value".to_string(), "this".to_string()], body, depth)?;
                Special::Reduce {
                    input,
                    initial,
                    body,
                }
            }
            "$switch" => {
                let d = super::shapes::spec_arg(op, arg)?;
                let branches = super::shapes::switch_branches(d)?;
                let mut parsed = Vec::with_capacity(branches.len());
                for b in branches {
                    let parts = self.named(b, "$switch", &["case", "then"], &[], depth)?;
                    let mut parts = parts.into_iter().flatten();
                    if let (Some(case), Some(then)) = (parts.next(), parts.next()) {
                        parsed.push((case, then));
                    }
                }
                let default = match d.get("default") {
                    Some(v) => Some(self.parse(v, depth + 1)?),
                    None => None,
                };
                Special::Switch {
                    branches: parsed,
                    default,
                }
            }
            "$function" => {
                crate::query::js::require_enabled(ErrorCode::Location31264)?;
                let d = Self::object_arg(op, arg)?;
                let source = match d.get("body") {
                    Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => s.clone(),
                    _ => {
                        return Err(err(
                            ErrorCode::Location31264,
                            "The body function must be specified.",
                        ));
                    }
                };
                if !matches!(d.get("lang"), Some(Bson::String(l)) if l == "js") {
                    return Err(err(
                        ErrorCode::Location31264,
                        "$function currently only supports language 'js'",
                    ));
                }
                let args = match d.get("args") {
                    Some(Bson::Array(a)) => a
                        .iter()
                        .map(|v| self.parse(v, depth + 1))
                        .collect::<CommandResult<Vec<_>>>()?,
                    None => Vec::new(),
                    Some(_) => {
                        return Err(err(
                            ErrorCode::Location31264,
                            "The args field must be of type array",
                        ));
                    }
                };
                Special::Js {
                    source,
                    this_root: false,
                    args,
                    scope: None,
                }
            }
            // mapReduce's pieces (see commands/map_reduce.rs): `{eval, this, scope?}` emits
            // `{k, v}` pairs; `{eval, args, scope?}` calls a function with mapReduce's scope.
            "$_internalJsEmit" | "$_internalJsCall" => {
                crate::query::js::require_enabled(ErrorCode::Location31264)?;
                let d = Self::object_arg(op, arg)?;
                let source = match d.get("eval") {
                    Some(Bson::String(s)) | Some(Bson::JavaScriptCode(s)) => s.clone(),
                    _ => {
                        return Err(err(
                            ErrorCode::BadValue,
                            format!("{op} requires 'eval' to be a string or code"),
                        ));
                    }
                };
                let scope = match d.get("scope") {
                    None | Some(Bson::Null) => None,
                    Some(Bson::Document(s)) => Some(s.clone()),
                    Some(_) => {
                        return Err(err(
                            ErrorCode::BadValue,
                            format!("{op} requires 'scope' to be an object"),
                        ));
                    }
                };
                if op == "$_internalJsEmit" {
                    let this = d
                        .get("this")
                        .cloned()
                        .unwrap_or(Bson::String("$$ROOT".into()));
                    Special::JsEmit {
                        source,
                        this: self.parse(&this, depth + 1)?,
                        scope,
                    }
                } else {
                    let args = match d.get("args") {
                        Some(Bson::Array(a)) => a
                            .iter()
                            .map(|v| self.parse(v, depth + 1))
                            .collect::<CommandResult<Vec<_>>>()?,
                        _ => Vec::new(),
                    };
                    Special::Js {
                        source,
                        this_root: false,
                        args,
                        scope,
                    }
                }
            }
            "$getField" => match arg {
                Bson::Document(d) if !d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                    if let Some(f) = d.get("field") {
                        super::shapes::get_field_field(f)?;
                    }
                    let parts = self.named(d, op, &["field"], &["input"], depth)?;
                    let mut it = parts.into_iter();
                    let field = it.next().flatten().unwrap_or(Expr::Literal(Bson::Null));
                    let input = it.next().flatten().unwrap_or(Expr::Root(Vec::new()));
                    Special::GetField { field, input }
                }
                other => Special::GetField {
                    field: {
                        super::shapes::get_field_field(other)?;
                        self.parse(other, depth + 1)?
                    },
                    input: Expr::Root(Vec::new()),
                },
            },
            "$trim" | "$ltrim" | "$rtrim" => {
                let d = Self::object_arg(op, arg)?;
                let parts = self.named(d, op, &["input"], &["chars"], depth)?;
                let mut it = parts.into_iter();
                let input = it.next().flatten().unwrap_or(Expr::Literal(Bson::Null));
                let chars = it.next().flatten();
                Special::Trim {
                    input,
                    chars,
                    left: op != "$rtrim",
                    right: op != "$ltrim",
                }
            }
            name if NAMED.iter().any(|(n, ..)| *n == name) => {
                let Some((_, named, required, optional)) = NAMED.iter().find(|(n, ..)| *n == name)
                else {
                    return Ok(None);
                };
                if op == "$zip" {
                    super::arrays::check_zip_spec(arg)?;
                }
                let d = Self::object_arg(op, arg)?;
                // mongod reads `sortBy` as a literal pattern, before parsing any expression in it.
                if let ("$sortArray", Some(by)) = (op, d.get("sortBy")) {
                    super::shapes::sort_array_by(by)?;
                }
                let args = self.named(d, op, required, optional, depth)?;
                if let ("$setField" | "$unsetField", Some(f)) = (op, d.get("field")) {
                    super::shapes::set_field_field(op, f)?;
                }
                if op.starts_with("$date") {
                    let names = required.iter().chain(optional.iter()).copied();
                    super::dates::check_constant_args(op, names, &args)?;
                }
                Special::Named { op: *named, args }
            }
            name if super::array_n::ArrayNOp::from_name(name).is_some() => {
                let Some(array_op) = super::array_n::ArrayNOp::from_name(name) else {
                    return Ok(None);
                };
                let (n, input) = super::array_n::parse_args(array_op, arg)?;
                Special::ArrayN {
                    op: array_op,
                    n: self.parse(n, depth + 1)?,
                    input: self.parse(input, depth + 1)?,
                }
            }
            "$percentile" | "$median" => {
                use super::quantile::{QuantileOp, parse_spec};
                let q = if op == "$median" {
                    QuantileOp::Median
                } else {
                    QuantileOp::Percentile
                };
                let spec = parse_spec(q, arg, false)?;
                Special::Quantile {
                    op: q,
                    input: self.parse(spec.input, depth + 1)?,
                    ps: spec.ps,
                }
            }
            "$dateToString" => {
                let d = Self::object_arg(op, arg)?;
                let names = ["date", "format", "onNull", "timezone"];
                let parts = self.named(d, op, &names[..1], &names[1..], depth)?;
                super::dates::check_constant_args(op, names.into_iter(), &parts)?;
                let mut it = parts.into_iter();
                let date = it.next().flatten().unwrap_or(Expr::Literal(Bson::Null));
                let format = it.next().flatten();
                let on_null = it.next().flatten();
                let timezone = it.next().flatten();
                Special::DateToString {
                    date,
                    format,
                    on_null,
                    timezone,
                }
            }
            _ => return Ok(None),
        }))
    }
}
