//! Document validation: a collection's `validator` (a filter, `$jsonSchema` included) with its
//! `validationLevel` and `validationAction`, and the explanation of a failure in mongod's
//! `errInfo.details` shape (`operatorName`, `specifiedAs`, `reason`, `consideredValue`,
//! `schemaRulesNotSatisfied`, `propertiesNotSatisfied`, `missingProperties`, ...). The
//! explanation is worked out by taking the validator apart and matching each part again, so it
//! can never disagree with the verdict. Pure: no I/O, no logging.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::{Filter, Schema};
use crate::query::types;
use bson::{Bson, Document, RawBsonRef, RawDocument, doc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Off,
    Strict,
    /// Updates of documents that already fail the validator are not checked.
    Moderate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Error,
    Warn,
}

impl Level {
    pub fn parse(v: &Bson) -> CommandResult<Level> {
        match v {
            Bson::String(s) if s == "off" => Ok(Level::Off),
            Bson::String(s) if s == "strict" => Ok(Level::Strict),
            Bson::String(s) if s == "moderate" => Ok(Level::Moderate),
            Bson::String(s) => Err(err(
                ErrorCode::BadValue,
                format!(
                    "Enumeration value '{s}' for field 'validationLevel' is not a valid value."
                ),
            )),
            _ => Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'validationLevel' is the wrong type, expected type 'string'",
            )),
        }
    }
}

impl Action {
    pub fn parse(v: &Bson) -> CommandResult<Action> {
        match v {
            Bson::String(s) if s == "error" => Ok(Action::Error),
            Bson::String(s) if s == "warn" => Ok(Action::Warn),
            Bson::String(s) => Err(err(
                ErrorCode::BadValue,
                format!(
                    "Enumeration value '{s}' for field 'validationAction' is not a valid value."
                ),
            )),
            _ => Err(err(
                ErrorCode::TypeMismatch,
                "BSON field 'validationAction' is the wrong type, expected type 'string'",
            )),
        }
    }
}

/// A collection's validation rules, parsed from its options.
#[derive(Debug, Clone)]
pub struct Validator {
    pub filter: Filter,
    pub doc: Document,
    pub level: Level,
    pub action: Action,
}

/// Query operators a validator may not use (mongod refuses them with 4 / BadValue).
const NOT_IN_VALIDATOR: &[&str] = &["$near", "$nearSphere", "$text", "$where"];

