//! `$dateToParts`, `$dateFromParts`, `$dateFromString`, `$dateTrunc` (UTC only: another
//! timezone is refused as not implemented rather than silently ignored), and the object and
//! array helpers `$setField`, `$unsetField`, `$zip`.

use super::NamedOp;
use super::dates::{
    MS_PER_DAY, civil, days_from_civil, iso_day_of_week, iso_week, iso_year_start_ms, millis, parts,
};
use super::extra::{unit, unit_ms};
use super::ops::{is_nullish, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, DateTime, doc};

type Value = Option<Bson>;

/// Anchor of `$dateTrunc` bins, as in mongod: 2000-01-01T00:00:00Z.
const TRUNC_REFERENCE_MS: i64 = 946_684_800_000;

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

/// Accepts only timezones that mean UTC.
fn check_utc(tz: &Value, op: &str) -> CommandResult<()> {
    match tz {
        None | Some(Bson::Null) => Ok(()),
        Some(Bson::String(s))
            if ["UTC", "GMT", "Z", "Etc/UTC", "+00:00", "+0000", "+00"].contains(&s.as_str()) =>
        {
            Ok(())
        }
        Some(other) => Err(err(
            ErrorCode::NotImplemented,
            format!("{op} with timezone {other} is not supported yet (only UTC)"),
        )),
    }
}

fn int(v: &Value, op: &str, name: &str, default: i64) -> CommandResult<i64> {
    match v {
        None => Ok(default),
        Some(b) => types::as_i64_exact(b).ok_or_else(|| {
            err(
                ErrorCode::BadValue,
                format!(
                    "'{name}' must evaluate to an integer, found {} with value {b} in {op}",
                    type_name(v)
                ),
            )
        }),
    }
}

pub(super) fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    let given = |i: usize| values.get(i).cloned().flatten();
    let arg = |i: usize| given(i).flatten();
    match op {
        NamedOp::DateToParts => {
            check_utc(&arg(2), "$dateToParts")?;
            let Some(ms) = millis(&arg(0), "$dateToParts")? else {
                return null();
            };
            let p = parts(ms);
            let small = |x: i64| Bson::Int32(i32::try_from(x).unwrap_or(i32::MAX));
            Ok(Some(Bson::Document(
                if arg(1).as_ref().is_some_and(types::is_truthy) {
                    let (year, week) = iso_week(&p);
                    doc! {"isoWeekYear": small(year), "isoWeek": week, "isoDayOfWeek": iso_day_of_week(&p),
                    "hour": small(p[3]), "minute": small(p[4]), "second": small(p[5]), "millisecond": small(p[6])}
                } else {
                    doc! {"year": small(p[0]), "month": small(p[1]), "day": small(p[2]), "hour": small(p[3]),
                    "minute": small(p[4]), "second": small(p[5]), "millisecond": small(p[6])}
                },
            )))
        }
        NamedOp::DateFromParts => date_from_parts(&values),
        NamedOp::DateFromString => {
            check_utc(&arg(3), "$dateFromString")?;
            let input = arg(0);
            if is_nullish(&input) {
                return Ok(given(2).unwrap_or(Some(Bson::Null)));
            }
            let parsed = match (&input, arg(1)) {
                (Some(Bson::String(s)), Some(Bson::String(f))) => parse_with_format(s, &f),
                (Some(Bson::String(s)), _) => parse_iso(s),
                (other, _) => Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "$dateFromString requires that 'dateString' be a string, found: {}",
                        type_name(other)
                    ),
                )),
            };
            match (parsed, given(2)) {
                (Ok(ms), _) => Ok(Some(Bson::DateTime(DateTime::from_millis(ms)))),
                (Err(_), Some(on_error)) => Ok(on_error),
                (Err(e), None) => Err(e),
            }
        }
        NamedOp::DateTrunc => {
            check_utc(&arg(4), "$dateTrunc")?;
            let Some(ms) = millis(&arg(0), "$dateTrunc")? else {
                return null();
            };
            let unit = unit(&arg(1))?;
            let bin = int(&arg(2), "$dateTrunc", "binSize", 1)?;
            if bin <= 0 {
                return Err(err(
                    ErrorCode::BadValue,
                    "$dateTrunc requires 'binSize' to be greater than 0",
                ));
            }
            let start_of_week = match arg(3) {
                Some(Bson::String(s)) => s.to_ascii_lowercase(),
                _ => "sunday".to_string(),
            };
            Ok(Some(Bson::DateTime(DateTime::from_millis(truncate(
                ms,
                &unit,
                bin,
                &start_of_week,
            )?))))
        }
        NamedOp::SetField | NamedOp::UnsetField => {
            let Some(Bson::String(field)) = arg(0) else {
                return Err(err(
                    ErrorCode::BadValue,
                    "$setField requires 'field' to evaluate to a constant string",
                ));
            };
            let mut d = match arg(1) {
                Some(Bson::Document(d)) => d,
                v if is_nullish(&v) => return null(),
                other => {
                    return Err(err(
                        ErrorCode::BadValue,
                        format!(
                            "$setField requires 'input' to evaluate to type Object, found {}",
                            type_name(&other)
                        ),
                    ));
                }
            };
            // `value: "$$REMOVE"` (missing) removes the field, as `$unsetField` does.
            match (op, arg(2)) {
                (NamedOp::SetField, Some(v)) => {
                    d.insert(field, v);
                }
                _ => {
                    d.remove(&field);
                }
            }
            Ok(Some(Bson::Document(d)))
        }
        _ => zip(arg(0), arg(1), arg(2)),
    }
}

