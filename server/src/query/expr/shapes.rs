//! The argument documents of `$let`, `$map`, `$filter`, `$reduce` and `$switch`, checked as
//! mongod's parsers check them, each with the operator's own codes: the argument is a document,
//! no field is unknown, the required ones are there. Parsing the expressions inside is the
//! parser's; this only looks at the shape.

use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, Document};

fn type_of(v: &Bson) -> &'static str {
    crate::query::types::type_name(crate::query::types::type_code(v))
}

/// The document an operator takes; a value of another type has the operator's own code.
pub(super) fn spec_arg<'d>(op: &str, arg: &'d Bson) -> CommandResult<&'d Document> {
    if let Bson::Document(d) = arg {
        return Ok(d);
    }
    let code = match op {
        "$let" => ErrorCode::Location16874,
        "$map" => ErrorCode::Location16878,
        "$filter" => ErrorCode::Location28646,
        "$reduce" => ErrorCode::Location40075,
        "$switch" => {
            return Err(err(
                ErrorCode::Location40060,
                format!(
                    "$switch requires an object as an argument, found: {}",
                    type_of(arg)
                ),
            ));
        }
        _ => ErrorCode::FailedToParse,
    };
    Err(err(
        code,
        format!("{op} only supports an object as its argument"),
    ))
}

fn unknown(code: ErrorCode, op: &str, field: &str) -> crate::error::CommandError {
    err(code, format!("Unrecognized parameter to {op}: {field}"))
}

fn missing(code: ErrorCode, op: &str, field: &str) -> crate::error::CommandError {
    err(code, format!("Missing '{field}' parameter to {op}"))
}

/// `$let`: `vars` (a document) and `in`; 16875 for another field, 16876/16877 for a missing one.
pub(super) fn let_parts(d: &Document) -> CommandResult<(&Document, &Bson)> {
    if let Some(k) = d.keys().find(|k| !matches!(k.as_str(), "vars" | "in")) {
        return Err(unknown(ErrorCode::Location16875, "$let", k));
    }
    let vars = d
        .get("vars")
        .ok_or_else(|| missing(ErrorCode::Location16876, "$let", "vars"))?;
    let body = d
        .get("in")
        .ok_or_else(|| missing(ErrorCode::Location16877, "$let", "in"))?;
    let Bson::Document(vars) = vars else {
        return Err(err(
            ErrorCode::Location10065,
            format!(
                "invalid parameter: expected an object (vars), found {}",
                type_of(vars)
            ),
        ));
    };
    Ok((vars, body))
}

/// `$map` (`input`, `as`, `in`: 16879 unknown, 16880 and 16882 missing) and `$filter`
/// (`input`, `as`, `cond`, `limit`: 28647 unknown, 28648 and 28650 missing).
pub(super) fn map_filter_parts<'d>(
    op: &str,
    d: &'d Document,
) -> CommandResult<(&'d Bson, &'d Bson)> {
    let map = op == "$map";
    let (body_key, unknown_code, input_code, body_code) = if map {
        (
            "in",
            ErrorCode::Location16879,
            ErrorCode::Location16880,
            ErrorCode::Location16882,
        )
    } else {
        (
            "cond",
            ErrorCode::Location28647,
            ErrorCode::Location28648,
            ErrorCode::Location28650,
        )
    };
    if let Some(k) = d.keys().find(|k| {
        let k = k.as_str();
        !(k == "input" || k == "as" || k == body_key || (!map && k == "limit"))
    }) {
        return Err(unknown(unknown_code, op, k));
    }
    let input = d
        .get("input")
        .ok_or_else(|| missing(input_code, op, "input"))?;
    let body = d
        .get(body_key)
        .ok_or_else(|| missing(body_code, op, body_key))?;
    Ok((input, body))
}

/// `$reduce`: `input`, `initialValue`, `in` (40076 unknown; 40077, 40078, 40079 missing).
pub(super) fn reduce_parts(d: &Document) -> CommandResult<(&Bson, &Bson, &Bson)> {
    if let Some(k) = d
        .keys()
        .find(|k| !matches!(k.as_str(), "input" | "initialValue" | "in"))
    {
        return Err(unknown(ErrorCode::Location40076, "$reduce", k));
    }
    let get = |k: &str, code| d.get(k).ok_or_else(|| missing(code, "$reduce", k));
    Ok((
        get("input", ErrorCode::Location40077)?,
        get("initialValue", ErrorCode::Location40078)?,
        get("in", ErrorCode::Location40079)?,
    ))
}

