//! Model-ish tests of `$jsonSchema` keywords and of the failure explanation: each keyword
//! accepts and refuses the values it should, and the explanation names the broken rule.

use super::*;
use bson::RawDocumentBuf;

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).unwrap()
}

fn schema_ok(schema: Document, d: Document) -> bool {
    Filter::parse(&doc! { "$jsonSchema": schema })
        .unwrap()
        .matches(&raw(d))
}

#[test]
fn keywords_accept_and_refuse() {
    // (schema, passing document, failing document)
    let cases = [
        (
            doc! { "bsonType": "object", "properties": { "a": { "bsonType": "int" } } },
            doc! { "a": 1 },
            doc! { "a": "x" },
        ),
        (
            doc! { "properties": { "a": { "type": "string" } } },
            doc! { "a": "x" },
            doc! { "a": 1 },
        ),
        (
            doc! { "required": ["a", "b"] },
            doc! { "a": 1, "b": 2 },
            doc! { "a": 1 },
        ),
        (
            doc! { "properties": { "a": { "minimum": 5 } } },
            doc! { "a": 5 },
            doc! { "a": 4 },
        ),
        (
            doc! { "properties": { "a": { "minimum": 5, "exclusiveMinimum": true } } },
            doc! { "a": 6 },
            doc! { "a": 5 },
        ),
        (
            doc! { "properties": { "a": { "maximum": 5, "exclusiveMaximum": true } } },
            doc! { "a": 4.5 },
            doc! { "a": 5 },
        ),
        (
            doc! { "properties": { "a": { "minLength": 2, "maxLength": 3 } } },
            doc! { "a": "héé" },
            doc! { "a": "h" },
        ),
        (
            doc! { "properties": { "a": { "pattern": "^x+$" } } },
            doc! { "a": "xx" },
            doc! { "a": "xy" },
        ),
        (
            doc! { "properties": { "a": { "enum": [1, "b"] } } },
            doc! { "a": "b" },
            doc! { "a": 2 },
        ),
        (
            doc! { "properties": { "a": { "items": { "bsonType": "int" }, "minItems": 1, "maxItems": 2 } } },
            doc! { "a": [1, 2] },
            doc! { "a": [1, 2, 3] },
        ),
        (
            doc! { "properties": { "a": { "items": [ { "bsonType": "int" } ], "additionalItems": false } } },
            doc! { "a": [1] },
            doc! { "a": [1, 2] },
        ),
        (
            doc! { "properties": { "a": { "uniqueItems": true } } },
            doc! { "a": [1, 2] },
            doc! { "a": [1, 1.0] },
        ),
        (
            doc! { "minProperties": 2, "maxProperties": 3 },
            doc! { "a": 1, "b": 1 },
            doc! { "a": 1 },
        ),
        (
            doc! { "properties": { "_id": {}, "a": {} }, "additionalProperties": false },
            doc! { "_id": 1, "a": 1 },
            doc! { "_id": 1, "b": 1 },
        ),
        (
            doc! { "patternProperties": { "^n_": { "bsonType": "int" } } },
            doc! { "n_a": 1, "s": "x" },
            doc! { "n_a": "x" },
        ),
        (
            doc! { "patternProperties": { "^n_": {} }, "properties": { "_id": {} }, "additionalProperties": false },
            doc! { "_id": 1, "n_a": 1 },
            doc! { "_id": 1, "m": 1 },
        ),
        (
            doc! { "dependencies": { "card": ["address"] } },
            doc! { "card": 1, "address": 2 },
            doc! { "card": 1 },
        ),
        (
            doc! { "dependencies": { "card": { "required": ["zip"] } } },
            doc! { "x": 1 },
            doc! { "card": 1 },
        ),
        (
            doc! { "properties": { "a": { "multipleOf": 3 } } },
            doc! { "a": 9 },
            doc! { "a": 10 },
        ),
        (
            doc! { "properties": { "a": { "allOf": [ { "minimum": 1 }, { "maximum": 3 } ] } } },
            doc! { "a": 2 },
            doc! { "a": 4 },
        ),
        (
            doc! { "properties": { "a": { "anyOf": [ { "bsonType": "int" }, { "bsonType": "string" } ] } } },
            doc! { "a": "x" },
            doc! { "a": 1.5 },
        ),
        (
            doc! { "properties": { "a": { "oneOf": [ { "minimum": 1 }, { "minimum": 2 } ] } } },
            doc! { "a": 1 },
            doc! { "a": 3 },
        ),
        (
            doc! { "properties": { "a": { "not": { "bsonType": "string" } } } },
            doc! { "a": 1 },
            doc! { "a": "x" },
        ),
        (
            doc! { "title": "t", "description": "d", "properties": { "a": { "description": "x", "bsonType": "bool" } } },
            doc! { "a": true },
            doc! { "a": 0 },
        ),
    ];
    for (schema, good, bad) in cases {
        assert!(
            schema_ok(schema.clone(), good.clone()),
            "{schema} should accept {good}"
        );
        assert!(
            !schema_ok(schema.clone(), bad.clone()),
            "{schema} should refuse {bad}"
        );
        // The explanation names at least one rule for every refusal.
        let v = doc! { "$jsonSchema": schema.clone() };
        let d = details(&v, &raw(bad.clone()));
        assert_eq!(d.get_str("operatorName").unwrap(), "$jsonSchema");
        assert!(
            !d.get_array("schemaRulesNotSatisfied").unwrap().is_empty(),
            "{schema} {bad}: {d}"
        );
    }
}

