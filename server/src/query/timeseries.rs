//! Time-series collections, the pure part: the `timeseries` options of `create` (checked as
//! mongod 7.0 checks them, defaults filled in as it fills them), the bucket document layout
//! mongod uses (`{_id, control: {version: 1, min, max}, meta, data: {field: {"0": v, ...}}}`),
//! packing measurements into buckets and unpacking them again, and the bucket-level predicate
//! a measurement filter on the time and meta fields implies (so a time-range read skips
//! buckets). Storage and commands live in `commands/timeseries.rs`.
//!
//! Routing: a measurement goes to the bucket of its meta value and of the `bucketMaxSpanSeconds`
//! window its time falls in. The bucket's `_id` is derived from both (4 bytes of window start
//! seconds, as mongod's OID timestamp, 6 bytes of a hash of the meta value, 2 bytes of sequence
//! for when a bucket fills up), so finding the open bucket is one `_id` look-up.

use crate::error::{CommandResult, ErrorCode, err};
use bson::oid::ObjectId;
use bson::{Bson, DateTime, Document, doc};
use std::cmp::Ordering;
use storage::order::compare_bson;

/// Most measurements one bucket holds (mongod's `timeseriesBucketMaxCount`).
pub const BUCKET_COUNT_MAX: usize = 1000;
/// Most bytes of measurements one bucket holds (mongod's `timeseriesBucketMaxSize`).
pub const BUCKET_BYTES_MAX: usize = 125 * 1024;
/// Largest `bucketMaxSpanSeconds` / `bucketRoundingSeconds` (one year).
const BUCKET_SECONDS_MAX: i64 = 31_536_000;
/// The name of the stage that unpacks buckets into measurements.
pub const UNPACK_STAGE: &str = "$_internalUnpackBucket";
/// Prefix of the namespace that stores a time-series collection's buckets.
pub const BUCKETS_PREFIX: &str = "system.buckets.";

/// `granularity`, with the rounding and span mongod derives from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Seconds,
    Minutes,
    Hours,
}

impl Granularity {
    fn parse(v: &Bson) -> CommandResult<Granularity> {
        match v {
            Bson::String(s) => match s.as_str() {
                "seconds" => Ok(Granularity::Seconds),
                "minutes" => Ok(Granularity::Minutes),
                "hours" => Ok(Granularity::Hours),
                _ => Err(err(
                    ErrorCode::BadValue,
                    format!(
                        "Enumeration value '{s}' for field 'create.timeseries.granularity' is not a valid value."
                    ),
                )),
            },
            v => Err(wrong_type("granularity", v, "string")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Granularity::Seconds => "seconds",
            Granularity::Minutes => "minutes",
            Granularity::Hours => "hours",
        }
    }

    /// `(bucketRoundingSeconds, bucketMaxSpanSeconds)` of this granularity.
    fn seconds(self) -> (i64, i64) {
        match self {
            Granularity::Seconds => (60, 3600),
            Granularity::Minutes => (3600, 86_400),
            Granularity::Hours => (86_400, 2_592_000),
        }
    }
}

/// A time-series collection's options, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `None` when custom bucket seconds were given instead.
    pub granularity: Option<Granularity>,
    pub rounding_seconds: i64,
    pub span_seconds: i64,
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> crate::error::CommandError {
    err(
        ErrorCode::TypeMismatch,
        format!(
            "BSON field 'create.timeseries.{field}' is the wrong type '{}', expected type '{expected}'",
            crate::query::pipeline::values::type_name(v)
        ),
    )
}

fn field_name(spec: &Document, field: &str) -> CommandResult<Option<String>> {
    match spec.get(field) {
        None => Ok(None),
        Some(Bson::String(s)) if s.is_empty() || s.starts_with('$') || s.contains('.') => Err(err(
            ErrorCode::BadValue,
            format!("'{field}' must be a non-empty top-level field name without '$': '{s}'"),
        )),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(wrong_type(field, v, "string")),
    }
}

fn bucket_seconds(spec: &Document, field: &str) -> CommandResult<Option<i64>> {
    let Some(v) = spec.get(field) else {
        return Ok(None);
    };
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 => *d as i64,
        v => return Err(wrong_type(field, v, "int")),
    };
    if !(1..=BUCKET_SECONDS_MAX).contains(&n) {
        return Err(err(
            ErrorCode::BadValue,
            format!(
                "BSON field 'create.timeseries.{field}' value must be >= 1 and <= {BUCKET_SECONDS_MAX}, actual value '{n}'"
            ),
        ));
    }
    Ok(Some(n))
}

