//! Calendar arithmetic in a time zone: `$dateAdd`, `$dateSubtract`, `$dateDiff`, `$dateTrunc`.
//!
//! mongod's rules, which this module keeps: units of an hour or less are elapsed time, while
//! days and longer keep the local wall-clock time (a day added across a DST change is 23 or 25
//! hours); `$dateDiff` counts unit boundaries between the two local times (hours, minutes and
//! seconds corrected by the change of offset, so they stay elapsed time); `$dateTrunc` bins
//! from the reference 2000-01-01T00:00 local: elapsed time for units under a day, local
//! calendar units from there up, and weeks from the first `startOfWeek` day on or after it.

use super::NamedOp;
use super::args::{is_nullish, type_name};
use super::dates::{MS_PER_DAY, civil, days_from_civil, days_in_month, parts};
use super::tz::{Zone, zone_arg};
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, DateTime};

type Value = Option<Bson>;

const MS_PER_HOUR: i64 = 3_600_000;

/// Anchor of `$dateTrunc` bins, as in mongod: 2000-01-01T00:00:00 (local).
const TRUNC_REFERENCE_MS: i64 = 946_684_800_000;

/// Weekday names, Monday first, as `startOfWeek` accepts them (or their first three letters).
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// mongod's bound on `$dateAdd` amounts, in days: about the span of a 64-bit millisecond
/// count. Amounts in other units are bounded by the same span (years of 365 days).
const ADD_DAYS_MAX: i64 = (u64::MAX / 86_400_000 + 1) as i64;

/// mongod's largest `binSize` for `$dateTrunc` in units of a day or more.
const TRUNC_CALENDAR_BIN_MAX: i64 = 100_000_000_000;

/// Index into [`WEEKDAYS`] of Sunday, the default first day of a week.
const SUNDAY: i64 = 6;

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

fn date(ms: i64) -> CommandResult<Value> {
    Ok(Some(Bson::DateTime(DateTime::from_millis(ms))))
}

/// Evaluated arguments in the order of the parser's table for each operator.
pub(super) fn apply_named(op: NamedOp, values: Vec<Option<Value>>) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let given = |i: usize| values.get(i).cloned().flatten();
    match op {
        NamedOp::DateAdd | NamedOp::DateSubtract => {
            let name = if op == NamedOp::DateAdd {
                "$dateAdd"
            } else {
                "$dateSubtract"
            };
            let tz = given(3);
            if [arg(0), arg(1), arg(2)].iter().any(is_nullish)
                || tz.as_ref().is_some_and(is_nullish)
            {
                return null();
            }
            let unit = unit(&arg(1), name)?;
            let Some(zone) = zone_arg(tz.as_ref(), name)? else {
                return null();
            };
            let start = coerce_date(&arg(0), ErrorCode::Location5166403, || {
                format!("{name} requires startDate to be convertible to a date")
            })?;
            let amount = arg(2)
                .as_ref()
                .and_then(types::as_i64_exact)
                .ok_or_else(|| {
                    err(
                        ErrorCode::Location5166405,
                        format!("{name} expects integer amount of time units"),
                    )
                })?;
            let amount = if op == NamedOp::DateSubtract {
                amount.checked_neg().ok_or_else(|| {
                    err(
                        ErrorCode::Location6045000,
                        format!("invalid $dateSubtract 'amount' parameter value: {amount}"),
                    )
                })?
            } else {
                amount
            };
            date(date_add(start, &unit, amount, &zone)?)
        }
        NamedOp::DateDiff => {
            let tz = given(3);
            if [arg(0), arg(1), arg(2)].iter().any(is_nullish) {
                return null();
            }
            let unit = unit(&arg(2), "$dateDiff")?;
            let Some(first) = week_start(&unit, given(4), "$dateDiff")? else {
                return null();
            };
            let Some(zone) = zone_arg(tz.as_ref(), "$dateDiff")? else {
                return null();
            };
            let a = diff_date(&arg(0), "$dateDiff", "startDate")?;
            let b = diff_date(&arg(1), "$dateDiff", "endDate")?;
            Ok(Some(Bson::Int64(date_diff(a, b, &unit, &zone, first))))
        }
        _ => date_trunc(&values),
    }
}

