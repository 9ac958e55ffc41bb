//! Collated against simple sort of 100,000 strings, side by side in one process: the documents
//! `{s: <string>}` sorted by `SortSpec::compare` (what find's blocking sort does) with no
//! collator current, then with `en` at strength 3 and 2 current, and the same strings sorted by
//! precomputed collation key strings (what a collated index or an encoded-key sort compares).
//! Strings: seeded random words of 3-12 letters mixing case and accented Latin letters.

use bson::{RawDocumentBuf, doc};
use cairn_server::query::collation::Spec;
use cairn_server::query::collator;
use cairn_server::query::sort::SortSpec;
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const COUNT: usize = 100_000;
const LETTERS: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'k', 'l', 'm', 'n', 'o', 'r', 's', 't', 'u', 'A',
    'B', 'E', 'S', 'T', 'é', 'è', 'ä', 'ö', 'ü', 'ß', 'Å', 'ç', 'ñ',
];

/// A small xorshift: reproducible strings without a dependency.
fn words() -> Vec<String> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..COUNT)
        .map(|_| {
            let len = 3 + (next() % 10) as usize;
            (0..len)
                .map(|_| LETTERS[(next() % LETTERS.len() as u64) as usize])
                .collect()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let docs: Vec<RawDocumentBuf> = words()
        .into_iter()
        .map(|s| RawDocumentBuf::try_from(&doc! { "s": s }).expect("encodes"))
        .collect();
    let spec = SortSpec::parse(&doc! { "s": 1 }).expect("sort spec");
    let en = |strength: i32| {
        collator::for_spec(&Spec::parse(&doc! { "locale": "en", "strength": strength }).unwrap())
            .unwrap()
    };
    let mut g = c.benchmark_group("sort_100k_strings");
    g.sample_size(10);
    let sort = |collator| {
        let _current = collator::scope(collator);
        let mut v: Vec<&RawDocumentBuf> = docs.iter().collect();
        v.sort_by(|a, b| spec.compare(a, b));
        black_box(v.len());
    };
    g.bench_function("simple", |b| b.iter(|| sort(None)));
    g.bench_function("en_strength3", |b| b.iter(|| sort(en(3))));
    g.bench_function("en_strength2", |b| b.iter(|| sort(en(2))));
    let strings: Vec<String> = docs
        .iter()
        .map(|d| d.get_str("s").unwrap().to_string())
        .collect();
    let c3 = en(3).unwrap();
    g.bench_function("en_strength3_keys_then_bytes", |b| {
        b.iter(|| {
            let mut keyed: Vec<String> = strings.iter().map(|s| c3.key_string(s)).collect();
            keyed.sort_unstable();
            black_box(keyed.len());
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