/// `$switch`: `branches` (an array, 40061, of documents, 40062, each of `case` and `then` only:
/// 40063 another field, 40064/40065 a missing one) and `default`; another field is 40067, no
/// branch at all 40068.
pub(super) fn switch_branches(d: &Document) -> CommandResult<Vec<&Document>> {
    let mut out = Vec::new();
    for (k, v) in d {
        match k.as_str() {
            "branches" => {
                let Bson::Array(branches) = v else {
                    return Err(err(
                        ErrorCode::Location40061,
                        format!(
                            "$switch expected an array for 'branches', found: {}",
                            type_of(v)
                        ),
                    ));
                };
                for b in branches {
                    out.push(switch_branch(b)?);
                }
            }
            "default" => {}
            other => {
                return Err(err(
                    ErrorCode::Location40067,
                    format!("$switch found an unknown argument: {other}"),
                ));
            }
        }
    }
    if out.is_empty() {
        return Err(err(
            ErrorCode::Location40068,
            "$switch requires at least one branch.",
        ));
    }
    Ok(out)
}

fn switch_branch(b: &Bson) -> CommandResult<&Document> {
    let Bson::Document(b) = b else {
        return Err(err(
            ErrorCode::Location40062,
            format!(
                "$switch expected each branch to be an object, found: {}",
                type_of(b)
            ),
        ));
    };
    if let Some(k) = b.keys().find(|k| !matches!(k.as_str(), "case" | "then")) {
        return Err(err(
            ErrorCode::Location40063,
            format!("$switch found an unknown argument to a branch: {k}"),
        ));
    }
    if !b.contains_key("case") {
        return Err(err(
            ErrorCode::Location40064,
            "$switch requires each branch have a 'case' expression",
        ));
    }
    if !b.contains_key("then") {
        return Err(err(
            ErrorCode::Location40065,
            "$switch requires each branch have a 'then' expression.",
        ));
    }
    Ok(b)
}