impl Options {
    /// The `timeseries` option of `create`, checked as mongod 7.0 checks it.
    pub fn parse(spec: &Document) -> CommandResult<Options> {
        const FIELDS: &[&str] = &[
            "timeField",
            "metaField",
            "granularity",
            "bucketMaxSpanSeconds",
            "bucketRoundingSeconds",
        ];
        if let Some(k) = spec.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(err(
                ErrorCode::Location40415,
                format!("BSON field 'create.timeseries.{k}' is an unknown field."),
            ));
        }
        let time_field = field_name(spec, "timeField")?.ok_or_else(|| {
            err(
                ErrorCode::Location40414,
                "BSON field 'create.timeseries.timeField' is missing but a required field",
            )
        })?;
        let meta_field = field_name(spec, "metaField")?;
        match meta_field.as_deref() {
            Some("_id") => {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    "The 'metaField' field name cannot be '_id'",
                ));
            }
            Some(m) if m == time_field => {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    "The 'metaField' field name cannot be the same as the 'timeField' field name",
                ));
            }
            _ => {}
        }
        let granularity = spec
            .get("granularity")
            .map(Granularity::parse)
            .transpose()?;
        let span = bucket_seconds(spec, "bucketMaxSpanSeconds")?;
        let rounding = bucket_seconds(spec, "bucketRoundingSeconds")?;
        let (granularity, rounding_seconds, span_seconds) = match (granularity, rounding, span) {
            (g, None, None) => {
                let g = g.unwrap_or(Granularity::Seconds);
                let (r, s) = g.seconds();
                (Some(g), r, s)
            }
            // Given with a granularity, the seconds must be that granularity's own.
            (Some(g), Some(r), Some(s)) if g.seconds() != (r, s) => {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    format!(
                        "Time-series 'bucketRoundingSeconds' and 'bucketMaxSpanSeconds' must be those of granularity '{}' when all three are given",
                        g.name()
                    ),
                ));
            }
            (Some(g), Some(r), Some(s)) => (Some(g), r, s),
            (None, Some(r), Some(s)) if r != s => {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    "Time-series 'bucketRoundingSeconds' and 'bucketMaxSpanSeconds' must be equal",
                ));
            }
            (None, Some(r), Some(s)) => (None, r, s),
            _ => {
                return Err(err(
                    ErrorCode::InvalidOptions,
                    "Time-series 'bucketRoundingSeconds' and 'bucketMaxSpanSeconds' must both be given, or neither",
                ));
            }
        };
        Ok(Options {
            time_field,
            meta_field,
            granularity,
            rounding_seconds,
            span_seconds,
        })
    }

    /// The options as `listCollections` shows them (mongod's field order and defaults).
    pub fn to_document(&self) -> Document {
        let mut d = doc! { "timeField": &self.time_field };
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m);
        }
        match self.granularity {
            Some(g) => {
                d.insert("granularity", g.name());
            }
            None => {
                d.insert("bucketRoundingSeconds", self.rounding_seconds as i32);
            }
        }
        d.insert("bucketMaxSpanSeconds", self.span_seconds as i32);
        d
    }

    /// The options back from `to_document` (as stored in the buckets collection's options).
    pub fn from_document(d: &Document) -> Option<Options> {
        let mut spec = d.clone();
        // Stored with a granularity, the span is that granularity's and implied.
        if spec.contains_key("granularity") {
            spec.remove("bucketMaxSpanSeconds");
        }
        Options::parse(&spec).ok()
    }

    /// The unpacking stage a read of the collection starts with.
    pub fn unpack_stage(&self) -> Document {
        let mut spec = doc! { "timeField": &self.time_field };
        if let Some(m) = &self.meta_field {
            spec.insert("metaField", m);
        }
        spec.insert("bucketMaxSpanSeconds", self.span_seconds as i32);
        doc! { UNPACK_STAGE: spec }
    }

    /// The measurement's time; mongod's error when it has none or it is not a date.
    pub fn measurement_time(&self, m: &Document) -> CommandResult<DateTime> {
        match m.get(&self.time_field) {
            Some(Bson::DateTime(t)) => Ok(*t),
            _ => Err(err(
                ErrorCode::BadValue,
                format!(
                    "'{}' must be present and contain a valid BSON UTC datetime value",
                    self.time_field
                ),
            )),
        }
    }

    /// The measurement's meta value (`None`: no metaField, or the measurement lacks it).
    pub fn measurement_meta<'m>(&self, m: &'m Document) -> Option<&'m Bson> {
        self.meta_field.as_ref().and_then(|f| m.get(f))
    }

    /// The `_id` of bucket number `seq` for `meta` and the span window holding `time`.
    pub fn bucket_id(&self, meta: Option<&Bson>, time: DateTime, seq: u16) -> ObjectId {
        let window = time
            .timestamp_millis()
            .div_euclid(1000)
            .div_euclid(self.span_seconds)
            * self.span_seconds;
        let mut bytes = [0u8; 12];
        bytes[..4].copy_from_slice(&(window as u32).to_be_bytes());
        bytes[4..10].copy_from_slice(&meta_hash(meta).to_be_bytes()[2..]);
        bytes[10..].copy_from_slice(&seq.to_be_bytes());
        ObjectId::from_bytes(bytes)
    }

    /// `t` rounded down to `bucketRoundingSeconds` (a bucket's `control.min` time).
    fn rounded(&self, t: DateTime) -> DateTime {
        let unit = self.rounding_seconds * 1000;
        DateTime::from_millis(t.timestamp_millis().div_euclid(unit) * unit)
    }
}