/// Refuse the operators a validator cannot hold, at any depth.
pub fn check_validator(d: &Document) -> CommandResult<()> {
    for (k, v) in d {
        if NOT_IN_VALIDATOR.contains(&k.as_str()) {
            return Err(err(
                ErrorCode::BadValue,
                format!("{k} is not allowed in collection validators"),
            ));
        }
        match v {
            Bson::Document(sub) if k != "$jsonSchema" => check_validator(sub)?,
            Bson::Array(items) => {
                for i in items {
                    if let Bson::Document(sub) = i {
                        check_validator(sub)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

impl Validator {
    /// The rules in a collection's options; `None` when it has no (non-empty) validator.
    pub fn from_options(options: &Document) -> CommandResult<Option<Validator>> {
        let Some(Bson::Document(doc)) = options.get("validator") else {
            return Ok(None);
        };
        if doc.is_empty() {
            return Ok(None);
        }
        let level = match options.get("validationLevel") {
            Some(v) => Level::parse(v)?,
            None => Level::Strict,
        };
        let action = match options.get("validationAction") {
            Some(v) => Action::parse(v)?,
            None => Action::Error,
        };
        Ok(Some(Validator {
            filter: Filter::parse(doc)?,
            doc: doc.clone(),
            level,
            action,
        }))
    }

    pub fn passes(&self, d: &RawDocument) -> bool {
        self.filter.matches(d)
    }

    /// `errInfo` for a document that failed: `{failingDocumentId, details}`.
    pub fn error_info(&self, d: &RawDocument) -> Document {
        let id = d
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| Bson::try_from(v).ok())
            .unwrap_or(Bson::Null);
        doc! { "failingDocumentId": id, "details": details(&self.doc, d) }
    }
}

/// Why `d` does not match the filter `validator`.
pub fn details(validator: &Document, d: &RawDocument) -> Document {
    let clauses: Vec<Document> = validator
        .iter()
        .map(|(k, v)| doc! { k.clone(): v.clone() })
        .collect();
    if clauses.len() == 1 {
        return clause_details(&clauses[0], d);
    }
    and_details("$and", &clauses, d)
}

fn and_details(name: &str, clauses: &[Document], d: &RawDocument) -> Document {
    let failing: Vec<Bson> = clauses
        .iter()
        .enumerate()
        .filter(|(_, c)| !matches(c, d))
        .map(|(i, c)| Bson::Document(doc! { "index": i as i32, "details": clause_details(c, d) }))
        .collect();
    doc! { "operatorName": name, "clausesNotSatisfied": failing }
}

fn matches(filter: &Document, d: &RawDocument) -> bool {
    Filter::parse(filter).is_ok_and(|f| f.matches(d))
}

fn sub_documents(v: &Bson) -> Vec<Document> {
    match v {
        Bson::Array(items) => items
            .iter()
            .filter_map(|i| i.as_document().cloned())
            .collect(),
        _ => Vec::new(),
    }
}

/// One top-level clause `{key: value}` that failed.
fn clause_details(clause: &Document, d: &RawDocument) -> Document {
    let Some((key, value)) = clause.iter().next() else {
        return Document::new();
    };
    match key.as_str() {
        "$jsonSchema" => {
            let rules = match value {
                Bson::Document(s) => schema_rules(s, RawBsonRef::Document(d)),
                _ => Vec::new(),
            };
            doc! { "operatorName": "$jsonSchema", "schemaRulesNotSatisfied": rules }
        }
        "$and" => and_details("$and", &sub_documents(value), d),
        "$or" | "$nor" => {
            let clauses = sub_documents(value);
            let shown: Vec<Bson> = clauses
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    Bson::Document(doc! { "index": i as i32, "details": clause_details(c, d) })
                })
                .collect();
            doc! { "operatorName": key.clone(), "clausesNotSatisfied": shown }
        }
        "$expr" => doc! {
            "operatorName": "$expr",
            "specifiedAs": clause.clone(),
            "reason": "expression did not match",
            "expressionResult": false,
        },
        k if k.starts_with('$') => doc! {
            "operatorName": k,
            "specifiedAs": clause.clone(),
            "reason": "expression did not match",
        },
        field => field_details(field, value, d),
    }
}

/// `{field: {$op: x, ...}}` or `{field: value}` that failed.
fn field_details(field: &str, value: &Bson, d: &RawDocument) -> Document {
    let ops: Vec<(String, Bson)> = match value {
        Bson::Document(o) if o.keys().next().is_some_and(|k| k.starts_with('$')) => {
            o.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
        other => vec![("$eq".to_string(), other.clone())],
    };
    if ops.len() > 1 {
        let clauses: Vec<Document> = ops
            .iter()
            .map(|(op, v)| doc! { field: { op.clone(): v.clone() } })
            .collect();
        return and_details("$and", &clauses, d);
    }
    let (op, _) = &ops[0];
    let mut out = doc! {
        "operatorName": op.clone(),
        "specifiedAs": { field: value.clone() },
    };
    match crate::query::path::get_exact(d, &crate::query::path::split(field)) {
        None => {
            out.insert("reason", "field was missing");
        }
        Some(v) => {
            let reason = match op.as_str() {
                "$type" => "type did not match",
                "$exists" => "field was present",
                "$regex" => "regular expression did not match",
                "$in" => "no matching value found in array",
                "$nin" => "matching value found in array",
                "$size" => "array length was not equal to given size",
                "$all" | "$elemMatch" => "array did not match specification",
                "$mod" => "result of modulo operation did not match",
                _ => "comparison failed",
            };
            out.insert("reason", reason);
            if let Ok(b) = Bson::try_from(v) {
                out.insert("consideredValue", b);
            }
        }
    }
    out
}

/// Keywords that carry no rule of their own.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "exclusiveMinimum",
    "exclusiveMaximum",
];

/// One `$jsonSchema` keyword (with the companion a bound needs) as a schema of its own.
fn keyword_schema(schema: &Document, key: &str, value: &Bson) -> Document {
    let mut one = doc! { key: value.clone() };
    for (bound, companion) in [
        ("minimum", "exclusiveMinimum"),
        ("maximum", "exclusiveMaximum"),
    ] {
        if key == bound
            && let Some(e) = schema.get(companion)
        {
            one.insert(companion, e.clone());
        }
    }
    one
}

fn accepts(schema: &Document, v: RawBsonRef<'_>) -> bool {
    Schema::parse(schema).is_ok_and(|s| s.accepts_value(v))
}

fn considered(v: RawBsonRef<'_>) -> Bson {
    Bson::try_from(v).unwrap_or(Bson::Null)
}

/// The rules of `schema` that `v` breaks, each in mongod's shape.
fn schema_rules(schema: &Document, v: RawBsonRef<'_>) -> Vec<Bson> {
    let mut out = Vec::new();
    for (key, value) in schema {
        if ANNOTATIONS.contains(&key.as_str()) {
            continue;
        }
        let one = keyword_schema(schema, key, value);
        if accepts(&one, v) {
            continue;
        }
        let mut rule = doc! { "operatorName": key.clone() };
        match (key.as_str(), v) {
            ("properties", RawBsonRef::Document(d)) => {
                let props = value.as_document().cloned().unwrap_or_default();
                let failing: Vec<Bson> = props
                    .iter()
                    .filter_map(|(name, sub)| {
                        let sub = sub.as_document()?;
                        let field = d.get(name).ok().flatten()?;
                        if accepts(sub, field) {
                            return None;
                        }
                        let mut p = doc! { "propertyName": name.clone() };
                        for note in ["title", "description"] {
                            if let Some(n) = sub.get(note) {
                                p.insert(note, n.clone());
                            }
                        }
                        p.insert("details", schema_rules(sub, field));
                        Some(Bson::Document(p))
                    })
                    .collect();
                rule.insert("propertiesNotSatisfied", failing);
            }
            ("required", RawBsonRef::Document(d)) => {
                rule.insert("specifiedAs", doc! { "required": value.clone() });
                let missing: Vec<Bson> = sub_strings(value)
                    .into_iter()
                    .filter(|n| d.get(n).ok().flatten().is_none())
                    .map(Bson::String)
                    .collect();
                rule.insert("missingProperties", missing);
            }
            ("additionalProperties", RawBsonRef::Document(d)) => {
                rule.insert(
                    "specifiedAs",
                    doc! { "additionalProperties": value.clone() },
                );
                let declared = schema.get_document("properties").ok();
                let extra: Vec<Bson> = d
                    .iter()
                    .map_while(Result::ok)
                    .map(|(k, _)| k.as_str().to_string())
                    .filter(|k| declared.is_none_or(|p| !p.contains_key(k)))
                    .map(Bson::String)
                    .collect();
                rule.insert("additionalProperties", extra);
            }
            ("bsonType" | "type", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "type did not match");
                rule.insert("consideredValue", considered(v));
                rule.insert("consideredType", types::type_name(types::type_code_raw(v)));
            }
            ("enum", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "value was not found in enum");
                rule.insert("consideredValue", considered(v));
            }
            ("minimum" | "maximum" | "multipleOf", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "comparison failed");
                rule.insert("consideredValue", considered(v));
            }
            ("minLength" | "maxLength", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "specified string length was not satisfied");
                rule.insert("consideredValue", considered(v));
            }
            ("pattern", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "regular expression did not match");
                rule.insert("consideredValue", considered(v));
            }
            ("minItems" | "maxItems", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "array did not match specified length");
                rule.insert("consideredValue", considered(v));
            }
            ("minProperties" | "maxProperties", _) => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", "specified number of properties was not satisfied");
                if let RawBsonRef::Document(d) = v {
                    rule.insert("numberOfProperties", d.iter().count() as i32);
                }
            }
            _ => {
                rule.insert("specifiedAs", one.clone());
                rule.insert("reason", format!("{key} was not satisfied"));
                rule.insert("consideredValue", considered(v));
            }
        }
        out.push(Bson::Document(rule));
    }
    out
}

fn sub_strings(v: &Bson) -> Vec<String> {
    match v {
        Bson::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests;
