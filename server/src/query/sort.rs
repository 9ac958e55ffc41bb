//! Sort specifications and sort keys with mongod's rules: keys compare in the one BSON order of
//! `storage::order`; a field holding an array sorts by its smallest element ascending and its
//! largest descending (elements only, never the array as a whole); an empty array sorts below
//! null (as undefined); a missing field sorts as null. `$natural` is recognized and handed to
//! the caller, who knows what storage order means.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::path::{self, Candidate};
use crate::query::types;
use bson::{Bson, Document, RawBsonRef, RawDocument};
use std::cmp::Ordering;
use std::ops::ControlFlow;
use storage::order::View;

/// One sort key: a dotted path and a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortField {
    pub path: String,
    pub components: Vec<String>,
    pub ascending: bool,
    /// `{$meta: "textScore"}`: the document's text score, highest first.
    pub text_score: bool,
}

/// A parsed `sort` document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SortSpec {
    pub fields: Vec<SortField>,
    /// `Some(1)` / `Some(-1)` for `{$natural: ±1}`: storage order, handled by the caller.
    pub natural: Option<i32>,
}

/// The values a document sorts by, one per sort field.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey(pub Vec<Bson>);

/// `{$meta: "textScore"}` (as a sort direction or a projection value).
pub fn is_text_score(v: &Bson) -> bool {
    matches!(v, Bson::Document(d) if d.len() == 1 && d.get_str("$meta").is_ok_and(|m| m == "textScore"))
}

fn direction(path: &str, v: &Bson) -> CommandResult<bool> {
    if let Bson::Document(d) = v
        && d.contains_key("$meta")
    {
        return Err(err(
            ErrorCode::NotImplemented,
            format!("sort by {{$meta: ...}} on '{path}' is not supported yet"),
        ));
    }
    match types::as_f64(v) {
        Some(1.0) => Ok(true),
        Some(-1.0) => Ok(false),
        _ => Err(err(
            ErrorCode::BadValue,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
        )),
    }
}

impl SortSpec {
    pub fn parse(spec: &Document) -> CommandResult<SortSpec> {
        let mut out = SortSpec::default();
        for (path, v) in spec {
            if path == "$natural" {
                out.natural = Some(if direction(path, v)? { 1 } else { -1 });
                continue;
            }
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("Invalid sort path: '{path}'"),
                ));
            }
            if path.starts_with('$') {
                return Err(err(
                    ErrorCode::BadValue,
                    format!("FieldPath field names may not start with '$'. Given: '{path}'"),
                ));
            }
            let text_score = is_text_score(v);
            let ascending = text_score || direction(path, v)?;
            out.fields.push(SortField {
                path: path.clone(),
                components: path::split(path),
                ascending: !text_score && ascending,
                text_score,
            });
        }
        if out.natural.is_some() && !out.fields.is_empty() {
            return Err(err(
                ErrorCode::BadValue,
                "$natural cannot be combined with other sort fields",
            ));
        }
        Ok(out)
    }

    /// Whether a field sorts by `{$meta: "textScore"}`.
    pub fn has_text_score(&self) -> bool {
        self.fields.iter().any(|f| f.text_score)
    }

    /// Orders two documents that carry text scores (`compare` treats score fields as equal).
    pub fn compare_scored(
        &self,
        (a, a_score): (&RawDocument, f64),
        (b, b_score): (&RawDocument, f64),
    ) -> Ordering {
        for f in &self.fields {
            let o = if f.text_score {
                b_score.total_cmp(&a_score)
            } else {
                let x = field_view(a, &f.components, f.ascending);
                let y = field_view(b, &f.components, f.ascending);
                let o = crate::query::collator::compare_views(x, y);
                if f.ascending { o } else { o.reverse() }
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// True when there are no field keys (possibly only `$natural`).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The key `doc` sorts by.
    pub fn sort_key(&self, doc: &RawDocument) -> SortKey {
        SortKey(
            self.fields
                .iter()
                .map(|f| field_key(doc, &f.components, f.ascending))
                .collect(),
        )
    }

    /// Orders two keys made by [`SortSpec::sort_key`].
    pub fn compare_keys(&self, a: &SortKey, b: &SortKey) -> Ordering {
        for (i, f) in self.fields.iter().enumerate() {
            let (x, y) = (
                a.0.get(i).unwrap_or(&Bson::Null),
                b.0.get(i).unwrap_or(&Bson::Null),
            );
            let o = crate::query::collator::compare_bson(x, y);
            if o != Ordering::Equal {
                return if f.ascending { o } else { o.reverse() };
            }
        }
        Ordering::Equal
    }

    /// Orders two documents. Copies nothing: keys are compared as borrowed views, field by
    /// field, stopping at the first difference.
    pub fn compare(&self, a: &RawDocument, b: &RawDocument) -> Ordering {
        for f in self.fields.iter().filter(|f| !f.text_score) {
            let x = field_view(a, &f.components, f.ascending);
            let y = field_view(b, &f.components, f.ascending);
            let o = crate::query::collator::compare_views(x, y);
            if o != Ordering::Equal {
                return if f.ascending { o } else { o.reverse() };
            }
        }
        Ordering::Equal
    }
}

/// The smallest (ascending) or largest (descending) value the path reaches, borrowed.
fn field_view<'a>(doc: &'a RawDocument, components: &[String], ascending: bool) -> View<'a> {
    let better = |o: Ordering| {
        if ascending {
            o == Ordering::Less
        } else {
            o == Ordering::Greater
        }
    };
    let mut best: Option<View<'a>> = None;
    let mut missing = false;
    let mut empty_array = false;
    let _ = path::walk::<()>(doc, components, &mut |c: Candidate<'a>| {
        match c.value {
            None => missing = true,
            Some(RawBsonRef::Array(a)) if !c.expanded => empty_array |= a.is_empty(),
            Some(v) => {
                let v = View::from_raw(v);
                if best.is_none_or(|b| better(crate::query::collator::compare_views(v, b))) {
                    best = Some(v);
                }
            }
        }
        ControlFlow::Continue(())
    });
    // Missing reaches count as null and empty arrays as undefined, competing with the rest.
    for (present, stand_in) in [(missing, View::Null), (empty_array, View::Undefined)] {
        if present
            && best.is_none_or(|b| better(crate::query::collator::compare_views(stand_in, b)))
        {
            best = Some(stand_in);
        }
    }
    best.unwrap_or(View::Null)
}