/// FNV-1a over the meta value's BSON bytes (stable across restarts, unlike std's hasher).
fn meta_hash(meta: Option<&Bson>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = meta
        .and_then(|m| bson::RawDocumentBuf::try_from(&doc! { "m": m.clone() }).ok())
        .map(|r| r.into_bytes())
        .unwrap_or_default();
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// One bucket being filled: its columns in first-seen field order.
#[derive(Debug, Clone)]
pub struct Bucket {
    pub id: ObjectId,
    meta: Option<Bson>,
    columns: Vec<(String, Vec<(usize, Bson)>)>,
    min: Document,
    max: Document,
    count: usize,
    bytes: usize,
}

impl Bucket {
    pub fn new(id: ObjectId, meta: Option<Bson>) -> Bucket {
        Bucket {
            id,
            meta,
            columns: Vec::new(),
            min: Document::new(),
            max: Document::new(),
            count: 0,
            bytes: 0,
        }
    }

    /// A stored bucket document read back for appending; `None` when it is not one.
    pub fn from_document(d: &Document) -> Option<Bucket> {
        let id = d.get_object_id("_id").ok()?;
        let control = d.get_document("control").ok()?;
        let mut columns = Vec::new();
        let mut count = 0;
        for (field, col) in d.get_document("data").ok()? {
            let Bson::Document(col) = col else {
                return None;
            };
            let mut values = Vec::with_capacity(col.len());
            for (k, v) in col {
                let i: usize = k.parse().ok()?;
                count = count.max(i + 1);
                values.push((i, v.clone()));
            }
            columns.push((field.clone(), values));
        }
        Some(Bucket {
            id,
            meta: d.get("meta").cloned(),
            columns,
            min: control.get_document("min").ok()?.clone(),
            max: control.get_document("max").ok()?.clone(),
            count,
            bytes: d.get_document("data").ok().map_or(0, doc_bytes),
        })
    }

    pub fn meta(&self) -> Option<&Bson> {
        self.meta.as_ref()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// No room for another measurement.
    pub fn is_full(&self) -> bool {
        self.count >= BUCKET_COUNT_MAX || self.bytes >= BUCKET_BYTES_MAX
    }

    /// Appends one measurement (its time already checked to be a date).
    pub fn push(&mut self, opts: &Options, m: &Document) {
        let i = self.count;
        for (field, value) in m {
            if Some(field) == opts.meta_field.as_ref() {
                continue;
            }
            let shown = if *field == opts.time_field {
                match value {
                    Bson::DateTime(t) => Bson::DateTime(opts.rounded(*t)),
                    v => v.clone(),
                }
            } else {
                value.clone()
            };
            widen(&mut self.min, field, &shown, Ordering::Less);
            widen(&mut self.max, field, value, Ordering::Greater);
            match self.columns.iter_mut().find(|(f, _)| f == field) {
                Some((_, col)) => col.push((i, value.clone())),
                None => self.columns.push((field.clone(), vec![(i, value.clone())])),
            }
        }
        self.bytes += doc_bytes(m);
        self.count += 1;
    }

    /// The bucket as stored.
    pub fn to_document(&self) -> Document {
        let mut data = Document::new();
        for (field, col) in &self.columns {
            let mut c = Document::new();
            for (i, v) in col {
                c.insert(i.to_string(), v.clone());
            }
            data.insert(field.clone(), c);
        }
        let mut d = doc! {
            "_id": self.id,
            "control": { "version": 1, "min": self.min.clone(), "max": self.max.clone() },
        };
        if let Some(m) = &self.meta {
            d.insert("meta", m.clone());
        }
        d.insert("data", data);
        d
    }
}

fn doc_bytes(d: &Document) -> usize {
    bson::RawDocumentBuf::try_from(d).map_or(0, |r| r.as_bytes().len())
}

/// Keeps in `bound.field` whichever of it and `v` compares `keep` (min or max).
fn widen(bound: &mut Document, field: &str, v: &Bson, keep: Ordering) {
    match bound.get(field) {
        Some(old) if compare_bson(v, old) != keep => {}
        _ => {
            bound.insert(field, v.clone());
        }
    }
}

/// The measurements of a stored bucket, each with the time field first, then the meta field,
/// then the other fields in column order (mongod's order).
pub fn unpack(time_field: &str, meta_field: Option<&str>, bucket: &Document) -> Vec<Document> {
    let Ok(data) = bucket.get_document("data") else {
        return Vec::new();
    };
    let Some(Bson::Document(times)) = data.get(time_field) else {
        return Vec::new();
    };
    let meta = meta_field.and_then(|f| bucket.get("meta").map(|m| (f, m)));
    let others: Vec<(&String, &Document)> = data
        .iter()
        .filter(|(f, _)| *f != time_field)
        .filter_map(|(f, c)| c.as_document().map(|c| (f, c)))
        .collect();
    let mut out = Vec::with_capacity(times.len());
    for (i, t) in times {
        let mut m = doc! { time_field: t.clone() };
        if let Some((f, v)) = meta {
            m.insert(f, v.clone());
        }
        for (f, col) in &others {
            if let Some(v) = col.get(i) {
                m.insert((*f).clone(), v.clone());
            }
        }
        out.push(m);
    }
    out
}

/// A predicate on buckets every bucket holding a measurement `filter` accepts also meets:
/// time comparisons become comparisons on `control.min` / `control.max`, meta predicates
/// move to `meta`. `None` when the filter says nothing about either.
pub fn bucket_filter(opts: &Options, filter: &Document) -> Option<Document> {
    let mut parts = Vec::new();
    collect_bucket_predicates(opts, filter, &mut parts);
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(doc! { "$and": parts.into_iter().map(Bson::Document).collect::<Vec<_>>() }),
    }
}

/// In a read of a time-series collection (`stages` starting with the unpacking stage), puts
/// the bucket-level form of a `$match` right after the unpacking in front of it, so the scan
/// of the buckets (and its explain) filters on `control.min` / `control.max` and `meta`.
pub fn push_down(stages: &mut Vec<Document>) {
    let Some(Ok(spec)) = stages.first().map(|s| s.get_document(UNPACK_STAGE)) else {
        return;
    };
    let Some(Ok(filter)) = stages.get(1).map(|s| s.get_document("$match")) else {
        return;
    };
    let mut names = doc! {};
    for k in ["timeField", "metaField"] {
        if let Ok(v) = spec.get_str(k) {
            names.insert(k, v);
        }
    }
    let Ok(opts) = Options::parse(&names) else {
        return;
    };
    if let Some(pred) = bucket_filter(&opts, filter) {
        stages.insert(0, doc! { "$match": pred });
    }
}

fn collect_bucket_predicates(opts: &Options, filter: &Document, out: &mut Vec<Document>) {
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                for item in items.iter().filter_map(Bson::as_document) {
                    collect_bucket_predicates(opts, item, out);
                }
            }
        } else if *k == opts.time_field {
            time_predicates(&opts.time_field, v, out);
        } else if let Some(m) = &opts.meta_field {
            let rest = if k == m {
                Some("")
            } else {
                k.strip_prefix(m.as_str()).filter(|r| r.starts_with('.'))
            };
            if let Some(rest) = rest {
                out.push(doc! { format!("meta{rest}"): v.clone() });
            }
        }
    }
}

