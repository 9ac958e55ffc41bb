//! The index key encoding: for any two values, comparing their encoded keys byte by byte
//! agrees with the BSON comparison order, descending keys reverse it, and a key decodes to a
//! value that compares equal to the original.
#![no_main]

use arbitrary::Unstructured;
use cairn_fuzz::{Keys, value};
use libfuzzer_sys::fuzz_target;
use storage::keycode;
use storage::order::compare_bson;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(a), Ok(b)) = (
        value(&mut u, Keys::Expression, 2),
        value(&mut u, Keys::Expression, 2),
    ) else {
        return;
    };
    let (mut ka, mut kb) = (Vec::new(), Vec::new());
    keycode::encode_bson_value(&mut ka, &a);
    keycode::encode_bson_value(&mut kb, &b);
    assert_eq!(ka.cmp(&kb), compare_bson(&a, &b), "keys of {a:?} and {b:?}");
    let da = keycode::encode_bson_key(std::slice::from_ref(&a), &[true]);
    let db = keycode::encode_bson_key(std::slice::from_ref(&b), &[true]);
    assert_eq!(
        da.cmp(&db),
        compare_bson(&b, &a),
        "descending keys of {a:?} and {b:?}"
    );
    let (decoded, used) = keycode::decode_value(&ka).expect("an encoded key decodes");
    assert_eq!(used, ka.len(), "decoding {a:?} stopped early");
    assert_eq!(
        compare_bson(&decoded, &a),
        std::cmp::Ordering::Equal,
        "{a:?} decoded as {decoded:?}"
    );
});
