//! Proves the date operators' time-zone behaviour: DST transitions, offsets, ISO weeks, far dates.
//! How: parses and evaluates expressions against hand-computed instants (ms since the epoch).

use super::*;
use bson::{RawDocumentBuf, doc};

/// An instant written as RFC 3339 text, parsed by the bson crate (not by the code under test).
fn at(s: &str) -> Bson {
    Bson::DateTime(bson::DateTime::parse_rfc3339_str(s).expect("valid instant"))
}

fn eval(e: Document) -> CommandResult<Option<Bson>> {
    let raw = RawDocumentBuf::try_from(&doc! {"n": Bson::Null}).expect("encodes");
    Expr::parse(&Bson::Document(e))?.evaluate_value(&raw)
}

fn ev(e: Document) -> Bson {
    eval(e)
        .expect("evaluates")
        .unwrap_or(Bson::String("<missing>".into()))
}

fn code(e: Document) -> i32 {
    eval(e).expect_err("must fail").code.code()
}

fn string(date: &str, format: &str, tz: &str) -> Bson {
    ev(doc! {"$dateToString": {"date": at(date), "format": format, "timezone": tz}})
}

const NY: &str = "America/New_York";

#[test]
fn new_york_spring_forward() {
    // 2021-03-14 02:00 EST jumps to 03:00 EDT (07:00Z).
    let part = |op: &str, d: &str| ev(doc! {op: {"date": at(d), "timezone": NY}});
    assert_eq!(part("$hour", "2021-03-14T06:30:00Z"), Bson::Int32(1));
    assert_eq!(part("$hour", "2021-03-14T07:30:00Z"), Bson::Int32(3));
    assert_eq!(
        string("2021-03-14T07:30:00Z", "%H:%M %z %Z", NY),
        Bson::String("03:30 -0400 -240".into())
    );
    assert_eq!(
        string("2021-03-14T07:30:00Z", "%Z", "UTC"),
        Bson::String("+0".into())
    );
    // A day later keeps 12:00 local: only 23 hours elapse.
    let add = |d: &str, unit: &str| {
        ev(doc! {"$dateAdd": {"startDate": at(d), "unit": unit, "amount": 1, "timezone": NY}})
    };
    assert_eq!(
        add("2021-03-13T17:00:00Z", "day"),
        at("2021-03-14T16:00:00Z")
    );
    // Hours are elapsed time whatever the zone.
    assert_eq!(
        add("2021-03-14T06:30:00Z", "hour"),
        at("2021-03-14T07:30:00Z")
    );
    // 01:30 EST to 03:30 EDT is one elapsed hour, although the wall clocks differ by two.
    let diff = |a: &str, b: &str, unit: &str| {
        ev(doc! {"$dateDiff": {"startDate": at(a), "endDate": at(b), "unit": unit, "timezone": NY}})
    };
    assert_eq!(
        diff("2021-03-14T06:30:00Z", "2021-03-14T07:30:00Z", "hour"),
        Bson::Int64(1)
    );
    assert_eq!(
        diff("2021-03-13T17:00:00Z", "2021-03-14T16:00:00Z", "day"),
        Bson::Int64(1)
    );
    // Local midnight of the 14th is still EST.
    assert_eq!(
        ev(
            doc! {"$dateTrunc": {"date": at("2021-03-14T16:00:00Z"), "unit": "day", "timezone": NY}}
        ),
        at("2021-03-14T05:00:00Z")
    );
    // 02:30 does not exist on that day: it resolves forward to 03:30 EDT.
    assert_eq!(
        ev(
            doc! {"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 2, "minute": 30, "timezone": NY}}
        ),
        at("2021-03-14T07:30:00Z")
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2021-03-14T02:30:00", "timezone": NY}}),
        at("2021-03-14T07:30:00Z")
    );
}

#[test]
fn new_york_fall_back() {
    // 2021-11-07 02:00 EDT falls back to 01:00 EST (06:00Z); 01:30 happens twice.
    assert_eq!(
        ev(
            doc! {"$dateAdd": {"startDate": at("2021-11-06T16:00:00Z"), "unit": "day", "amount": 1, "timezone": NY}}
        ),
        at("2021-11-07T17:00:00Z")
    );
    assert_eq!(
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-11-06T16:00:00Z"), "endDate": at("2021-11-07T17:00:00Z"), "unit": "hour", "timezone": NY}}
        ),
        Bson::Int64(25)
    );
    // Each occurrence of 01:30 truncates within its own hour.
    let trunc_hour =
        |d: &str| ev(doc! {"$dateTrunc": {"date": at(d), "unit": "hour", "timezone": NY}});
    assert_eq!(
        trunc_hour("2021-11-07T05:30:00Z"),
        at("2021-11-07T05:00:00Z")
    );
    assert_eq!(
        trunc_hour("2021-11-07T06:30:00Z"),
        at("2021-11-07T06:00:00Z")
    );
    // An ambiguous local time resolves to its first occurrence (EDT).
    assert_eq!(
        ev(
            doc! {"$dateFromParts": {"year": 2021, "month": 11, "day": 7, "hour": 1, "minute": 30, "timezone": NY}}
        ),
        at("2021-11-07T05:30:00Z")
    );
    // An explicit offset in the string picks the second one.
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2021-11-07 01:30:00 -0500"}}),
        at("2021-11-07T06:30:00Z")
    );
    assert_eq!(
        string("2021-11-07T06:30:00Z", "%Y-%m-%dT%H:%M:%S%z", NY),
        Bson::String("2021-11-07T01:30:00-0500".into())
    );
}

