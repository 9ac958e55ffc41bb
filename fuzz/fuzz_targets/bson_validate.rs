//! BSON validation: cairn's validator (the walk every request body goes through) never panics,
//! and what it accepts the bson crate decodes, so no later stage meets a document it cannot read.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if wire::validate_document(data).is_ok() {
        let raw = bson::RawDocument::from_bytes(data).expect("validated bytes are a document");
        let decoded = bson::Document::try_from(raw);
        assert!(
            decoded.is_ok(),
            "validated document does not decode: {decoded:?}"
        );
    }
});
