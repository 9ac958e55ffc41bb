//! Filter document -> [`Filter`], with mongod's errors. Every key is checked: an operator this
//! module does not know is an error, never silently ignored.

use super::{BitTest, Filter, Op, RegexPred, Schema};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::expr::{Expr, Special};
use crate::query::limits::FILTER_DEPTH_MAX;
use crate::query::path;
use crate::query::types;
use bson::{Bson, Document};

pub(super) fn parse_filter(filter: &Document, depth: usize) -> CommandResult<Filter> {
    if depth > FILTER_DEPTH_MAX {
        return Err(err(
            ErrorCode::BadValue,
            format!("exceeded maximum query tree depth of {FILTER_DEPTH_MAX}"),
        ));
    }
    let mut children = Vec::with_capacity(filter.len());
    for (key, value) in filter {
        // Parsing a filter of 100,000s of fields takes long enough to need a yield point.
        crate::interrupt::tick()?;
        if let Some(op) = key.strip_prefix('$') {
            if let Some(f) = parse_top_level(op, value, depth)? {
                children.push(f);
            }
        } else {
            parse_field(key, value, depth, &mut children)?;
        }
    }
    Ok(if children.len() == 1 {
        children.remove(0)
    } else {
        Filter::And(children)
    })
}

fn parse_top_level(op: &str, value: &Bson, depth: usize) -> CommandResult<Option<Filter>> {
    Ok(Some(match op {
        "and" => Filter::And(parse_list(op, value, depth)?),
        "or" => Filter::Or(parse_list(op, value, depth)?),
        "nor" => Filter::Nor(parse_list(op, value, depth)?),
        "expr" => Filter::Expr(Box::new(Expr::parse(value)?)),
        "jsonSchema" => match value {
            Bson::Document(d) => Filter::Schema(Box::new(Schema::parse(d)?)),
            _ => {
                return Err(err(
                    ErrorCode::TypeMismatch,
                    "$jsonSchema must be an object",
                ));
            }
        },
        "comment" => return Ok(None),
        "alwaysTrue" | "alwaysFalse" => {
            if types::as_f64(value) != Some(1.0) {
                return Err(err(
                    ErrorCode::FailedToParse,
                    format!("${op} must be an integer value of 1"),
                ));
            }
            Filter::Const(op == "alwaysTrue")
        }
        "where" => {
            crate::query::js::require_enabled(ErrorCode::Location16395)?;
            let code = match value {
                Bson::String(s) | Bson::JavaScriptCode(s) => s,
                Bson::JavaScriptCodeWithScope(c) => &c.code,
                _ => return Err(err(ErrorCode::BadValue, "$where got bad type")),
            };
            Filter::Expr(Box::new(Expr::Special(Box::new(Special::Js {
                source: crate::query::js::where_source(code),
                this_root: true,
                args: Vec::new(),
            }))))
        }
        "text" => Filter::Text(std::sync::Arc::new(crate::query::text::TextQuery::parse(
            value,
        )?)),
        _ => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "unknown top level operator: ${op}. If you have a field name that starts with a '$' symbol, consider using $getField or $setField."
                ),
            ));
        }
    }))
}

fn parse_list(op: &str, value: &Bson, depth: usize) -> CommandResult<Vec<Filter>> {
    let Bson::Array(items) = value else {
        return Err(err(ErrorCode::BadValue, format!("${op} must be an array")));
    };
    if items.is_empty() {
        return Err(err(
            ErrorCode::BadValue,
            "$and/$or/$nor must be a nonempty array",
        ));
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => parse_filter(d, depth + 1),
            _ => Err(err(
                ErrorCode::BadValue,
                "$or/$and/$nor entries need to be full objects",
            )),
        })
        .collect()
}

/// mongod refuses to compare with `undefined`.
fn comparable(v: &Bson) -> CommandResult<Bson> {
    if matches!(v, Bson::Undefined) {
        return Err(err(ErrorCode::BadValue, "cannot compare to undefined"));
    }
    Ok(v.clone())
}

fn leaf(path: &str, op: Op) -> Filter {
    let components = if path.is_empty() {
        Vec::new()
    } else {
        path::split(path)
    };
    Filter::Path {
        path: path.to_string(),
        components,
        op,
    }
}

fn not(f: Filter) -> Filter {
    Filter::Not(Box::new(f))
}

