//! Parsing one `$operator: {path: argument}` entry into an [`UpdateOp`], with mongod's checks
//! on paths and arguments.

use super::display;
use super::{OpKind, UpdateOp, filter_identifier};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::{Filter, Op, RegexPred};
use crate::query::sort::SortSpec;
use crate::query::types;
use bson::{Bson, Document, doc};

/// The argument of one operation, already validated.
#[derive(Debug, Clone)]
pub enum Arg {
    /// `$set`, `$setOnInsert`, `$min`, `$max`: the value; `$inc`, `$mul`: the number.
    Value(Bson),
    Unset,
    /// `$rename`: the target path's components.
    Rename(Vec<String>),
    CurrentDate {
        timestamp: bool,
    },
    Push(PushSpec),
    AddToSet(Vec<Bson>),
    /// `$pop`: true removes the first element, false the last.
    Pop {
        first: bool,
    },
    Pull(PullCondition),
    PullAll(Vec<Bson>),
    /// `$bit`: `and`/`or`/`xor` with integer operands, in the order given.
    Bit(Vec<(BitOp, Bson)>),
}

#[derive(Debug, Clone)]
pub struct PushSpec {
    pub each: Vec<Bson>,
    pub slice: Option<i64>,
    pub sort: Option<PushSort>,
    pub position: Option<i64>,
}

#[derive(Debug, Clone)]
pub enum PushSort {
    /// `$sort: 1/-1`: whole elements, ascending when true.
    Whole(bool),
    /// `$sort: {field: 1/-1}`: embedded fields.
    Fields(SortSpec),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
}

fn parse_bit(arg: &Bson) -> CommandResult<Arg> {
    let Bson::Document(d) = arg else {
        return Err(bad(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
            types::type_name(types::type_code(arg))
        )));
    };
    if d.is_empty() {
        return Err(bad(
            "You must pass in at least one bitwise operation. The format is: {$bit: {field: {and/or/xor: #}}",
        ));
    }
    let mut out = Vec::with_capacity(d.len());
    for (name, v) in d {
        let op = match name.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            other => {
                return Err(bad(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' which is an unknown operator: {}",
                    display::document(d)
                )));
            }
        };
        if !matches!(v, Bson::Int32(_) | Bson::Int64(_)) {
            return Err(bad(format!(
                "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {}",
                types::type_name(types::type_code(v)),
                display::element(name, v)
            )));
        }
        out.push((op, v.clone()));
    }
    Ok(Arg::Bit(out))
}

/// What `$pull` removes.
#[derive(Debug, Clone)]
pub enum PullCondition {
    Equal(Bson),
    Regex(RegexPred),
    /// A filter applied to each element (`{score: {$gt: 5}}` or `{$gte: 6}`).
    Filter(Box<Filter>),
}

fn bad(message: impl Into<String>) -> crate::error::CommandError {
    err(ErrorCode::BadValue, message)
}