fn date_trunc(values: &[Option<Value>]) -> CommandResult<Value> {
    const OP: &str = "$dateTrunc";
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let given = |i: usize| values.get(i).cloned().flatten();
    // mongod's order: date, binSize, unit, startOfWeek, timezone (null checks and types), then
    // the date's type.
    if is_nullish(&arg(0)) || is_nullish(&arg(1)) || given(2).as_ref().is_some_and(is_nullish) {
        return null();
    }
    let bin = match given(2) {
        None => 1,
        Some(v) => v
            .as_ref()
            .filter(|b| types::is_number(b))
            .and_then(types::as_i64_exact)
            .ok_or_else(|| {
                err(
                    ErrorCode::Location5439017,
                    format!(
                        "{OP} requires 'binSize' to be a 64-bit integer, but got value of type {}",
                        type_name(&v)
                    ),
                )
            })?,
    };
    if bin <= 0 {
        return Err(err(
            ErrorCode::Location5439018,
            format!("$dateTrunc requires 'binSize' to be greater than 0, but got value {bin}"),
        ));
    }
    let unit = unit(&arg(1), OP)?;
    let Some(first) = week_start(&unit, given(3), OP)? else {
        return null();
    };
    let Some(zone) = zone_arg(given(4).as_ref(), OP)? else {
        return null();
    };
    let ms = diff_date(&arg(0), OP, "date")?;
    date(truncate(ms, &unit, bin, &zone, first)?)
}

/// A date argument as mongod's `coercibleToDate` reads it (a date, a timestamp or an ObjectId),
/// with the operator's own code for anything else; the caller has handled null.
fn coerce_date(v: &Value, code: ErrorCode, message: impl FnOnce() -> String) -> CommandResult<i64> {
    match v {
        Some(Bson::DateTime(d)) => Ok(d.timestamp_millis()),
        Some(Bson::Timestamp(t)) => Ok(i64::from(t.time) * 1000),
        Some(Bson::ObjectId(o)) => Ok(o.timestamp().timestamp_millis()),
        _ => Err(err(code, message())),
    }
}

/// `$dateDiff`'s and `$dateTrunc`'s dates: 5166307.
fn diff_date(v: &Value, op: &str, what: &str) -> CommandResult<i64> {
    coerce_date(v, ErrorCode::Location5166307, || {
        format!(
            "{op} requires '{what}' to be a date, but got {}",
            type_name(v)
        )
    })
}

fn overflow(op: &str) -> crate::error::CommandError {
    err(
        ErrorCode::Overflow,
        format!("{op} overflowed the date range"),
    )
}

/// A `unit` argument, checked against mongod's names: not a string 5439013, an unknown name
/// FailedToParse.
pub(super) fn unit(v: &Value, op: &str) -> CommandResult<String> {
    const UNITS: [&str; 9] = [
        "millisecond",
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "quarter",
        "year",
    ];
    match v {
        Some(Bson::String(s)) if UNITS.contains(&s.as_str()) => Ok(s.clone()),
        Some(Bson::String(s)) => Err(err(
            ErrorCode::FailedToParse,
            format!(
                "{op} parameter 'unit' value parsing failed :: caused by :: unknown time unit value: {s}"
            ),
        )),
        other => Err(err(
            ErrorCode::Location5439013,
            format!(
                "{op} requires 'unit' to be a string, but got {}",
                type_name(other)
            ),
        )),
    }
}

/// Milliseconds in the units of fixed length.
pub(super) fn unit_ms(unit: &str) -> Option<i64> {
    Some(match unit {
        "millisecond" => 1,
        "second" => 1000,
        "minute" => 60_000,
        "hour" => MS_PER_HOUR,
        "day" => MS_PER_DAY,
        "week" => 7 * MS_PER_DAY,
        _ => return None,
    })
}