fn date_from_parts(values: &[Option<Value>]) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    check_utc(&arg(10), "$dateFromParts")?;
    let op = "$dateFromParts";
    if (0..10).any(|i| values.get(i).is_some_and(Option::is_some) && is_nullish(&arg(i))) {
        return null();
    }
    let time = |base: i64| -> CommandResult<i64> {
        let h = int(&arg(3), op, "hour", 0)?;
        let mi = int(&arg(4), op, "minute", 0)?;
        let s = int(&arg(5), op, "second", 0)?;
        let l = int(&arg(6), op, "millisecond", 0)?;
        [
            h.checked_mul(3_600_000),
            mi.checked_mul(60_000),
            s.checked_mul(1000),
            Some(l),
        ]
        .into_iter()
        .try_fold(base, |acc, part| part.and_then(|p| acc.checked_add(p)))
        .ok_or_else(|| err(ErrorCode::Overflow, "$dateFromParts overflowed"))
    };
    let iso = arg(7).is_some();
    if iso == arg(0).is_some() {
        return Err(err(
            ErrorCode::BadValue,
            "$dateFromParts requires either 'year' or 'isoWeekYear', but not both",
        ));
    }
    let base = if iso {
        let year = int(&arg(7), op, "isoWeekYear", 1970)?;
        let week = int(&arg(8), op, "isoWeek", 1)?;
        let day = int(&arg(9), op, "isoDayOfWeek", 1)?;
        iso_year_start_ms(year) + ((week - 1) * 7 + (day - 1)) * MS_PER_DAY
    } else {
        let year = int(&arg(0), op, "year", 1970)?;
        if !(1..=9999).contains(&year) {
            return Err(err(
                ErrorCode::BadValue,
                "'year' must evaluate to an integer in the range 1 to 9999",
            ));
        }
        let month = int(&arg(1), op, "month", 1)? - 1;
        let day = int(&arg(2), op, "day", 1)?;
        // Out-of-range months and days carry into the next unit, as in mongod.
        let (y, m) = (
            year + month.div_euclid(12),
            u32::try_from(month.rem_euclid(12) + 1).unwrap_or(1),
        );
        (days_from_civil(y, m, 1) + day - 1) * MS_PER_DAY
    };
    Ok(Some(Bson::DateTime(DateTime::from_millis(time(base)?))))
}

fn parse_error(s: &str) -> crate::error::CommandError {
    err(
        ErrorCode::BadValue,
        format!("Error parsing date string '{s}'"),
    )
}

/// ISO 8601 dates: a date alone is midnight UTC; a time without an offset is UTC.
fn parse_iso(s: &str) -> CommandResult<i64> {
    let text = s.trim();
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else if text.contains(['Z', '+'])
        || text[text.len().saturating_sub(6)..].contains('-') && text.len() > 19
    {
        text.replace(' ', "T")
    } else {
        format!("{}Z", text.replace(' ', "T"))
    };
    DateTime::parse_rfc3339_str(&full)
        .map(|d| d.timestamp_millis())
        .map_err(|_| parse_error(s))
}

