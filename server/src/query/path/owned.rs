//! Dotted paths over owned documents (`bson::Document`/`Bson`), for the code that still works on
//! decoded documents: `distinct`'s unwinding read, the aggregation language's mapping read, the
//! documents-only read, and the setter and remover the pipeline stages and covered plans use.
//! Each walk has its own rule for arrays; the rule is in its doc comment.

use bson::{Bson, Document};

/// Values at a dotted path, arrays unwound at every level (as `distinct` reads them).
pub fn values_at(v: &Bson, path: &[&str], out: &mut Vec<Bson>) {
    let Some((first, rest)) = path.split_first() else {
        match v {
            Bson::Array(items) => out.extend(items.iter().cloned()),
            other => out.push(other.clone()),
        }
        return;
    };
    match v {
        Bson::Document(d) => {
            if let Some(next) = d.get(*first) {
                values_at(next, rest, out);
            }
        }
        Bson::Array(items) => {
            if let Ok(i) = first.parse::<usize>()
                && let Some(item) = items.get(i)
            {
                values_at(item, rest, out);
            }
            for item in items {
                if let Bson::Document(_) = item {
                    values_at(item, path, out);
                }
            }
        }
        _ => {}
    }
}

/// Aggregation path semantics over an owned value: arrays map over their document elements.
pub fn value_at_path<S: AsRef<str>>(value: &Bson, path: &[S]) -> Option<Bson> {
    let Some(first) = path.first() else {
        return Some(value.clone());
    };
    match value {
        Bson::Document(d) => d
            .get(first.as_ref())
            .and_then(|v| value_at_path(v, &path[1..])),
        Bson::Array(items) => Some(Bson::Array(
            items
                .iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| value_at_path(e, path))
                .collect(),
        )),
        _ => None,
    }
}

/// The value at `path`, descending through documents only (as `$unwind` reads it).
pub fn get_path<'d>(doc: &'d Document, path: &[String]) -> Option<&'d Bson> {
    let (first, rest) = path.split_first()?;
    let value = doc.get(first)?;
    if rest.is_empty() {
        return Some(value);
    }
    match value {
        Bson::Document(d) => get_path(d, rest),
        _ => None,
    }
}

/// Sets `path`, creating documents on the way and replacing non-documents in the way.
pub fn set_path(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.clone(), Bson::Document(Document::new()));
    }
    if let Some(Bson::Document(inner)) = doc.get_mut(first) {
        set_path(inner, rest, value);
    }
}

/// Removes `path`, descending through documents and through arrays of documents.
pub fn remove_path(doc: &mut Document, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.remove(first);
        return;
    }
    match doc.get_mut(first) {
        Some(Bson::Document(inner)) => remove_path(inner, rest),
        Some(Bson::Array(items)) => {
            for item in items {
                if let Bson::Document(inner) = item {
                    remove_path(inner, rest);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn distinct_paths_unwind_arrays() {
        let d = Bson::Document(doc! { "a": [ { "b": 1 }, { "b": [2, 3] }, { "c": 4 } ] });
        let mut out = Vec::new();
        values_at(&d, &["a", "b"], &mut out);
        assert_eq!(out, vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]);
    }
}
