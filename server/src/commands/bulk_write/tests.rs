//! `bulkWrite` parsing: the order mongod checks a request in and the codes it answers.

use super::*;

fn request(body: Document) -> Request {
    let mut body = body;
    body.insert("$db", "admin");
    super::super::parse_request(body, vec![], true)
        .ok()
        .unwrap()
}

fn code(body: Document) -> (i32, String) {
    let e = parse(&request(body)).unwrap_err();
    (e.code.code(), e.message)
}

fn ns() -> Bson {
    bson::bson!([{ "ns": "d.c" }])
}

#[test]
fn nsinfo_checks_come_first() {
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [] }),
        (
            40414,
            "BSON field 'bulkWrite.nsInfo' is missing but a required field".into()
        )
    );
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [], "nsInfo": 5 }).0,
        14,
        "a wrongly typed nsInfo is reported before the batch size"
    );
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": [5] }).1,
        "BSON field 'bulkWrite.nsInfo.0' is the wrong type 'int', expected type 'object'"
    );
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": [{ "x": 1 }] }).1,
        "BSON field 'bulkWrite.nsInfo.x' is an unknown field."
    );
    for (ns, named) in [("nodot", "nodot"), ("", ""), (".", "")] {
        assert_eq!(
            code(
                doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": [{ "ns": ns }] }
            ),
            (
                73,
                format!("Invalid namespace specified for bulkWrite: '{named}'")
            )
        );
    }
}

#[test]
fn op_shapes() {
    let one = |op: Document| code(doc! { "bulkWrite": 1, "ops": [op], "nsInfo": ns() });
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [], "nsInfo": ns() }).0,
        16
    );
    assert_eq!(
        one(doc! { "insert": -1, "document": {} }),
        (
            2,
            "BSON field 'insert' value must be >= 0, actual value '-1'".into()
        )
    );
    let (c, m) = one(doc! { "insert": 5, "document": {} });
    assert_eq!(c, 2);
    assert!(m.ends_with("has an invalid nsInfo index."), "{m}");
    assert_eq!(
        one(doc! { "insert": "0", "document": {} }).1,
        "BSON field 'bulkWrite.ops.insert' is the wrong type 'string', expected types '[long, int, decimal, double]'"
    );
    assert_eq!(
        one(doc! { "frobnicate": 0 }).1,
        "BSON field 'bulkWrite.frobnicate' is an unknown field."
    );
    for (op, field) in [
        (doc! { "insert": 0 }, "document"),
        (doc! { "update": 0, "filter": {} }, "updateMods"),
        (doc! { "update": 0, "updateMods": {} }, "filter"),
        (doc! { "delete": 0 }, "filter"),
    ] {
        assert_eq!(
            one(op),
            (
                40414,
                format!("BSON field 'bulkWrite.ops.{field}' is missing but a required field")
            )
        );
    }
    assert_eq!(
        one(doc! { "insert": 0, "document": 5 }).1,
        "BSON field 'bulkWrite.ops.document' is the wrong type 'int', expected type 'object'"
    );
    assert_eq!(one(doc! { "delete": 0, "filter": {}, "x": 1 }).0, 40415);
    assert_eq!(
        code(doc! { "bulkWrite": 1, "ops": [{ "insert": 0, "document": {} }], "nsInfo": ns(), "bogus": 1 }).0,
        40415
    );
    let ok = parse(&request(
        doc! { "bulkWrite": 1, "ops": [{ "insert": 0.0, "document": {} }], "nsInfo": ns() },
    ));
    assert!(ok.is_ok(), "a double index is accepted");
}

#[test]
fn first_batch_fits_one_reply() {
    let big = |i: i32| {
        let d = doc! { "idx": i, "errmsg": "x".repeat(7 * 1024 * 1024) };
        RawDocumentBuf::try_from(&d).unwrap()
    };
    let mut rest: std::collections::VecDeque<_> = (0..3).map(big).collect();
    let first = first_batch(&mut rest, usize::MAX).unwrap();
    assert_eq!(
        (first.len(), rest.len()),
        (2, 1),
        "two 7 MiB items fit, the third waits"
    );
    let mut rest: std::collections::VecDeque<_> = (0..3).map(big).collect();
    assert_eq!(first_batch(&mut rest, 1).unwrap().len(), 1);
    assert!(first_batch(&mut rest, 0).unwrap().is_empty());
}
