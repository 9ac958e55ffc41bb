//! A fast walk over the top-level elements of a stored raw document: each element's key bytes
//! and its whole byte range (type, key, value), found from the type byte and the length fields
//! alone. Nothing is decoded or UTF-8 checked, which is what makes it several times faster than
//! the `bson` crate's iterator for stages that copy or skip most elements (`$project` of a few
//! fields copies the elements it keeps byte for byte).
//!
//! It relies on what every stored document already passed (`wire::bson_check` on the way in)
//! only for speed, never for safety: every length is checked against its container, and any
//! inconsistency ends the walk with `None`, after which callers take the `bson` crate's path,
//! which reports the error as before.

use bson::RawDocument;

/// One top-level element: its key (without the terminator) and the bytes from its type byte to
/// the end of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element<'a> {
    pub key: &'a [u8],
    pub bytes: &'a [u8],
}

impl<'a> Element<'a> {
    /// The BSON type byte.
    pub fn kind(&self) -> u8 {
        self.bytes[0]
    }

    /// The value's bytes (after the type byte and the key's terminator).
    pub fn value(&self) -> &'a [u8] {
        &self.bytes[self.key.len() + 2..]
    }

    /// The value when it is a double or an int32 (both exact as `f64`).
    pub fn as_f64(&self) -> Option<f64> {
        let v = self.value();
        match self.kind() {
            0x01 => Some(f64::from_le_bytes(v.get(..8)?.try_into().ok()?)),
            0x10 => Some(f64::from(i32::from_le_bytes(v.get(..4)?.try_into().ok()?))),
            _ => None,
        }
    }

    /// The value when it is an embedded document.
    pub fn as_document(&self) -> Option<&'a RawDocument> {
        (self.kind() == 0x03)
            .then(|| RawDocument::from_bytes(self.value()).ok())
            .flatten()
    }
}

/// The first element of `doc` named `key` (`None`: there is none, or the bytes do not walk).
pub fn find<'a>(doc: &'a RawDocument, key: &str) -> Option<Element<'a>> {
    let mut found = None;
    walk(doc, |e| {
        if e.key == key.as_bytes() {
            found = Some(e);
            return false;
        }
        true
    });
    found
}

/// The elements of `doc` in order, or `None` when its bytes are not well formed.
pub fn for_each<'a>(doc: &'a RawDocument, mut each: impl FnMut(Element<'a>)) -> Option<()> {
    walk(doc, |e| {
        each(e);
        true
    })
}

/// The elements of `doc` in order while `each` returns true; `None` when the bytes walked are
/// not well formed.
#[inline]
fn walk<'a>(doc: &'a RawDocument, mut each: impl FnMut(Element<'a>) -> bool) -> Option<()> {
    let bytes = doc.as_bytes();
    // The length prefix and the trailing zero were checked when the RawDocument was made.
    let end = bytes.len().checked_sub(1)?;
    let mut pos = 4;
    while pos < end {
        let start = pos;
        let kind = *bytes.get(pos)?;
        let key_start = pos + 1;
        let key_len = bytes.get(key_start..end)?.iter().position(|&b| b == 0)?;
        let value_at = key_start + key_len + 1;
        let value_len = value_len(kind, bytes.get(value_at..end)?)?;
        pos = value_at.checked_add(value_len)?;
        if pos > end {
            return None;
        }
        let go_on = each(Element {
            key: &bytes[key_start..key_start + key_len],
            bytes: &bytes[start..pos],
        });
        if !go_on {
            return Some(());
        }
    }
    (pos == end).then_some(())
}

fn i32_at(b: &[u8], at: usize) -> Option<usize> {
    let four: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    usize::try_from(i32::from_le_bytes(four)).ok()
}

