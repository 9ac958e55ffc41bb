//! Dotted paths and mongod's way of walking them through documents and arrays.
//!
//! A path `a.b.c` names every value reachable by descending field by field, where an array met
//! before the last component is crossed implicitly (each element that is a document continues
//! the walk) and a numeric component may also index into an array. At the end of the path an
//! array yields itself and then each of its elements ("expanded"), so `{a: 1}` matches
//! `{a: [1, 2]}`, except an element picked by a numeric component, which is taken whole.
//! When a step finds nothing, the walk yields one "missing" candidate, which is
//! what lets `{a: null}` match documents without `a`. The walk reads raw BSON in place.

mod owned;

use bson::{RawBsonRef, RawDocument};
pub use owned::{get_path, remove_path, set_path, value_at_path, values_at};
use std::ops::ControlFlow;

/// One value a path reaches in a document.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `None` when the path reaches nothing here.
    pub value: Option<RawBsonRef<'a>>,
    /// True for the elements of an array found at the end of the path.
    pub expanded: bool,
    /// The position in the first array the walk crossed implicitly (for the positional `$`).
    pub array_pos: Option<usize>,
}

/// Splits a dotted path into its components.
pub fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

/// A component that can index an array: all ASCII digits, no sign, within `usize`.
pub fn array_index(component: &str) -> Option<usize> {
    if component.is_empty() || !component.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // mongod does not treat "01" as index 1 when walking paths.
    if component.len() > 1 && component.starts_with('0') {
        return None;
    }
    component.parse().ok()
}

/// Calls `visit` for each candidate reached by `path` in `doc`, stopping when it breaks.
pub fn walk<'a, B>(
    doc: &'a RawDocument,
    path: &[String],
    visit: &mut dyn FnMut(Candidate<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    walk_doc(doc, path, None, visit)
}

/// Like [`walk`] but starting from a value rather than a document.
pub fn walk_value<'a, B>(
    value: RawBsonRef<'a>,
    path: &[String],
    visit: &mut dyn FnMut(Candidate<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    walk_from(value, path, None, visit)
}

fn walk_doc<'a, B>(
    doc: &'a RawDocument,
    path: &[String],
    pos: Option<usize>,
    visit: &mut dyn FnMut(Candidate<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let Some(first) = path.first() else {
        return ControlFlow::Continue(());
    };
    match doc.get(first).ok().flatten() {
        None => visit(Candidate {
            value: None,
            expanded: false,
            array_pos: pos,
        }),
        Some(v) => walk_from(v, &path[1..], pos, visit),
    }
}

fn walk_from<'a, B>(
    value: RawBsonRef<'a>,
    rest: &[String],
    pos: Option<usize>,
    visit: &mut dyn FnMut(Candidate<'a>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let Some(next) = rest.first() else {
        visit(Candidate {
            value: Some(value),
            expanded: false,
            array_pos: pos,
        })?;
        if let RawBsonRef::Array(a) = value {
            for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
                let array_pos = pos.or(Some(i));
                visit(Candidate {
                    value: Some(e),
                    expanded: true,
                    array_pos,
                })?;
            }
        }
        return ControlFlow::Continue(());
    };
    match value {
        RawBsonRef::Document(d) => walk_doc(d, rest, pos, visit),
        RawBsonRef::Array(a) => {
            // A numeric component picks its element (taken whole at the end of the path, as
            // mongod does); every other element that is a document continues the whole path.
            let offset = array_index(next);
            let mut reached = false;
            for (i, e) in a.into_iter().map_while(Result::ok).enumerate() {
                if offset == Some(i) {
                    reached = true;
                    if rest.len() == 1 {
                        visit(Candidate {
                            value: Some(e),
                            expanded: false,
                            array_pos: pos,
                        })?;
                    } else {
                        walk_from(e, &rest[1..], pos, visit)?;
                    }
                } else if let RawBsonRef::Document(d) = e {
                    reached = true;
                    walk_doc(d, rest, pos.or(Some(i)), visit)?;
                }
            }
            if reached {
                ControlFlow::Continue(())
            } else {
                visit(Candidate {
                    value: None,
                    expanded: false,
                    array_pos: pos,
                })
            }
        }
        _ => visit(Candidate {
            value: None,
            expanded: false,
            array_pos: pos,
        }),
    }
}