/// True when a document is an operator object (`{$gt: 1}`) rather than a literal value.
fn is_operator_object(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

/// Parses `path: value` into one or more filters appended to `out`.
pub(super) fn parse_field(
    path: &str,
    value: &Bson,
    depth: usize,
    out: &mut Vec<Filter>,
) -> CommandResult<()> {
    match value {
        Bson::RegularExpression(r) => out.push(leaf(
            path,
            Op::Regex(RegexPred::new(r.pattern.as_str(), r.options.as_str())?),
        )),
        Bson::Document(d) if is_operator_object(d) => parse_operators(path, d, depth, out)?,
        _ => out.push(leaf(path, Op::Eq(comparable(value)?))),
    }
    Ok(())
}

fn parse_operators(
    path: &str,
    ops: &Document,
    depth: usize,
    out: &mut Vec<Filter>,
) -> CommandResult<()> {
    let mut regex: Option<&Bson> = None;
    let mut options: Option<&Bson> = None;
    if ops.contains_key("$near") || ops.contains_key("$nearSphere") {
        out.push(leaf(path, Op::Near(Box::new(super::geo::parse_near(ops)?))));
        return Ok(());
    }
    for (key, value) in ops {
        match key.as_str() {
            "$regex" => regex = Some(value),
            "$options" => options = Some(value),
            "$not" => out.push(not(parse_not(path, value, depth)?)),
            _ => out.push(parse_operator(path, key, value, depth)?),
        }
    }
    match (regex, options) {
        (Some(r), o) => out.push(leaf(path, Op::Regex(parse_regex(r, o)?))),
        (None, Some(_)) => return Err(err(ErrorCode::BadValue, "$options needs a $regex")),
        (None, None) => {}
    }
    Ok(())
}

fn parse_regex(regex: &Bson, options: Option<&Bson>) -> CommandResult<RegexPred> {
    let extra = match options {
        None => "",
        Some(Bson::String(s)) => s.as_str(),
        Some(_) => return Err(err(ErrorCode::BadValue, "$options has to be a string")),
    };
    match regex {
        Bson::String(p) => RegexPred::new(p, extra),
        Bson::RegularExpression(r) => {
            if !r.options.as_str().is_empty() && !extra.is_empty() {
                return Err(err(
                    ErrorCode::BadValue,
                    "options set in both $regex and $options",
                ));
            }
            let opts = if extra.is_empty() {
                r.options.as_str()
            } else {
                extra
            };
            RegexPred::new(r.pattern.as_str(), opts)
        }
        _ => Err(err(ErrorCode::BadValue, "$regex has to be a string")),
    }
}

fn parse_not(path: &str, value: &Bson, depth: usize) -> CommandResult<Filter> {
    match value {
        Bson::RegularExpression(r) => Ok(leaf(
            path,
            Op::Regex(RegexPred::new(r.pattern.as_str(), r.options.as_str())?),
        )),
        Bson::Document(d) if d.is_empty() => Err(err(ErrorCode::BadValue, "$not cannot be empty")),
        Bson::Document(d) => {
            let mut inner = Vec::new();
            parse_operators(path, d, depth + 1, &mut inner)?;
            Ok(if inner.len() == 1 {
                inner.remove(0)
            } else {
                Filter::And(inner)
            })
        }
        _ => Err(err(ErrorCode::BadValue, "$not needs a regex or a document")),
    }
}

/// One `$op: value` inside an operator object.
fn parse_operator(path: &str, op: &str, value: &Bson, depth: usize) -> CommandResult<Filter> {
    Ok(match op {
        "$eq" => leaf(path, Op::Eq(comparable(value)?)),
        "$ne" => not(leaf(path, Op::Eq(comparable(value)?))),
        "$gt" => leaf(path, Op::Gt(comparable(value)?)),
        "$gte" => leaf(path, Op::Gte(comparable(value)?)),
        "$lt" => leaf(path, Op::Lt(comparable(value)?)),
        "$lte" => leaf(path, Op::Lte(comparable(value)?)),
        "$in" => leaf(path, parse_in(value, "$in")?),
        "$nin" => not(leaf(path, parse_in(value, "$nin")?)),
        "$exists" => {
            let e = leaf(path, Op::Exists);
            if types::is_truthy(value) { e } else { not(e) }
        }
        "$type" => leaf(path, Op::Type(parse_type(value)?)),
        "$mod" => leaf(path, parse_mod(value)?),
        "$size" => leaf(path, Op::Size(parse_size(value)?)),
        "$all" => parse_all(path, value, depth)?,
        "$elemMatch" => leaf(path, parse_elem_match(value, depth)?),
        "$bitsAllSet" => leaf(path, parse_bits(op, BitTest::AllSet, value)?),
        "$bitsAllClear" => leaf(path, parse_bits(op, BitTest::AllClear, value)?),
        "$bitsAnySet" => leaf(path, parse_bits(op, BitTest::AnySet, value)?),
        "$bitsAnyClear" => leaf(path, parse_bits(op, BitTest::AnyClear, value)?),
        "$comment" => Filter::Const(true),
        "$geoWithin" | "$within" => leaf(
            path,
            Op::GeoWithin(Box::new(super::geo::parse_geo_within(value)?)),
        ),
        "$geoIntersects" => leaf(
            path,
            Op::GeoIntersects(Box::new(super::geo::parse_geo_intersects(value)?)),
        ),
        _ => return Err(err(ErrorCode::BadValue, format!("unknown operator: {op}"))),
    })
}

fn parse_in(value: &Bson, op: &str) -> CommandResult<Op> {
    let Bson::Array(items) = value else {
        return Err(err(ErrorCode::BadValue, format!("{op} needs an array")));
    };
    let mut values = Vec::new();
    let mut regexes = Vec::new();
    for item in items {
        match item {
            Bson::RegularExpression(r) => {
                regexes.push(RegexPred::new(r.pattern.as_str(), r.options.as_str())?)
            }
            Bson::Document(d) if is_operator_object(d) => {
                return Err(err(ErrorCode::BadValue, "cannot nest $ under $in"));
            }
            _ => values.push(item.clone()),
        }
    }
    // Sorted in the one BSON order so that matching can binary-search large lists.
    values.sort_by(storage::order::compare_bson);
    Ok(Op::In { values, regexes })
}

fn parse_type(value: &Bson) -> CommandResult<Vec<i32>> {
    let one = |v: &Bson| -> CommandResult<Vec<i32>> {
        match v {
            Bson::String(s) if s == "number" => Ok(types::NUMBER_CODES.to_vec()),
            Bson::String(s) => types::code_for_alias(s)
                .map(|c| vec![c])
                .ok_or_else(|| err(ErrorCode::BadValue, format!("Unknown type name alias: {s}"))),
            v if types::is_number(v) => {
                let n = types::as_f64(v).unwrap_or(f64::NAN);
                match types::f64_to_i64_exact(n).and_then(|c| i32::try_from(c).ok()) {
                    Some(c) if types::is_valid_code(c) => Ok(vec![c]),
                    _ => Err(err(
                        ErrorCode::BadValue,
                        format!("Invalid numerical type code: {n}"),
                    )),
                }
            }
            _ => Err(err(
                ErrorCode::TypeMismatch,
                "type must be represented as a number or a string",
            )),
        }
    };
    match value {
        Bson::Array(items) => {
            let mut codes = Vec::new();
            for item in items {
                codes.extend(one(item)?);
            }
            Ok(codes)
        }
        v => one(v),
    }
}

fn parse_mod(value: &Bson) -> CommandResult<Op> {
    let bad = |m: &str| err(ErrorCode::BadValue, format!("malformed mod, {m}"));
    let Bson::Array(items) = value else {
        return Err(bad("needs to be an array"));
    };
    if items.len() < 2 {
        return Err(bad("not enough elements"));
    }
    if items.len() > 2 {
        return Err(bad("too many elements"));
    }
    let as_int = |v: &Bson, what: &str| -> CommandResult<i64> {
        let d = types::as_f64(v).ok_or_else(|| bad(&format!("{what} not a number")))?;
        if !d.is_finite() {
            return Err(bad(&format!("{what} value is invalid")));
        }
        // mongod truncates towards zero and saturates at the i64 range.
        Ok(match v {
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => *i,
            _ => d.trunc() as i64,
        })
    };
    let divisor = as_int(&items[0], "divisor")?;
    let remainder = as_int(&items[1], "remainder")?;
    if divisor == 0 {
        return Err(err(ErrorCode::BadValue, "divisor cannot be 0"));
    }
    Ok(Op::Mod { divisor, remainder })
}

fn parse_size(value: &Bson) -> CommandResult<i64> {
    let d = types::as_f64(value).ok_or_else(|| err(ErrorCode::BadValue, "$size needs a number"))?;
    let n = types::f64_to_i64_exact(d)
        .ok_or_else(|| err(ErrorCode::BadValue, "$size must be a whole number"))?;
    if n < 0 {
        return Err(err(ErrorCode::BadValue, "$size may not be negative"));
    }
    Ok(n)
}

/// `$all: [v1, v2]` is `v1 AND v2` by equality; `$all: [{$elemMatch}, ...]` is an AND of
/// `$elemMatch`es; mixing the two is an error, and an empty `$all` matches nothing.
fn parse_all(path: &str, value: &Bson, depth: usize) -> CommandResult<Filter> {
    let Bson::Array(items) = value else {
        return Err(err(ErrorCode::BadValue, "$all needs an array"));
    };
    if items.is_empty() {
        return Ok(Filter::Const(false));
    }
    let is_elem_match = |v: &Bson| matches!(v, Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$elemMatch"));
    let elem_matches = items.iter().filter(|v| is_elem_match(v)).count();
    if elem_matches > 0 && elem_matches < items.len() {
        return Err(err(
            ErrorCode::BadValue,
            "$all/$elemMatch has to be consistent",
        ));
    }
    let mut children = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Bson::Document(d) if elem_matches > 0 => {
                let inner = d.get("$elemMatch").unwrap_or(&Bson::Null);
                children.push(leaf(path, parse_elem_match(inner, depth)?));
            }
            Bson::Document(d) if is_operator_object(d) => {
                return Err(err(ErrorCode::BadValue, "no $ expressions in $all"));
            }
            Bson::RegularExpression(r) => children.push(leaf(
                path,
                Op::Regex(RegexPred::new(r.pattern.as_str(), r.options.as_str())?),
            )),
            v => children.push(leaf(path, Op::Eq(v.clone()))),
        }
    }
    Ok(if children.len() == 1 {
        children.remove(0)
    } else {
        Filter::And(children)
    })
}

