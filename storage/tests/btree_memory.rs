//! Measures B+tree memory per entry for index-shaped keys (an int32 field plus a RecordId) when
//! bulk built and when inserted in random order. How: `cargo test -p cairn-storage --test
//! btree_memory -- --ignored --nocapture` prints bytes per entry; the assertion is a loose bound.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use storage::btree::BTree;
use storage::keycode::{append_record_id, encode_key};

fn index_key(value: i32, record_id: u64) -> Vec<u8> {
    let holder = bson::rawdoc! { "v": value };
    let raw = holder.get("v").expect("valid").expect("present");
    let mut key = encode_key(&[raw], &[false]);
    append_record_id(&mut key, record_id);
    key
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn bytes_per_entry_for_a_million_index_keys() {
    let count = 1_000_000u64;
    let mut entries: Vec<(Vec<u8>, u64)> = (0..count)
        .map(|id| (index_key((id * 7919 % 1_000_003) as i32, id), 0))
        .collect();
    entries.sort();
    let key_bytes: usize = entries.iter().map(|(k, _)| k.len()).sum();
    let bulk = BTree::bulk_build(entries.clone()).expect("sorted");
    let mut shuffled = entries;
    shuffled.shuffle(&mut StdRng::seed_from_u64(7));
    let mut random = BTree::new();
    for (key, value) in &shuffled {
        random.insert(key, *value);
    }
    random.check().expect("valid");
    let per = |t: &BTree| t.memory_bytes() as f64 / count as f64;
    println!(
        "keys avg {:.1} B; bulk {:.1} B/entry depth {}; random-order {:.1} B/entry depth {}",
        key_bytes as f64 / count as f64,
        per(&bulk),
        bulk.depth(),
        per(&random),
        random.depth()
    );
    assert!(per(&bulk) < 40.0 && per(&random) < 60.0);
}
