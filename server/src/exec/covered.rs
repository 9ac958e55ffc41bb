//! Covered execution: a document rebuilt from an index key alone, for the covered plans
//! `planner::covered` chooses (the rule of which values decode exactly is there).

use crate::planner::covered::{Covered, decodes_exactly};
use bson::{Document, RawDocumentBuf};

impl Covered {
    /// The document of the needed key fields, or None when a value does not decode exactly.
    pub fn rebuild(&self, key: &[u8]) -> Option<RawDocumentBuf> {
        let values = storage::keycode::decode_key(key, &self.descending).ok()?;
        let mut doc = Document::new();
        for (pos, path) in &self.fields {
            let v = values.get(*pos)?;
            if !decodes_exactly(v) {
                return None;
            }
            crate::query::path::set_path(&mut doc, path, v.clone());
        }
        RawDocumentBuf::try_from(&doc).ok()
    }
}
