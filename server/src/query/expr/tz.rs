//! Time zones of the date operators: IANA (Olson) names from the tz database bundled into the
//! binary by `jiff` (no system files are read at run time), and fixed UTC offsets (`+04:30`,
//! `-0700`, `+03`), with mongod's errors. A zone only converts between instants (UTC
//! milliseconds) and local wall-clock milliseconds ("local ms": the same count as if the local
//! time were UTC); all calendar arithmetic happens on local ms in `dates.rs`.
//!
//! Local times that fall in a DST gap resolve forward (02:30 on a spring-forward night in New
//! York is 03:30 EDT) and those in a fold resolve to the first occurrence, as mongod's timelib
//! does for the common cases.

use super::args::{is_nullish, type_name};
use crate::error::{CommandResult, ErrorCode, err};
use bson::Bson;
use jiff::Timestamp;
use jiff::tz::{AmbiguousOffset, TimeZone};

type Value = Option<Bson>;

const MS_PER_SECOND: i64 = 1000;

/// A resolved `timezone` argument.
#[derive(Debug, Clone)]
pub(super) enum Zone {
    /// A constant offset east of UTC, in milliseconds (UTC itself is `Fixed(0)`).
    Fixed(i64),
    Named(TimeZone),
}

impl Zone {
    pub(super) const UTC: Zone = Zone::Fixed(0);

    /// Parses a zone name as mongod does: an exact (case-sensitive) IANA name, else a UTC offset.
    pub(super) fn parse(name: &str) -> CommandResult<Zone> {
        // mongod's database maps only "UTC" to its UTC zone (so `$dateToString` keeps the `Z`);
        // "GMT" and "Etc/UTC" are ordinary zones that happen to have offset zero.
        if name == "UTC" {
            return Ok(Zone::UTC);
        }
        if let Some(offset_ms) = parse_offset(name) {
            return Ok(Zone::Fixed(offset_ms));
        }
        match jiff::tz::db().get(name) {
            // The bundled database matches names case-insensitively; mongod does not.
            Ok(tz) if tz.iana_name() == Some(name) => Ok(Zone::Named(tz)),
            _ => Err(err(
                ErrorCode::Location40485,
                format!("unrecognized time zone identifier: \"{name}\""),
            )),
        }
    }

    /// Offset east of UTC at an instant, in milliseconds.
    pub(super) fn offset_ms(&self, utc_ms: i64) -> i64 {
        match self {
            Zone::Fixed(ms) => *ms,
            Zone::Named(tz) => {
                let ts = clamp_timestamp(utc_ms);
                i64::from(tz.to_offset(ts).seconds()) * MS_PER_SECOND
            }
        }
    }

    /// Local wall-clock milliseconds of an instant.
    pub(super) fn utc_to_local(&self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(self.offset_ms(utc_ms))
    }

    /// The instant of a local wall-clock time (gaps resolve forward, folds to the earlier one).
    pub(super) fn local_to_utc(&self, local_ms: i64) -> i64 {
        match self {
            Zone::Fixed(ms) => local_ms.saturating_sub(*ms),
            Zone::Named(tz) => {
                let Some(dt) = civil_of(local_ms) else {
                    // Beyond jiff's years (+-9999): the offset at the edge of its range holds.
                    return local_ms.saturating_sub(self.offset_ms(local_ms));
                };
                let offset = match tz.to_ambiguous_timestamp(dt).offset() {
                    AmbiguousOffset::Unambiguous { offset } => offset,
                    // Gap: the offset before the gap moves the time forward past it.
                    // Fold: the offset before the fold gives the first occurrence.
                    AmbiguousOffset::Gap { before, .. } | AmbiguousOffset::Fold { before, .. } => {
                        before
                    }
                };
                local_ms.saturating_sub(i64::from(offset.seconds()) * MS_PER_SECOND)
            }
        }
    }
}

/// The `timezone` argument of an operator: absent means UTC, null or missing makes the
/// operator return null (`Ok(None)`), a non-string is refused.
pub(super) fn zone_arg(given: Option<&Value>, op: &str) -> CommandResult<Option<Zone>> {
    match given {
        None => Ok(Some(Zone::UTC)),
        Some(v) if is_nullish(v) => Ok(None),
        Some(Some(Bson::String(s))) => Zone::parse(s).map(Some),
        Some(other) => Err(err(
            ErrorCode::Location40517,
            format!(
                "{op}: timezone must evaluate to a string, found {}",
                type_name(other)
            ),
        )),
    }
}

/// `+hh`, `+hhmm` or `+hh:mm` (or `-`), in milliseconds east of UTC.
pub(super) fn parse_offset(s: &str) -> Option<i64> {
    let bytes = s.as_bytes();
    let sign = match bytes.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits = |b: &[u8]| -> Option<i64> {
        if b.len() == 2 && b.iter().all(u8::is_ascii_digit) {
            Some(i64::from(b[0] - b'0') * 10 + i64::from(b[1] - b'0'))
        } else {
            None
        }
    };
    let rest = &bytes[1..];
    let (hours, minutes) = match rest.len() {
        2 => (digits(rest)?, 0),
        4 => (digits(&rest[..2])?, digits(&rest[2..])?),
        5 if rest[2] == b':' => (digits(&rest[..2])?, digits(&rest[3..])?),
        _ => return None,
    };
    if minutes >= 60 {
        return None;
    }
    Some(sign * (hours * 3_600_000 + minutes * 60_000))
}

fn clamp_timestamp(utc_ms: i64) -> Timestamp {
    let lo = Timestamp::MIN.as_millisecond();
    let hi = Timestamp::MAX.as_millisecond();
    Timestamp::from_millisecond(utc_ms.clamp(lo, hi)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// jiff's civil date-time of local ms, or `None` outside its years.
fn civil_of(local_ms: i64) -> Option<jiff::civil::DateTime> {
    let days = local_ms.div_euclid(super::dates::MS_PER_DAY);
    let in_day = local_ms.rem_euclid(super::dates::MS_PER_DAY);
    let (y, m, d) = super::dates::civil(days);
    let small = |x: i64| i8::try_from(x).ok();
    jiff::civil::DateTime::new(
        i16::try_from(y).ok()?,
        i8::try_from(m).ok()?,
        i8::try_from(d).ok()?,
        small(in_day / 3_600_000)?,
        small(in_day / 60_000 % 60)?,
        small(in_day / 1000 % 60)?,
        i32::try_from(in_day % 1000 * 1_000_000).ok()?,
    )
    .ok()
}