/// Bytes of a value of BSON type `kind` at the start of `b` (the rest of its container).
#[inline]
fn value_len(kind: u8, b: &[u8]) -> Option<usize> {
    let cstr_len = |at: usize| Some(b.get(at..)?.iter().position(|&x| x == 0)? + 1);
    let len = match kind {
        0x06 | 0x0A | 0x7F | 0xFF => 0,
        0x08 => 1,
        0x10 => 4,
        0x01 | 0x09 | 0x11 | 0x12 => 8,
        0x07 => 12,
        0x13 => 16,
        // string, JavaScript, symbol: length (counting its zero), bytes, zero.
        0x02 | 0x0D | 0x0E => 4 + i32_at(b, 0).filter(|&n| n >= 1)?,
        // document, array, JavaScript with scope: the length counts itself.
        0x03 | 0x04 | 0x0F => i32_at(b, 0).filter(|&n| n >= 5)?,
        0x05 => 5 + i32_at(b, 0)?,
        0x0B => {
            let pattern = cstr_len(0)?;
            pattern + cstr_len(pattern)?
        }
        0x0C => 4 + i32_at(b, 0).filter(|&n| n >= 1)? + 12,
        _ => return None,
    };
    (len <= b.len()).then_some(len)
}

#[cfg(test)]
mod tests {
    //! Proves the walk finds exactly the elements (keys and byte ranges) the `bson` crate's
    //! iterator finds, for every BSON type, and gives `None`, never a panic, for every
    //! truncation and every single-byte corruption of a document.
    //! How: one document holding each type, compared element by element; then all damaged copies.
    use super::*;
    use bson::{Binary, Bson, DateTime, Decimal128, JavaScriptCodeWithScope, Regex, Timestamp};
    use bson::{RawDocumentBuf, doc, oid::ObjectId, spec::BinarySubtype};

    fn every_type() -> RawDocumentBuf {
        let d = doc! {
            "_id": ObjectId::from_bytes([7; 12]), "d": 1.5, "s": "ü-text", "o": {"a": [1, {"b": 2}]},
            "arr": [1, "x"], "bin": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "u": Bson::Undefined, "t": true, "date": DateTime::from_millis(5), "n": Bson::Null,
            "re": Regex { pattern: "a.b".try_into().unwrap(), options: "i".try_into().unwrap() },
            "js": Bson::JavaScriptCode("f()".into()),
            "sym": Bson::Symbol("sy".into()),
            "jsw": JavaScriptCodeWithScope { code: "g()".into(), scope: doc! {"v": 1} },
            "i": 3, "ts": Timestamp { time: 1, increment: 2 }, "l": 4i64,
            "dec": Decimal128::from_bytes([1; 16]), "max": Bson::MaxKey, "min": Bson::MinKey,
            "": "empty key",
        };
        RawDocumentBuf::try_from(&d).unwrap()
    }

    #[test]
    fn finds_what_the_bson_iterator_finds() {
        let raw = every_type();
        let mut ours = Vec::new();
        for_each(&raw, |e| ours.push(e)).unwrap();
        let theirs: Vec<_> = raw.iter_elements().map(|e| e.unwrap()).collect();
        assert_eq!(ours.len(), theirs.len());
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.key, t.key().as_str().as_bytes());
            // Copying an element's bytes into a fresh document gives the same value back.
            let mut one = vec![0u8; 4];
            one.extend_from_slice(o.bytes);
            one.push(0);
            let len = (one.len() as i32).to_le_bytes();
            one[..4].copy_from_slice(&len);
            let copy = RawDocumentBuf::from_bytes(one).unwrap();
            assert_eq!(
                copy.get(t.key().as_str()).unwrap(),
                Some(t.value().unwrap())
            );
        }
    }

    #[test]
    fn damaged_bytes_end_the_walk_without_panicking() {
        let good = every_type().into_bytes();
        for cut in 5..good.len() {
            let mut b = good[..cut].to_vec();
            b.push(0);
            let len = (b.len() as i32).to_le_bytes();
            b[..4].copy_from_slice(&len);
            if let Ok(d) = RawDocumentBuf::from_bytes(b) {
                let _ = for_each(&d, |_| {});
            }
        }
        for at in 4..good.len() - 1 {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut b = good.clone();
                b[at] ^= flip;
                let d = RawDocumentBuf::from_bytes(b).unwrap();
                let _ = for_each(&d, |_| {});
            }
        }
    }
}
