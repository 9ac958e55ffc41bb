//! Proves the B+tree behaves like an ordered map at depth >= 3, with long (overflow) keys, bulk
//! build, and checkpoints. How: seeded random operations (CAIRN_SEED) mirrored on a BTreeMap, the
//! full invariant check at intervals, and byte flips in checkpoint images.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use storage::btree::BTree;

fn seed() -> u64 {
    std::env::var("CAIRN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xb7ee)
}

/// Keys with long shared prefixes (long separators, so the tree gets deep with few entries),
/// some short ones and some past the inline limit.
fn key_for(n: u32) -> Vec<u8> {
    let pad = match n % 10 {
        0 => 1200,
        1 => 3,
        _ => 150,
    };
    let mut key = vec![b'a' + (n % 3) as u8];
    key.extend(std::iter::repeat_n(b'x', pad));
    key.extend(n.to_be_bytes());
    key
}

fn bound(rng: &mut StdRng, make_key: fn(u32) -> Vec<u8>) -> Bound<Vec<u8>> {
    match rng.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(make_key(rng.random_range(0..3000))),
        _ => Bound::Excluded(make_key(rng.random_range(0..3000))),
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

fn check_range(
    tree: &BTree,
    model: &BTreeMap<Vec<u8>, u64>,
    rng: &mut StdRng,
    make_key: fn(u32) -> Vec<u8>,
) {
    let (lower, upper) = (bound(rng, make_key), bound(rng, make_key));
    let reverse = rng.random::<bool>();
    if let (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) =
        (&lower, &upper)
        && (l > u
            || (l == u && !matches!((&lower, &upper), (Bound::Included(_), Bound::Included(_)))))
    {
        assert_eq!(
            tree.range(as_ref(&lower), as_ref(&upper), reverse).count(),
            0
        );
        return;
    }
    let expected: Vec<(Vec<u8>, u64)> = model
        .range((lower.clone(), upper.clone()))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let mut got: Vec<(Vec<u8>, u64)> = tree
        .range(as_ref(&lower), as_ref(&upper), reverse)
        .map(|(k, v)| (k.to_vec(), v))
        .collect();
    if reverse {
        got.reverse();
    }
    assert_eq!(
        got, expected,
        "range {lower:?}..{upper:?} reverse {reverse}"
    );
}

fn run_model(seed: u64, steps: usize, make_key: fn(u32) -> Vec<u8>) -> usize {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tree = BTree::new();
    let mut model = BTreeMap::new();
    let mut depth_max = 0;
    for step in 0..steps {
        let key = make_key(rng.random_range(0..3000));
        // Grow first, then churn with deletions dominating, to exercise merges.
        let insert_share = if step < steps / 2 { 70 } else { 35 };
        match rng.random_range(0..100) {
            p if p < insert_share => {
                let value = rng.random::<u64>();
                assert_eq!(
                    tree.insert(&key, value),
                    model.insert(key, value),
                    "step {step}"
                );
            }
            p if p < 90 => assert_eq!(tree.remove(&key), model.remove(&key), "step {step}"),
            p if p < 97 => assert_eq!(tree.get(&key), model.get(&key).copied(), "step {step}"),
            _ => check_range(&tree, &model, &mut rng, make_key),
        }
        assert_eq!(tree.len(), model.len() as u64);
        depth_max = depth_max.max(tree.depth());
        if step % 200 == 0 {
            tree.check().unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }
    tree.check().expect("final check");
    let all: Vec<(Vec<u8>, u64)> = tree.iter().map(|(k, v)| (k.to_vec(), v)).collect();
    let expected: Vec<(Vec<u8>, u64)> = model.into_iter().collect();
    assert_eq!(all, expected);
    depth_max
}

#[test]
fn random_operations_match_a_btreemap_at_depth_three() {
    let seed = seed();
    let result = std::panic::catch_unwind(|| run_model(seed, 12_000, key_for));
    match result {
        Ok(depth) => assert!(depth >= 3, "tree only reached depth {depth}"),
        Err(panic) => {
            eprintln!("failed with CAIRN_SEED={seed}");
            std::panic::resume_unwind(panic);
        }
    }
}

/// Short keys over three byte values, the empty key included: many keys are prefixes of others.
fn tiny_key(n: u32) -> Vec<u8> {
    let len = (n % 7) as usize;
    (0..len)
        .map(|i| [0u8, 1, 255][(n / 7 / 3u32.pow(i as u32) % 3) as usize])
        .collect()
}

#[test]
fn prefix_keys_and_the_empty_key_match_a_btreemap() {
    let seed = seed();
    if std::panic::catch_unwind(|| run_model(seed, 6_000, tiny_key)).is_err() {
        panic!("failed with CAIRN_SEED={seed}");
    }
}

#[test]
fn delete_everything_then_reuse() {
    let mut tree = BTree::new();
    let keys: Vec<Vec<u8>> = (0..2500).map(key_for).collect();
    for (i, key) in keys.iter().enumerate() {
        tree.insert(key, i as u64);
    }
    assert!(tree.depth() >= 3);
    for (i, key) in keys.iter().enumerate().rev() {
        assert_eq!(tree.remove(key), Some(i as u64));
    }
    tree.check().expect("empty tree is valid");
    assert_eq!((tree.len(), tree.depth(), tree.iter().count()), (0, 1, 0));
    tree.insert(b"again", 7);
    assert_eq!(tree.get(b"again"), Some(7));
}

fn sorted_entries(count: u32) -> Vec<(Vec<u8>, u64)> {
    let mut entries: Vec<(Vec<u8>, u64)> = (0..count).map(|n| (key_for(n), u64::from(n))).collect();
    entries.sort();
    entries
}

#[test]
fn bulk_build_equals_incremental() {
    for count in [0, 1, 5, 100, 2999] {
        let entries = sorted_entries(count);
        let bulk = BTree::bulk_build(entries.clone()).expect("sorted input");
        bulk.check().expect("bulk tree is valid");
        let mut incremental = BTree::new();
        for (k, v) in &entries {
            incremental.insert(k, *v);
        }
        let a: Vec<(Vec<u8>, u64)> = bulk.iter().map(|(k, v)| (k.to_vec(), v)).collect();
        let b: Vec<(Vec<u8>, u64)> = incremental.iter().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(a, b, "count {count}");
        assert!(bulk.memory_bytes() <= incremental.memory_bytes());
    }
    let mut bulk = BTree::bulk_build(sorted_entries(2999)).expect("sorted");
    for n in 0..2999u32 {
        if n % 3 == 0 {
            assert_eq!(bulk.remove(&key_for(n)), Some(u64::from(n)));
        }
    }
    bulk.check().expect("valid after deletions");
    assert!(BTree::bulk_build(vec![(b"b".to_vec(), 1), (b"a".to_vec(), 2)]).is_err());
    assert!(BTree::bulk_build(vec![(b"a".to_vec(), 1), (b"a".to_vec(), 2)]).is_err());
}

#[test]
fn checkpoint_round_trips_and_detects_corruption() {
    let mut tree = BTree::bulk_build(sorted_entries(1500)).expect("sorted");
    for n in (0..1500u32).step_by(4) {
        tree.remove(&key_for(n));
    }
    let image = tree.to_checkpoint();
    let loaded = BTree::from_checkpoint(&image).expect("valid image");
    assert!(loaded.iter().eq(tree.iter()));
    assert_eq!(loaded.len(), tree.len());
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..200 {
        let mut bad = image.clone();
        let at = rng.random_range(0..bad.len());
        bad[at] ^= 1 << rng.random_range(0..8);
        assert!(
            BTree::from_checkpoint(&bad).is_err(),
            "flip at {at} went unnoticed"
        );
    }
    assert!(BTree::from_checkpoint(&image[..image.len() - 1]).is_err());
    assert!(BTree::from_checkpoint(&[]).is_err());
}

#[test]
fn corrupt_images_with_valid_checksums_are_errors_not_panics() {
    let image = BTree::bulk_build(sorted_entries(600))
        .expect("sorted")
        .to_checkpoint();
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..2000 {
        let mut bad = image[..image.len() - 4].to_vec();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..bad.len());
            bad[at] = rng.random();
        }
        let crc = crc32fast::hash(&bad);
        bad.extend_from_slice(&crc.to_le_bytes());
        if let Ok(tree) = BTree::from_checkpoint(&bad) {
            // A flip inside a value or dead space is not detectable and still a valid tree.
            tree.invariants();
            assert_eq!(tree.iter().count() as u64, tree.len());
        }
    }
}

#[test]
fn long_keys_and_values() {
    let mut tree = BTree::new();
    let long = |i: u8, len: usize| -> Vec<u8> { std::iter::repeat_n(i, len).collect() };
    for i in 0..50u8 {
        tree.insert(&long(i, 5000 + usize::from(i)), u64::MAX - u64::from(i));
    }
    for i in 0..50u8 {
        assert_eq!(
            tree.get(&long(i, 5000 + usize::from(i))),
            Some(u64::MAX - u64::from(i))
        );
    }
    assert_eq!(tree.insert(&long(3, 5003), 1), Some(u64::MAX - 3));
    tree.check().expect("valid");
    let image = tree.to_checkpoint();
    assert!(
        BTree::from_checkpoint(&image)
            .expect("loads")
            .iter()
            .eq(tree.iter())
    );
}
