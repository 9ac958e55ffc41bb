//! `$dateToParts` and `$dateFromParts` in a time zone. Parts are local wall-clock values; parts
//! out of their natural range carry into the next unit (month 14 is February of next year), as
//! in mongod, and a local time in a DST gap or fold resolves as `tz.rs` describes.

use super::NamedOp;
use super::args::{is_nullish, type_name};
use super::dates::{MS_PER_DAY, days_from_civil, iso_day_of_week, iso_week, iso_year_start_ms};
use super::dates::{millis, parts};
use super::tz::zone_arg;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, DateTime, doc};

type Value = Option<Bson>;

/// mongod's bounds for `year` and `isoWeekYear` in `$dateFromParts`.
const YEAR_MIN: i64 = 1;
const YEAR_MAX: i64 = 9999;
/// mongod's bounds for month, day, hour, minute, isoWeek and isoDayOfWeek (they carry into the
/// next unit, but only this far); seconds and milliseconds are unbounded.
const PART_MIN: i64 = -32_768;
const PART_MAX: i64 = 32_767;

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

pub(super) fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    match op {
        NamedOp::DateToParts => date_to_parts(&values),
        NamedOp::DateFromParts => date_from_parts(&values),
        _ => super::date_string::date_from_string(&values),
    }
}

/// Arguments: `date, iso8601, timezone`.
fn date_to_parts(values: &[Option<Value>]) -> CommandResult<Value> {
    const OP: &str = "$dateToParts";
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let Some(zone) = zone_arg(values.get(2).and_then(Option::as_ref), OP)? else {
        return null();
    };
    let iso = match values.get(1).cloned().flatten() {
        None => false,
        Some(v) if is_nullish(&v) => return null(),
        Some(Some(Bson::Boolean(b))) => b,
        Some(other) => {
            return Err(err(
                ErrorCode::Location40521,
                format!(
                    "iso8601 must evaluate to a bool, found {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let Some(ms) = millis(&arg(0), OP)? else {
        return null();
    };
    let p = parts(zone.utc_to_local(ms));
    let small = |x: i64| Bson::Int32(i32::try_from(x).unwrap_or(i32::MAX));
    Ok(Some(Bson::Document(if iso {
        let (year, week) = iso_week(&p);
        doc! {"isoWeekYear": small(year), "isoWeek": week, "isoDayOfWeek": iso_day_of_week(&p),
        "hour": small(p[3]), "minute": small(p[4]), "second": small(p[5]), "millisecond": small(p[6])}
    } else {
        doc! {"year": small(p[0]), "month": small(p[1]), "day": small(p[2]), "hour": small(p[3]),
        "minute": small(p[4]), "second": small(p[5]), "millisecond": small(p[6])}
    })))
}

/// An integer part, `default` when not given; checked against mongod's bounds.
fn part(v: &Value, name: &str, default: i64, range: (i64, i64)) -> CommandResult<i64> {
    let Some(b) = v else {
        return Ok(default);
    };
    let n = types::as_i64_exact(b).ok_or_else(|| {
        err(
            ErrorCode::Location40515,
            format!(
                "'{name}' must evaluate to an integer, found {} with value {b}",
                type_name(v)
            ),
        )
    })?;
    if !(range.0..=range.1).contains(&n) {
        let (code, message) = if range.0 == YEAR_MIN {
            (
                if name == "year" {
                    ErrorCode::Location40523
                } else {
                    ErrorCode::Location31095
                },
                format!("'{name}' must evaluate to an integer in the range 1 to 9999, found {n}"),
            )
        } else {
            (
                ErrorCode::Location31034,
                format!(
                    "'{name}' must evaluate to a value in the range [-32768, 32767]; value {n} is not in range"
                ),
            )
        };
        return Err(err(code, message));
    }
    Ok(n)
}

/// Arguments: `year, month, day, hour, minute, second, millisecond, isoWeekYear, isoWeek,
/// isoDayOfWeek, timezone`.
fn date_from_parts(values: &[Option<Value>]) -> CommandResult<Value> {
    const OP: &str = "$dateFromParts";
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    if (0..10).any(|i| values.get(i).is_some_and(Option::is_some) && is_nullish(&arg(i))) {
        return null();
    }
    let Some(zone) = zone_arg(values.get(10).and_then(Option::as_ref), OP)? else {
        return null();
    };
    let iso = arg(7).is_some();
    if iso == arg(0).is_some() {
        return Err(err(
            ErrorCode::BadValue,
            "$dateFromParts requires either 'year' or 'isoWeekYear', but not both",
        ));
    }
    let small = (PART_MIN, PART_MAX);
    let any = (i64::MIN, i64::MAX);
    let base_day = if iso {
        let year = part(&arg(7), "isoWeekYear", 1970, (YEAR_MIN, YEAR_MAX))?;
        let week = part(&arg(8), "isoWeek", 1, small)?;
        let day = part(&arg(9), "isoDayOfWeek", 1, small)?;
        iso_year_start_ms(year) / MS_PER_DAY + (week - 1) * 7 + (day - 1)
    } else {
        let year = part(&arg(0), "year", 1970, (YEAR_MIN, YEAR_MAX))?;
        let month = part(&arg(1), "month", 1, small)? - 1;
        let day = part(&arg(2), "day", 1, small)?;
        let (y, m) = (
            year + month.div_euclid(12),
            u32::try_from(month.rem_euclid(12) + 1).unwrap_or(1),
        );
        days_from_civil(y, m, 1) + day - 1
    };
    let time_ms = [
        part(&arg(3), "hour", 0, small)?.checked_mul(3_600_000),
        part(&arg(4), "minute", 0, small)?.checked_mul(60_000),
        part(&arg(5), "second", 0, any)?.checked_mul(1000),
        Some(part(&arg(6), "millisecond", 0, any)?),
    ];
    let local = time_ms
        .into_iter()
        .try_fold(base_day * MS_PER_DAY, |acc, ms| acc.checked_add(ms?))
        .ok_or_else(|| err(ErrorCode::Overflow, "$dateFromParts overflowed"))?;
    Ok(Some(Bson::DateTime(DateTime::from_millis(
        zone.local_to_utc(local),
    ))))
}