/// `format` with `%Y %m %d %H %M %S %L %j` and literal characters.
fn parse_with_format(s: &str, format: &str) -> CommandResult<i64> {
    let (mut y, mut mo, mut d, mut h, mut mi, mut se, mut ms) =
        (1970i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
    let mut rest = s;
    let mut spec = format.chars();
    let take = |rest: &mut &str, digits: usize| -> CommandResult<i64> {
        let n = rest
            .chars()
            .take(digits)
            .take_while(char::is_ascii_digit)
            .count();
        if n == 0 {
            return Err(parse_error(s));
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        head.parse().map_err(|_| parse_error(s))
    };
    while let Some(c) = spec.next() {
        if c != '%' {
            rest = rest.strip_prefix(c).ok_or_else(|| parse_error(s))?;
            continue;
        }
        match spec.next() {
            Some('Y') => y = take(&mut rest, 4)?,
            Some('m') => mo = take(&mut rest, 2)?,
            Some('d') => d = take(&mut rest, 2)?,
            Some('H') => h = take(&mut rest, 2)?,
            Some('M') => mi = take(&mut rest, 2)?,
            Some('S') => se = take(&mut rest, 2)?,
            Some('L') => ms = take(&mut rest, 3)?,
            Some('%') => rest = rest.strip_prefix('%').ok_or_else(|| parse_error(s))?,
            _ => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("Invalid format character in format string '{format}'"),
                ));
            }
        }
    }
    let valid = rest.is_empty()
        && (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && h < 24
        && mi < 60
        && se < 60;
    if !valid {
        return Err(parse_error(s));
    }
    let days = days_from_civil(
        y,
        u32::try_from(mo).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    );
    Ok(days * MS_PER_DAY + h * 3_600_000 + mi * 60_000 + se * 1000 + ms)
}

fn truncate(ms: i64, unit: &str, bin: i64, start_of_week: &str) -> CommandResult<i64> {
    let overflow = || err(ErrorCode::Overflow, "$dateTrunc overflowed the date range");
    if unit == "week" {
        const DAYS: [&str; 7] = [
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ];
        let Some(first) = DAYS
            .iter()
            .position(|d| *d == start_of_week || d[..3] == *start_of_week)
        else {
            return Err(err(
                ErrorCode::BadValue,
                format!("unknown startOfWeek value: {start_of_week}"),
            ));
        };
        // 2000-01-03 was a Monday; anchor weeks on the chosen first day.
        let anchor = TRUNC_REFERENCE_MS + (2 + i64::try_from(first).unwrap_or(0)) * MS_PER_DAY;
        let width = bin.checked_mul(7 * MS_PER_DAY).ok_or_else(overflow)?;
        return Ok(anchor + (ms - anchor).div_euclid(width) * width);
    }
    if let Some(u) = unit_ms(unit) {
        let width = bin.checked_mul(u).ok_or_else(overflow)?;
        return Ok(TRUNC_REFERENCE_MS + (ms - TRUNC_REFERENCE_MS).div_euclid(width) * width);
    }
    let months_per = match unit {
        "month" => 1,
        "quarter" => 3,
        _ => 12,
    };
    let width = bin.checked_mul(months_per).ok_or_else(overflow)?;
    let (y, m, _) = civil(ms.div_euclid(MS_PER_DAY));
    let since = (y - 2000) * 12 + i64::from(m) - 1;
    let start = since.div_euclid(width) * width;
    let (ny, nm) = (
        2000 + start.div_euclid(12),
        u32::try_from(start.rem_euclid(12) + 1).unwrap_or(1),
    );
    Ok(days_from_civil(ny, nm, 1) * MS_PER_DAY)
}

fn zip(inputs: Value, longest: Value, defaults: Value) -> CommandResult<Value> {
    let arrays = match inputs {
        Some(Bson::Array(items)) => items,
        other => {
            return Err(err(
                ErrorCode::BadValue,
                format!(
                    "inputs must be an array of expressions, found {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let mut columns = Vec::with_capacity(arrays.len());
    for a in arrays {
        match a {
            Bson::Array(items) => columns.push(items),
            Bson::Null | Bson::Undefined => return null(),
            other => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("$zip found a non-array expression in input: {other}"),
                ));
            }
        }
    }
    let longest = longest.as_ref().is_some_and(types::is_truthy);
    let defaults = match defaults {
        Some(Bson::Array(d)) if d.len() == columns.len() && longest => d,
        None => vec![Bson::Null; columns.len()],
        Some(_) if !longest => {
            return Err(err(
                ErrorCode::BadValue,
                "cannot specify defaults unless useLongestLength is true",
            ));
        }
        Some(_) => {
            return Err(err(
                ErrorCode::BadValue,
                "defaults and inputs must have the same length",
            ));
        }
    };
    let rows = if longest {
        columns.iter().map(Vec::len).max().unwrap_or(0)
    } else {
        columns.iter().map(Vec::len).min().unwrap_or(0)
    };
    let out = (0..rows)
        .map(|r| {
            Bson::Array(
                columns
                    .iter()
                    .zip(&defaults)
                    .map(|(c, d)| c.get(r).cloned().unwrap_or_else(|| d.clone()))
                    .collect(),
            )
        })
        .collect();
    Ok(Some(Bson::Array(out)))
}