/// The first day of a week (Monday = 0) for unit `week`; Sunday when not given. `Ok(None)` when
/// it evaluated to null (the operator returns null). Other units ignore it, as mongod does.
fn week_start(unit: &str, given: Option<Value>, op: &str) -> CommandResult<Option<i64>> {
    if unit != "week" {
        return Ok(Some(SUNDAY));
    }
    let name = match given {
        None => return Ok(Some(SUNDAY)),
        Some(v) if is_nullish(&v) => return Ok(None),
        Some(Some(Bson::String(s))) => s,
        Some(other) => {
            return Err(err(
                ErrorCode::Location5439015,
                format!(
                    "{op} requires 'startOfWeek' to be a string, but got {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let lower = name.to_ascii_lowercase();
    WEEKDAYS
        .iter()
        .position(|d| *d == lower || d[..3] == lower)
        .map(|i| Some(i64::try_from(i).unwrap_or(SUNDAY)))
        .ok_or_else(|| {
            err(
                ErrorCode::Location5439016,
                format!(
                    "{op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {name}"
                ),
            )
        })
}

/// Adds `amount` units; day and longer units move the local date and keep the wall-clock time.
pub(super) fn date_add(start: i64, unit: &str, amount: i64, zone: &Zone) -> CommandResult<i64> {
    let overflow = || overflow("$dateAdd");
    let years_max = ADD_DAYS_MAX / 365 + 1;
    let max = match unit {
        "millisecond" => i64::MAX,
        "second" => ADD_DAYS_MAX * 86_400,
        "minute" => ADD_DAYS_MAX * 1440,
        "hour" => ADD_DAYS_MAX * 24,
        "day" => ADD_DAYS_MAX,
        "week" => ADD_DAYS_MAX / 7,
        "month" => years_max * 12,
        "quarter" => years_max * 4,
        _ => years_max,
    };
    if unit != "millisecond" && !(-max < amount && amount < max) {
        return Err(err(
            ErrorCode::Location5976500,
            format!("invalid dateAdd 'amount' parameter value: {amount} {unit}"),
        ));
    }
    if let Some(ms) = unit_ms(unit).filter(|ms| *ms < MS_PER_DAY) {
        return amount
            .checked_mul(ms)
            .and_then(|d| start.checked_add(d))
            .ok_or_else(overflow);
    }
    if amount == 0 {
        return Ok(start); // a fold would otherwise move a second occurrence to the first
    }
    let local = zone.utc_to_local(start);
    let moved = if let Some(ms) = unit_ms(unit) {
        amount
            .checked_mul(ms)
            .and_then(|d| local.checked_add(d))
            .ok_or_else(overflow)?
    } else {
        let months = match unit {
            "month" => Some(amount),
            "quarter" => amount.checked_mul(3),
            _ => amount.checked_mul(12),
        }
        .ok_or_else(overflow)?;
        add_months(local, months).ok_or_else(overflow)?
    };
    Ok(zone.local_to_utc(moved))
}

/// Local ms moved by whole months; the day is clamped to the new month's length (Jan 31 plus
/// one month is Feb 28 or 29), as mongod does.
fn add_months(local: i64, months: i64) -> Option<i64> {
    let (y, m, d) = civil(local.div_euclid(MS_PER_DAY));
    let total = (y.checked_mul(12)? + i64::from(m) - 1).checked_add(months)?;
    let (ny, nm) = (
        total.div_euclid(12),
        u32::try_from(total.rem_euclid(12) + 1).ok()?,
    );
    let nd = d.min(days_in_month(ny, nm));
    days_from_civil(ny, nm, nd)
        .checked_mul(MS_PER_DAY)?
        .checked_add(local.rem_euclid(MS_PER_DAY))
}

/// Week number of a local day count, weeks starting on `first` (Monday = 0).
fn week_index(day: i64, first: i64) -> i64 {
    // 1970-01-01 (day 0) was a Thursday, index 3.
    (day + 3 - first).div_euclid(7)
}

/// How many unit boundaries lie between two instants, seen in the zone.
pub(super) fn date_diff(a: i64, b: i64, unit: &str, zone: &Zone, first: i64) -> i64 {
    if unit == "millisecond" {
        return b.saturating_sub(a);
    }
    let (la, lb) = (zone.utc_to_local(a), zone.utc_to_local(b));
    let day = |l: i64| l.div_euclid(MS_PER_DAY);
    let month_index = |l: i64| {
        let (y, m, _) = civil(day(l));
        y * 12 + i64::from(m) - 1
    };
    // Local hours, minutes and seconds between the two times, each corrected by the change of
    // offset counted in that unit (truncated, as mongod does), so that a DST change does not
    // count as time elapsed.
    let (pa, pb) = (parts(la), parts(lb));
    let offset_drop_ms = zone.offset_ms(a) - zone.offset_ms(b);
    let hours = lb.div_euclid(MS_PER_HOUR) - la.div_euclid(MS_PER_HOUR);
    let minutes = hours * 60 + pb[4] - pa[4];
    match unit {
        "second" => minutes * 60 + pb[5] - pa[5] + offset_drop_ms / 1000,
        "minute" => minutes + offset_drop_ms / 60_000,
        "hour" => hours + offset_drop_ms / MS_PER_HOUR,
        "day" => day(lb) - day(la),
        "week" => week_index(day(lb), first) - week_index(day(la), first),
        "month" => month_index(lb) - month_index(la),
        "quarter" => month_index(lb).div_euclid(3) - month_index(la).div_euclid(3),
        _ => pb[0] - pa[0],
    }
}

/// The start of the bin holding `ms`, bins counted in local time from the reference.
pub(super) fn truncate(
    ms: i64,
    unit: &str,
    bin: i64,
    zone: &Zone,
    first: i64,
) -> CommandResult<i64> {
    let overflow = || overflow("$dateTrunc");
    // The lower bound of the bin of `value`, bins of `width` laid from `anchor`.
    let floor_to = |value: i64, anchor: i64, width: i64| -> CommandResult<i64> {
        let shifted = value.checked_sub(anchor).ok_or_else(overflow)?;
        value
            .checked_sub(shifted.rem_euclid(width))
            .ok_or_else(overflow)
    };
    if let Some(u) = unit_ms(unit).filter(|u| *u < MS_PER_DAY) {
        let width = bin.checked_mul(u).ok_or_else(overflow)?;
        // Bins of elapsed time from the reference's instant (2000-01-01 local, with the offset
        // of that day), as mongod does: in a DST fold each occurrence keeps its own hour.
        let reference = TRUNC_REFERENCE_MS - zone.offset_ms(TRUNC_REFERENCE_MS);
        return floor_to(ms, reference, width);
    }
    if bin > TRUNC_CALENDAR_BIN_MAX {
        return Err(err(
            ErrorCode::Location5439006,
            "dateTrunc unsupported binSize value",
        ));
    }
    let today = zone.utc_to_local(ms).div_euclid(MS_PER_DAY);
    let reference_day = TRUNC_REFERENCE_MS / MS_PER_DAY;
    let start_day = match unit {
        "day" => floor_to(today, reference_day, bin)?,
        "week" => {
            // 2000-01-01 was a Saturday (index 5): weeks count from the next `first` day.
            let anchor = reference_day + (first - 5).rem_euclid(7);
            floor_to(today, anchor, bin.checked_mul(7).ok_or_else(overflow)?)?
        }
        _ => {
            let months_per = match unit {
                "month" => 1,
                "quarter" => 3,
                _ => 12,
            };
            let width = bin.checked_mul(months_per).ok_or_else(overflow)?;
            let (y, m, _) = civil(today);
            let since = (y - 2000) * 12 + i64::from(m) - 1;
            let start = since.div_euclid(width) * width;
            let month = u32::try_from(start.rem_euclid(12) + 1).unwrap_or(1);
            days_from_civil(2000 + start.div_euclid(12), month, 1)
        }
    };
    let start_local = start_day.checked_mul(MS_PER_DAY).ok_or_else(overflow)?;
    Ok(zone.local_to_utc(start_local))
}
