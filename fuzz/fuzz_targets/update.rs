//! The update parser and applier: any update document either parses or is refused, applying
//! never panics, a result still encodes as BSON, and an update reported as a no-op left the
//! document byte-identical.
#![no_main]

use arbitrary::Unstructured;
use bson::{Document, RawDocumentBuf};
use cairn_fuzz::{Keys, document, documents};
use cairn_server::query::update::{ApplyContext, Update};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(spec) = document(&mut u, Keys::Update, 0) else {
        return;
    };
    let Ok(docs) = documents(&mut u, 2) else {
        return;
    };
    let is_insert = u.arbitrary::<bool>().unwrap_or(false);
    let Ok(update) = Update::parse(&spec, None) else {
        return;
    };
    let ctx = ApplyContext {
        is_insert,
        positional: Some(0),
        now: bson::DateTime::from_millis(0),
    };
    for raw in &docs {
        let original = Document::try_from(raw.clone()).expect("generated documents decode");
        let mut d = original.clone();
        if let Ok(changed) = update.apply(&mut d, &ctx) {
            let encoded = RawDocumentBuf::try_from(&d);
            if !changed {
                let before = RawDocumentBuf::try_from(&original).expect("original encodes");
                assert_eq!(
                    encoded.map(|e| e.into_bytes()).ok(),
                    Some(before.into_bytes()),
                    "no-op {spec} changed the document"
                );
            }
        }
    }
});
