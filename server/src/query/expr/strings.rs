//! String operators: `$concat`, `$toLower`/`$toUpper`, lengths, `$substr*`, `$split`,
//! `$strcasecmp`, `$indexOfBytes`/`$indexOfCP`, `$trim`/`$ltrim`/`$rtrim`, the regex operators and
//! `$replaceOne`/`$replaceAll`.

use super::args::*;
use super::{Expr, NamedOp, Operator, Scope};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::RegexPred;
use crate::query::types;
use bson::{Bson, RawDocument, doc};
use std::cmp::Ordering;

/// `$concat`.
pub(super) fn concat(values: &[Value]) -> CommandResult<Value> {
    let mut out = String::new();
    for v in values {
        match v {
            _ if is_nullish(v) => return Ok(Some(Bson::Null)),
            Some(Bson::String(s)) => {
                check_built("$concat", out.len() + s.len(), s.len())?;
                out.push_str(s)
            }
            other => {
                return Err(err(
                    ErrorCode::Location16702,
                    format!("$concat only supports strings, not {}", type_name(other)),
                ));
            }
        }
    }
    Ok(Some(Bson::String(out)))
}

/// `$toLower` and `$toUpper`.
pub(super) fn change_case(op: Operator, values: &[Value]) -> CommandResult<Value> {
    let text = to_text(&values[0])?;
    Ok(Some(Bson::String(if op == Operator::ToLower {
        text.to_lowercase()
    } else {
        text.to_uppercase()
    })))
}

pub(super) fn strings(op: Operator, values: &[Value]) -> CommandResult<Value> {
    use Operator::*;
    if matches!(op, Split | IndexOfBytes) && is_nullish(&values[0]) {
        return null();
    }
    if op == Split && is_nullish(&values[1]) {
        return null();
    }
    Ok(Some(match op {
        StrLenBytes => Bson::Int32(
            i32::try_from(
                string_coded(&values[0], ErrorCode::Location34473, "$strLenBytes")?.len(),
            )
            .unwrap_or(i32::MAX),
        ),
        StrLenCp => Bson::Int32(
            i32::try_from(
                string_coded(&values[0], ErrorCode::Location34471, "$strLenCP")?
                    .chars()
                    .count(),
            )
            .unwrap_or(i32::MAX),
        ),
        Substr | SubstrCp => {
            let text = if is_nullish(&values[0]) {
                String::new()
            } else {
                to_text(&values[0])?
            };
            let (start, count) = substr_bounds(op, &values[1], &values[2])?;
            let start = usize::try_from(start).unwrap_or(0);
            let count = if count < 0 {
                usize::MAX
            } else {
                usize::try_from(count).unwrap_or(usize::MAX)
            };
            if op == SubstrCp {
                Bson::String(text.chars().skip(start).take(count).collect())
            } else {
                let end = start.saturating_add(count).min(text.len());
                let start = start.min(text.len());
                match text.get(start..end) {
                    Some(s) => Bson::String(s.to_string()),
                    None if !text.is_char_boundary(start) => {
                        return Err(err(
                            ErrorCode::Location28656,
                            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
                        ));
                    }
                    None => {
                        return Err(err(
                            ErrorCode::Location28657,
                            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
                        ));
                    }
                }
            }
        }
        Split => {
            let s = string_coded(&values[0], ErrorCode::Location40085, "$split")?;
            let d = string_coded(&values[1], ErrorCode::Location40086, "$split")?;
            if d.is_empty() {
                return Err(err(
                    ErrorCode::Location40087,
                    "$split requires a non-empty separator",
                ));
            }
            Bson::Array(s.split(d).map(|p| Bson::String(p.to_string())).collect())
        }
        StrCaseCmp => {
            let a = to_text(&values[0])?.to_ascii_lowercase();
            let b = to_text(&values[1])?.to_ascii_lowercase();
            Bson::Int32(match a.cmp(&b) {
                Ordering::Less => -1,
                Ordering::Equal => 0,
                Ordering::Greater => 1,
            })
        }
        IndexOfBytes => {
            let (s, sub) = (
                string_coded(&values[0], ErrorCode::Location40091, "$indexOfBytes")?,
                string_coded(&values[1], ErrorCode::Location40092, "$indexOfBytes")?,
            );
            let start = match values.get(2) {
                Some(v) => {
                    usize::try_from(index_arg(v, "$indexOfBytes", "starting index")?).unwrap_or(0)
                }
                None => 0,
            };
            let end = match values.get(3) {
                Some(v) => {
                    usize::try_from(index_arg(v, "$indexOfBytes", "ending index")?).unwrap_or(0)
                }
                None => s.len(),
            };
            let hay = s.as_bytes().get(start..end.min(s.len())).unwrap_or(&[]);
            let found = hay
                .windows(sub.len().max(1))
                .position(|w| w == sub.as_bytes())
                .map(|i| i + start);
            let found = if sub.is_empty() && start <= s.len() {
                Some(start)
            } else {
                found
            };
            Bson::Int32(found.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1))
        }
        _ => {
            return Err(err(
                ErrorCode::InternalError,
                "string operator out of place",
            ));
        }
    }))
}

