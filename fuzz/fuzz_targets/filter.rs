//! The filter parser and matcher: any filter either parses or is refused, matching never
//! panics, and `$nor: [f]` is the negation of `f` wherever `f` evaluates without error.
#![no_main]

use arbitrary::Unstructured;
use bson::doc;
use cairn_fuzz::{Keys, document, documents, nondeterministic};
use cairn_server::query::matcher::Filter;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(spec) = document(&mut u, Keys::Filter, 0) else {
        return;
    };
    let Ok(docs) = documents(&mut u, 3) else {
        return;
    };
    let Ok(filter) = Filter::parse(&spec) else {
        return;
    };
    let negated = Filter::parse(&doc! {"$nor": [spec.clone()]});
    for d in &docs {
        let outcome = filter.try_matches(d);
        if nondeterministic(&spec) {
            continue;
        }
        if let (Ok(m), Ok(n)) = (&outcome, &negated)
            && let Ok(nm) = n.try_matches(d)
        {
            assert_eq!(nm.is_some(), m.is_none(), "$nor of {spec} on {d:?}");
        }
    }
});