#[test]
fn london_lord_howe_and_odd_offsets() {
    // London: BST starts 2021-03-28 01:00Z.
    let london = "Europe/London";
    assert_eq!(
        ev(doc! {"$hour": {"date": at("2021-03-28T00:30:00Z"), "timezone": london}}),
        Bson::Int32(0)
    );
    assert_eq!(
        ev(doc! {"$hour": {"date": at("2021-03-28T01:30:00Z"), "timezone": london}}),
        Bson::Int32(2)
    );
    // mongod refuses zone names inside the string (only offsets and UTC/GMT/Z).
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "2021-06-01T12:00:00 Europe/London"}}),
        241
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2021-06-01T12:00:00 GMT"}}),
        at("2021-06-01T12:00:00Z")
    );
    // Lord Howe moves by half an hour: 01:45 happens at +11:00 and again at +10:30.
    let lh = "Australia/Lord_Howe";
    assert_eq!(
        string("2021-04-03T14:45:00Z", "%H:%M%z", lh),
        Bson::String("01:45+1100".into())
    );
    assert_eq!(
        string("2021-04-03T15:15:00Z", "%H:%M%z %Z", lh),
        Bson::String("01:45+1030 +630".into())
    );
    // 02:15 on 2021-10-03 is in its half-hour gap: it resolves to 02:45 (+11:00).
    assert_eq!(
        ev(
            doc! {"$dateFromParts": {"year": 2021, "month": 10, "day": 3, "hour": 2, "minute": 15, "timezone": lh}}
        ),
        at("2021-10-02T15:45:00Z")
    );
    // +05:45 (and Asia/Kathmandu, which uses it).
    for tz in ["+05:45", "+0545", "Asia/Kathmandu"] {
        assert_eq!(
            ev(doc! {"$dateToString": {"date": at("2021-01-01T00:00:00Z"), "timezone": tz}}),
            Bson::String("2021-01-01T05:45:00.000".into()),
            "{tz}"
        );
        assert_eq!(
            ev(
                doc! {"$dateTrunc": {"date": at("2021-01-01T00:00:00Z"), "unit": "hour", "timezone": tz}}
            ),
            at("2020-12-31T23:15:00Z")
        );
    }
    assert_eq!(
        string("2021-01-01T00:00:00Z", "%H %z", "-03"),
        Bson::String("21 -0300".into())
    );
    // Hour boundaries are local: 05:30 to 06:15 crosses one at +05:30, none in UTC.
    let diff = |tz: &str| {
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-01-01T00:00:00Z"), "endDate": at("2021-01-01T00:45:00Z"), "unit": "hour", "timezone": tz}},
        )
    };
    assert_eq!(diff("+05:30"), Bson::Int64(1));
    assert_eq!(diff("UTC"), Bson::Int64(0));
}