/// A string argument with the operator's own code for anything else.
fn string_coded<'a>(v: &'a Value, code: ErrorCode, op: &str) -> CommandResult<&'a str> {
    match v {
        Some(Bson::String(s)) => Ok(s),
        other => Err(err(
            code,
            format!(
                "{op} requires a string argument, found: {}",
                type_name(other)
            ),
        )),
    }
}

/// `$substr`/`$substrBytes` and `$substrCP`'s start and length, as mongod's evaluators check
/// them: bytes take any number (16034, 16035) with a non-negative start (50752) and a negative
/// length meaning "to the end"; code points take 32-bit integers (34450-34453), both
/// non-negative (34454 length, 34455 start).
fn substr_bounds(op: Operator, start: &Value, length: &Value) -> CommandResult<(i64, i64)> {
    if op == Operator::SubstrCp {
        let s = int32_arg(
            start,
            (ErrorCode::Location34450, ErrorCode::Location34451),
            "$substrCP's starting index",
        )?;
        let n = int32_arg(
            length,
            (ErrorCode::Location34452, ErrorCode::Location34453),
            "$substrCP's length",
        )?;
        if n < 0 {
            return Err(err(
                ErrorCode::Location34454,
                "$substrCP: length must be a nonnegative integer.",
            ));
        }
        if s < 0 {
            return Err(err(
                ErrorCode::Location34455,
                "$substrCP: the starting index must be nonnegative integer.",
            ));
        }
        return Ok((s, n));
    }
    let number = |v: &Value, code, what: &str| {
        v.as_ref()
            .filter(|b| types::is_number(b))
            .and_then(types::as_f64)
            .map(|f| f.trunc() as i64)
            .ok_or_else(|| {
                err(
                    code,
                    format!(
                        "$substrBytes:  {what} must be a numeric type (is BSON type {})",
                        type_name(v)
                    ),
                )
            })
    };
    let s = number(start, ErrorCode::Location16034, "starting index")?;
    let n = number(length, ErrorCode::Location16035, "length")?;
    if s < 0 {
        return Err(err(
            ErrorCode::Location50752,
            format!("$substrBytes:  starting index must be non-negative (got: {s})"),
        ));
    }
    Ok((s, n))
}