fn time_predicates(time: &str, v: &Bson, out: &mut Vec<Document>) {
    let min = format!("control.min.{time}");
    let max = format!("control.max.{time}");
    let ops = match v {
        Bson::DateTime(_) => vec![("$eq", v)],
        Bson::Document(d) if d.keys().all(|k| k.starts_with('$')) => {
            d.iter().map(|(k, v)| (k.as_str(), v)).collect()
        }
        _ => return,
    };
    for (op, value) in ops {
        if !matches!(value, Bson::DateTime(_)) {
            continue;
        }
        match op {
            "$gt" | "$gte" => out.push(doc! { &max: { op: value.clone() } }),
            "$lt" | "$lte" => out.push(doc! { &min: { op: value.clone() } }),
            "$eq" => {
                out.push(doc! { &min: { "$lte": value.clone() } });
                out.push(doc! { &max: { "$gte": value.clone() } });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(spec: Document) -> CommandResult<Options> {
        Options::parse(&spec)
    }

    fn code(r: CommandResult<Options>) -> i32 {
        r.unwrap_err().code.code()
    }

    #[test]
    fn options_get_mongod_defaults_and_errors() {
        let o = opts(doc! { "timeField": "t", "metaField": "m" }).unwrap();
        assert_eq!(
            o.to_document(),
            doc! { "timeField": "t", "metaField": "m", "granularity": "seconds", "bucketMaxSpanSeconds": 3600 }
        );
        let o = opts(doc! { "timeField": "t", "granularity": "hours" }).unwrap();
        assert_eq!((o.rounding_seconds, o.span_seconds), (86_400, 2_592_000));
        let o = opts(
            doc! { "timeField": "t", "bucketMaxSpanSeconds": 300, "bucketRoundingSeconds": 300 },
        )
        .unwrap();
        assert_eq!(
            o.to_document(),
            doc! { "timeField": "t", "bucketRoundingSeconds": 300, "bucketMaxSpanSeconds": 300 }
        );
        assert_eq!(code(opts(doc! { "metaField": "m" })), 40414);
        assert_eq!(code(opts(doc! { "timeField": "t", "x": 1 })), 40415);
        assert_eq!(code(opts(doc! { "timeField": 1 })), 14);
        assert_eq!(code(opts(doc! { "timeField": "t", "metaField": "t" })), 72);
        assert_eq!(
            code(opts(doc! { "timeField": "t", "metaField": "_id" })),
            72
        );
        assert_eq!(
            code(opts(doc! { "timeField": "t", "granularity": "days" })),
            2
        );
        assert_eq!(
            code(opts(
                doc! { "timeField": "t", "bucketMaxSpanSeconds": 3600 }
            )),
            72
        );
        assert_eq!(
            code(opts(
                doc! { "timeField": "t", "bucketMaxSpanSeconds": 50, "bucketRoundingSeconds": 100 }
            )),
            72
        );
        assert_eq!(
            code(opts(
                doc! { "timeField": "t", "bucketMaxSpanSeconds": -1, "bucketRoundingSeconds": -1 }
            )),
            2
        );
        assert_eq!(
            code(opts(doc! { "timeField": "t", "granularity": "minutes",
            "bucketMaxSpanSeconds": 4000, "bucketRoundingSeconds": 4000 })),
            72
        );
        let o = opts(doc! { "timeField": "t", "granularity": "minutes",
        "bucketMaxSpanSeconds": 86400, "bucketRoundingSeconds": 3600 })
        .unwrap();
        assert_eq!(o.granularity, Some(Granularity::Minutes));
    }

    #[test]
    fn stored_options_read_back() {
        for spec in [
            doc! { "timeField": "t", "metaField": "m" },
            doc! { "timeField": "t", "granularity": "minutes" },
            doc! { "timeField": "t", "bucketMaxSpanSeconds": 30, "bucketRoundingSeconds": 30 },
        ] {
            let o = opts(spec).unwrap();
            assert_eq!(Options::from_document(&o.to_document()), Some(o));
        }
    }

    #[test]
    fn routing_keys_on_meta_and_span_window() {
        let o = opts(doc! { "timeField": "t", "metaField": "m" }).unwrap();
        let at = |s: i64| DateTime::from_millis(s * 1000);
        let a = Bson::from("a");
        let b = Bson::from("b");
        // Same meta, same hour: one bucket; another hour or another meta: another bucket.
        assert_eq!(
            o.bucket_id(Some(&a), at(7200), 0),
            o.bucket_id(Some(&a), at(7200 + 3599), 0)
        );
        assert_ne!(
            o.bucket_id(Some(&a), at(7200), 0),
            o.bucket_id(Some(&a), at(7200 + 3600), 0)
        );
        assert_ne!(
            o.bucket_id(Some(&a), at(7200), 0),
            o.bucket_id(Some(&b), at(7200), 0)
        );
        assert_ne!(
            o.bucket_id(Some(&a), at(7200), 0),
            o.bucket_id(Some(&a), at(7200), 1)
        );
        assert_ne!(
            o.bucket_id(None, at(7200), 0),
            o.bucket_id(Some(&a), at(7200), 0)
        );
        // The OID timestamp is the window start, as mongod's is the bucket's start.
        assert_eq!(
            o.bucket_id(None, at(7300), 0)
                .timestamp()
                .timestamp_millis(),
            7_200_000
        );
        let e = o.measurement_time(&doc! { "t": 1 }).unwrap_err();
        assert_eq!(e.code.code(), 2);
        assert!(o.measurement_time(&doc! { "m": 1 }).is_err());
    }

    #[test]
    fn buckets_pack_and_unpack_measurements() {
        let o = opts(doc! { "timeField": "t", "metaField": "m" }).unwrap();
        let ms = vec![
            doc! { "t": DateTime::from_millis(65_000), "m": "s1", "_id": 1, "v": 3 },
            doc! { "_id": 2, "t": DateTime::from_millis(61_000), "m": "s1" },
            doc! { "t": DateTime::from_millis(90_000), "m": "s1", "_id": 3, "v": 1, "w": "x" },
        ];
        let mut b = Bucket::new(
            o.bucket_id(
                Some(&Bson::from("s1")),
                ms[0].get_datetime("t").copied().unwrap(),
                0,
            ),
            Some(Bson::from("s1")),
        );
        b.push(&o, &ms[0]);
        // Stored and read back between appends, as inserts do.
        let mut b = Bucket::from_document(&b.to_document()).unwrap();
        b.push(&o, &ms[1]);
        b.push(&o, &ms[2]);
        assert_eq!(b.len(), 3);
        let d = b.to_document();
        let control = d.get_document("control").unwrap();
        // control.min's time is rounded down to bucketRoundingSeconds (60 s).
        assert_eq!(
            control
                .get_document("min")
                .unwrap()
                .get_datetime("t")
                .unwrap()
                .timestamp_millis(),
            60_000
        );
        assert_eq!(
            control
                .get_document("max")
                .unwrap()
                .get_datetime("t")
                .unwrap()
                .timestamp_millis(),
            90_000
        );
        assert_eq!(
            control.get_document("min").unwrap().get_i32("v").unwrap(),
            1
        );
        assert_eq!(d.get_str("meta").unwrap(), "s1");
        assert_eq!(
            d.get_document("data").unwrap().get_document("w").unwrap(),
            &doc! { "2": "x" }
        );
        let back = unpack("t", Some("m"), &d);
        let sorted = |d: &Document| {
            let mut v: Vec<(String, Bson)> = d.clone().into_iter().collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(back.len(), 3);
        for (got, want) in back.iter().zip(&ms) {
            assert_eq!(sorted(got), sorted(want));
            assert_eq!(got.keys().next().unwrap(), "t");
        }
    }

    #[test]
    fn time_and_meta_filters_become_bucket_predicates() {
        let o = opts(doc! { "timeField": "t", "metaField": "m" }).unwrap();
        let t = DateTime::from_millis(1000);
        assert_eq!(
            bucket_filter(&o, &doc! { "t": { "$gte": t, "$lt": t }, "v": 1 }),
            Some(doc! { "$and": [
                { "control.max.t": { "$gte": t } },
                { "control.min.t": { "$lt": t } },
            ] })
        );
        assert_eq!(
            bucket_filter(&o, &doc! { "m.site": "a" }),
            Some(doc! { "meta.site": "a" })
        );
        assert_eq!(
            bucket_filter(&o, &doc! { "mx": 1, "v": { "$gt": 1 } }),
            None
        );
        assert_eq!(
            bucket_filter(&o, &doc! { "$and": [{ "t": t }] }),
            Some(doc! { "$and": [
                { "control.min.t": { "$lte": t } },
                { "control.max.t": { "$gte": t } },
            ] })
        );
    }
}
