//! The collation spec: the `collation` argument of find, aggregate, createIndexes, `create` and
//! the write commands, parsed and validated the way mongod does, and the normalised document
//! mongod echoes back (every option filled in). Comparison itself is not here yet: only the
//! simple (binary) collation compares strings today, so callers reject any other locale after
//! the spec has been validated.

use bson::{Bson, Document, doc};

use crate::error::{CommandResult, ErrorCode, err};

/// `caseFirst`: which case sorts first at the tertiary level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CaseFirst {
    Upper,
    Lower,
    Off,
}

/// `alternate`: whether whitespace and punctuation are base characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alternate {
    NonIgnorable,
    Shifted,
}

/// `maxVariable`: with `alternate: "shifted"`, the characters that are ignorable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MaxVariable {
    Punct,
    Space,
}

/// A validated, non-simple collation with every option resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Collation {
    pub locale: String,
    pub strength: u8,
    pub case_level: bool,
    pub case_first: CaseFirst,
    pub numeric_ordering: bool,
    pub alternate: Alternate,
    pub max_variable: MaxVariable,
    pub normalization: bool,
    pub backwards: bool,
}

/// What a `collation` argument asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// `{locale: "simple"}`: binary comparison, as with no collation at all.
    Simple,
    Locale(Collation),
}

/// The ICU version mongod 7.0 reports in a normalised collation.
const ICU_VERSION: &str = "57.1";

const FIELDS: &[&str] = &[
    "locale",
    "strength",
    "caseLevel",
    "caseFirst",
    "numericOrdering",
    "alternate",
    "maxVariable",
    "normalization",
    "backwards",
    "version",
];

impl Spec {
    /// Parses a `collation` document; bad input gets mongod's code.
    pub fn parse(spec: &Document) -> CommandResult<Spec> {
        if let Some(k) = spec.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field 'collation.{k}' is an unknown field."),
            ));
        }
        let locale = match spec.get("locale") {
            Some(Bson::String(l)) => l.as_str(),
            Some(v) => return Err(wrong_type("locale", v, "string")),
            None => {
                return Err(err(
                    ErrorCode::Location40414,
                    "BSON field 'collation.locale' is missing but a required field",
                ));
            }
        };
        if locale.is_empty() || !locale_shape_ok(locale) {
            return Err(err(ErrorCode::BadValue, "Field 'locale' is invalid"));
        }
        let c = Collation {
            locale: locale.to_string(),
            strength: strength(spec)?,
            case_level: flag(spec, "caseLevel")?,
            case_first: match choice(spec, "caseFirst", &["upper", "lower", "off"])? {
                Some("upper") => CaseFirst::Upper,
                Some("lower") => CaseFirst::Lower,
                _ => CaseFirst::Off,
            },
            numeric_ordering: flag(spec, "numericOrdering")?,
            alternate: match choice(spec, "alternate", &["non-ignorable", "shifted"])? {
                Some("shifted") => Alternate::Shifted,
                _ => Alternate::NonIgnorable,
            },
            max_variable: match choice(spec, "maxVariable", &["punct", "space"])? {
                Some("space") => MaxVariable::Space,
                _ => MaxVariable::Punct,
            },
            normalization: flag(spec, "normalization")?,
            backwards: flag(spec, "backwards")?,
        };
        if locale == "simple" {
            return if spec.len() == 1 {
                Ok(Spec::Simple)
            } else {
                Err(err(
                    ErrorCode::BadValue,
                    "If 'locale' is set to 'simple', no other fields in the collation spec can be set",
                ))
            };
        }
        Ok(Spec::Locale(c))
    }

    /// The document mongod echoes in listIndexes, listCollections and explain.
    pub fn to_document(&self) -> Document {
        match self {
            Spec::Simple => doc! { "locale": "simple" },
            Spec::Locale(c) => doc! {
                "locale": c.locale.as_str(),
                "caseLevel": c.case_level,
                "caseFirst": match c.case_first {
                    CaseFirst::Upper => "upper",
                    CaseFirst::Lower => "lower",
                    CaseFirst::Off => "off",
                },
                "strength": c.strength as i32,
                "numericOrdering": c.numeric_ordering,
                "alternate": match c.alternate {
                    Alternate::NonIgnorable => "non-ignorable",
                    Alternate::Shifted => "shifted",
                },
                "maxVariable": match c.max_variable {
                    MaxVariable::Punct => "punct",
                    MaxVariable::Space => "space",
                },
                "normalization": c.normalization,
                "backwards": c.backwards,
                "version": ICU_VERSION,
            },
        }
    }
}

