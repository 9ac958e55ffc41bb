//! Turns a server's answer into a form that two correct servers agree on byte for byte, and renders
//! it as text for exact comparison and for the mismatch report.
//!
//! What is volatile and therefore removed or replaced: cluster times and other replication-only
//! fields, timings, host names, connection ids, cursor ids (only "open or closed" is kept),
//! ObjectIds the server generated (renumbered by first appearance, so equal ids stay equal), and
//! error messages (errors are compared by code and code name, never by wording). Everything else
//! is kept exactly: field order, numeric types, -0.0 versus 0.0, NaN.

use bson::{Bson, Document, oid::ObjectId};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// Fields dropped wherever they appear: they depend on the host, the clock or the deployment.
const VOLATILE_FIELDS: &[&str] = &[
    "$clusterTime",
    "operationTime",
    "$gleStats",
    "lastCommittedOpTime",
    "$configServerState",
    "$topologyTime",
    "electionId",
    "opTime",
    "localTime",
    "connectionId",
    "host",
    "hostname",
    "me",
    "millis",
    "executionTimeMillis",
    "executionTimeMillisEstimate",
    "durationMillis",
    "errmsg",
    "topologyVersion",
];

/// Placeholder for an open cursor: ids differ between servers, only "still open" matters.
const CURSOR_OPEN: &str = "<open cursor>";
/// Placeholder for a cursor id listed in a `killCursors` reply.
const CURSOR_ID: &str = "<cursor id>";

/// Rewrites answers of one case; ObjectIds not in `known` get numbered in order of appearance.
pub struct Normalizer {
    known: HashSet<ObjectId>,
    generated: HashMap<ObjectId, usize>,
}

impl Normalizer {
    pub fn new(known: impl IntoIterator<Item = ObjectId>) -> Normalizer {
        Normalizer {
            known: known.into_iter().collect(),
            generated: HashMap::new(),
        }
    }

    /// Normalise one successful reply document.
    pub fn reply(&mut self, reply: &Document) -> Document {
        let mut out = self.document(reply);
        if let Some(Bson::Document(cursor)) = out.get_mut("cursor")
            && let Some(id) = cursor.get_mut("id")
            && !matches!(id, Bson::Int64(0) | Bson::Int32(0))
        {
            *id = Bson::String(CURSOR_OPEN.into());
        }
        // killCursors lists cursor ids, which differ between servers; their count is what matters.
        for key in [
            "cursorsKilled",
            "cursorsNotFound",
            "cursorsAlive",
            "cursorsUnknown",
        ] {
            if let Some(Bson::Array(ids)) = out.get_mut(key) {
                for id in ids.iter_mut() {
                    *id = Bson::String(CURSOR_ID.into());
                }
            }
        }
        // Write errors are compared by position and code; their messages are free text.
        if let Some(Bson::Array(errors)) = out.get_mut("writeErrors") {
            for e in errors.iter_mut() {
                if let Bson::Document(d) = e {
                    let kept: Document = std::mem::take(d)
                        .into_iter()
                        .filter(|(k, _)| k == "index" || k == "code")
                        .collect();
                    *d = kept;
                }
            }
        }
        out
    }

    fn document(&mut self, d: &Document) -> Document {
        let mut out = Document::new();
        for (k, v) in d {
            if !VOLATILE_FIELDS.contains(&k.as_str()) {
                out.insert(k.clone(), self.value(v));
            }
        }
        out
    }

    fn value(&mut self, v: &Bson) -> Bson {
        match v {
            Bson::Document(d) => Bson::Document(self.document(d)),
            Bson::Array(a) => Bson::Array(a.iter().map(|x| self.value(x)).collect()),
            Bson::ObjectId(oid) if !self.known.contains(oid) => {
                let next = self.generated.len() + 1;
                let n = *self.generated.entry(*oid).or_insert(next);
                Bson::String(format!("<generated ObjectId #{n}>"))
            }
            other => other.clone(),
        }
    }
}

/// The normalised form of an error reply: compared by code (and its name), not by message.
pub fn error_doc(code: i32, code_name: &str) -> Document {
    let mut d = Document::new();
    d.insert("ok", 0.0);
    d.insert("code", code);
    d.insert("codeName", code_name);
    d
}

/// Sort the documents of `cursor.firstBatch` by their rendering, for answers whose order the
/// query language leaves unspecified (e.g. `$group` output).
pub fn sort_first_batch(reply: &mut Document) {
    if let Some(Bson::Document(cursor)) = reply.get_mut("cursor")
        && let Some(Bson::Array(batch)) = cursor.get_mut("firstBatch")
    {
        batch.sort_by_cached_key(render);
    }
}

/// Exact, type-revealing text of a value: `NumberInt(1)`, `NumberLong(1)`, `1.0`, `-0.0`, `NaN`.
/// Two values render equally exactly when a client could not tell them apart.
pub fn render(v: &Bson) -> String {
    let mut s = String::new();
    render_into(&mut s, v);
    s
}

/// Render a whole document (see [`render`]).
pub fn render_doc(d: &Document) -> String {
    let mut s = String::new();
    render_fields(&mut s, d);
    s
}

fn render_fields(s: &mut String, d: &Document) {
    s.push('{');
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{k:?}: ");
        render_into(s, v);
    }
    s.push('}');
}

