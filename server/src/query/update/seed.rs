//! The document an upsert starts from: the query's equality fields (`{a: 1}`, `{"b.c": 2}`,
//! `$eq`, one-element `$in`, inside a top-level `$and`), laid out as nested documents, before
//! the update's operators run on it as an insert.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::matcher::Filter;
use bson::{Bson, Document};

/// Builds the upsert seed from a parsed filter.
pub fn upsert_seed(filter: &Filter) -> CommandResult<Document> {
    let fields = filter.equality_fields();
    for (i, (a, _)) in fields.iter().enumerate() {
        for (b, _) in &fields[..i] {
            if a == b {
                return Err(err(
                    ErrorCode::NotSingleValueField,
                    format!("cannot infer query fields to set, path '{a}' is matched twice"),
                ));
            }
            let (short, long) = if a.len() < b.len() { (a, b) } else { (b, a) };
            if long.starts_with(short.as_str()) && long.as_bytes().get(short.len()) == Some(&b'.') {
                return Err(err(
                    ErrorCode::NotSingleValueField,
                    format!(
                        "cannot infer query fields to set, both paths '{long}' and '{short}' are matched"
                    ),
                ));
            }
        }
    }
    let mut seed = Document::new();
    // `_id` first, as mongod stores it.
    let (ids, rest): (Vec<_>, Vec<_>) = fields
        .into_iter()
        .partition(|(p, _)| p == "_id" || p.starts_with("_id."));
    for (path, value) in ids.into_iter().chain(rest) {
        set_path(&mut seed, &path, value)?;
    }
    Ok(seed)
}

fn set_path(doc: &mut Document, path: &str, value: Bson) -> CommandResult<()> {
    match path.split_once('.') {
        None => {
            doc.insert(path, value);
            Ok(())
        }
        Some((head, rest)) => {
            let child = doc
                .entry(head.to_string())
                .or_insert_with(|| Bson::Document(Document::new()));
            match child {
                Bson::Document(d) => set_path(d, rest, value),
                other => Err(err(
                    ErrorCode::PathNotViable,
                    format!(
                        "cannot infer query fields to set, path '{head}' holds {other} and '{rest}' cannot be created in it"
                    ),
                )),
            }
        }
    }
}