/// A locale identifier's shape: `simple`, or a language subtag of 2–3 letters optionally followed
/// by `_`/`-` separated alphanumeric subtags and an `@key=value` keyword list. Whether ICU knows the
/// locale is decided by the comparison layer.
fn locale_shape_ok(locale: &str) -> bool {
    let base = locale.split('@').next().unwrap_or("");
    let mut parts = base.split(['_', '-']);
    let lang = parts.next().unwrap_or("");
    (lang == "simple"
        || (2..=3).contains(&lang.len()) && lang.bytes().all(|b| b.is_ascii_lowercase()))
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> crate::error::CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'collation.{field}' is the wrong type '{}', expected type '{expected}'",
            crate::query::types::type_name(v.element_type() as i32)
        ),
    )
}

fn flag(spec: &Document, field: &str) -> CommandResult<bool> {
    match spec.get(field) {
        None => Ok(false),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(v) => Err(wrong_type(field, v, "bool")),
    }
}

fn choice<'a>(spec: &'a Document, field: &str, allowed: &[&str]) -> CommandResult<Option<&'a str>> {
    match spec.get(field) {
        None => Ok(None),
        Some(Bson::String(s)) if allowed.contains(&s.as_str()) => Ok(Some(s)),
        Some(Bson::String(s)) => Err(err(
            ErrorCode::BadValue,
            format!("Enumeration value '{s}' for field 'collation.{field}' is not a valid value."),
        )),
        Some(v) => Err(wrong_type(field, v, "string")),
    }
}

fn strength(spec: &Document) -> CommandResult<u8> {
    let n = match spec.get("strength") {
        None => return Ok(3),
        Some(Bson::Int32(i)) => *i as f64,
        Some(Bson::Int64(i)) => *i as f64,
        Some(Bson::Double(f)) => *f,
        Some(v) => return Err(wrong_type("strength", v, "int")),
    };
    if n.fract() != 0.0 || !(1.0..=5.0).contains(&n) {
        return Err(err(
            ErrorCode::BadValue,
            format!("Field 'strength' must be an integer 1 through 5. Got: {n}"),
        ));
    }
    Ok(n as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(d: Document) -> i32 {
        Spec::parse(&d).unwrap_err().code.code()
    }

    #[test]
    fn simple_alone_is_simple() {
        assert_eq!(
            Spec::parse(&doc! {"locale": "simple"}).unwrap(),
            Spec::Simple
        );
        assert_eq!(code(doc! {"locale": "simple", "strength": 2}), 2);
    }

    #[test]
    fn defaults_are_filled_in() {
        let s = Spec::parse(&doc! {"locale": "en"}).unwrap();
        assert_eq!(
            s.to_document(),
            doc! {
                "locale": "en", "caseLevel": false, "caseFirst": "off", "strength": 3,
                "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
                "normalization": false, "backwards": false, "version": "57.1",
            }
        );
    }

    #[test]
    fn options_are_kept() {
        let s = Spec::parse(&doc! {
            "locale": "tr", "strength": 2.0, "caseFirst": "upper", "numericOrdering": true,
            "alternate": "shifted", "maxVariable": "space", "backwards": true,
        })
        .unwrap();
        let Spec::Locale(c) = s else {
            panic!("expected a locale")
        };
        assert_eq!(
            (
                c.strength,
                c.case_first,
                c.numeric_ordering,
                c.alternate,
                c.max_variable
            ),
            (
                2,
                CaseFirst::Upper,
                true,
                Alternate::Shifted,
                MaxVariable::Space
            )
        );
        assert!(c.backwards && !c.normalization && !c.case_level);
    }

    #[test]
    fn bad_values_get_mongod_codes() {
        assert_eq!(code(doc! {}), 40414);
        assert_eq!(code(doc! {"strength": 2}), 40414);
        assert_eq!(code(doc! {"locale": 1}), 14);
        assert_eq!(code(doc! {"locale": ""}), 2);
        assert_eq!(code(doc! {"locale": "not a locale"}), 2);
        assert_eq!(code(doc! {"locale": "en", "strength": 0}), 2);
        assert_eq!(code(doc! {"locale": "en", "strength": 6}), 2);
        assert_eq!(code(doc! {"locale": "en", "strength": 2.5}), 2);
        assert_eq!(code(doc! {"locale": "en", "strength": "2"}), 14);
        assert_eq!(code(doc! {"locale": "en", "caseFirst": "title"}), 2);
        assert_eq!(code(doc! {"locale": "en", "alternate": 1}), 14);
        assert_eq!(code(doc! {"locale": "en", "backwards": 1}), 14);
        assert_eq!(code(doc! {"locale": "en", "colour": true}), 40415);
    }

    #[test]
    fn locale_shapes() {
        for ok in ["en", "en_US", "zh_Hant", "de@collation=phonebook", "fil"] {
            assert!(locale_shape_ok(ok), "{ok}");
        }
        for bad in ["EN", "e", "en__US", "english", "en US"] {
            assert!(!locale_shape_ok(bad), "{bad}");
        }
    }
}
