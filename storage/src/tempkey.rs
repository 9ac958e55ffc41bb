//! Stand-in index key extraction and encoding, used until the `keys` and `keycode` modules land
//! from the index branch. Keys are self-delimiting (no encoded key is a prefix of another), which
//! the index code relies on when it appends the 8-byte RecordId. Order is right for numbers,
//! strings, booleans, dates and ObjectIds; other types only get a stable order.

use bson::{Bson, Document, RawBsonRef, RawDocument};

use crate::error::{Result, StorageError};

fn rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 1,
        Bson::Null | Bson::Undefined => 2,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 3,
        Bson::String(_) | Bson::Symbol(_) => 4,
        Bson::Document(_) => 5,
        Bson::Array(_) => 6,
        Bson::Binary(_) => 7,
        Bson::ObjectId(_) => 8,
        Bson::Boolean(_) => 9,
        Bson::DateTime(_) => 10,
        Bson::Timestamp(_) => 11,
        Bson::RegularExpression(_) => 12,
        Bson::MaxKey => 14,
        _ => 13,
    }
}

fn push_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

fn ordered_f64(f: f64) -> [u8; 8] {
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let key = if f.is_nan() {
        0
    } else if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    key.to_be_bytes()
}

fn encode_value(out: &mut Vec<u8>, v: &Bson) {
    out.push(rank(v));
    match v {
        Bson::Int32(i) => out.extend_from_slice(&ordered_f64(f64::from(*i))),
        Bson::Int64(i) => out.extend_from_slice(&ordered_f64(*i as f64)),
        Bson::Double(f) => out.extend_from_slice(&ordered_f64(*f)),
        Bson::String(s) | Bson::Symbol(s) => push_escaped(out, s.as_bytes()),
        Bson::Boolean(b) => out.push(u8::from(*b)),
        Bson::DateTime(d) => {
            out.extend_from_slice(&((d.timestamp_millis() as u64) ^ (1 << 63)).to_be_bytes())
        }
        Bson::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        other => {
            let mut d = Document::new();
            d.insert("v", other.clone());
            push_escaped(out, &d.to_vec().unwrap_or_default());
        }
    }
}

/// Encodes one key (one value per key-pattern field).
pub fn encode(pattern: &Document, values: &[Bson]) -> Vec<u8> {
    let mut out = Vec::new();
    for ((_, dir), v) in pattern.iter().zip(values) {
        let start = out.len();
        encode_value(&mut out, v);
        if is_descending(dir) {
            for b in &mut out[start..] {
                *b = !*b;
            }
        }
    }
    out
}

fn is_descending(dir: &Bson) -> bool {
    match dir {
        Bson::Int32(i) => *i < 0,
        Bson::Int64(i) => *i < 0,
        Bson::Double(f) => *f < 0.0,
        _ => false,
    }
}

/// Values at a dotted path; arrays along the way fan out. `None` = missing.
fn values_at(doc: &RawDocument, path: &str, out: &mut Vec<Bson>, array_seen: &mut bool) {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let Ok(Some(v)) = doc.get(head) else { return };
    visit(v, rest, out, array_seen);
}

fn visit(v: RawBsonRef<'_>, rest: Option<&str>, out: &mut Vec<Bson>, array_seen: &mut bool) {
    match (v, rest) {
        (RawBsonRef::Array(arr), _) => {
            *array_seen = true;
            let mut any = false;
            for el in arr.into_iter().flatten() {
                any = true;
                match (el, rest) {
                    (RawBsonRef::Document(d), Some(r)) => values_at(d, r, out, array_seen),
                    (_, Some(_)) => {}
                    (el, None) => {
                        if let Ok(b) = Bson::try_from(el) {
                            out.push(b);
                        }
                    }
                }
            }
            if !any && rest.is_none() {
                out.push(Bson::Undefined);
            }
        }
        (RawBsonRef::Document(d), Some(r)) => values_at(d, r, out, array_seen),
        (_, Some(_)) => {}
        (v, None) => {
            if let Ok(b) = Bson::try_from(v) {
                out.push(b);
            }
        }
    }
}

/// The keys of `doc` under `pattern`: (values per key) and whether any field was an array.
/// `sparse`: no keys when every field is missing.
pub fn extract(
    pattern: &Document,
    doc: &RawDocument,
    sparse: bool,
) -> Result<(Vec<Vec<Bson>>, bool)> {
    let mut per_field = Vec::new();
    let mut multikey = false;
    let mut array_field: Option<String> = None;
    let mut all_missing = true;
    for (path, _) in pattern {
        let mut vals = Vec::new();
        let mut arr = false;
        values_at(doc, path, &mut vals, &mut arr);
        if arr {
            multikey = true;
            if let Some(prev) = &array_field {
                return Err(StorageError::ParallelArrays(prev.clone(), path.clone()));
            }
            array_field = Some(path.clone());
        }
        if vals.is_empty() {
            vals.push(Bson::Null);
        } else {
            all_missing = false;
        }
        vals.dedup();
        per_field.push(vals);
    }
    if sparse && all_missing {
        return Ok((Vec::new(), multikey));
    }
    let mut keys: Vec<Vec<Bson>> = vec![Vec::new()];
    for vals in per_field {
        let mut next = Vec::with_capacity(keys.len() * vals.len());
        for k in &keys {
            for v in &vals {
                let mut k2 = k.clone();
                k2.push(v.clone());
                next.push(k2);
            }
        }
        keys = next;
    }
    Ok((keys, multikey))
}
