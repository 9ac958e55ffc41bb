//! The expression parser and evaluator: any expression either parses or is refused, and
//! evaluating it over any document returns a value or an error, never a panic or a hang
//! (string and array builders stop at their size limits).
#![no_main]

use arbitrary::Unstructured;
use cairn_fuzz::{Keys, documents, value};
use cairn_server::query::pipeline::ParseContext;
use cairn_server::query::pipeline::variables::AggExpr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(spec) = value(&mut u, Keys::Expression, 0) else {
        return;
    };
    let Ok(docs) = documents(&mut u, 2) else {
        return;
    };
    let ctx = ParseContext::new(
        "db",
        Some("c"),
        bson::DateTime::from_millis(1_700_000_000_000),
    );
    let Ok(expr) = AggExpr::parse(&spec, &ctx) else {
        return;
    };
    for d in &docs {
        let _ = expr.eval(d);
    }
});