/// How a named-argument operator answers a bad argument document, as mongod's parser for
/// it does: the code for an argument that is not a document, for a field it does not know,
/// and for each required field that is absent (in the order mongod checks them).
pub(super) struct NamedCodes {
    not_object: (ErrorCode, &'static str),
    unknown: (ErrorCode, &'static str),
    missing: &'static [(&'static str, ErrorCode, &'static str)],
}

// Message templates: `{op}` is the operator, `{t}` the type found, `{k}` the field.
const DATE_UNKNOWN: &str = "Unrecognized argument to {op}: {k}";
const FOUND_UNKNOWN: &str = "{op} found an unknown argument: {k}";
const DATE_MISSING: &str = "Missing '{k}' parameter to {op}";
const SPECIFIED: &str = "{op} requires '{k}' to be specified";
const REGEX_MISSING: &str = "{op} requires '{k}' parameter";

/// The codes of the operators whose parsers have their own; `None` keeps the generic 17080.
pub(super) fn named_codes(op: &str) -> Option<NamedCodes> {
    use ErrorCode as E;
    let c = |not_object, unknown, missing| {
        Some(NamedCodes {
            not_object,
            unknown,
            missing,
        })
    };
    match op {
        "$dateFromParts" => c(
            (
                E::Location40519,
                "$dateFromParts only supports an object as its argument",
            ),
            (E::Location40518, DATE_UNKNOWN),
            &[],
        ),
        "$dateToParts" => c(
            (
                E::Location40524,
                "$dateToParts only supports an object as its argument",
            ),
            (E::Location40520, DATE_UNKNOWN),
            &[("date", E::Location40522, DATE_MISSING)],
        ),
        "$dateFromString" => c(
            (
                E::Location40540,
                "$dateFromString only supports an object as an argument, found: {t}",
            ),
            (E::Location40541, DATE_UNKNOWN),
            &[("dateString", E::Location40542, DATE_MISSING)],
        ),
        "$dateToString" => c(
            (
                E::Location18629,
                "$dateToString only supports an object as its argument",
            ),
            (E::Location18534, DATE_UNKNOWN),
            &[("date", E::Location18628, DATE_MISSING)],
        ),
        "$dateAdd" | "$dateSubtract" => c(
            (E::Location5166400, "{op} expects an object as its argument"),
            (E::Location5166401, DATE_UNKNOWN),
            &[
                (
                    "startDate",
                    E::Location5166402,
                    "{op} requires startDate, unit, and amount to be present",
                ),
                (
                    "unit",
                    E::Location5166402,
                    "{op} requires startDate, unit, and amount to be present",
                ),
                (
                    "amount",
                    E::Location5166402,
                    "{op} requires startDate, unit, and amount to be present",
                ),
            ],
        ),
        "$dateDiff" => c(
            (
                E::Location5166301,
                "$dateDiff only supports an object as its argument",
            ),
            (E::Location5166302, DATE_UNKNOWN),
            &[
                ("startDate", E::Location5166303, DATE_MISSING),
                ("endDate", E::Location5166304, DATE_MISSING),
                ("unit", E::Location5166305, DATE_MISSING),
            ],
        ),
        "$dateTrunc" => c(
            (
                E::Location5439007,
                "$dateTrunc only supports an object as its argument",
            ),
            (E::Location5439008, DATE_UNKNOWN),
            &[
                ("date", E::Location5439009, DATE_MISSING),
                ("unit", E::Location5439010, DATE_MISSING),
            ],
        ),
        "$convert" => c(
            (
                E::FailedToParse,
                "$convert expects an object of named arguments but found: {t}",
            ),
            (E::FailedToParse, FOUND_UNKNOWN),
            &[
                ("input", E::FailedToParse, DATE_MISSING),
                ("to", E::FailedToParse, DATE_MISSING),
            ],
        ),
        "$trim" | "$ltrim" | "$rtrim" => c(
            (
                E::Location50696,
                "{op} only supports an object as an argument, found {t}",
            ),
            (E::Location50694, FOUND_UNKNOWN),
            &[("input", E::Location50695, "{op} requires an 'input' field")],
        ),
        "$regexMatch" | "$regexFind" | "$regexFindAll" => c(
            (
                E::Location51103,
                "{op} expects an object of named arguments but found: {t}",
            ),
            (E::Location31024, FOUND_UNKNOWN),
            &[
                ("input", E::Location31022, REGEX_MISSING),
                ("regex", E::Location31023, REGEX_MISSING),
            ],
        ),
        "$replaceOne" | "$replaceAll" => c(
            (
                E::Location51751,
                "{op} requires an object as an argument, found: {t}",
            ),
            (E::Location51750, FOUND_UNKNOWN),
            &[
                ("input", E::Location51749, SPECIFIED),
                ("find", E::Location51748, SPECIFIED),
                ("replacement", E::Location51747, SPECIFIED),
            ],
        ),
        "$sortArray" => c(
            (
                E::Location2942500,
                "$sortArray requires an object as an argument, found: {t}",
            ),
            (E::Location2942501, FOUND_UNKNOWN),
            &[
                ("input", E::Location2942502, SPECIFIED),
                ("sortBy", E::Location2942503, SPECIFIED),
            ],
        ),
        "$setField" => c(
            (
                E::Location4161100,
                "{op} only supports an object as its argument",
            ),
            (E::Location4161101, FOUND_UNKNOWN),
            &[
                ("field", E::Location4161102, SPECIFIED),
                ("value", E::Location4161103, SPECIFIED),
                ("input", E::Location4161109, SPECIFIED),
            ],
        ),
        "$unsetField" => c(
            (
                E::Location4161100,
                "{op} only supports an object as its argument",
            ),
            (E::Location4161101, FOUND_UNKNOWN),
            &[
                ("field", E::Location4161102, SPECIFIED),
                ("input", E::Location4161109, SPECIFIED),
            ],
        ),
        "$getField" => c(
            (
                E::FailedToParse,
                "{op} only supports an object as its argument",
            ),
            (E::Location3041701, FOUND_UNKNOWN),
            &[("field", E::Location3041702, SPECIFIED)],
        ),
        "$cond" => c(
            (
                E::FailedToParse,
                "{op} only supports an object as its argument",
            ),
            (E::Location17083, "Unrecognized parameter to $cond: {k}"),
            &[
                ("if", E::Location17080, DATE_MISSING),
                ("then", E::Location17081, DATE_MISSING),
                ("else", E::Location17082, DATE_MISSING),
            ],
        ),
        _ => None,
    }
}

fn fill(template: &str, op: &str, k: &str) -> String {
    template
        .replace("{op}", op)
        .replace("{k}", k)
        .replace("{t}", k)
}

impl NamedCodes {
    /// The operator's error for an argument that is not a document.
    pub(super) fn not_object(&self, op: &str, arg: &Bson) -> crate::error::CommandError {
        let (code, msg) = self.not_object;
        err(code, fill(msg, op, type_of(arg)))
    }

    /// The operator's error for a field it does not take.
    pub(super) fn unknown(&self, op: &str, field: &str) -> crate::error::CommandError {
        let (code, msg) = self.unknown;
        err(code, fill(msg, op, field))
    }

    /// The first required field absent from `d`, as mongod reports it.
    pub(super) fn check_missing(&self, op: &str, d: &Document) -> CommandResult<()> {
        match self.missing.iter().find(|(k, ..)| !d.contains_key(*k)) {
            Some((k, code, msg)) => Err(err(*code, fill(msg, op, k))),
            None => Ok(()),
        }
    }
}

/// `$dateFromParts` needs `year` or `isoWeekYear` (40516) and refuses to mix the natural
/// fields with the ISO ones (40489 with `year`, 40525 with `isoWeekYear`).
pub(super) fn date_from_parts_fields(d: &Document) -> CommandResult<()> {
    let has = |k: &str| d.contains_key(k);
    if !has("year") && !has("isoWeekYear") {
        return Err(err(
            ErrorCode::Location40516,
            "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
        ));
    }
    if has("year") && (has("isoWeekYear") || has("isoWeek") || has("isoDayOfWeek")) {
        return Err(err(
            ErrorCode::Location40489,
            "$dateFromParts does not allow mixing natural dates with ISO dates",
        ));
    }
    if has("isoWeekYear") && (has("year") || has("month") || has("day")) {
        return Err(err(
            ErrorCode::Location40525,
            "$dateFromParts does not allow mixing ISO dates with natural dates",
        ));
    }
    Ok(())
}

/// `field` of `$setField`/`$unsetField` as mongod checks it when parsing: a constant string
/// (a `$literal` counts), not a field path (4161108), not an expression (4161106), not
/// another type (4161107).
pub(super) fn set_field_field(op: &str, field: &Bson) -> CommandResult<()> {
    let constant = match field {
        Bson::Document(d) if d.len() == 1 && d.contains_key("$literal") => &d["$literal"],
        Bson::Document(_) | Bson::Array(_) => {
            return Err(err(
                ErrorCode::Location4161106,
                format!(
                    "{op} requires 'field' to evaluate to a constant, but got a non-constant argument"
                ),
            ));
        }
        Bson::String(s) if s.starts_with('$') => {
            return Err(err(
                ErrorCode::Location4161108,
                format!(
                    "A field path reference which is not allowed in this context. Did you mean {{$literal: '{s}'}}?"
                ),
            ));
        }
        other => other,
    };
    if matches!(constant, Bson::String(_)) {
        return Ok(());
    }
    Err(err(
        ErrorCode::Location4161107,
        format!(
            "{op} requires 'field' to evaluate to type String, but got {}",
            type_of(constant)
        ),
    ))
}

/// `$getField`'s `field` when it is a constant (8.0 lets it be any expression): a constant
/// of another type than string is refused when parsing (5654602).
pub(super) fn get_field_field(field: &Bson) -> CommandResult<()> {
    let constant = match field {
        Bson::Document(d) if d.len() == 1 && d.contains_key("$literal") => &d["$literal"],
        Bson::Document(_) | Bson::Array(_) | Bson::String(_) => return Ok(()),
        other => other,
    };
    if matches!(constant, Bson::String(_)) {
        return Ok(());
    }
    Err(err(
        ErrorCode::Location5654602,
        format!(
            "$getField requires 'field' to evaluate to type String, but got {}",
            type_of(constant)
        ),
    ))
}

/// `$sortArray`'s `sortBy`, read as a literal when the expression is parsed: a document must be a
/// non-empty pattern of 1/-1 over non-empty paths (2942505), a number must be 1 or -1 (2942506),
/// anything else is 2942507.
pub(super) fn sort_array_by(by: &Bson) -> CommandResult<()> {
    let unit = |v: &Bson| {
        crate::query::types::is_number(v)
            && matches!(crate::query::types::as_f64(v), Some(1.0) | Some(-1.0))
    };
    match by {
        Bson::Document(d) => {
            let problem = if d.is_empty() {
                Some("The sort pattern is empty when it should be a set of fields.")
            } else if !d.values().all(unit) {
                Some("The sort element value must be either 1 or -1")
            } else if d
                .keys()
                .any(|k| k.is_empty() || k.split('.').any(str::is_empty))
            {
                Some("The sort field cannot be empty")
            } else {
                None
            };
            match problem {
                Some(m) => Err(err(ErrorCode::Location2942505, m)),
                None => Ok(()),
            }
        }
        n if crate::query::types::is_number(n) => {
            if unit(n) {
                Ok(())
            } else {
                Err(err(
                    ErrorCode::Location2942506,
                    "The $sort element value must be either 1 or -1",
                ))
            }
        }
        _ => Err(err(
            ErrorCode::Location2942507,
            "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
        )),
    }
}