/// Checks a path and splits it.
fn components(path: &str) -> CommandResult<Vec<String>> {
    if path.is_empty() {
        return Err(err(
            ErrorCode::EmptyFieldName,
            "An empty update path is not valid.",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(err(
            ErrorCode::EmptyFieldName,
            format!("The update path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    if parts.iter().filter(|p| *p == "$").count() > 1 {
        return Err(bad(format!(
            "Too many positional (i.e. '$') elements found in path '{path}'"
        )));
    }
    for p in &parts {
        let array_op = p == "$" || p == "$[]" || filter_identifier(p).is_some();
        if p.starts_with('$') && !array_op {
            return Err(err(
                ErrorCode::DollarPrefixedFieldName,
                format!(
                    "The dollar ($) prefixed field '{p}' in '{path}' is not valid for storage."
                ),
            ));
        }
    }
    Ok(parts)
}

fn is_dynamic(parts: &[String]) -> bool {
    parts.iter().any(|p| p.starts_with('$'))
}

pub fn parse_op(kind: OpKind, path: &str, arg: &Bson) -> CommandResult<Vec<UpdateOp>> {
    let comps = components(path)?;
    let arg = match kind {
        OpKind::Set | OpKind::SetOnInsert | OpKind::Min | OpKind::Max => Arg::Value(arg.clone()),
        OpKind::Unset => Arg::Unset,
        OpKind::Inc | OpKind::Mul => {
            if !types::is_number(arg) {
                let verb = if kind == OpKind::Inc {
                    "increment"
                } else {
                    "multiply"
                };
                return Err(err(
                    ErrorCode::TypeMismatch,
                    format!(
                        "Cannot {verb} with non-numeric argument: {}",
                        display::element(path, arg)
                    ),
                ));
            }
            Arg::Value(arg.clone())
        }
        OpKind::Rename => Arg::Rename(parse_rename(path, &comps, arg)?),
        OpKind::CurrentDate => parse_current_date(arg)?,
        OpKind::Push => Arg::Push(parse_push(arg)?),
        OpKind::AddToSet => Arg::AddToSet(parse_add_to_set(arg)?),
        OpKind::Pop => match types::as_f64(arg) {
            Some(1.0) => Arg::Pop { first: false },
            Some(-1.0) => Arg::Pop { first: true },
            _ => {
                return Err(err(
                    ErrorCode::FailedToParse,
                    format!("$pop expects 1 or -1, found: {}", display::value(arg)),
                ));
            }
        },
        OpKind::Pull => Arg::Pull(parse_pull(arg)?),
        OpKind::Bit => parse_bit(arg)?,
        OpKind::PullAll => match arg {
            Bson::Array(items) => Arg::PullAll(items.clone()),
            other => {
                return Err(bad(format!(
                    "$pullAll requires an array argument but was given a {}",
                    types::type_name(types::type_code(other))
                )));
            }
        },
    };
    Ok(vec![UpdateOp {
        kind,
        path: path.to_string(),
        components: comps,
        arg,
    }])
}

fn parse_rename(from: &str, from_parts: &[String], arg: &Bson) -> CommandResult<Vec<String>> {
    let Bson::String(to) = arg else {
        return Err(bad(format!(
            "The 'to' field for $rename must be a string: {}",
            display::element(from, arg)
        )));
    };
    let to_parts = components(to)?;
    if is_dynamic(from_parts) {
        return Err(bad(format!(
            "The source field for $rename may not be dynamic: {from}"
        )));
    }
    if is_dynamic(&to_parts) {
        return Err(bad(format!(
            "The destination field for $rename may not be dynamic: {to}"
        )));
    }
    if from == to {
        return Err(bad(format!(
            "The source and target field for $rename must differ: {}",
            display::element(from, arg)
        )));
    }
    let common = from_parts.len().min(to_parts.len());
    if from_parts[..common] == to_parts[..common] {
        return Err(bad(format!(
            "The source and target field for $rename must not be on the same path: {}",
            display::element(from, arg)
        )));
    }
    Ok(to_parts)
}

fn parse_current_date(arg: &Bson) -> CommandResult<Arg> {
    match arg {
        Bson::Boolean(_) => Ok(Arg::CurrentDate { timestamp: false }),
        Bson::Document(d) => match (d.len(), d.get("$type")) {
            (1, Some(Bson::String(t))) if t == "date" => Ok(Arg::CurrentDate { timestamp: false }),
            (1, Some(Bson::String(t))) if t == "timestamp" => {
                Ok(Arg::CurrentDate { timestamp: true })
            }
            _ => Err(bad(
                "The '$type' string field is required to be 'date' or 'timestamp': {$currentDate: {field : {$type: 'date'}}}",
            )),
        },
        other => Err(bad(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type expression ({{$type: 'timestamp/date'}}).",
            types::type_name(types::type_code(other))
        ))),
    }
}

fn has_each(arg: &Bson) -> Option<&Document> {
    match arg {
        Bson::Document(d) if d.contains_key("$each") => Some(d),
        _ => None,
    }
}

fn each_list(d: &Document, op: &str) -> CommandResult<Vec<Bson>> {
    match d.get("$each") {
        Some(Bson::Array(items)) => Ok(items.clone()),
        Some(other) => Err(bad(format!(
            "The argument to $each in {op} must be an array but it was of type: {}",
            types::type_name(types::type_code(other))
        ))),
        None => Ok(Vec::new()),
    }
}

fn parse_add_to_set(arg: &Bson) -> CommandResult<Vec<Bson>> {
    let Some(d) = has_each(arg) else {
        return Ok(vec![arg.clone()]);
    };
    if d.len() > 1 {
        return Err(bad(format!(
            "Found unexpected fields after $each in $addToSet: {}",
            display::document(d)
        )));
    }
    each_list(d, "$addToSet")
}

fn whole_integer(v: &Bson, what: &str) -> CommandResult<i64> {
    types::as_i64_exact(v).ok_or_else(|| {
        bad(format!(
            "The value for {what} must be an integer value but was given type: {}",
            types::type_name(types::type_code(v))
        ))
    })
}

fn parse_push(arg: &Bson) -> CommandResult<PushSpec> {
    let Some(d) = has_each(arg) else {
        return Ok(PushSpec {
            each: vec![arg.clone()],
            slice: None,
            sort: None,
            position: None,
        });
    };
    let mut spec = PushSpec {
        each: each_list(d, "$push")?,
        slice: None,
        sort: None,
        position: None,
    };
    for (k, v) in d {
        match k.as_str() {
            "$each" => {}
            "$slice" => spec.slice = Some(whole_integer(v, "$slice")?),
            "$position" => spec.position = Some(whole_integer(v, "$position")?),
            "$sort" => spec.sort = Some(parse_push_sort(v)?),
            other => return Err(bad(format!("Unrecognized clause in $push: {other}"))),
        }
    }
    Ok(spec)
}

fn parse_push_sort(v: &Bson) -> CommandResult<PushSort> {
    let invalid = || {
        bad(
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
        )
    };
    match v {
        Bson::Document(d) => {
            if d.is_empty() {
                return Err(bad(
                    "The $sort pattern is empty when it should be a set of fields.",
                ));
            }
            SortSpec::parse(d)
                .map(PushSort::Fields)
                .map_err(|_| invalid())
        }
        other => match types::as_f64(other) {
            Some(1.0) => Ok(PushSort::Whole(true)),
            Some(-1.0) => Ok(PushSort::Whole(false)),
            _ => Err(invalid()),
        },
    }
}

fn parse_pull(arg: &Bson) -> CommandResult<PullCondition> {
    match arg {
        Bson::RegularExpression(r) => Ok(PullCondition::Regex(RegexPred::new(
            r.pattern.as_str(),
            r.options.as_str(),
        )?)),
        Bson::Document(d) => {
            let value_form = d.keys().next().is_some_and(|k| {
                k.starts_with('$') && !matches!(k.as_str(), "$and" | "$or" | "$nor" | "$expr")
            });
            if !value_form {
                return Ok(PullCondition::Filter(Box::new(Filter::parse(d)?)));
            }
            // Reuse the value form of $elemMatch: operators applied to each element itself.
            match Filter::parse(&doc! {"v": {"$elemMatch": d.clone()}})? {
                Filter::Path {
                    op: Op::ElemMatchValue(tree),
                    ..
                } => Ok(PullCondition::Filter(tree)),
                other => Ok(PullCondition::Filter(Box::new(other))),
            }
        }
        other => Ok(PullCondition::Equal(other.clone())),
    }
}