/// The value at `path` without any array traversal except numeric indexes (as `$set` sees it).
pub fn get_exact<'a>(doc: &'a RawDocument, path: &[String]) -> Option<RawBsonRef<'a>> {
    let mut current = RawBsonRef::Document(doc);
    for component in path {
        current = match current {
            RawBsonRef::Document(d) => d.get(component).ok().flatten()?,
            RawBsonRef::Array(a) => a.get(array_index(component)?).ok().flatten()?,
            _ => return None,
        };
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    // Proves the path walk yields mongod's candidates (implicit array traversal, numeric
    // components, missing) and array positions, on hand-written documents.
    use super::*;
    use bson::{RawDocumentBuf, doc};

    fn collect(d: &bson::Document, path: &str) -> Vec<(Option<bson::Bson>, bool)> {
        let raw = RawDocumentBuf::try_from(d).expect("encodes");
        let mut out = Vec::new();
        let _ = walk::<()>(&raw, &split(path), &mut |c| {
            out.push((c.value.map(crate::query::types::to_owned), c.expanded));
            ControlFlow::Continue(())
        });
        out
    }

    #[test]
    fn walks_like_mongod() {
        use bson::Bson;
        assert_eq!(
            collect(&doc! {"a": 1}, "a"),
            vec![(Some(Bson::Int32(1)), false)]
        );
        assert_eq!(collect(&doc! {"b": 1}, "a"), vec![(None, false)]);
        assert_eq!(collect(&doc! {"a": 5}, "a.b"), vec![(None, false)]);
        let arr = collect(&doc! {"a": [1, 2]}, "a");
        assert_eq!(arr.len(), 3);
        assert!(arr[1].1 && arr[2].1);
        // Implicit traversal: elements that are documents continue the walk; others are skipped.
        let v = collect(&doc! {"a": [{"b": 1}, 5, {"c": 2}]}, "a.b");
        assert_eq!(v, vec![(Some(Bson::Int32(1)), false), (None, false)]);
        // Arrays of scalars reach nothing for a sub-path.
        assert_eq!(collect(&doc! {"a": [1, 2]}, "a.b"), vec![(None, false)]);
        // Numeric components index arrays.
        assert_eq!(
            collect(&doc! {"a": [7, 8]}, "a.1"),
            vec![(Some(Bson::Int32(8)), false)]
        );
        assert_eq!(collect(&doc! {"a": [7, 8]}, "a.5"), vec![(None, false)]);
        assert_eq!(
            collect(&doc! {"a": {"1": 3}}, "a.1"),
            vec![(Some(Bson::Int32(3)), false)]
        );
        // An element picked by index is not expanded, and is not walked again by name.
        assert_eq!(
            collect(&doc! {"a": [[1, 2]]}, "a.0"),
            vec![(Some(bson::bson!([1, 2])), false)]
        );
        assert_eq!(
            collect(&doc! {"a": [{"b": 1}]}, "a.0.b"),
            vec![(Some(Bson::Int32(1)), false)]
        );
        assert_eq!(
            collect(&doc! {"a": [{"b": 1}, {"b": 2}]}, "a.1.b"),
            vec![(None, false), (Some(Bson::Int32(2)), false)]
        );
        // Nested arrays are not flattened more than one level.
        let nested = collect(&doc! {"a": [[1]]}, "a");
        assert_eq!(nested.len(), 2);
    }

    #[test]
    fn positions_and_exact_lookup() {
        let raw = RawDocumentBuf::try_from(&doc! {"a": [{"b": 1}, {"b": 2}]}).expect("encodes");
        let mut positions = Vec::new();
        let _ = walk::<()>(&raw, &split("a.b"), &mut |c| {
            positions.push(c.array_pos);
            ControlFlow::Continue(())
        });
        assert_eq!(positions, vec![Some(0), Some(1)]);
        assert!(get_exact(&raw, &split("a.b")).is_none());
        assert!(get_exact(&raw, &split("a.1.b")).is_some());
        assert_eq!(array_index("01"), None);
        assert_eq!(array_index("10"), Some(10));
    }
}
