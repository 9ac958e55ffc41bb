//! Calendar arithmetic over local wall-clock milliseconds (see `tz.rs`) in the proleptic
//! Gregorian calendar, so year 0, negative years and dates past 9999 work as in mongod; the
//! date-part operators (`$year` ... `$isoDayOfWeek`) and `$dateToString` formatting, each in an
//! optional time zone. Null or missing dates and time zones give null, never an error.

use super::Operator;
use super::args::{is_nullish, type_name};
use super::tz::{Zone, zone_arg};
use super::{Expr, Scope};
use crate::error::{CommandResult, ErrorCode, err};
use bson::{Bson, RawDocument};

type Value = Option<Bson>;

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
            return Err(err(
                ErrorCode::Location16006,
                format!(
                    "{op}: can't convert from BSON type {} to Date",
                    type_name(other)
                ),
            ));
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

/// `$year`, `$hour`, `$isoWeek`, ...: `values` holds the date and, from the `{date, timezone}`
/// form, the timezone.
pub(super) fn date_part(op: Operator, values: &[Value]) -> CommandResult<Value> {
    let name = super::args::op_name(op);
    let Some(zone) = zone_arg(values.get(1), &name)? else {
        return null();
    };
    let Some(ms) = millis(values.first().unwrap_or(&None), &name)? else {
        return null();
    };
    let p = parts(zone.utc_to_local(ms));
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

/// mongod refuses a constant bad `timezone`, `format` or `unit` of a date operator when the
/// expression is parsed, before any document is seen (so also on an empty collection).
pub(super) fn check_constant_args<'n>(
    op: &str,
    names: impl Iterator<Item = &'n str>,
    args: &[Option<super::Expr>],
) -> CommandResult<()> {
    for (name, arg) in names.zip(args) {
        let Some(super::Expr::Literal(Bson::String(s))) = arg else {
            continue;
        };
        match name {
            "timezone" => drop(Zone::parse(s)?),
            "format" if op == "$dateToString" => validate_format(s, TO_STRING_SPECIFIERS)?,
            "format" => validate_format(s, FROM_STRING_SPECIFIERS)?,
            "unit" => drop(super::date_math::unit(&Some(Bson::String(s.clone())), op)?),
            _ => {}
        }
    }
    Ok(())
}

/// Specifiers `$dateToString` accepts after `%` (besides `%%`).
pub(super) const TO_STRING_SPECIFIERS: &str = "bBdGHjLmMSwuUVYzZ";
/// Specifiers `$dateFromString` accepts after `%` (besides `%%`).
pub(super) const FROM_STRING_SPECIFIERS: &str = "bBdGHjLmMSuVYzZ";

/// Checks every `%` of a format before any date is looked at, with mongod's errors.
pub(super) fn validate_format(format: &str, allowed: &str) -> CommandResult<()> {
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            continue;
        }
        match chars.next() {
            None => {
                return Err(err(
                    ErrorCode::Location18535,
                    "Unmatched '%' at end of format string",
                ));
            }
            Some(s) if s == '%' || allowed.contains(s) => {}
            Some(other) => {
                return Err(err(
                    ErrorCode::Location18536,
                    format!("Invalid format character '%{other}' in format string"),
                ));
            }
        }
    }
    Ok(())
}

