//! `$jsonSchema`: the common JSON Schema keywords mongod supports, checked against raw values.
//! As in JSON Schema, a keyword about one kind of value (e.g. `minimum`) says nothing about
//! values of other kinds; `bsonType`/`type` are what restrict kinds.

use super::RegexPred;
use crate::error::{CommandResult, ErrorCode, err};
use crate::query::types;
use bson::{Bson, Document, RawBsonRef, RawDocument};
use std::cmp::Ordering;
use storage::order;

/// A parsed schema node.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// Allowed type codes from `bsonType` or `type`; empty = any.
    types: Vec<i32>,
    enum_values: Option<Vec<Bson>>,
    minimum: Option<(Bson, bool)>,
    maximum: Option<(Bson, bool)>,
    min_length: Option<usize>,
    max_length: Option<usize>,
    pattern: Option<RegexPred>,
    required: Vec<String>,
    properties: Vec<(String, Schema)>,
    pattern_properties: Vec<(RegexPred, Schema)>,
    additional: Option<Box<Additional>>,
    /// `dependencies`: when the field is present, these fields must be too, or the whole
    /// object must satisfy the schema.
    dependencies: Vec<(String, Dependency)>,
    multiple_of: Option<Bson>,
    additional_items: Option<Box<Additional>>,
    min_properties: Option<usize>,
    max_properties: Option<usize>,
    items: Option<Items>,
    min_items: Option<usize>,
    max_items: Option<usize>,
    unique_items: bool,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
}

#[derive(Debug, Clone)]
enum Additional {
    Allowed(bool),
    Schema(Box<Schema>),
}

#[derive(Debug, Clone)]
enum Dependency {
    Fields(Vec<String>),
    Schema(Box<Schema>),
}

#[derive(Debug, Clone)]
enum Items {
    All(Box<Schema>),
    Each(Vec<Schema>),
}

fn fail(message: impl Into<String>) -> crate::error::CommandError {
    err(ErrorCode::FailedToParse, message)
}

fn count(v: &Bson, keyword: &str) -> CommandResult<usize> {
    types::as_i64_exact(v)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            fail(format!(
                "${keyword} must be a representable as a non-negative integer"
            ))
        })
}

fn sub(v: &Bson, keyword: &str) -> CommandResult<Schema> {
    match v {
        Bson::Document(d) => Schema::parse(d),
        _ => Err(err(
            ErrorCode::TypeMismatch,
            format!("${keyword} must be an object"),
        )),
    }
}

fn sub_list(v: &Bson, keyword: &str) -> CommandResult<Vec<Schema>> {
    match v {
        Bson::Array(items) if !items.is_empty() => items.iter().map(|i| sub(i, keyword)).collect(),
        _ => Err(fail(format!("${keyword} must be a non-empty array"))),
    }
}

fn json_type(name: &str) -> CommandResult<Vec<i32>> {
    Ok(match name {
        "object" => vec![3],
        "array" => vec![4],
        "number" => types::NUMBER_CODES.to_vec(),
        "boolean" => vec![8],
        "string" => vec![2],
        "null" => vec![10],
        "integer" => {
            return Err(fail(
                "$jsonSchema type 'integer' is not currently supported.",
            ));
        }
        other => return Err(fail(format!("Unknown type name alias: {other}"))),
    })
}

fn type_list(v: &Bson, bson_names: bool) -> CommandResult<Vec<i32>> {
    let one = |name: &Bson| -> CommandResult<Vec<i32>> {
        let Bson::String(s) = name else {
            return Err(err(
                ErrorCode::TypeMismatch,
                "type must be represented as a string",
            ));
        };
        if !bson_names {
            return json_type(s);
        }
        if s == "number" {
            return Ok(types::NUMBER_CODES.to_vec());
        }
        types::code_for_alias(s)
            .map(|c| vec![c])
            .ok_or_else(|| fail(format!("Unknown type name alias: {s}")))
    };
    match v {
        Bson::Array(names) => names
            .iter()
            .map(one)
            .collect::<CommandResult<Vec<_>>>()
            .map(|v| v.concat()),
        name => one(name),
    }
}

