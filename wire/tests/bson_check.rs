//! Proves that the document walk accepts every well-formed BSON value and rejects each kind of structural damage.
//! How: `wire::validate_document` on documents built by the bson crate, then on hand-damaged copies of them.

use bson::spec::BinarySubtype;
use bson::{Binary, RawDocumentBuf, rawdoc};
use wire::limits::BSON_NESTING_DEPTH_MAX;
use wire::{WireError, validate_document};

/// The bson crate cannot build a DBPointer, so splice one in by hand: 0x0C, key, string, 12 bytes.
fn with_db_pointer(doc: RawDocumentBuf) -> RawDocumentBuf {
    let mut bytes = doc.into_bytes();
    let mut element = b"\x0cptr\0".to_vec();
    element.extend(5i32.to_le_bytes());
    element.extend_from_slice(b"db.c\0");
    element.extend([2; 12]);
    let end = bytes.len() - 1;
    bytes.splice(end..end, element);
    let len = bytes.len() as i32;
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    RawDocumentBuf::from_bytes(bytes).unwrap()
}

fn every_type() -> RawDocumentBuf {
    let code = bson::RawJavaScriptCodeWithScope {
        code: "f()".into(),
        scope: rawdoc! { "x": 1 },
    };
    with_db_pointer(rawdoc! {
        "d": 1.5, "s": "str", "o": { "a": [1, "2", { "b": null }] }, "e": {}, "ea": [],
        "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
        "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9, 9] },
        "u": bson::RawBson::Undefined, "oid": bson::oid::ObjectId::from_bytes([1; 12]), "t": true,
        "dt": bson::DateTime::from_millis(5), "n": null,
        "re": bson::Regex { pattern: "a.*".try_into().unwrap(), options: "i".try_into().unwrap() },
        "js": bson::RawBson::JavaScriptCode("1".into()), "sym": bson::RawBson::Symbol("s".into()),
        "jsws": code, "i": 7, "ts": bson::Timestamp { time: 1, increment: 2 }, "l": 8i64,
        "dec": bson::Decimal128::from_bytes([3; 16]), "min": bson::RawBson::MinKey, "max": bson::RawBson::MaxKey,
    })
}

fn reject(bytes: &[u8], why: &str) {
    assert!(
        matches!(validate_document(bytes), Err(WireError::InvalidBson { .. })),
        "accepted: {why}"
    );
}

/// Offset of the first occurrence of `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
}

#[test]
fn accepts_every_type() {
    validate_document(every_type().as_bytes()).unwrap();
    validate_document(rawdoc! {}.as_bytes()).unwrap();
}

#[test]
fn rejects_outer_damage() {
    let doc = every_type().into_bytes();
    reject(&doc[..doc.len() - 1], "truncated");
    let mut longer = doc.clone();
    longer.push(0);
    reject(&longer, "extra byte after the document");
    let mut no_zero = doc.clone();
    *no_zero.last_mut().unwrap() = 1;
    reject(&no_zero, "missing terminator");
    reject(&[4, 0, 0, 0], "length below 5");
    reject(&[], "empty");
}

#[test]
fn rejects_every_inner_length_off_by_one() {
    // Nudging any i32 inside the document up or down must never be accepted silently,
    // except where the value is plain data (int32 "i" and the timestamp, date, ...).
    let doc = every_type().into_bytes();
    let s = find(&doc, b"\x02s\0") + 3;
    let o = find(&doc, b"\x03o\0") + 3;
    let bin = find(&doc, b"\x05bin\0") + 5;
    let jsws = find(&doc, b"\x0fjsws\0") + 6;
    for at in [s, o, bin, jsws] {
        for delta in [-1i32, 1, -100, 100_000] {
            let mut bad = doc.clone();
            let v = i32::from_le_bytes(bad[at..at + 4].try_into().unwrap()) + delta;
            bad[at..at + 4].copy_from_slice(&v.to_le_bytes());
            reject(&bad, &format!("length at {at} off by {delta}"));
        }
    }
}

#[test]
fn rejects_value_damage() {
    let doc = every_type().into_bytes();
    let mut bad = doc.clone();
    bad[find(&doc, b"\x08t\0") + 3] = 2;
    reject(&bad, "boolean 2");
    let mut bad = doc.clone();
    bad[find(&doc, b"\x02s\0")] = 0x14;
    reject(&bad, "unknown type 0x14");
    let mut bad = doc.clone();
    let at = find(&doc, b"str\0");
    bad[at] = 0xff;
    reject(&bad, "string not UTF-8");
    let mut bad = doc.clone();
    bad[at + 3] = b'x';
    reject(&bad, "string not zero-terminated");
    let mut bad = doc.clone();
    bad[find(&doc, b"\x02s\0") + 1] = 0xc3;
    reject(&bad, "key not UTF-8");
    let mut bad = doc.clone();
    let old = find(&doc, b"\x05old\0") + 5 + 5;
    bad[old] = 3;
    reject(&bad, "old binary inner length");
}

fn nested(depth: usize) -> Vec<u8> {
    let mut doc = rawdoc! {};
    for _ in 0..depth {
        doc = rawdoc! { "a": doc };
    }
    doc.into_bytes()
}

#[test]
fn nesting_depth_is_bounded() {
    validate_document(&nested(BSON_NESTING_DEPTH_MAX)).unwrap();
    reject(&nested(BSON_NESTING_DEPTH_MAX + 1), "too deep");
    // Deep garbage cannot exhaust the stack either: the walk does not recurse.
    reject(&nested(20_000), "far too deep");
}