fn render_into(s: &mut String, v: &Bson) {
    let _ = match v {
        Bson::Double(f) => write!(s, "{}", render_double(*f)),
        Bson::String(x) => write!(s, "{x:?}"),
        Bson::Document(d) => {
            render_fields(s, d);
            Ok(())
        }
        Bson::Array(a) => {
            s.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render_into(s, x);
            }
            s.push(']');
            Ok(())
        }
        Bson::Boolean(b) => write!(s, "{b}"),
        Bson::Null => write!(s, "null"),
        Bson::Undefined => write!(s, "undefined"),
        Bson::MinKey => write!(s, "MinKey"),
        Bson::MaxKey => write!(s, "MaxKey"),
        Bson::Int32(i) => write!(s, "NumberInt({i})"),
        Bson::Int64(i) => write!(s, "NumberLong({i})"),
        Bson::Decimal128(d) => write!(s, "NumberDecimal({:?})", d.to_string()),
        Bson::ObjectId(o) => write!(s, "ObjectId({:?})", o.to_hex()),
        Bson::DateTime(t) => write!(s, "Date({})", t.timestamp_millis()),
        Bson::Timestamp(t) => write!(s, "Timestamp({}, {})", t.time, t.increment),
        Bson::Binary(b) => write!(
            s,
            "BinData({}, {:02x?})",
            u8::from(b.subtype),
            b.bytes.as_slice()
        ),
        Bson::RegularExpression(r) => write!(s, "/{}/{}", r.pattern, r.options),
        Bson::JavaScriptCode(c) => write!(s, "Code({c:?})"),
        Bson::JavaScriptCodeWithScope(c) => {
            let _ = write!(s, "Code({:?}, ", c.code);
            render_fields(s, &c.scope);
            s.push(')');
            Ok(())
        }
        Bson::Symbol(x) => write!(s, "Symbol({x:?})"),
        Bson::DbPointer(p) => write!(s, "DBPointer({p:?})"),
    };
}

/// Doubles keep their sign of zero and every NaN looks alike (payload bits are not observable
/// through the query language, and servers may canonicalise them).
fn render_double(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f == 0.0 && f.is_sign_negative() {
        "-0.0".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        format!("{f:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn render_tells_numeric_types_and_zero_signs_apart() {
        assert_eq!(render(&Bson::Int32(1)), "NumberInt(1)");
        assert_eq!(render(&Bson::Int64(1)), "NumberLong(1)");
        assert_eq!(render(&Bson::Double(1.0)), "1.0");
        assert_eq!(render(&Bson::Double(-0.0)), "-0.0");
        assert_ne!(render(&Bson::Double(0.0)), render(&Bson::Double(-0.0)));
        assert_eq!(
            render(&Bson::Double(f64::NAN)),
            render(&Bson::Double(-f64::NAN))
        );
        assert_eq!(
            render_doc(&doc! {"b": 1, "a": 2}),
            "{\"b\": NumberInt(1), \"a\": NumberInt(2)}"
        );
        assert_ne!(
            render_doc(&doc! {"a": 1, "b": 2}),
            render_doc(&doc! {"b": 2, "a": 1})
        );
    }

    #[test]
    fn generated_object_ids_are_numbered_and_known_ones_kept() {
        let known = ObjectId::from_bytes([1; 12]);
        let a = ObjectId::from_bytes([2; 12]);
        let b = ObjectId::from_bytes([3; 12]);
        let mut n = Normalizer::new([known]);
        let out = n.reply(&doc! {"x": [a, b, a, known]});
        assert_eq!(
            out,
            doc! {"x": ["<generated ObjectId #1>", "<generated ObjectId #2>",
            "<generated ObjectId #1>", known]}
        );
    }

    #[test]
    fn volatile_fields_cursor_ids_and_messages_are_removed() {
        let mut n = Normalizer::new([]);
        let reply = doc! {
            "cursor": {"firstBatch": [], "id": 1234_i64, "ns": "d.c"},
            "ok": 1.0, "operationTime": 5, "$clusterTime": {"t": 1},
            "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup", "keyValue": {"a": 1}}],
        };
        let out = n.reply(&reply);
        assert_eq!(
            out,
            doc! {
                "cursor": {"firstBatch": [], "id": CURSOR_OPEN, "ns": "d.c"},
                "ok": 1.0,
                "writeErrors": [{"index": 0, "code": 11000}],
            }
        );
        let killed = n.reply(&doc! {"cursorsKilled": [5_i64], "cursorsNotFound": [], "ok": 1.0});
        assert_eq!(
            killed,
            doc! {"cursorsKilled": [CURSOR_ID], "cursorsNotFound": [], "ok": 1.0}
        );
        let closed = n.reply(&doc! {"cursor": {"id": 0_i64}});
        assert_eq!(closed, doc! {"cursor": {"id": 0_i64}});
    }

    #[test]
    fn unordered_batches_sort_stably() {
        let mut a = doc! {"cursor": {"firstBatch": [{"_id": 2}, {"_id": 1}]}};
        let mut b = doc! {"cursor": {"firstBatch": [{"_id": 1}, {"_id": 2}]}};
        sort_first_batch(&mut a);
        sort_first_batch(&mut b);
        assert_eq!(render_doc(&a), render_doc(&b));
    }
}