impl Schema {
    pub fn parse(d: &Document) -> CommandResult<Schema> {
        let mut s = Schema::default();
        for (key, v) in d {
            match key.as_str() {
                "bsonType" => s.types = type_list(v, true)?,
                "type" => s.types = type_list(v, false)?,
                "enum" => match v {
                    Bson::Array(items) if !items.is_empty() => s.enum_values = Some(items.clone()),
                    _ => return Err(fail("$jsonSchema keyword 'enum' must be a non-empty array")),
                },
                "minimum" | "maximum" => {
                    if !types::is_number(v) {
                        return Err(err(
                            ErrorCode::TypeMismatch,
                            format!("${key} must be a number"),
                        ));
                    }
                    let exclusive = d.get(format!(
                        "exclusive{}{}",
                        &key[..1].to_uppercase(),
                        &key[1..]
                    ));
                    let bound = (v.clone(), exclusive.is_some_and(types::is_truthy));
                    if key == "minimum" {
                        s.minimum = Some(bound)
                    } else {
                        s.maximum = Some(bound)
                    }
                }
                "exclusiveMinimum" | "exclusiveMaximum" => {}
                "minLength" => s.min_length = Some(count(v, key)?),
                "maxLength" => s.max_length = Some(count(v, key)?),
                "pattern" => match v {
                    Bson::String(p) => s.pattern = Some(RegexPred::new(p, "")?),
                    _ => return Err(err(ErrorCode::TypeMismatch, "$pattern must be a string")),
                },
                "required" => match v {
                    Bson::Array(names) => {
                        for n in names {
                            match n {
                                Bson::String(n) => s.required.push(n.clone()),
                                _ => {
                                    return Err(err(
                                        ErrorCode::TypeMismatch,
                                        "$jsonSchema keyword 'required' must be an array of strings",
                                    ));
                                }
                            }
                        }
                    }
                    _ => {
                        return Err(err(
                            ErrorCode::TypeMismatch,
                            "$jsonSchema keyword 'required' must be an array",
                        ));
                    }
                },
                "properties" => match v {
                    Bson::Document(props) => {
                        for (name, p) in props {
                            s.properties.push((name.clone(), sub(p, "properties")?));
                        }
                    }
                    _ => {
                        return Err(err(
                            ErrorCode::TypeMismatch,
                            "$properties must be an object",
                        ));
                    }
                },
                "additionalProperties" => {
                    s.additional = Some(Box::new(match v {
                        Bson::Boolean(b) => Additional::Allowed(*b),
                        other => Additional::Schema(Box::new(sub(other, key)?)),
                    }))
                }
                "patternProperties" => match v {
                    Bson::Document(props) => {
                        for (pattern, p) in props {
                            let re = RegexPred::new(pattern, "")?;
                            s.pattern_properties.push((re, sub(p, key)?));
                        }
                    }
                    _ => {
                        return Err(err(
                            ErrorCode::TypeMismatch,
                            "$patternProperties must be an object",
                        ));
                    }
                },
                "dependencies" => {
                    let Bson::Document(deps) = v else {
                        return Err(err(
                            ErrorCode::TypeMismatch,
                            "$dependencies must be an object",
                        ));
                    };
                    for (field, dep) in deps {
                        let dep = match dep {
                            Bson::Document(d) => Dependency::Schema(Box::new(Schema::parse(d)?)),
                            Bson::Array(names) if !names.is_empty() => Dependency::Fields(
                                names
                                    .iter()
                                    .map(|n| match n {
                                        Bson::String(n) => Ok(n.clone()),
                                        _ => Err(fail(
                                            "property dependency must be an array of strings",
                                        )),
                                    })
                                    .collect::<CommandResult<_>>()?,
                            ),
                            _ => {
                                return Err(fail(
                                    "property dependency must be an object or a non-empty array",
                                ));
                            }
                        };
                        s.dependencies.push((field.clone(), dep));
                    }
                }
                "multipleOf" => {
                    if !types::is_number(v) || types::as_f64(v).is_none_or(|m| m <= 0.0) {
                        return Err(fail("$multipleOf must be a positive number"));
                    }
                    s.multiple_of = Some(v.clone());
                }
                "additionalItems" => {
                    s.additional_items = Some(Box::new(match v {
                        Bson::Boolean(b) => Additional::Allowed(*b),
                        other => Additional::Schema(Box::new(sub(other, key)?)),
                    }))
                }
                "minProperties" => s.min_properties = Some(count(v, key)?),
                "maxProperties" => s.max_properties = Some(count(v, key)?),
                "items" => {
                    s.items = Some(match v {
                        Bson::Array(_) => Items::Each(sub_list(v, key)?),
                        other => Items::All(Box::new(sub(other, key)?)),
                    })
                }
                "minItems" => s.min_items = Some(count(v, key)?),
                "maxItems" => s.max_items = Some(count(v, key)?),
                "uniqueItems" => s.unique_items = types::is_truthy(v),
                "allOf" => s.all_of = sub_list(v, key)?,
                "anyOf" => s.any_of = sub_list(v, key)?,
                "oneOf" => s.one_of = sub_list(v, key)?,
                "not" => s.not = Some(Box::new(sub(v, key)?)),
                "title" | "description" => {}
                other => return Err(fail(format!("Unknown $jsonSchema keyword: {other}"))),
            }
        }
        Ok(s)
    }