#[test]
fn months_weeks_and_leap_years() {
    let add = |d: &str, unit: &str, n: i32| {
        ev(doc! {"$dateAdd": {"startDate": at(d), "unit": unit, "amount": n, "timezone": NY}})
    };
    // Jan 31 + 1 month clamps to Feb 28; Mar 1 + 1 month keeps 12:00 across the DST change.
    assert_eq!(
        add("2021-01-31T17:00:00Z", "month", 1),
        at("2021-02-28T17:00:00Z")
    );
    assert_eq!(
        add("2021-03-01T17:00:00Z", "month", 1),
        at("2021-04-01T16:00:00Z")
    );
    assert_eq!(
        add("2024-02-29T17:00:00Z", "year", 1),
        at("2025-02-28T17:00:00Z")
    );
    assert_eq!(
        add("2024-02-29T17:00:00Z", "quarter", -1),
        at("2023-11-29T17:00:00Z")
    );
    assert_eq!(
        ev(
            doc! {"$dateSubtract": {"startDate": at("2021-03-14T16:00:00Z"), "unit": "week", "amount": 1, "timezone": NY}}
        ),
        at("2021-03-07T17:00:00Z")
    );
    assert_eq!(
        ev(doc! {"$dayOfYear": at("2024-12-31T12:00:00Z")}),
        Bson::Int32(366)
    );
    // 23:30 EST on Jan 31 is already February in UTC.
    let month_diff = |tz: &str| {
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-02-01T04:30:00Z"), "endDate": at("2021-02-01T17:00:00Z"), "unit": "month", "timezone": tz}},
        )
    };
    assert_eq!(month_diff(NY), Bson::Int64(1));
    assert_eq!(month_diff("UTC"), Bson::Int64(0));
    // Sunday 2021-01-03 to Monday 2021-01-04: a new week only when weeks start on Monday.
    let week_diff = |first: &str| {
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-01-03T12:00:00Z"), "endDate": at("2021-01-04T12:00:00Z"), "unit": "week", "timezone": NY, "startOfWeek": first}},
        )
    };
    assert_eq!(week_diff("monday"), Bson::Int64(1));
    assert_eq!(week_diff("SUN"), Bson::Int64(0));
    // Wednesday 2021-03-17 truncates to Monday the 15th (EDT), or Sunday the 14th (still EST).
    let trunc_week = |first: &str| {
        ev(
            doc! {"$dateTrunc": {"date": at("2021-03-17T12:00:00Z"), "unit": "week", "timezone": NY, "startOfWeek": first}},
        )
    };
    assert_eq!(trunc_week("mon"), at("2021-03-15T04:00:00Z"));
    assert_eq!(trunc_week("sunday"), at("2021-03-14T05:00:00Z"));
    assert_eq!(
        ev(
            doc! {"$dateTrunc": {"date": at("2021-11-15T12:00:00Z"), "unit": "month", "timezone": NY}}
        ),
        at("2021-11-01T04:00:00Z")
    );
    assert_eq!(
        ev(
            doc! {"$dateTrunc": {"date": at("2021-11-15T12:00:00Z"), "unit": "quarter", "timezone": NY}}
        ),
        at("2021-10-01T04:00:00Z")
    );
}

#[test]
fn iso_weeks_at_year_ends() {
    let iso = |d: &str| {
        (
            ev(doc! {"$isoWeekYear": at(d)}),
            ev(doc! {"$isoWeek": at(d)}),
            ev(doc! {"$week": at(d)}),
        )
    };
    // Friday 2021-01-01 is in week 53 of 2020; Saturday 2022-01-01 in week 52 of 2021;
    // Sunday 2023-01-01 in week 52 of 2022 but Sunday-week 1 of 2023.
    assert_eq!(
        iso("2021-01-01T12:00:00Z"),
        (Bson::Int64(2020), Bson::Int32(53), Bson::Int32(0))
    );
    assert_eq!(
        iso("2022-01-01T12:00:00Z"),
        (Bson::Int64(2021), Bson::Int32(52), Bson::Int32(0))
    );
    assert_eq!(
        iso("2023-01-01T12:00:00Z"),
        (Bson::Int64(2022), Bson::Int32(52), Bson::Int32(1))
    );
    // Thursday 2026-01-01 starts week 1; Monday 2024-12-30 is already week 1 of 2025.
    assert_eq!(
        iso("2026-01-01T12:00:00Z"),
        (Bson::Int64(2026), Bson::Int32(1), Bson::Int32(0))
    );
    assert_eq!(
        iso("2024-12-30T12:00:00Z"),
        (Bson::Int64(2025), Bson::Int32(1), Bson::Int32(52))
    );
    // 02:00Z on Monday 2021-01-04 is still Sunday evening in New York: ISO week 53 of 2020.
    assert_eq!(
        ev(doc! {"$isoWeek": {"date": at("2021-01-04T02:00:00Z"), "timezone": NY}}),
        Bson::Int32(53)
    );
    assert_eq!(
        ev(doc! {"$isoDayOfWeek": {"date": at("2021-01-04T02:00:00Z"), "timezone": NY}}),
        Bson::Int32(7)
    );
    assert_eq!(
        string("2021-01-01T12:00:00Z", "%G-W%V-%u %U %w %j %b %B %%", "UTC"),
        Bson::String("2020-W53-5 00 6 001 Jan January %".into())
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2020-53-5", "format": "%G-%V-%u"}}),
        at("2021-01-01T00:00:00Z")
    );
    assert_eq!(
        ev(
            doc! {"$dateToParts": {"date": at("2021-01-04T02:00:00Z"), "timezone": NY, "iso8601": true}}
        ),
        Bson::Document(
            doc! {"isoWeekYear": 2020, "isoWeek": 53, "isoDayOfWeek": 7, "hour": 21, "minute": 0, "second": 0, "millisecond": 0}
        )
    );
}

