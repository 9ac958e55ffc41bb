//! The one total order over BSON values that mongod uses for sort, range bounds, `$min`/`$max`,
//! index order and unique checks. Values first fall into type brackets (MinKey < undefined <
//! null < numbers < strings and symbols < objects < arrays < binData < ObjectId < bool < date <
//! timestamp < regex < dbPointer < javascript < javascriptWithScope < MaxKey); inside a bracket
//! they compare by value: numbers exactly across int32/int64/double/decimal128 (see `number`),
//! strings by bytes, objects element by element (type bracket, then field name, then value, then
//! length), arrays element by element, binData by length then subtype then bytes.
//!
//! The comparison works on a borrowed view so that raw (`RawBsonRef`) and owned (`Bson`) values
//! share one implementation and can even be compared with each other. A corrupt raw document
//! compares as if it ended at the damage: this module never panics on stored bytes.

mod corpus;
pub mod number;
#[cfg(test)]
mod tests;

pub use corpus::corpus;
pub use number::{Number, compare_numbers};

use bson::raw::{RawArray, RawDocument};
use bson::{Bson, Document, RawBsonRef};
use std::cmp::Ordering;

/// mongod's canonical type numbers: values of different canonical types order by these.
pub mod rank {
    pub const MIN_KEY: i32 = -1;
    pub const UNDEFINED: i32 = 0;
    pub const NULL: i32 = 5;
    pub const NUMBER: i32 = 10;
    pub const STRING: i32 = 15;
    pub const OBJECT: i32 = 20;
    pub const ARRAY: i32 = 25;
    pub const BIN_DATA: i32 = 30;
    pub const OBJECT_ID: i32 = 35;
    pub const BOOL: i32 = 40;
    pub const DATE: i32 = 45;
    pub const TIMESTAMP: i32 = 47;
    pub const REGEX: i32 = 50;
    pub const DB_POINTER: i32 = 55;
    pub const JAVASCRIPT: i32 = 60;
    pub const JAVASCRIPT_WITH_SCOPE: i32 = 65;
    pub const MAX_KEY: i32 = 127;
}