    /// True when the document satisfies the schema.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.accepts(RawBsonRef::Document(doc))
    }

    /// True when a value (of any type) satisfies the schema.
    pub fn accepts_value(&self, v: RawBsonRef<'_>) -> bool {
        self.accepts(v)
    }

    fn accepts(&self, v: RawBsonRef<'_>) -> bool {
        if !self.types.is_empty() && !self.types.contains(&types::type_code_raw(v)) {
            return false;
        }
        if let Some(values) = &self.enum_values
            && !values
                .iter()
                .any(|e| order::compare_raw_bson(v, e) == Ordering::Equal)
        {
            return false;
        }
        let kind_ok = match v {
            RawBsonRef::Document(d) => self.accepts_object(d),
            RawBsonRef::Array(a) => {
                self.accepts_array(&a.into_iter().map_while(Result::ok).collect::<Vec<_>>())
            }
            RawBsonRef::String(s) => self.accepts_string(s),
            other if types::raw_as_f64(other).is_some() => self.accepts_number(other),
            _ => true,
        };
        kind_ok
            && self.all_of.iter().all(|s| s.accepts(v))
            && (self.any_of.is_empty() || self.any_of.iter().any(|s| s.accepts(v)))
            && (self.one_of.is_empty() || self.one_of.iter().filter(|s| s.accepts(v)).count() == 1)
            && self.not.as_ref().is_none_or(|s| !s.accepts(v))
    }

    fn accepts_number(&self, v: RawBsonRef<'_>) -> bool {
        let within = |bound: &Option<(Bson, bool)>, want: Ordering| match bound {
            None => true,
            Some((b, exclusive)) => {
                let o = order::compare_raw_bson(v, b);
                o == want || (!exclusive && o == Ordering::Equal)
            }
        };
        let multiple = match (&self.multiple_of, types::raw_as_f64(v)) {
            (Some(m), Some(x)) => types::as_f64(m).is_some_and(|m| (x % m) == 0.0),
            _ => true,
        };
        multiple
            && within(&self.minimum, Ordering::Greater)
            && within(&self.maximum, Ordering::Less)
    }

    fn accepts_string(&self, s: &str) -> bool {
        let chars = s.chars().count();
        self.min_length.is_none_or(|m| chars >= m)
            && self.max_length.is_none_or(|m| chars <= m)
            && self.pattern.as_ref().is_none_or(|p| p.is_match(s))
    }

    fn accepts_object(&self, d: &RawDocument) -> bool {
        let fields: Vec<(&str, RawBsonRef<'_>)> = d
            .iter()
            .map_while(Result::ok)
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        if self.min_properties.is_some_and(|m| fields.len() < m)
            || self.max_properties.is_some_and(|m| fields.len() > m)
        {
            return false;
        }
        if !self
            .required
            .iter()
            .all(|r| fields.iter().any(|(k, _)| k == r))
        {
            return false;
        }
        let present = |f: &str| fields.iter().any(|(k, _)| *k == f);
        for (field, dep) in &self.dependencies {
            if !present(field) {
                continue;
            }
            let ok = match dep {
                Dependency::Fields(names) => names.iter().all(|n| present(n)),
                Dependency::Schema(s) => s.accepts_object(d),
            };
            if !ok {
                return false;
            }
        }
        fields.iter().all(|(k, v)| {
            let named = self.properties.iter().find(|(name, _)| name == k);
            let mut patterned = self
                .pattern_properties
                .iter()
                .filter(|(re, _)| re.is_match(k))
                .peekable();
            let by_pattern = patterned.peek().is_some();
            if named.is_some_and(|(_, s)| !s.accepts(*v)) || !patterned.all(|(_, s)| s.accepts(*v))
            {
                return false;
            }
            named.is_some() || by_pattern || additional_accepts(self.additional.as_deref(), *v)
        })
    }

    fn accepts_array(&self, elements: &[RawBsonRef<'_>]) -> bool {
        if self.min_items.is_some_and(|m| elements.len() < m)
            || self.max_items.is_some_and(|m| elements.len() > m)
        {
            return false;
        }
        if self.unique_items {
            for (i, a) in elements.iter().enumerate() {
                if elements[i + 1..]
                    .iter()
                    .any(|b| order::compare(*a, *b) == Ordering::Equal)
                {
                    return false;
                }
            }
        }
        match &self.items {
            None => true,
            Some(Items::All(s)) => elements.iter().all(|e| s.accepts(*e)),
            Some(Items::Each(list)) => {
                elements.iter().zip(list).all(|(e, s)| s.accepts(*e))
                    && elements
                        .iter()
                        .skip(list.len())
                        .all(|e| additional_accepts(self.additional_items.as_deref(), *e))
            }
        }
    }
}

fn additional_accepts(rule: Option<&Additional>, v: RawBsonRef<'_>) -> bool {
    match rule {
        None | Some(Additional::Allowed(true)) => true,
        Some(Additional::Allowed(false)) => false,
        Some(Additional::Schema(s)) => s.accepts(v),
    }
}