#[test]
fn bad_schemas_are_refused() {
    for s in [
        doc! { "minimum": "x" },
        doc! { "multipleOf": 0 },
        doc! { "dependencies": { "a": 1 } },
        doc! { "patternProperties": { "(": {} } },
        doc! { "nope": 1 },
    ] {
        assert!(
            Filter::parse(&doc! { "$jsonSchema": s.clone() }).is_err(),
            "{s}"
        );
    }
}

#[test]
fn explanation_has_mongods_shape() {
    let v = doc! { "$jsonSchema": {
        "bsonType": "object",
        "required": ["name", "year"],
        "properties": { "year": { "bsonType": "int", "description": "an int" } },
    } };
    let d = details(&v, &raw(doc! { "_id": 1, "year": 2019.0 }));
    let rules = d.get_array("schemaRulesNotSatisfied").unwrap();
    // Rules come in the schema's keyword order.
    let req = rules[0].as_document().unwrap();
    assert_eq!(
        req.get_array("missingProperties").unwrap(),
        &vec![Bson::from("name")]
    );
    let props = rules[1].as_document().unwrap();
    assert_eq!(props.get_str("operatorName").unwrap(), "properties");
    let p = props.get_array("propertiesNotSatisfied").unwrap()[0]
        .as_document()
        .unwrap();
    assert_eq!(p.get_str("propertyName").unwrap(), "year");
    assert_eq!(p.get_str("description").unwrap(), "an int");
    let inner = p.get_array("details").unwrap()[0].as_document().unwrap();
    assert_eq!(
        inner,
        &doc! {
            "operatorName": "bsonType", "specifiedAs": { "bsonType": "int" },
            "reason": "type did not match", "consideredValue": 2019.0, "consideredType": "double",
        }
    );

    // Query operators: one clause, then several.
    let d = details(&doc! { "a": { "$gt": 5 } }, &raw(doc! { "a": 1 }));
    assert_eq!(
        d,
        doc! {
            "operatorName": "$gt", "specifiedAs": { "a": { "$gt": 5 } },
            "reason": "comparison failed", "consideredValue": 1,
        }
    );
    let d = details(
        &doc! { "a": 1, "b": { "$exists": true } },
        &raw(doc! { "a": 1 }),
    );
    assert_eq!(d.get_str("operatorName").unwrap(), "$and");
    let failing = d.get_array("clausesNotSatisfied").unwrap();
    assert_eq!(failing.len(), 1);
    let only = failing[0].as_document().unwrap();
    assert_eq!(only.get_i32("index").unwrap(), 1);
    assert_eq!(
        only.get_document("details")
            .unwrap()
            .get_str("reason")
            .unwrap(),
        "field was missing"
    );
}

#[test]
fn options_parse() {
    let v = Validator::from_options(&doc! {
        "validator": { "a": 1 }, "validationLevel": "moderate", "validationAction": "warn",
    })
    .unwrap()
    .unwrap();
    assert_eq!(v.level, Level::Moderate);
    assert_eq!(v.action, Action::Warn);
    assert!(Validator::from_options(&doc! {}).unwrap().is_none());
    assert!(
        Validator::from_options(&doc! { "validator": {} })
            .unwrap()
            .is_none()
    );
    assert!(Level::parse(&Bson::from("loose")).is_err());
    assert!(Action::parse(&Bson::from(1)).is_err());
    assert!(check_validator(&doc! { "$or": [ { "$where": "1" } ] }).is_err());
}