#[test]
fn far_dates() {
    // Before 1970: Apollo 11's landing in New York (EDT).
    assert_eq!(
        string("1969-07-20T20:17:00Z", "%Y-%m-%d %H:%M %z", NY),
        Bson::String("1969-07-20 16:17 -0400".into())
    );
    assert_eq!(
        ev(doc! {"$hour": {"date": at("1900-01-01T05:00:00Z"), "timezone": NY}}),
        Bson::Int32(0)
    );
    // Far future: the zone's current DST rule keeps applying.
    assert_eq!(
        ev(doc! {"$hour": {"date": at("9000-06-15T12:00:00Z"), "timezone": NY}}),
        Bson::Int32(8)
    );
    // Past jiff's years the offset at the edge of its range holds; no panic, no error.
    let year_20000 = Bson::DateTime(bson::DateTime::from_millis(568_971_820_800_000));
    assert_eq!(ev(doc! {"$year": year_20000.clone()}), Bson::Int32(20000));
    assert_eq!(
        ev(doc! {"$year": {"date": year_20000.clone(), "timezone": NY}}),
        Bson::Int32(19999)
    );
    // `$dateToString` refuses years past 9999, as mongod does.
    assert_eq!(
        code(doc! {"$dateToString": {"date": year_20000, "format": "%Y"}}),
        18537
    );
    assert_eq!(
        ev(doc! {"$dateFromParts": {"year": 1, "month": 1, "day": 1, "timezone": "+01:00"}}),
        at("0000-12-31T23:00:00Z")
    );
}

#[test]
fn nulls_and_missing() {
    let null = Bson::Null;
    assert_eq!(ev(doc! {"$year": {"date": "$n", "timezone": NY}}), null);
    assert_eq!(ev(doc! {"$year": {"date": "$nope", "timezone": NY}}), null);
    assert_eq!(
        ev(doc! {"$year": {"date": at("2021-01-01T00:00:00Z"), "timezone": "$n"}}),
        null
    );
    assert_eq!(
        ev(doc! {"$dateToString": {"date": "$nope", "timezone": NY, "onNull": "none"}}),
        Bson::String("none".into())
    );
    assert_eq!(
        ev(doc! {"$dateToString": {"date": at("2021-01-01T00:00:00Z"), "timezone": "$n"}}),
        null
    );
    assert_eq!(
        ev(
            doc! {"$dateAdd": {"startDate": at("2021-01-01T00:00:00Z"), "unit": "day", "amount": 1, "timezone": "$n"}}
        ),
        null
    );
    assert_eq!(
        ev(
            doc! {"$dateDiff": {"startDate": "$n", "endDate": at("2021-01-01T00:00:00Z"), "unit": "day", "timezone": NY}}
        ),
        null
    );
    assert_eq!(
        ev(doc! {"$dateTrunc": {"date": "$nope", "unit": "day", "timezone": NY}}),
        null
    );
    assert_eq!(
        ev(doc! {"$dateToParts": {"date": "$n", "timezone": NY}}),
        null
    );
    assert_eq!(
        ev(doc! {"$dateFromParts": {"year": 2021, "month": "$n", "timezone": NY}}),
        null
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "$n", "onNull": "n", "timezone": NY}}),
        Bson::String("n".into())
    );
}