pub(super) fn index_of_cp(values: &[Value]) -> CommandResult<Value> {
    if is_nullish(&values[0]) {
        return null();
    }
    let s = string_coded(&values[0], ErrorCode::Location40093, "$indexOfCP")?;
    let sub = string_coded(&values[1], ErrorCode::Location40094, "$indexOfCP")?;
    let index = |i: usize, what: &str| -> CommandResult<Option<i64>> {
        values
            .get(i)
            .map(|v| index_arg(v, "$indexOfCP", what))
            .transpose()
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = sub.chars().collect();
    let start = usize::try_from(index(2, "starting index")?.unwrap_or(0)).unwrap_or(0);
    let end = index(3, "ending index")?
        .map_or(chars.len(), |e| usize::try_from(e).unwrap_or(0))
        .min(chars.len());
    let found = (start..=end.saturating_sub(needle.len()))
        .take_while(|i| i + needle.len() <= end)
        .find(|&i| chars[i..i + needle.len()] == needle[..]);
    Ok(Some(Bson::Int32(
        found.and_then(|i| i32::try_from(i).ok()).unwrap_or(-1),
    )))
}

/// `$regexMatch`, `$regexFind`, `$regexFindAll`, checked in mongod's order with its codes:
/// `regex` not a string or regex 51105, `options` not a string 51106, options in both places
/// 51107, a null byte in the pattern 51109 or the options 51110, a bad flag 51108, a pattern that
/// does not compile 51111, then `input` not a string 51104; a null input or pattern gives
/// false, [] or null.
pub(super) fn regex_op(
    op: NamedOp,
    input: Value,
    regex: Value,
    options: Value,
) -> CommandResult<Value> {
    let name = match op {
        NamedOp::RegexMatch => "$regexMatch",
        NamedOp::RegexFind => "$regexFind",
        _ => "$regexFindAll",
    };
    let (pattern, mut flags) = match &regex {
        Some(Bson::String(p)) => (Some(p.clone()), String::new()),
        Some(Bson::RegularExpression(r)) => (
            Some(r.pattern.as_str().to_string()),
            r.options.as_str().to_string(),
        ),
        _ if is_nullish(&regex) => (None, String::new()),
        _ => {
            return Err(err(
                ErrorCode::Location51105,
                format!("{name} needs 'regex' to be of type string or regex"),
            ));
        }
    };
    match &options {
        _ if is_nullish(&options) => {}
        Some(Bson::String(o)) => {
            if !flags.is_empty() {
                return Err(err(
                    ErrorCode::Location51107,
                    format!(
                        "{name}: found regex option(s) specified in both 'regex' and 'option' fields"
                    ),
                ));
            }
            flags = o.clone();
        }
        _ => {
            return Err(err(
                ErrorCode::Location51106,
                format!("{name} needs 'options' to be of type string"),
            ));
        }
    }
    if pattern.as_deref().is_some_and(|p| p.contains('\0')) {
        return Err(err(
            ErrorCode::Location51109,
            format!("{name}: regular expression cannot contain an embedded null byte"),
        ));
    }
    if flags.contains('\0') {
        return Err(err(
            ErrorCode::Location51110,
            format!("{name}: regular expression options cannot contain an embedded null byte"),
        ));
    }
    let re = match &pattern {
        Some(p) => Some(RegexPred::new(p, &flags).map_err(|e| {
            if e.code == ErrorCode::Location51091 {
                err(
                    ErrorCode::Location51111,
                    format!("Invalid Regex in {name}: {}", e.message),
                )
            } else {
                e
            }
        })?),
        None => None,
    };
    let text = match &input {
        Some(Bson::String(s)) => Some(s.clone()),
        _ if is_nullish(&input) => None,
        _ => {
            return Err(err(
                ErrorCode::Location51104,
                format!("{name} needs 'input' to be of type string"),
            ));
        }
    };
    let (Some(text), Some(re)) = (text, re) else {
        return Ok(Some(match op {
            NamedOp::RegexMatch => Bson::Boolean(false),
            NamedOp::RegexFindAll => Bson::Array(Vec::new()),
            _ => Bson::Null,
        }));
    };
    let compiled = re.compiled();
    Ok(Some(match op {
        NamedOp::RegexMatch => Bson::Boolean(compiled.is_match(&text)),
        NamedOp::RegexFind => compiled
            .captures(&text)
            .map_or(Bson::Null, |c| found_doc(&text, &c, &mut (0, 0))),
        _ => regex_find_all(compiled, &text)?,
    }))
}

/// One `$regexFind(All)` result: the match, its code-point index and the captures. `counted`
/// is (byte offset, code points before it) of the previous match, so that a scan over all
/// matches counts each character once instead of from the start every time.
fn found_doc(text: &str, c: &regex::Captures<'_>, counted: &mut (usize, usize)) -> Bson {
    let (start, matched) = c.get(0).map_or((0, ""), |m| (m.start(), m.as_str()));
    let captures: Vec<Bson> = c
        .iter()
        .skip(1)
        .map(|g| g.map_or(Bson::Null, |g| Bson::String(g.as_str().to_string())))
        .collect();
    match_doc(text, start, matched, captures, counted)
}

fn match_doc(
    text: &str,
    start: usize,
    matched: &str,
    captures: Vec<Bson>,
    counted: &mut (usize, usize),
) -> Bson {
    let (from, before) = *counted;
    let points = before + text.get(from..start).map_or(0, |s| s.chars().count());
    *counted = (start.max(from), points);
    let idx = i32::try_from(points).unwrap_or(i32::MAX);
    Bson::Document(doc! {"match": matched, "idx": idx, "captures": captures})
}

/// `$regexFindAll`: every match in one pass, interruptible per match, failing (51151) once
/// the result passes the BSON size limit instead of growing without bound. A pattern without
/// groups takes the regex crate's faster search (no capture slots).
fn regex_find_all(compiled: &regex::Regex, text: &str) -> CommandResult<Bson> {
    let max = crate::query::limits::BUILT_VALUE_BYTES_MAX;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    let mut counted = (0, 0);
    let mut push = |d: Bson| -> CommandResult<()> {
        crate::interrupt::tick()?;
        bytes += element_size_bytes(&d);
        if bytes > max {
            return Err(err(
                ErrorCode::Location51151,
                format!(
                    "$regexFindAll: the size of buffer to store output exceeded the {max} byte limit"
                ),
            ));
        }
        out.push(d);
        Ok(())
    };
    if compiled.captures_len() == 1 {
        for m in compiled.find_iter(text) {
            push(match_doc(text, m.start(), m.as_str(), vec![], &mut counted))?;
        }
    } else {
        for c in compiled.captures_iter(text) {
            push(found_doc(text, &c, &mut counted))?;
        }
    }
    Ok(Bson::Array(out))
}

/// `$replaceOne` and `$replaceAll`: arguments `input, find, replacement`.
pub(super) fn replace(
    op: NamedOp,
    input: Value,
    find: Value,
    replacement: Value,
) -> CommandResult<Value> {
    // Types first (51746, 51745, 51744), then null: mongod's order.
    let name = if op == NamedOp::ReplaceOne {
        "$replaceOne"
    } else {
        "$replaceAll"
    };
    for (v, what, code) in [
        (&input, "input", ErrorCode::Location51746),
        (&find, "find", ErrorCode::Location51745),
        (&replacement, "replacement", ErrorCode::Location51744),
    ] {
        if !is_nullish(v) && !matches!(v, Some(Bson::String(_))) {
            return Err(err(
                code,
                format!(
                    "{name} requires that '{what}' be a string, found: {}",
                    type_name(v)
                ),
            ));
        }
    }
    let (Some(Bson::String(i)), Some(Bson::String(f)), Some(Bson::String(r))) =
        (input, find, replacement)
    else {
        return null();
    };
    Ok(Some(Bson::String(if op == NamedOp::ReplaceOne {
        i.replacen(&f, &r, 1)
    } else {
        i.replace(&f, &r)
    })))
}

/// `$trim`, `$ltrim` and `$rtrim`.
pub(super) fn trim(
    input: &Expr,
    chars: Option<&Expr>,
    left: bool,
    right: bool,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let v = input.eval(root, scope)?;
    if is_nullish(&v) {
        return null();
    }
    let name = match (left, right) {
        (true, false) => "$ltrim",
        (false, true) => "$rtrim",
        _ => "$trim",
    };
    let Some(Bson::String(text)) = v else {
        return Err(err(
            ErrorCode::Location50699,
            format!(
                "{name} requires its input to be a string, got {} instead.",
                type_name(&v)
            ),
        ));
    };
    let set: Vec<char> = match chars {
        Some(c) => match c.eval(root, scope)? {
            Some(Bson::String(s)) => s.chars().collect(),
            other if is_nullish(&other) => return null(),
            other => {
                return Err(err(
                    ErrorCode::Location50700,
                    format!(
                        "{name} requires 'chars' to be a string, got {} instead.",
                        type_name(&other)
                    ),
                ));
            }
        },
        None => vec![
            ' ', '\0', '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{a0}', '\u{2000}', '\u{200a}',
            '\u{3000}',
        ],
    };
    let mut t = text.as_str();
    if left {
        t = t.trim_start_matches(|c| set.contains(&c));
    }
    if right {
        t = t.trim_end_matches(|c| set.contains(&c));
    }
    Ok(Some(Bson::String(t.to_string())))
}