/// `$dateToString` once its arguments are evaluated, in mongod's order: the format and zone
/// are checked first, a null date then gives `Ok(None)` (the caller evaluates `onNull`), and
/// only after that does a null zone or format give null.
pub(super) fn date_to_string(
    date: &Value,
    format: Option<Value>,
    timezone: Option<Value>,
) -> CommandResult<Option<Value>> {
    const OP: &str = "$dateToString";
    let format = match format {
        None => None,
        Some(v) if is_nullish(&v) => Some(None),
        Some(Some(Bson::String(s))) => {
            validate_format(&s, TO_STRING_SPECIFIERS)?;
            Some(Some(s))
        }
        Some(other) => {
            return Err(err(
                ErrorCode::Location18533,
                format!(
                    "{OP} requires that 'format' be a string, found: {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let zone = zone_arg(timezone.as_ref(), OP)?;
    let Some(ms) = millis(date, OP)? else {
        return Ok(None);
    };
    let Some(zone) = zone else {
        return Ok(Some(Some(Bson::Null)));
    };
    let format = match format {
        Some(Some(f)) => f,
        Some(None) => return Ok(Some(Some(Bson::Null))),
        // Without a format mongod prints UTC with a `Z`, and any other zone without one.
        None => match zone {
            Zone::Fixed(0) => "%Y-%m-%dT%H:%M:%S.%LZ".to_string(),
            _ => "%Y-%m-%dT%H:%M:%S.%L".to_string(),
        },
    };
    Ok(Some(Some(Bson::String(format_date(ms, &format, &zone)?))))
}

pub(super) const MONTH_NAMES: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// Appends a zero-padded number; mongod refuses components outside 0..=9999.
fn padded(out: &mut String, value: i64, width: usize) -> CommandResult<()> {
    if !(0..=9999).contains(&value) {
        return Err(err(
            ErrorCode::Location18537,
            format!(
                "Could not convert date to string: date component was outside the supported range of 0-9999: {value}"
            ),
        ));
    }
    out.push_str(&format!("{value:0width$}"));
    Ok(())
}

/// Formats an instant in a zone with mongod's `%` specifiers.
pub(super) fn format_date(ms: i64, format: &str, zone: &Zone) -> CommandResult<String> {
    let p = parts(zone.utc_to_local(ms));
    let offset_minutes = zone.offset_ms(ms) / 60_000;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let month = MONTH_NAMES[usize::try_from(p[1] - 1).unwrap_or(0) % 12];
        match chars.next() {
            Some('Y') => padded(&mut out, p[0], 4)?,
            Some('m') => padded(&mut out, p[1], 2)?,
            Some('d') => padded(&mut out, p[2], 2)?,
            Some('H') => padded(&mut out, p[3], 2)?,
            Some('M') => padded(&mut out, p[4], 2)?,
            Some('S') => padded(&mut out, p[5], 2)?,
            Some('L') => padded(&mut out, p[6], 3)?,
            Some('j') => padded(&mut out, p[8], 3)?,
            Some('w') => padded(&mut out, p[7], 1)?,
            Some('u') => padded(&mut out, i64::from(iso_day_of_week(&p)), 1)?,
            Some('U') => padded(&mut out, i64::from(week_of_year(&p)), 2)?,
            Some('V') => padded(&mut out, i64::from(iso_week(&p).1), 2)?,
            Some('G') => padded(&mut out, iso_week(&p).0, 4)?,
            Some('b') => out.push_str(&month[..3]),
            Some('B') => out.push_str(month),
            // Signed minutes, `+285` or `-300`, as mongod prints them.
            Some('Z') => out.push_str(&format!("{offset_minutes:+}")),
            Some('z') => {
                out.push(if offset_minutes < 0 { '-' } else { '+' });
                let abs = offset_minutes.abs();
                out.push_str(&format!("{:02}{:02}", abs / 60, abs % 60));
            }
            Some('%') => out.push('%'),
            None => {
                return Err(err(
                    ErrorCode::Location18535,
                    "Unmatched '%' at end of format string",
                ));
            }
            Some(other) => {
                return Err(err(
                    ErrorCode::Location18536,
                    format!("Invalid format character '%{other}' in format string"),
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

/// `$dateToString` with its optional arguments evaluated; `onNull` when the date is null or
/// missing.
pub(super) fn eval_date_to_string(
    date: &Expr,
    format: Option<&Expr>,
    on_null: Option<&Expr>,
    timezone: Option<&Expr>,
    root: &RawDocument,
    scope: &mut Scope,
) -> CommandResult<Value> {
    let v = date.eval(root, scope)?;
    let format = match format {
        Some(f) => Some(f.eval(root, scope)?),
        None => None,
    };
    let timezone = match timezone {
        Some(t) => Some(t.eval(root, scope)?),
        None => None,
    };
    match date_to_string(&v, format, timezone)? {
        Some(out) => Ok(out),
        None => match on_null {
            Some(e) => e.eval(root, scope),
            None => null(),
        },
    }
}