/// The owned form of [`field_view`], for keys kept beyond the document's lifetime.
fn field_key(doc: &RawDocument, components: &[String], ascending: bool) -> Bson {
    match field_view(doc, components, ascending) {
        View::Null => Bson::Null,
        View::Undefined => Bson::Undefined,
        _ => owned_best(doc, components, ascending),
    }
}

/// Finds the winning raw value again and copies it (views do not convert back to `Bson`).
fn owned_best(doc: &RawDocument, components: &[String], ascending: bool) -> Bson {
    let target = field_view(doc, components, ascending);
    let mut found = None;
    let _ = path::walk::<()>(doc, components, &mut |c: Candidate<'_>| {
        if let Some(v) = c.value
            && (!matches!(v, RawBsonRef::Array(_)) || c.expanded)
            && crate::query::collator::compare_views(View::from_raw(v), target) == Ordering::Equal
        {
            found = Some(types::to_owned(v));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found.unwrap_or(Bson::Null)
}

#[cfg(test)]
mod tests {
    // Proves sort keys follow mongod's documented array/missing rules and the BSON type order,
    // by sorting hand-written documents and the frozen corpus.
    use super::*;
    use bson::{RawDocumentBuf, doc};

    fn sorted(spec: Document, docs: Vec<Document>) -> Vec<Document> {
        let spec = SortSpec::parse(&spec).expect("spec parses");
        let mut raws: Vec<RawDocumentBuf> = docs
            .iter()
            .map(|d| RawDocumentBuf::try_from(d).expect("encodes"))
            .collect();
        raws.sort_by(|a, b| spec.compare(a, b));
        raws.iter()
            .map(|r| Document::try_from(r.as_ref()).expect("decodes"))
            .collect()
    }

    #[test]
    fn arrays_sort_by_min_ascending_and_max_descending() {
        let docs = vec![
            doc! {"_id": 1, "a": [1, 10]},
            doc! {"_id": 2, "a": 5},
            doc! {"_id": 3, "a": [3, 4]},
        ];
        let asc: Vec<i32> = sorted(doc! {"a": 1}, docs.clone())
            .iter()
            .map(|d| d.get_i32("_id").expect("id"))
            .collect();
        assert_eq!(asc, [1, 3, 2]);
        let desc: Vec<i32> = sorted(doc! {"a": -1}, docs)
            .iter()
            .map(|d| d.get_i32("_id").expect("id"))
            .collect();
        assert_eq!(desc, [1, 2, 3]);
    }

    #[test]
    fn missing_null_and_empty_arrays() {
        let docs = vec![
            doc! {"_id": 1, "a": 1},
            doc! {"_id": 2},
            doc! {"_id": 3, "a": []},
            doc! {"_id": 4, "a": Bson::Null},
            doc! {"_id": 5, "a": Bson::MinKey},
        ];
        let asc: Vec<i32> = sorted(doc! {"a": 1}, docs)
            .iter()
            .map(|d| d.get_i32("_id").expect("id"))
            .collect();
        assert_eq!(asc, [5, 3, 2, 4, 1]);
    }

    #[test]
    fn several_keys_and_dotted_paths() {
        let docs = vec![
            doc! {"_id": 1, "a": 1, "b": {"c": 2}},
            doc! {"_id": 2, "a": 1, "b": {"c": 1}},
            doc! {"_id": 3, "a": 0, "b": [{"c": 9}, {"c": 0}]},
        ];
        let got: Vec<i32> = sorted(doc! {"a": -1, "b.c": 1}, docs)
            .iter()
            .map(|d| d.get_i32("_id").expect("id"))
            .collect();
        assert_eq!(got, [2, 1, 3]);
    }

    #[test]
    fn corpus_sorts_in_bson_order() {
        let corpus = storage::order::corpus();
        let docs: Vec<Document> = corpus.iter().map(|v| doc! {"v": v.clone()}).collect();
        let spec = SortSpec::parse(&doc! {"v": 1}).expect("parses");
        let keys: Vec<SortKey> = docs
            .iter()
            .map(|d| spec.sort_key(&RawDocumentBuf::try_from(d).expect("encodes")))
            .collect();
        for (i, w) in keys.windows(2).enumerate() {
            // Arrays sort by their elements, so only scalar neighbours keep corpus order.
            if !matches!(corpus[i], Bson::Array(_)) && !matches!(corpus[i + 1], Bson::Array(_)) {
                assert_ne!(
                    spec.compare_keys(&w[0], &w[1]),
                    Ordering::Greater,
                    "{:?} {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }

    #[test]
    fn borrowed_and_owned_keys_agree() {
        let spec = SortSpec::parse(&doc! {"v": -1, "w": 1}).expect("parses");
        let docs: Vec<RawDocumentBuf> = storage::order::corpus()
            .into_iter()
            .map(|v| RawDocumentBuf::try_from(&doc! {"v": v.clone(), "w": [v]}).expect("encodes"))
            .collect();
        for a in &docs {
            for b in &docs {
                let owned = spec.compare_keys(&spec.sort_key(a), &spec.sort_key(b));
                assert_eq!(spec.compare(a, b), owned);
            }
        }
    }

    #[test]
    fn parse_rules() {
        assert_eq!(
            SortSpec::parse(&doc! {"$natural": -1}).expect("ok").natural,
            Some(-1)
        );
        assert_eq!(
            SortSpec::parse(&doc! {"a": 2})
                .expect_err("bad")
                .code
                .code(),
            2
        );
        assert_eq!(
            SortSpec::parse(&doc! {"a": {"$meta": "searchScore"}})
                .expect_err("meta")
                .code
                .code(),
            238
        );
        let scored = SortSpec::parse(&doc! {"s": {"$meta": "textScore"}, "a": 1}).expect("ok");
        assert!(scored.has_text_score());
        let (x, y) = (bson::rawdoc! {"a": 1}, bson::rawdoc! {"a": 0});
        // Higher score first, then the other fields.
        assert_eq!(scored.compare_scored((&x, 2.0), (&y, 1.0)), Ordering::Less);
        assert_eq!(
            scored.compare_scored((&x, 1.0), (&y, 1.0)),
            Ordering::Greater
        );
        assert!(SortSpec::parse(&doc! {"a": 1.0, "b": -1i64}).is_ok());
    }
}
