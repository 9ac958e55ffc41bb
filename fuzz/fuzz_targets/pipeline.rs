//! The pipeline parser and the stages: any pipeline either parses or is refused, and running
//! it over a few documents (with a foreign collection of a few more) ends in results or an
//! error, never a panic.
#![no_main]

use arbitrary::Unstructured;
use bson::{Bson, Document};
use cairn_fuzz::{Keys, documents, key, value};
use cairn_server::error::CommandResult;
use cairn_server::query::pipeline::{ParseContext, Pipeline, PipelineEnv};
use libfuzzer_sys::fuzz_target;

struct Foreign(Vec<Document>);

impl PipelineEnv for Foreign {
    fn collection_docs(&self, _db: &str, _coll: &str) -> CommandResult<Vec<Document>> {
        Ok(self.0.clone())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let mut stages = Vec::new();
    for _ in 0..u.int_in_range(1..=4u8).unwrap_or(1) {
        let (Ok(name), Ok(spec)) = (key(&mut u, Keys::Stage), value(&mut u, Keys::Stage, 1)) else {
            return;
        };
        let mut stage = Document::new();
        stage.insert(name, spec);
        stages.push(stage);
    }
    let Ok(input) = documents(&mut u, 4) else {
        return;
    };
    let Ok(foreign) = documents(&mut u, 3) else {
        return;
    };
    let decode = |docs: Vec<bson::RawDocumentBuf>| -> Vec<Document> {
        docs.into_iter()
            .filter_map(|d| Document::try_from(d).ok())
            .collect()
    };
    let env = Foreign(decode(foreign));
    let ctx = ParseContext::new(
        "db",
        Some("c"),
        bson::DateTime::from_millis(1_700_000_000_000),
    );
    let Ok(pipeline) = Pipeline::parse(&stages, &ctx) else {
        return;
    };
    if let Ok(out) = pipeline.run_vec(decode(input), &env) {
        for d in out {
            let _ = Bson::Document(d);
        }
    }
});
