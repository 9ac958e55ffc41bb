//! `$dateFromString`: ISO 8601 style strings (`2021-03-14`, `2021-03-14T02:30:00.5`,
//! `2021-03-14 02:30:00 -0500`, `...Z`, `... Europe/London`) or a `format` with mongod's `%`
//! specifiers. A string without an offset or zone is local time in `timezone` (UTC by default);
//! a string that carries one may not be combined with `timezone`. Parse failures are
//! ConversionFailure, which `onError` catches.

use super::dates::{MS_PER_DAY, days_from_civil, days_in_month, iso_year_start_ms};
use super::ops::{is_nullish, type_name};
use super::tz::{Zone, parse_offset, zone_arg};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, DateTime};

type Value = Option<Bson>;

const OP: &str = "$dateFromString";

/// Arguments: `dateString, format, onError, onNull, timezone`.
pub(super) fn date_from_string(values: &[Option<Value>]) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let given = |i: usize| values.get(i).cloned().flatten();
    let format = match given(1) {
        None => None,
        Some(v) if is_nullish(&v) => return Ok(Some(Bson::Null)),
        Some(Some(Bson::String(f))) => Some(f),
        Some(other) => {
            return Err(err(
                ErrorCode::Location40684,
                format!(
                    "{OP} requires that 'format' be a string, found: {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let tz_given = given(4);
    let Some(zone) = zone_arg(tz_given.as_ref(), OP)? else {
        return Ok(Some(Bson::Null));
    };
    let input = arg(0);
    if is_nullish(&input) {
        return Ok(given(3).unwrap_or(Some(Bson::Null)));
    }
    let parsed = match &input {
        Some(Bson::String(s)) => parse(s, format.as_deref(), &zone, tz_given.is_some()),
        other => Err(err(
            ErrorCode::ConversionFailure,
            format!(
                "{OP} requires that 'dateString' be a string, found: {}",
                type_name(other)
            ),
        )),
    };
    match (parsed, given(2)) {
        (Ok(ms), _) => Ok(Some(Bson::DateTime(DateTime::from_millis(ms)))),
        (Err(e), Some(on_error)) if e.code == ErrorCode::ConversionFailure => Ok(on_error),
        (Err(e), _) => Err(e),
    }
}

fn parse_error(s: &str, why: &str) -> CommandError {
    err(
        ErrorCode::ConversionFailure,
        format!("Error parsing date string '{s}'; {why}"),
    )
}

/// Fields read from a string; the zone is `Some` when the string names an offset or zone.
#[derive(Default)]
struct Fields {
    year: Option<i64>,
    month: Option<i64>,
    day: Option<i64>,
    day_of_year: Option<i64>,
    iso_year: Option<i64>,
    iso_week: Option<i64>,
    iso_day: Option<i64>,
    hour: i64,
    minute: i64,
    second: i64,
    millisecond: i64,
    zone: Option<Zone>,
}

fn parse(s: &str, format: Option<&str>, zone: &Zone, zone_given: bool) -> CommandResult<i64> {
    let fields = match format {
        Some(f) => parse_format(s, f)?,
        None => parse_iso(s)?,
    };
    let zone = match (&fields.zone, zone_given) {
        (Some(_), true) => {
            return Err(err(
                ErrorCode::ConversionFailure,
                format!(
                    "you cannot pass in a date/time string with GMT offset together with a timezone argument: '{s}'"
                ),
            ));
        }
        (Some(own), false) => own,
        (None, _) => zone,
    };
    Ok(zone.local_to_utc(local_ms(s, &fields)?))
}

/// Local wall-clock ms of the fields, after checking their ranges.
fn local_ms(s: &str, f: &Fields) -> CommandResult<i64> {
    let day = if let Some(iso_year) = f.iso_year {
        let (week, wd) = (f.iso_week.unwrap_or(1), f.iso_day.unwrap_or(1));
        if !(1..=53).contains(&week) || !(1..=7).contains(&wd) {
            return Err(parse_error(s, "ISO week or day out of range"));
        }
        iso_year_start_ms(iso_year) / MS_PER_DAY + (week - 1) * 7 + wd - 1
    } else {
        let year = f.year.unwrap_or(1970);
        if let Some(yday) = f.day_of_year {
            if !(1..=366).contains(&yday) {
                return Err(parse_error(s, "day of year out of range"));
            }
            days_from_civil(year, 1, 1) + yday - 1
        } else {
            let (month, day) = (f.month.unwrap_or(1), f.day.unwrap_or(1));
            let month = u32::try_from(month)
                .ok()
                .filter(|m| (1..=12).contains(m))
                .ok_or_else(|| parse_error(s, "month out of range"))?;
            if day < 1 || day > i64::from(days_in_month(year, month)) {
                return Err(parse_error(s, "day out of range"));
            }
            days_from_civil(year, month, u32::try_from(day).unwrap_or(1))
        }
    };
    if f.hour > 23 || f.minute > 59 || f.second > 59 {
        return Err(parse_error(s, "time out of range"));
    }
    Ok(day * MS_PER_DAY + f.hour * 3_600_000 + f.minute * 60_000 + f.second * 1000 + f.millisecond)
}

/// A cursor over the input string.
struct Reader<'a> {
    rest: &'a str,
    whole: &'a str,
}

impl<'a> Reader<'a> {
    /// Up to `max` digits (at least one).
    fn number(&mut self, max: usize) -> CommandResult<i64> {
        let n = self
            .rest
            .bytes()
            .take(max)
            .take_while(u8::is_ascii_digit)
            .count();
        if n == 0 {
            return Err(parse_error(self.whole, "expected a number"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        head.parse()
            .map_err(|_| parse_error(self.whole, "bad number"))
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    /// Fraction digits as milliseconds (further digits are dropped).
    fn fraction_ms(&mut self) -> CommandResult<i64> {
        let n = self.rest.bytes().take_while(u8::is_ascii_digit).count();
        let digits = &self.rest[..n];
        self.rest = &self.rest[n..];
        let padded = format!("{digits:0<3}");
        padded[..3]
            .parse()
            .map_err(|_| parse_error(self.whole, "bad fraction"))
    }
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|±hh[:mm]| zone name]`.
fn parse_iso(s: &str) -> CommandResult<Fields> {
    let text = s.trim();
    let mut r = Reader {
        rest: text,
        whole: s,
    };
    let mut f = Fields {
        year: Some(r.number(4)?),
        ..Fields::default()
    };
    let separator = if r.eat('/') { '/' } else { '-' };
    if separator == '-' && !r.eat('-') {
        return Err(parse_error(s, "expected '-' after the year"));
    }
    f.month = Some(r.number(2)?);
    if !r.eat(separator) {
        return Err(parse_error(s, "expected a day"));
    }
    f.day = Some(r.number(2)?);
    if (r.eat('T') || r.eat(' ')) && r.rest.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        f.hour = r.number(2)?;
        if !r.eat(':') {
            return Err(parse_error(s, "expected minutes"));
        }
        f.minute = r.number(2)?;
        if r.eat(':') {
            f.second = r.number(2)?;
            if r.eat('.') || r.eat(',') {
                f.millisecond = r.fraction_ms()?;
            }
        }
    }
    let tail = r.rest.trim_start();
    if !tail.is_empty() {
        f.zone = Some(zone_suffix(s, tail)?);
    }
    Ok(f)
}

/// A trailing `Z`, offset or zone name.
fn zone_suffix(s: &str, tail: &str) -> CommandResult<Zone> {
    if tail == "Z" || tail == "z" {
        return Ok(Zone::UTC);
    }
    if let Some(ms) = parse_offset(tail) {
        return Ok(Zone::Fixed(ms));
    }
    Zone::parse(tail).map_err(|_| parse_error(s, "unrecognized trailing characters"))
}

/// Parses `s` against a `format` made of literal characters and `%` specifiers.
fn parse_format(s: &str, format: &str) -> CommandResult<Fields> {
    let mut f = Fields::default();
    let mut r = Reader { rest: s, whole: s };
    let mut spec = format.chars();
    while let Some(c) = spec.next() {
        if c != '%' {
            if !r.eat(c) {
                return Err(parse_error(s, "the string does not match the format"));
            }
            continue;
        }
        match spec.next() {
            Some('Y') => f.year = Some(r.number(4)?),
            Some('m') => f.month = Some(r.number(2)?),
            Some('d') => f.day = Some(r.number(2)?),
            Some('j') => f.day_of_year = Some(r.number(3)?),
            Some('H') => f.hour = r.number(2)?,
            Some('M') => f.minute = r.number(2)?,
            Some('S') => f.second = r.number(2)?,
            Some('L') => f.millisecond = r.fraction_ms()?,
            Some('G') => f.iso_year = Some(r.number(4)?),
            Some('V') => f.iso_week = Some(r.number(2)?),
            Some('u') => f.iso_day = Some(r.number(1)?),
            Some('z') => f.zone = Some(offset_field(&mut r)?),
            Some('Z') => f.zone = Some(minutes_field(&mut r)?),
            Some('%') => {
                if !r.eat('%') {
                    return Err(parse_error(s, "expected '%'"));
                }
            }
            other => {
                return Err(err(
                    ErrorCode::Location18536,
                    format!(
                        "Invalid format character '%{}' in format string",
                        other.map(String::from).unwrap_or_default()
                    ),
                ));
            }
        }
    }
    if !r.rest.is_empty() {
        return Err(parse_error(s, "trailing data"));
    }
    Ok(f)
}

/// `%z`: `Z`, `±hh`, `±hhmm` or `±hh:mm`.
fn offset_field(r: &mut Reader<'_>) -> CommandResult<Zone> {
    if r.eat('Z') {
        return Ok(Zone::UTC);
    }
    let n = r
        .rest
        .char_indices()
        .skip(1)
        .find(|(_, c)| !c.is_ascii_digit() && *c != ':')
        .map_or(r.rest.len(), |(i, _)| i);
    let ms = parse_offset(&r.rest[..n]).ok_or_else(|| parse_error(r.whole, "bad UTC offset"))?;
    r.rest = &r.rest[n..];
    Ok(Zone::Fixed(ms))
}

/// `%Z`: minutes east of UTC, with an optional sign.
fn minutes_field(r: &mut Reader<'_>) -> CommandResult<Zone> {
    let negative = r.eat('-');
    if !negative {
        r.eat('+');
    }
    let minutes = r.number(4)?;
    Ok(Zone::Fixed(
        if negative { -minutes } else { minutes } * 60_000,
    ))
}