/// A borrowed view of a raw or owned BSON value, normalized for comparison.
#[derive(Debug, Clone, Copy)]
pub enum View<'a> {
    MinKey,
    Undefined,
    Null,
    Number(Number),
    /// Strings and symbols share a bracket and compare by bytes.
    String(&'a str),
    Object(DocView<'a>),
    Array(ArrView<'a>),
    Binary {
        subtype: u8,
        bytes: &'a [u8],
    },
    ObjectId([u8; 12]),
    Bool(bool),
    Date(i64),
    /// `time << 32 | increment`, compared unsigned.
    Timestamp(u64),
    Regex {
        pattern: &'a str,
        options: &'a str,
    },
    DbPointer(DbPointerView<'a>),
    JavaScript(&'a str),
    JavaScriptWithScope {
        code: &'a str,
        scope: DocView<'a>,
    },
    MaxKey,
}

/// A document, raw or owned.
#[derive(Debug, Clone, Copy)]
pub enum DocView<'a> {
    Raw(&'a RawDocument),
    Owned(&'a Document),
}

/// An array, raw or owned.
#[derive(Debug, Clone, Copy)]
pub enum ArrView<'a> {
    Raw(&'a RawArray),
    Owned(&'a [Bson]),
}

/// A deprecated dbPointer; its fields are private in the bson crate, so they are read lazily.
#[derive(Debug, Clone, Copy)]
pub enum DbPointerView<'a> {
    Raw(RawBsonRef<'a>),
    Owned(&'a Bson),
}

impl<'a> View<'a> {
    pub fn from_raw(value: RawBsonRef<'a>) -> View<'a> {
        match value {
            RawBsonRef::Double(d) => View::Number(Number::Double(d)),
            RawBsonRef::String(s) | RawBsonRef::Symbol(s) => View::String(s),
            RawBsonRef::Array(a) => View::Array(ArrView::Raw(a)),
            RawBsonRef::Document(d) => View::Object(DocView::Raw(d)),
            RawBsonRef::Boolean(b) => View::Bool(b),
            RawBsonRef::Null => View::Null,
            RawBsonRef::RegularExpression(r) => View::Regex {
                pattern: r.pattern.as_str(),
                options: r.options.as_str(),
            },
            RawBsonRef::JavaScriptCode(c) => View::JavaScript(c),
            RawBsonRef::JavaScriptCodeWithScope(c) => View::JavaScriptWithScope {
                code: c.code,
                scope: DocView::Raw(c.scope),
            },
            RawBsonRef::Int32(i) => View::Number(Number::Int(i64::from(i))),
            RawBsonRef::Int64(i) => View::Number(Number::Int(i)),
            RawBsonRef::Timestamp(t) => View::Timestamp(timestamp_u64(t)),
            RawBsonRef::Binary(b) => View::Binary {
                subtype: b.subtype.into(),
                bytes: b.bytes,
            },
            RawBsonRef::ObjectId(o) => View::ObjectId(o.bytes()),
            RawBsonRef::DateTime(d) => View::Date(d.timestamp_millis()),
            RawBsonRef::Decimal128(d) => View::Number(Number::Decimal(d.bytes())),
            RawBsonRef::Undefined => View::Undefined,
            RawBsonRef::MaxKey => View::MaxKey,
            RawBsonRef::MinKey => View::MinKey,
            RawBsonRef::DbPointer(_) => View::DbPointer(DbPointerView::Raw(value)),
        }
    }

    pub fn from_bson(value: &'a Bson) -> View<'a> {
        match value {
            Bson::Double(d) => View::Number(Number::Double(*d)),
            Bson::String(s) => View::String(s),
            Bson::Symbol(s) => View::String(s),
            Bson::Array(a) => View::Array(ArrView::Owned(a)),
            Bson::Document(d) => View::Object(DocView::Owned(d)),
            Bson::Boolean(b) => View::Bool(*b),
            Bson::Null => View::Null,
            Bson::RegularExpression(r) => View::Regex {
                pattern: r.pattern.as_str(),
                options: r.options.as_str(),
            },
            Bson::JavaScriptCode(c) => View::JavaScript(c),
            Bson::JavaScriptCodeWithScope(c) => View::JavaScriptWithScope {
                code: &c.code,
                scope: DocView::Owned(&c.scope),
            },
            Bson::Int32(i) => View::Number(Number::Int(i64::from(*i))),
            Bson::Int64(i) => View::Number(Number::Int(*i)),
            Bson::Timestamp(t) => View::Timestamp(timestamp_u64(*t)),
            Bson::Binary(b) => View::Binary {
                subtype: b.subtype.into(),
                bytes: &b.bytes,
            },
            Bson::ObjectId(o) => View::ObjectId(o.bytes()),
            Bson::DateTime(d) => View::Date(d.timestamp_millis()),
            Bson::Decimal128(d) => View::Number(Number::Decimal(d.bytes())),
            Bson::Undefined => View::Undefined,
            Bson::MaxKey => View::MaxKey,
            Bson::MinKey => View::MinKey,
            Bson::DbPointer(_) => View::DbPointer(DbPointerView::Owned(value)),
        }
    }

    /// mongod's canonical type number of this value (see [`rank`]).
    pub fn rank(&self) -> i32 {
        match self {
            View::MinKey => rank::MIN_KEY,
            View::Undefined => rank::UNDEFINED,
            View::Null => rank::NULL,
            View::Number(_) => rank::NUMBER,
            View::String(_) => rank::STRING,
            View::Object(_) => rank::OBJECT,
            View::Array(_) => rank::ARRAY,
            View::Binary { .. } => rank::BIN_DATA,
            View::ObjectId(_) => rank::OBJECT_ID,
            View::Bool(_) => rank::BOOL,
            View::Date(_) => rank::DATE,
            View::Timestamp(_) => rank::TIMESTAMP,
            View::Regex { .. } => rank::REGEX,
            View::DbPointer(_) => rank::DB_POINTER,
            View::JavaScript(_) => rank::JAVASCRIPT,
            View::JavaScriptWithScope { .. } => rank::JAVASCRIPT_WITH_SCOPE,
            View::MaxKey => rank::MAX_KEY,
        }
    }
}

fn timestamp_u64(t: bson::Timestamp) -> u64 {
    (u64::from(t.time) << 32) | u64::from(t.increment)
}

/// mongod's canonical type number of a raw value.
pub fn canonical_type_rank(value: RawBsonRef<'_>) -> i32 {
    View::from_raw(value).rank()
}

/// mongod's canonical type number of an owned value.
pub fn canonical_type_rank_bson(value: &Bson) -> i32 {
    View::from_bson(value).rank()
}

/// Compares two raw values in mongod's order.
pub fn compare(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    compare_views(View::from_raw(a), View::from_raw(b))
}

/// Compares two owned values in mongod's order.
pub fn compare_bson(a: &Bson, b: &Bson) -> Ordering {
    compare_views(View::from_bson(a), View::from_bson(b))
}

/// Compares a raw value with an owned one in mongod's order.
pub fn compare_raw_bson(a: RawBsonRef<'_>, b: &Bson) -> Ordering {
    compare_views(View::from_raw(a), View::from_bson(b))
}

/// Compares two raw documents as mongod's `BSONObj::woCompare` does.
pub fn compare_docs(a: &RawDocument, b: &RawDocument) -> Ordering {
    compare_doc_views(DocView::Raw(a), DocView::Raw(b), &by_bytes)
}

/// Compares two owned documents as mongod's `BSONObj::woCompare` does.
pub fn compare_documents(a: &Document, b: &Document) -> Ordering {
    compare_doc_views(DocView::Owned(a), DocView::Owned(b), &by_bytes)
}

/// How strings (and symbols) compare inside [`compare_views_with`]: by bytes in the simple
/// collation, by a collator's order otherwise. Field names, regexes and code always compare by
/// bytes, as in mongod.
pub type StrOrder<'s> = &'s dyn Fn(&str, &str) -> Ordering;

fn by_bytes(a: &str, b: &str) -> Ordering {
    a.as_bytes().cmp(b.as_bytes())
}

/// Compares two views; the heart of this module.
pub fn compare_views(a: View<'_>, b: View<'_>) -> Ordering {
    compare_views_with(a, b, &by_bytes)
}

/// [`compare_views`] with strings compared by `strings`, at any depth (inside objects and arrays
/// too): the order under a collation.
pub fn compare_views_with(a: View<'_>, b: View<'_>, strings: StrOrder<'_>) -> Ordering {
    let by_rank = a.rank().cmp(&b.rank());
    if by_rank != Ordering::Equal {
        return by_rank;
    }
    match (a, b) {
        (View::Number(x), View::Number(y)) => compare_numbers(x, y),
        (View::String(x), View::String(y)) => strings(x, y),
        (View::Object(x), View::Object(y)) => compare_doc_views(x, y, strings),
        (View::Array(x), View::Array(y)) => compare_arrays(x, y, strings),
        (
            View::Binary {
                subtype: sa,
                bytes: ba,
            },
            View::Binary {
                subtype: sb,
                bytes: bb,
            },
        ) => ba
            .len()
            .cmp(&bb.len())
            .then(sa.cmp(&sb))
            .then_with(|| ba.cmp(bb)),
        (View::ObjectId(x), View::ObjectId(y)) => x.cmp(&y),
        (View::Bool(x), View::Bool(y)) => x.cmp(&y),
        (View::Date(x), View::Date(y)) => x.cmp(&y),
        (View::Timestamp(x), View::Timestamp(y)) => x.cmp(&y),
        (
            View::Regex {
                pattern: pa,
                options: oa,
            },
            View::Regex {
                pattern: pb,
                options: ob,
            },
        ) => pa
            .as_bytes()
            .cmp(pb.as_bytes())
            .then_with(|| oa.as_bytes().cmp(ob.as_bytes())),
        (View::DbPointer(x), View::DbPointer(y)) => compare_db_pointers(x, y),
        (View::JavaScript(x), View::JavaScript(y)) => x.as_bytes().cmp(y.as_bytes()),
        (
            View::JavaScriptWithScope {
                code: ca,
                scope: sa,
            },
            View::JavaScriptWithScope {
                code: cb,
                scope: sb,
            },
        ) => ca
            .as_bytes()
            .cmp(cb.as_bytes())
            .then_with(|| compare_doc_views(sa, sb, strings)),
        // MinKey, MaxKey, null and undefined are alone in their brackets.
        _ => Ordering::Equal,
    }
}

impl<'a> DocView<'a> {
    /// The fields in order; a corrupt raw document ends at the damage.
    pub fn fields(self) -> Box<dyn Iterator<Item = (&'a str, View<'a>)> + 'a> {
        match self {
            DocView::Raw(d) => Box::new(
                d.iter()
                    .map_while(Result::ok)
                    .map(|(k, v)| (k.as_str(), View::from_raw(v))),
            ),
            DocView::Owned(d) => Box::new(d.iter().map(|(k, v)| (k.as_str(), View::from_bson(v)))),
        }
    }
}

impl<'a> ArrView<'a> {
    /// The elements in order; a corrupt raw array ends at the damage.
    pub fn elements(self) -> Box<dyn Iterator<Item = View<'a>> + 'a> {
        match self {
            ArrView::Raw(a) => Box::new(a.into_iter().map_while(Result::ok).map(View::from_raw)),
            ArrView::Owned(a) => Box::new(a.iter().map(View::from_bson)),
        }
    }
}

fn compare_doc_views(a: DocView<'_>, b: DocView<'_>, strings: StrOrder<'_>) -> Ordering {
    let mut left = a.fields();
    let mut right = b.fields();
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let c = va
                    .rank()
                    .cmp(&vb.rank())
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare_views_with(va, vb, strings));
                if c != Ordering::Equal {
                    return c;
                }
            }
        }
    }
}

/// Arrays compare as objects keyed "0", "1", ...: the keys always agree, so element by element.
fn compare_arrays(a: ArrView<'_>, b: ArrView<'_>, strings: StrOrder<'_>) -> Ordering {
    let mut left = a.elements();
    let mut right = b.elements();
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let c = compare_views_with(x, y, strings);
                if c != Ordering::Equal {
                    return c;
                }
            }
        }
    }
}

/// The value bytes of a dbPointer (string length, namespace, NUL, ObjectId), read by encoding it
/// because the bson crate keeps the fields private. Rare enough that the cost does not matter.
fn db_pointer_bytes(p: DbPointerView<'_>) -> Vec<u8> {
    let owned = match p {
        DbPointerView::Raw(r) => Bson::try_from(bson::RawBson::from(r)).unwrap_or(Bson::Null),
        DbPointerView::Owned(b) => b.clone(),
    };
    let mut wrapper = Document::new();
    wrapper.insert("v", owned);
    // Layout of `{v: <dbPointer>}`: length (4), type (1), "v\0" (2), value..., final NUL (1).
    const VALUE_START: usize = 4 + 1 + 2;
    match bson::RawDocumentBuf::try_from(&wrapper) {
        Ok(raw) => {
            let bytes = raw.as_bytes();
            bytes
                .get(VALUE_START..bytes.len().saturating_sub(1))
                .unwrap_or(&[])
                .to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// mongod compares dbPointers by value size (so namespace length), then bytes.
fn compare_db_pointers(a: DbPointerView<'_>, b: DbPointerView<'_>) -> Ordering {
    let (x, y) = (db_pointer_bytes(a), db_pointer_bytes(b));
    x.len().cmp(&y.len()).then_with(|| x.cmp(&y))
}
