//! The `collation` of an index spec, as `createIndexes` takes it: validated like a command's
//! collation, stored normalised (every option filled in, as listIndexes shows it) in the spec's
//! `extra`, inherited from the collection's default collation when the spec gives none, and
//! dropped when it is `{locale: "simple"}` (the simple collation is the absence of one).
//! Text and `2d` indexes take no collation (mongod's CannotCreateIndex), so on a collection
//! with a default collation they need an explicit `{locale: "simple"}`.

use crate::error::{CommandResult, ErrorCode, err};
use crate::query::collation::Spec;
use bson::{Bson, Document, doc};
use storage::{COLLATION, IndexSpec};

/// Checks a spec's `collation` and returns what `extra` keeps until `resolve`: the normalised
/// collation, or `{locale: "simple"}` when the spec asks for the simple one explicitly.
pub fn parse(d: &Document) -> CommandResult<Option<Document>> {
    match d.get(COLLATION) {
        None => Ok(None),
        Some(Bson::Document(c)) => {
            let spec = Spec::parse(c)?;
            // Compiling checks the locale (ICU data) as the command-level collation does.
            crate::query::collator::for_spec(&spec)?;
            Ok(Some(spec.to_document()))
        }
        Some(_) => Err(err(
            ErrorCode::TypeMismatch,
            "The field 'collation' must be an object",
        )),
    }
}

/// Settles a parsed spec's collation against the collection's default (`default`, normalised):
/// none given inherits the default, `{locale: "simple"}` becomes none. Then refuses a collation
/// on an index type that cannot take one.
pub fn resolve(spec: &mut IndexSpec, default: Option<&Document>) -> CommandResult<()> {
    match spec.extra.get_document(COLLATION) {
        Ok(c) if c.get_str("locale").ok() == Some("simple") => {
            spec.extra.remove(COLLATION);
        }
        Ok(_) => {}
        Err(_) => {
            if let Some(d) = default {
                spec.extra.insert(COLLATION, d.clone());
            }
        }
    }
    let Some(collation) = spec.collation() else {
        return Ok(());
    };
    let refused = spec
        .key
        .values()
        .filter_map(Bson::as_str)
        .find(|t| *t == storage::text::TEXT || *t == storage::keys::FLAT);
    if let Some(kind) = refused {
        return Err(err(
            ErrorCode::CannotCreateIndex,
            format!(
                "Index type '{kind}' does not support collation: {}",
                crate::error::dup_key_text(collation)
            ),
        ));
    }
    Ok(())
}

/// mongod's message when an index of the same name and key exists with another collation.
pub fn conflict_message(requested: &IndexSpec, existing: &IndexSpec) -> Option<String> {
    (requested.collation() != existing.collation()).then(|| {
        format!(
            "An index with the same key pattern, but a different collation already exists with \
             the same name.  Try again with a unique name. Existing index: {}, requested index: {}",
            existing.to_document(),
            requested.to_document()
        )
    })
}

/// The `{locale: "simple"}` document (for tests and callers that spell it).
pub fn simple() -> Document {
    doc! { "locale": "simple" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: Document, key: Document) -> IndexSpec {
        IndexSpec {
            name: "x".into(),
            key,
            extra,
            ..IndexSpec::default()
        }
    }

    #[test]
    fn normalises_inherits_and_drops_simple() {
        let given = doc! { "key": { "a": 1 }, "collation": { "locale": "fr", "strength": 1 } };
        let normal = parse(&given).unwrap().unwrap();
        assert_eq!(normal.get_str("locale").unwrap(), "fr");
        assert_eq!(normal.get_i32("strength").unwrap(), 1);
        assert_eq!(normal.get_str("version").unwrap(), "57.1");
        assert!(normal.contains_key("numericOrdering") && normal.contains_key("backwards"));
        let default = doc! { "locale": "en", "strength": 2 };
        let mut inherits = spec(Document::new(), doc! { "a": 1 });
        resolve(&mut inherits, Some(&default)).unwrap();
        assert_eq!(inherits.collation(), Some(&default));
        let mut simple_one = spec(doc! { "collation": simple() }, doc! { "a": 1 });
        resolve(&mut simple_one, Some(&default)).unwrap();
        assert_eq!(simple_one.collation(), None);
    }

    #[test]
    fn refuses_bad_collations_and_collated_text_indexes() {
        let code = |d: Document| parse(&d).unwrap_err().code.code();
        assert_eq!(code(doc! { "collation": 1 }), 14);
        assert_eq!(code(doc! { "collation": { "locale": "xx" } }), 2);
        assert_eq!(
            code(doc! { "collation": { "locale": "en", "bogus": 1 } }),
            40415
        );
        let default = doc! { "locale": "en" };
        let mut text = spec(Document::new(), doc! { "_fts": "text", "_ftsx": 1 });
        let e = resolve(&mut text, Some(&default)).unwrap_err();
        assert_eq!(e.code.code(), 67);
        let mut plain_text = spec(doc! { "collation": simple() }, doc! { "_fts": "text" });
        assert!(resolve(&mut plain_text, Some(&default)).is_ok());
    }
}
