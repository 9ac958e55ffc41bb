//! `$dateFromString`: ISO 8601 style strings (`2021-03-14`, `2021/03/14`,
//! `2021-03-14T02:30:00.5`, `2021-03-14 02:30:00 -0500`, `...Z`, `... GMT`) or a `format` with
//! mongod's `%` specifiers. A string without an offset is local time in `timezone` (UTC by
//! default); one that carries an offset may only be combined with the UTC zone, and zone names
//! inside the string are refused (mongod gives its parser no zone database). Parse failures are
//! ConversionFailure, which `onError` catches; timelib's free-form inputs ("next monday",
//! month names without a format) are not accepted.

use super::args::{is_nullish, type_name};
use super::dates::{FROM_STRING_SPECIFIERS, MONTH_NAMES, validate_format};
use super::dates::{MS_PER_DAY, days_from_civil, days_in_month, iso_year_start_ms};
use super::tz::{Zone, parse_offset, zone_arg};
use crate::error::{CommandError, CommandResult, ErrorCode, err};
use bson::{Bson, DateTime};

type Value = Option<Bson>;

const OP: &str = "$dateFromString";

/// Arguments: `dateString, format, onError, onNull, timezone`.
pub(super) fn date_from_string(values: &[Option<Value>]) -> CommandResult<Value> {
    let arg = |i: usize| values.get(i).cloned().flatten().flatten();
    let given = |i: usize| values.get(i).cloned().flatten();
    // mongod's order: the format and the zone are checked first, then a null string gives
    // `onNull`, then a null zone or format gives null.
    let format = match given(1) {
        None => None,
        Some(v) if is_nullish(&v) => Some(None),
        Some(Some(Bson::String(f))) => {
            validate_format(&f, FROM_STRING_SPECIFIERS)?;
            Some(Some(f))
        }
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
    let zone = zone_arg(given(4).as_ref(), OP)?;
    let input = arg(0);
    if is_nullish(&input) {
        return Ok(given(3).unwrap_or(Some(Bson::Null)));
    }
    let parsed = match (&input, zone, format) {
        (Some(Bson::String(s)), Some(zone), Some(Some(f))) => parse(s, Some(&f), &zone).map(Some),
        (Some(Bson::String(s)), Some(zone), None) => parse(s, None, &zone).map(Some),
        (Some(Bson::String(_)), ..) => Ok(None),
        (other, ..) => Err(err(
            ErrorCode::ConversionFailure,
            format!(
                "{OP} requires that 'dateString' be a string, found: {}",
                type_name(other)
            ),
        )),
    };
    match (parsed, given(2)) {
        (Ok(Some(ms)), _) => Ok(Some(Bson::DateTime(DateTime::from_millis(ms)))),
        (Ok(None), _) => Ok(Some(Bson::Null)),
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
    hour: Option<i64>,
    minute: Option<i64>,
    second: Option<i64>,
    millisecond: i64,
    zone: Option<Zone>,
}

fn parse(s: &str, format: Option<&str>, zone: &Zone) -> CommandResult<i64> {
    let fields = match format {
        Some(f) => parse_format(s, f)?,
        None => parse_iso(s)?,
    };
    let zone = match (&fields.zone, zone) {
        (None, zone) => zone,
        (Some(own), Zone::Fixed(0)) => own,
        (Some(_), _) => {
            return Err(err(
                ErrorCode::ConversionFailure,
                "you cannot pass in a date/time string with GMT offset together with a timezone argument",
            ));
        }
    };
    Ok(zone.local_to_utc(local_ms(s, &fields)?))
}

/// Local wall-clock ms of the fields, after checking their ranges.
fn local_ms(s: &str, f: &Fields) -> CommandResult<i64> {
    let complete_date = f.iso_year.is_some()
        || f.year.is_some() && (f.day_of_year.is_some() || f.month.is_some() && f.day.is_some());
    if !complete_date {
        return Err(incomplete(s));
    }
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
    // Time fields left out are zero (timelib fills them once any is set); a missing date part
    // is refused, as in mongod.
    let (hour, minute, second) = (
        f.hour.unwrap_or(0),
        f.minute.unwrap_or(0),
        f.second.unwrap_or(0),
    );
    if hour > 23 || minute > 59 || second > 59 {
        return Err(parse_error(s, "time out of range"));
    }
    Ok(day * MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + f.millisecond)
}

fn incomplete(s: &str) -> CommandError {
    err(
        ErrorCode::ConversionFailure,
        format!("an incomplete date/time string has been found, with elements missing: \"{s}\""),
    )
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
        f.hour = Some(r.number(2)?);
        if !r.eat(':') {
            return Err(parse_error(s, "expected minutes"));
        }
        f.minute = Some(r.number(2)?);
        f.second = Some(0);
        if r.eat(':') {
            f.second = Some(r.number(2)?);
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
    if tail == "UTC" || tail == "GMT" {
        return Ok(Zone::UTC);
    }
    // mongod gives timelib no zone database for strings, so names are refused.
    Err(parse_error(
        s,
        "passing a time zone identifier as part of the string is not allowed",
    ))
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
            Some('H') => f.hour = Some(r.number(2)?),
            Some('M') => f.minute = Some(r.number(2)?),
            Some('S') => f.second = Some(r.number(2)?),
            Some(c @ ('b' | 'B')) => f.month = Some(month_name(&mut r, c == 'B')?),
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

/// `%b` (three letters) or `%B` (the full name) of a month, any case; returns 1..=12.
fn month_name(r: &mut Reader<'_>, full: bool) -> CommandResult<i64> {
    for (i, name) in MONTH_NAMES.iter().enumerate() {
        let want = if full { name } else { &name[..3] };
        let matches = r
            .rest
            .get(..want.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(want));
        if matches {
            r.rest = &r.rest[want.len()..];
            return Ok(i64::try_from(i).unwrap_or(0) + 1);
        }
    }
    Err(parse_error(r.whole, "expected a month name"))
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
