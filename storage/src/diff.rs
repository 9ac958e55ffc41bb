//! The difference between two versions of a document in the shape of mongod's `$v: 2` update
//! diffs (the oplog's `o.diff`): `d` fields deleted (value false), `u` fields updated, `i`
//! fields inserted, `s<name>` the diff of an embedded document. Arrays that differ are updated
//! whole (mongod may send an array diff instead; both apply to the same result). Pure: the
//! write path stamps it under `--replSet`, readers turn it into change events.

use bson::{Bson, Document, RawBsonRef, RawDocument};

fn to_bson(v: RawBsonRef<'_>) -> Bson {
    Bson::try_from(bson::RawBson::from(v)).unwrap_or(Bson::Null)
}

/// The diff turning `old` into `new` (an empty document when they are equal).
pub fn diff(old: &RawDocument, new: &RawDocument) -> Document {
    let mut deleted = Document::new();
    let mut updated = Document::new();
    let mut inserted = Document::new();
    let mut subs = Document::new();
    for (k, v) in old.iter().flatten() {
        let k = k.as_str();
        match new.get(k).ok().flatten() {
            None => {
                deleted.insert(k, false);
            }
            Some(nv) if nv == v => {}
            Some(nv) => match (v, nv) {
                (RawBsonRef::Document(a), RawBsonRef::Document(b)) => {
                    let sub = diff(a, b);
                    if !sub.is_empty() {
                        subs.insert(format!("s{k}"), sub);
                    }
                }
                _ => {
                    updated.insert(k, to_bson(nv));
                }
            },
        }
    }
    for (k, v) in new.iter().flatten() {
        let k = k.as_str();
        if old.get(k).ok().flatten().is_none() {
            inserted.insert(k, to_bson(v));
        }
    }
    let mut out = Document::new();
    for (name, part) in [("d", deleted), ("u", updated), ("i", inserted)] {
        if !part.is_empty() {
            out.insert(name, part);
        }
    }
    out.extend(subs);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    #[test]
    fn shapes() {
        let old =
            rawdoc! { "_id": 1, "a": 1, "b": { "c": 1, "d": 2 }, "gone": true, "arr": [1, 2] };
        let new = rawdoc! { "_id": 1, "a": 2, "b": { "c": 1, "d": 3 }, "arr": [1], "n": "x" };
        assert_eq!(
            diff(&old, &new),
            doc! {
                "d": { "gone": false },
                "u": { "a": 2, "arr": [1] },
                "i": { "n": "x" },
                "sb": { "u": { "d": 3 } },
            }
        );
        assert!(diff(&old, &old).is_empty());
    }
}