#[test]
fn strings_and_errors() {
    assert_eq!(
        ev(
            doc! {"$dateFromString": {"dateString": "14/03/2021 03:30 -0400", "format": "%d/%m/%Y %H:%M %z"}}
        ),
        at("2021-03-14T07:30:00Z")
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2000-02-29", "timezone": "+05:45"}}),
        at("2000-02-28T18:15:00Z")
    );
    // 1900 was not a leap year.
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "1900-02-29", "onError": "bad"}}),
        Bson::String("bad".into())
    );
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "1900-02-29"}}),
        241
    );
    // An offset in the string cannot be combined with a timezone argument.
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "2021-11-07T01:30:00Z", "timezone": NY}}),
        241
    );
    assert_eq!(
        ev(
            doc! {"$dateFromString": {"dateString": "2021-11-07T01:30:00Z", "timezone": NY, "onError": 0}}
        ),
        Bson::Int32(0)
    );
    for bad in ["America/Nowhere", "america/new_york", "+5", "+05:60", ""] {
        assert_eq!(
            code(doc! {"$hour": {"date": at("2021-01-01T00:00:00Z"), "timezone": bad}}),
            40485,
            "{bad}"
        );
    }
    let message = eval(doc! {"$dateTrunc": {"date": at("2021-01-01T00:00:00Z"), "unit": "day", "timezone": "Mars/Olympus"}})
        .expect_err("bad zone")
        .message;
    assert_eq!(
        message,
        "unrecognized time zone identifier: \"Mars/Olympus\""
    );
    assert_eq!(
        code(doc! {"$year": {"date": at("2021-01-01T00:00:00Z"), "timezone": 5}}),
        40517
    );
    assert_eq!(code(doc! {"$year": {"date": "$n", "zone": NY}}), 40535);
    assert_eq!(code(doc! {"$year": {"timezone": NY}}), 40539);
    assert_eq!(
        code(doc! {"$dateToString": {"date": at("2021-01-01T00:00:00Z"), "format": "%Y%"}}),
        18535
    );
    assert_eq!(
        code(doc! {"$dateToString": {"date": at("2021-01-01T00:00:00Z"), "format": "%q"}}),
        18536
    );
    // UTC spelled every accepted way keeps the `Z` of the default format.
    for utc in ["UTC", "GMT", "Etc/UTC", "+00:00"] {
        let out = ev(doc! {"$dateToString": {"date": at("2021-01-01T00:00:00Z"), "timezone": utc}});
        let Bson::String(s) = out else {
            panic!("string expected")
        };
        assert!(s.starts_with("2021-01-01T00:00:00.000"), "{utc}: {s}");
    }
    // Links and legacy names of the tz database are zones too.
    for name in ["US/Eastern", "EST5EDT", "Etc/GMT+5", "Asia/Calcutta"] {
        assert!(super::tz::Zone::parse(name).is_ok(), "{name}");
    }
    // The expression form of a date-part argument is still an expression, not options.
    assert_eq!(
        ev(doc! {"$year": {"$add": [at("2021-01-01T00:00:00Z"), 0]}}),
        Bson::Int32(2021)
    );
}

#[test]
fn from_string_formats() {
    assert_eq!(
        ev(
            doc! {"$dateFromString": {"dateString": "Mar 14 2021", "format": "%b %d %Y", "timezone": NY}}
        ),
        at("2021-03-14T05:00:00Z")
    );
    assert_eq!(
        ev(doc! {"$dateFromString": {"dateString": "2021 073 +330", "format": "%Y %j %Z"}}),
        at("2021-03-13T18:30:00Z")
    );
    // No year in the format: mongod calls the string incomplete.
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "03-14", "format": "%m-%d"}}),
        241
    );
    // The format is checked even when the string is null.
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "$n", "format": "%Q"}}),
        18536
    );
    assert_eq!(
        code(doc! {"$dateFromString": {"dateString": "2021-01-01", "format": 5}}),
        40684
    );
    // An offset in the string is fine when the timezone argument is UTC itself.
    assert_eq!(
        ev(
            doc! {"$dateFromString": {"dateString": "2021-01-01T00:00:00+01:00", "timezone": "UTC"}}
        ),
        at("2020-12-31T23:00:00Z")
    );
    // Minutes and seconds of `$dateDiff` are elapsed time across a DST change.
    assert_eq!(
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-03-14T06:59:00Z"), "endDate": at("2021-03-14T07:01:00Z"), "unit": "minute", "timezone": NY}}
        ),
        Bson::Int64(2)
    );
    assert_eq!(
        ev(
            doc! {"$dateDiff": {"startDate": at("2021-03-14T06:59:59Z"), "endDate": at("2021-03-14T07:00:01Z"), "unit": "second", "timezone": NY}}
        ),
        Bson::Int64(2)
    );
    assert_eq!(
        code(
            doc! {"$dateDiff": {"startDate": at("2021-03-14T06:59:59Z"), "endDate": at("2021-03-14T07:00:01Z"), "unit": "fortnight"}}
        ),
        9
    );
    assert_eq!(
        code(
            doc! {"$dateTrunc": {"date": at("2021-03-14T06:59:59Z"), "unit": "week", "startOfWeek": "someday"}}
        ),
        // mongod's parseDayOfWeek has its own code.
        5439016
    );
}