fn parse_elem_match(value: &Bson, depth: usize) -> CommandResult<Op> {
    let Bson::Document(d) = value else {
        return Err(err(ErrorCode::BadValue, "$elemMatch needs an Object"));
    };
    // A leading operator that is not a logical one makes the value form.
    let value_form = d.keys().next().is_some_and(|k| {
        k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$expr" | "$where")
    });
    if value_form {
        let mut inner = Vec::new();
        parse_operators("", d, depth + 1, &mut inner)?;
        let tree = if inner.len() == 1 {
            inner.remove(0)
        } else {
            Filter::And(inner)
        };
        Ok(Op::ElemMatchValue(Box::new(tree)))
    } else {
        Ok(Op::ElemMatchObject(Box::new(parse_filter(d, depth + 1)?)))
    }
}

/// Largest bit position accepted in a position list (mongod: positions must fit an int).
const BIT_POSITION_MAX: i64 = i32::MAX as i64;

fn parse_bits(op: &str, test: BitTest, value: &Bson) -> CommandResult<Op> {
    let positions = match value {
        Bson::Binary(b) => set_bits(&b.bytes),
        Bson::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                let n = types::as_i64_exact(item).filter(|n| (0..=BIT_POSITION_MAX).contains(n));
                match n.and_then(|n| u32::try_from(n).ok()) {
                    Some(n) => out.push(n),
                    None => {
                        return Err(err(
                            ErrorCode::BadValue,
                            format!(
                                "bit positions must be non-negative integers that can be represented as a 32-bit signed integer, got {item} in {op}"
                            ),
                        ));
                    }
                }
            }
            out
        }
        v if types::is_number(v) => match types::as_i64_exact(v) {
            Some(n) if n >= 0 => set_bits(&n.to_le_bytes()),
            _ => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "{op} takes a non-negative integral bitmask representable as a 64-bit integer, got {v}"
                    ),
                ));
            }
        },
        _ => {
            return Err(err(
                ErrorCode::BadValue,
                format!("{op} takes an Array, a number, or a BinData but received: {value}"),
            ));
        }
    };
    Ok(Op::Bits { test, positions })
}

fn set_bits(bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, byte) in bytes.iter().enumerate() {
        for bit in 0..8u32 {
            if byte & (1 << bit) != 0 {
                // A document is at most 16 MiB, so the position fits a u32.
                out.push(u32::try_from(i * 8).unwrap_or(u32::MAX).saturating_add(bit));
            }
        }
    }
    out
}
