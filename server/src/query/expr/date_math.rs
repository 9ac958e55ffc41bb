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
use super::dates::{MS_PER_DAY, civil, days_from_civil, days_in_month, millis, parts};
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
            let (Some(start), Some(zone)) = (millis(&arg(0), name)?, zone_arg(tz.as_ref(), name)?)
            else {
                return null();
            };
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
                amount.checked_neg().ok_or_else(|| overflow(name))?
            } else {
                amount
            };
            date(date_add(start, &unit(&arg(1))?, amount, &zone)?)
        }
        NamedOp::DateDiff => {
            let tz = given(3);
            if [arg(0), arg(1), arg(2)].iter().any(is_nullish) {
                return null();
            }
            let (Some(a), Some(b)) = (millis(&arg(0), "$dateDiff")?, millis(&arg(1), "$dateDiff")?)
            else {
                return null();
            };
            let Some(zone) = zone_arg(tz.as_ref(), "$dateDiff")? else {
                return null();
            };
            let unit = unit(&arg(2))?;
            let Some(first) = week_start(&unit, given(4))? else {
                return null();
            };
            Ok(Some(Bson::Int64(date_diff(a, b, &unit, &zone, first))))
        }
        _ => date_trunc(&values),
    }
}

fn date_trunc(values: &[Option<Value>]) -> CommandResult<Value> {
    const OP: &str = "$dateTrunc";
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let given = |i: usize| values.get(i).cloned().flatten();
    let Some(ms) = millis(&arg(0), OP)? else {
        return null();
    };
    if is_nullish(&arg(1)) || given(2).as_ref().is_some_and(is_nullish) {
        return null();
    }
    let Some(zone) = zone_arg(given(4).as_ref(), OP)? else {
        return null();
    };
    let unit = unit(&arg(1))?;
    let bin = match given(2) {
        None => 1,
        Some(v) => v.as_ref().and_then(types::as_i64_exact).ok_or_else(|| {
            err(
                ErrorCode::BadValue,
                format!(
                    "{OP} requires 'binSize' to be a 64-bit integer, found {}",
                    type_name(&v)
                ),
            )
        })?,
    };
    if bin <= 0 {
        return Err(err(
            ErrorCode::BadValue,
            "$dateTrunc requires 'binSize' to be greater than 0",
        ));
    }
    let Some(first) = week_start(&unit, given(3))? else {
        return null();
    };
    date(truncate(ms, &unit, bin, &zone, first)?)
}

fn overflow(op: &str) -> crate::error::CommandError {
    err(
        ErrorCode::Overflow,
        format!("{op} overflowed the date range"),
    )
}

/// A `unit` argument, checked against mongod's names.
pub(super) fn unit(v: &Value) -> CommandResult<String> {
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
            format!("unknown time unit value: {s}"),
        )),
        other => Err(err(
            ErrorCode::FailedToParse,
            format!(
                "unit is expected to be a string, but found {}",
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
fn week_start(unit: &str, given: Option<Value>) -> CommandResult<Option<i64>> {
    if unit != "week" {
        return Ok(Some(SUNDAY));
    }
    let name = match given {
        None => return Ok(Some(SUNDAY)),
        Some(v) if is_nullish(&v) => return Ok(None),
        Some(Some(Bson::String(s))) => s,
        Some(other) => {
            return Err(err(
                ErrorCode::FailedToParse,
                format!(
                    "startOfWeek is expected to be a string, but found {}",
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
                ErrorCode::FailedToParse,
                format!("unknown day of week value: {name}"),
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