#[test]
fn extreme_instants_never_panic() {
    // Client-chosen dates at the ends of the i64 range must give a value or an error.
    let edges = [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX];
    for ms in edges {
        let d = Bson::DateTime(bson::DateTime::from_millis(ms));
        for tz in [NY, "+05:45", "UTC", "Australia/Lord_Howe"] {
            for op in [
                "$year",
                "$isoWeekYear",
                "$week",
                "$dayOfYear",
                "$millisecond",
            ] {
                let _ = eval(doc! {op: {"date": d.clone(), "timezone": tz}});
            }
            let _ = eval(doc! {"$dateToString": {"date": d.clone(), "timezone": tz}});
            let _ =
                eval(doc! {"$dateToParts": {"date": d.clone(), "timezone": tz, "iso8601": true}});
            for unit in ["millisecond", "hour", "day", "week", "month", "year"] {
                let _ = eval(
                    doc! {"$dateAdd": {"startDate": d.clone(), "unit": unit, "amount": i64::MAX, "timezone": tz}},
                );
                let _ = eval(
                    doc! {"$dateSubtract": {"startDate": d.clone(), "unit": unit, "amount": i64::MIN, "timezone": tz}},
                );
                let _ = eval(
                    doc! {"$dateDiff": {"startDate": Bson::DateTime(bson::DateTime::from_millis(i64::MIN)), "endDate": d.clone(), "unit": unit, "timezone": tz}},
                );
                let _ = eval(
                    doc! {"$dateTrunc": {"date": d.clone(), "unit": unit, "binSize": i64::MAX, "timezone": tz}},
                );
            }
        }
    }
    let _ = eval(
        doc! {"$dateFromParts": {"year": 9999, "second": i64::MAX, "millisecond": i64::MAX, "timezone": NY}},
    );
}

#[test]
fn parts_round_trip_in_zones() {
    // Every 7 hours 13 minutes over 2020-2022: to parts and back gives the same instant,
    // except for the second occurrence of a folded hour (which resolves to the first).
    let start = 1_577_836_800_000_i64; // 2020-01-01T00:00Z
    let step = (7 * 60 + 13) * 60_000;
    for tz in [
        NY,
        "Europe/London",
        "Australia/Lord_Howe",
        "+05:45",
        "-0330",
    ] {
        let zone = super::tz::Zone::parse(tz).expect("zone");
        for i in 0..3_000 {
            let ms = start + i * step;
            let local = zone.utc_to_local(ms);
            let back = zone.local_to_utc(local);
            let folded = back != ms && zone.utc_to_local(back) == local && back < ms;
            assert!(back == ms || folded, "{tz} at {ms}: {back}");
        }
    }
}

#[test]
fn constant_arguments_checked_at_parse_time() {
    // No document is needed for these to fail, as in mongod (an empty collection errors too).
    let parse_code = |e: Document| {
        Expr::parse(&Bson::Document(e))
            .expect_err("must fail to parse")
            .code
            .code()
    };
    assert_eq!(
        parse_code(doc! {"$hour": {"date": "$d", "timezone": "Nowhere/City"}}),
        40485
    );
    assert_eq!(
        parse_code(doc! {"$dateToString": {"date": "$d", "format": "%Q"}}),
        18536
    );
    assert_eq!(
        parse_code(doc! {"$dateTrunc": {"date": "$d", "unit": "fortnight"}}),
        9
    );
    assert_eq!(
        parse_code(
            doc! {"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 1, "timezone": "+5"}}
        ),
        40485
    );
    // Expressions are only checked when evaluated.
    assert!(
        Expr::parse(&Bson::Document(
            doc! {"$hour": {"date": "$d", "timezone": "$tz"}}
        ))
        .is_ok()
    );
}

#[test]
#[ignore = "timing only: cargo test -p cairn --lib zone_lookup_cost -- --ignored --nocapture"]
fn zone_lookup_cost() {
    let t = std::time::Instant::now();
    for _ in 0..10_000 {
        let _ = super::tz::Zone::parse("America/New_York").expect("zone");
    }
    println!("10k zone lookups: {:?}", t.elapsed());
}
