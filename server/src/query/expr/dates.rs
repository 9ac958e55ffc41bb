//! UTC date parts and `$dateToString` formatting over milliseconds since the epoch, with the
//! proleptic Gregorian calendar (so year 0 and negative dates work as in mongod).

use super::Operator;
use super::ops::{is_nullish, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use bson::Bson;

type Value = Option<Bson>;

fn mismatch(message: String) -> crate::error::CommandError {
    err(ErrorCode::TypeMismatch, message)
}

fn null() -> CommandResult<Value> {
    Ok(Some(Bson::Null))
}

/// Milliseconds since the epoch of a date-like value.
pub(super) fn millis(v: &Value, op: &str) -> CommandResult<Option<i64>> {
    Ok(match v {
        _ if is_nullish(v) => None,
        Some(Bson::DateTime(d)) => Some(d.timestamp_millis()),
        Some(Bson::Timestamp(t)) => Some(i64::from(t.time) * 1000),
        Some(Bson::ObjectId(o)) => Some(o.timestamp().timestamp_millis()),
        other => {
            return Err(mismatch(format!(
                "{op}: can't convert from BSON type {} to Date",
                type_name(other)
            )));
        }
    })
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub(super) fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let month = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub(super) const MS_PER_DAY: i64 = 86_400_000;

/// All parts of a UTC instant: year, month, day, hour, minute, second, ms, weekday (1 = Sunday),
/// day of year.
pub(super) fn parts(ms: i64) -> [i64; 9] {
    let days = ms.div_euclid(MS_PER_DAY);
    let in_day = ms.rem_euclid(MS_PER_DAY);
    let (y, m, d) = civil(days);
    let jan1 = days - day_count(y);
    [
        y,
        i64::from(m),
        i64::from(d),
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
        (days + 4).rem_euclid(7) + 1,
        jan1 + 1,
    ]
}

/// Days from 1970-01-01 to January 1st of `year` (inverse of `civil`).
fn day_count(year: i64) -> i64 {
    let y = year - 1; // January counts as month 13 of the previous year
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * 10 + 2) / 5; // day of a March-based year on which January 1st falls
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub(super) fn date_part(op: Operator, v: &Value) -> CommandResult<Value> {
    let Some(ms) = millis(v, &super::more::op_name(op))? else {
        return null();
    };
    let p = parts(ms);
    let index = match op {
        Operator::Year => 0,
        Operator::Month => 1,
        Operator::DayOfMonth => 2,
        Operator::Hour => 3,
        Operator::Minute => 4,
        Operator::Second => 5,
        Operator::Millisecond => 6,
        Operator::DayOfWeek => 7,
        Operator::DayOfYear => 8,
        Operator::IsoDayOfWeek => return Ok(Some(Bson::Int32(iso_day_of_week(&p)))),
        Operator::Week => return Ok(Some(Bson::Int32(week_of_year(&p)))),
        Operator::IsoWeek => return Ok(Some(Bson::Int32(iso_week(&p).1))),
        _ => return Ok(Some(Bson::Int64(iso_week(&p).0))),
    };
    Ok(Some(Bson::Int32(
        i32::try_from(p[index]).unwrap_or(i32::MAX),
    )))
}

pub(super) fn format_date(ms: i64, format: &str) -> CommandResult<String> {
    let p = parts(ms);
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{:04}", p[0])),
            Some('m') => out.push_str(&format!("{:02}", p[1])),
            Some('d') => out.push_str(&format!("{:02}", p[2])),
            Some('H') => out.push_str(&format!("{:02}", p[3])),
            Some('M') => out.push_str(&format!("{:02}", p[4])),
            Some('S') => out.push_str(&format!("{:02}", p[5])),
            Some('L') => out.push_str(&format!("{:03}", p[6])),
            Some('j') => out.push_str(&format!("{:03}", p[8])),
            Some('w') => out.push_str(&p[7].to_string()),
            Some('u') => out.push_str(&(if p[7] == 1 { 7 } else { p[7] - 1 }).to_string()),
            Some('%') => out.push('%'),
            other => {
                return Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "Invalid format character '%{}' in format string",
                        other.unwrap_or(' ')
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (inverse of [`civil`]).
pub(super) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (m, d) = (i64::from(month), i64::from(day));
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days in a month of a year.
pub(super) fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// ISO day of week: 1 = Monday ... 7 = Sunday.
pub(super) fn iso_day_of_week(p: &[i64; 9]) -> i32 {
    let sunday_based = i32::try_from(p[7]).unwrap_or(1); // 1 = Sunday
    if sunday_based == 1 {
        7
    } else {
        sunday_based - 1
    }
}

/// Week of the year with weeks starting on Sunday; days before the first Sunday are week 0.
fn week_of_year(p: &[i64; 9]) -> i32 {
    let yday = p[8] - 1;
    let wday = p[7] - 1; // 0 = Sunday
    i32::try_from((yday + 7 - wday) / 7).unwrap_or(0)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// ISO weeks in a year: 53 when January 1st is a Thursday, or a Wednesday in a leap year.
fn iso_weeks_in_year(year: i64) -> i64 {
    let jan1 = days_from_civil(year, 1, 1);
    let weekday = (jan1 + 3).rem_euclid(7) + 1; // 1 = Monday
    if weekday == 4 || (weekday == 3 && is_leap(year)) {
        53
    } else {
        52
    }
}

/// `(ISO week-numbering year, ISO week)`.
pub(super) fn iso_week(p: &[i64; 9]) -> (i64, i32) {
    let wd = i64::from(iso_day_of_week(p));
    let week = (p[8] - wd + 10).div_euclid(7);
    let (year, week) = if week < 1 {
        (p[0] - 1, iso_weeks_in_year(p[0] - 1))
    } else if week > iso_weeks_in_year(p[0]) {
        (p[0] + 1, 1)
    } else {
        (p[0], week)
    };
    (year, i32::try_from(week).unwrap_or(1))
}

/// Milliseconds of the Monday starting ISO week 1 of `year`.
pub(super) fn iso_year_start_ms(year: i64) -> i64 {
    let jan4 = days_from_civil(year, 1, 4);
    let weekday = (jan4 + 3).rem_euclid(7); // 0 = Monday
    (jan4 - weekday) * MS_PER_DAY
}
