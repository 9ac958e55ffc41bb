//! Proves that the codec round-trips random valid messages through any chunking of the byte stream, and that corrupted frames give an error or the original message, never a panic.
//! How: a seeded generator (seed printed on failure, `CAIRN_FUZZ_SEED` to replay, `CAIRN_FUZZ_CASES` to scale) builds messages, streams them through `FrameReader` in random chunks, then mutates frames under `catch_unwind`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use bson::spec::BinarySubtype;
use bson::{Binary, RawArrayBuf, RawBson, RawDocumentBuf, cstr};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wire::{
    Body, Compressor, DocumentSequence, FLAG_CHECKSUM_PRESENT, FLAG_EXHAUST_ALLOWED,
    FLAG_MORE_TO_COME, FrameReader, Header, Message, OpCode, OpMsg, OpQuery, OpReply, decode,
    encode_msg, encode_query, encode_reply, frame_length,
};

const CASES_DEFAULT: usize = 4000;

fn seed_and_cases() -> (u64, usize) {
    let seed = std::env::var("CAIRN_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            now.as_nanos() as u64
        });
    let cases = std::env::var("CAIRN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CASES_DEFAULT);
    // Printed with the test's output, which cargo shows when the test fails.
    eprintln!("fuzz seed {seed} ({cases} cases); replay with CAIRN_FUZZ_SEED={seed}");
    (seed, cases)
}

fn random_key(rng: &mut StdRng) -> String {
    let len = rng.random_range(0..8);
    (0..len)
        .map(|_| char::from(rng.random_range(b'a'..=b'z')))
        .collect()
}

fn random_value(rng: &mut StdRng, depth: usize) -> RawBson {
    let kinds = if depth >= 3 { 9 } else { 11 };
    match rng.random_range(0..kinds) {
        0 => RawBson::Int32(rng.random()),
        1 => RawBson::Int64(rng.random()),
        2 => RawBson::Double(rng.random::<f64>() * 1e6),
        3 => RawBson::String(random_key(rng).repeat(rng.random_range(0..4))),
        4 => RawBson::Boolean(rng.random()),
        5 => RawBson::Null,
        6 => {
            let bytes = (0..rng.random_range(0..20)).map(|_| rng.random()).collect();
            RawBson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes,
            })
        }
        7 => RawBson::ObjectId(bson::oid::ObjectId::from_bytes(rng.random())),
        8 => RawBson::DateTime(bson::DateTime::from_millis(rng.random())),
        9 => RawBson::Document(random_doc(rng, depth + 1)),
        _ => {
            let mut array = RawArrayBuf::new();
            for _ in 0..rng.random_range(0..4) {
                array.push(random_value(rng, depth + 1));
            }
            RawBson::Array(array)
        }
    }
}

fn random_doc(rng: &mut StdRng, depth: usize) -> RawDocumentBuf {
    let mut doc = RawDocumentBuf::new();
    for _ in 0..rng.random_range(0..5) {
        let key = random_key(rng);
        let key: &bson::raw::CStr = key.as_str().try_into().expect("generated keys have no NUL");
        doc.append(key, random_value(rng, depth));
    }
    doc
}

fn random_msg(rng: &mut StdRng) -> OpMsg {
    let mut flags = 0;
    for flag in [
        FLAG_CHECKSUM_PRESENT,
        FLAG_MORE_TO_COME,
        FLAG_EXHAUST_ALLOWED,
    ] {
        if rng.random_bool(0.3) {
            flags |= flag;
        }
    }
    let mut body = random_doc(rng, 0);
    body.append(cstr!("$db"), "test");
    let sequences = (0..rng.random_range(0..3))
        .map(|i| DocumentSequence {
            identifier: format!("seq{i}"),
            documents: (0..rng.random_range(0..4))
                .map(|_| random_doc(rng, 1).into())
                .collect(),
        })
        .collect();
    OpMsg {
        flags,
        body,
        sequences,
    }
}

/// One random message, its encoded frame, and the `Message` that decoding must give back.
fn random_case(rng: &mut StdRng) -> (Vec<u8>, Message) {
    let (request_id, response_to) = (rng.random(), rng.random());
    let compressor = rng
        .random_bool(0.4)
        .then(|| Compressor::ALL[rng.random_range(0..4)]);
    let (plain, body, op) = match rng.random_range(0..6) {
        0 => {
            let q = OpQuery {
                flags: rng.random_range(0..64),
                full_collection_name: format!("{}.$cmd", random_key(rng)),
                number_to_skip: rng.random(),
                number_to_return: rng.random(),
                query: random_doc(rng, 0),
                return_fields: rng.random_bool(0.5).then(|| random_doc(rng, 1)),
            };
            (
                encode_query(request_id, response_to, &q, None),
                Body::Query(q),
                OpCode::Query,
            )
        }
        1 => {
            let r = OpReply {
                response_flags: rng.random_range(0..16),
                cursor_id: rng.random(),
                starting_from: rng.random(),
                documents: (0..rng.random_range(0..4))
                    .map(|_| random_doc(rng, 0))
                    .collect(),
            };
            (
                encode_reply(request_id, response_to, &r, None),
                Body::Reply(r),
                OpCode::Reply,
            )
        }
        _ => {
            let m = random_msg(rng);
            (
                encode_msg(request_id, response_to, &m, None),
                Body::Msg(m),
                OpCode::Msg,
            )
        }
    };
    let plain = plain.expect("encode");
    let frame = match compressor {
        Some(c) => wire::compress_frame(&plain, c).expect("compress"),
        None => plain.clone(),
    };
    let header = Header {
        message_length: plain.len() as i32,
        request_id,
        response_to,
        op_code: op as i32,
    };
    (
        frame,
        Message {
            header,
            body,
            compressor,
        },
    )
}

#[test]
fn random_messages_survive_random_chunking() {
    let (seed, cases) = seed_and_cases();
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..cases / 10 {
        let batch: Vec<_> = (0..rng.random_range(1..8))
            .map(|_| random_case(&mut rng))
            .collect();
        let stream: Vec<u8> = batch.iter().flat_map(|(frame, _)| frame.clone()).collect();
        let mut reader = FrameReader::new();
        let mut got = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let chunk = if rng.random_bool(0.8) {
                rng.random_range(1..32)
            } else {
                rng.random_range(1..2048)
            };
            let end = (at + chunk).min(stream.len());
            reader.extend_from_slice(&stream[at..end]);
            at = end;
            while let Some(message) = reader.next_message().expect("valid stream") {
                got.push(message);
            }
        }
        assert_eq!(reader.buffered_len(), 0, "seed {seed}");
        let want: Vec<_> = batch.into_iter().map(|(_, m)| m).collect();
        assert_eq!(got, want, "seed {seed}");
    }
}

/// Damage `frame` in one random way; returns a short description for failure messages.
fn mutate(rng: &mut StdRng, frame: &mut Vec<u8>) -> String {
    match rng.random_range(0..5) {
        0 => {
            let bit = rng.random_range(0..frame.len() * 8);
            frame[bit / 8] ^= 1 << (bit % 8);
            format!("flip bit {bit}")
        }
        1 => {
            let len = rng.random_range(0..frame.len());
            frame.truncate(len);
            format!("truncate to {len}")
        }
        2 => {
            let at = rng.random_range(0..=frame.len());
            let junk: Vec<u8> = (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
            frame.splice(at..at, junk);
            format!("splice at {at}")
        }
        3 => {
            // Overwrite a random aligned-or-not i32 with a boundary value: lengths are i32s.
            let at = rng.random_range(0..frame.len().saturating_sub(3).max(1));
            let values = [
                0i32,
                -1,
                1,
                4,
                5,
                i32::MAX,
                i32::MIN,
                48_000_000,
                16 * 1024 * 1024 + 1,
            ];
            let value = values[rng.random_range(0..values.len())];
            let end = (at + 4).min(frame.len());
            frame[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
            format!("write {value} at {at}")
        }
        _ => {
            let at = rng.random_range(0..frame.len());
            let byte = rng.random();
            frame[at] = byte;
            format!("set byte {at} to {byte}")
        }
    }
}

#[test]
fn corrupted_frames_error_or_equal_never_panic() {
    let (seed, cases) = seed_and_cases();
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut errors, mut equal) = (0usize, 0usize);
    for case in 0..cases {
        let (frame, want) = random_case(&mut rng);
        let mut bad = frame.clone();
        let what = mutate(&mut rng, &mut bad);
        let was_flip = what.starts_with("flip");
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let _ = frame_length(&bad);
            decode(&bad)
        }));
        let result =
            outcome.unwrap_or_else(|_| panic!("seed {seed} case {case}: panic after {what}"));
        match result {
            Err(_) => errors += 1,
            Ok(got) => {
                let checksummed = matches!(&want.body, Body::Msg(m) if m.checksum_present());
                if checksummed && was_flip {
                    assert_eq!(
                        got, want,
                        "seed {seed} case {case}: {what} passed the checksum"
                    );
                }
                if got == want {
                    equal += 1;
                }
                // Whatever decoded must re-encode and decode to itself, and every document in
                // it must read cleanly with the bson crate's raw accessors.
                assert_reencodes(&got, seed, case);
                assert!(
                    all_documents(&got).iter().all(|d| bson_reads_cleanly(d)),
                    "seed {seed} case {case}"
                );
            }
        }
    }
    eprintln!(
        "{errors} errors, {equal} decoded equal, {} decoded different",
        cases - errors - equal
    );
}

fn assert_reencodes(message: &Message, seed: u64, case: usize) {
    let (id, to) = (message.header.request_id, message.header.response_to);
    let bytes = match &message.body {
        Body::Msg(m) => encode_msg(id, to, m, message.compressor),
        Body::Query(q) => encode_query(id, to, q, message.compressor),
        Body::Reply(r) => encode_reply(id, to, r, message.compressor),
    };
    let again = decode(&bytes.expect("re-encode")).expect("re-decode");
    assert_eq!(
        &again, message,
        "seed {seed} case {case}: unstable round trip"
    );
}

#[test]
fn random_garbage_after_a_valid_header_never_panics() {
    let (seed, cases) = seed_and_cases();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    for case in 0..cases {
        let len: i32 = rng.random_range(0..300);
        let op: i32 = [1, 2004, 2012, 2013, 2002, 7][rng.random_range(0..6)];
        let mut frame = (16 + len).to_le_bytes().to_vec();
        frame.extend([0; 8]);
        frame.extend(op.to_le_bytes());
        frame.extend((0..len).map(|_| rng.random::<u8>()));
        let outcome = catch_unwind(|| decode(&frame).is_ok());
        assert!(outcome.is_ok(), "seed {seed} case {case}: panic on garbage");
    }
}

fn all_documents(message: &Message) -> Vec<&bson::RawDocument> {
    match &message.body {
        Body::Msg(m) => {
            let seqs = m.sequences.iter().flat_map(|s| s.documents.iter());
            std::iter::once(m.body.as_ref())
                .chain(seqs.map(|d| d.as_ref()))
                .collect()
        }
        Body::Query(q) => std::iter::once(&q.query)
            .chain(q.return_fields.as_ref())
            .map(|d| d.as_ref())
            .collect(),
        Body::Reply(r) => r.documents.iter().map(|d| d.as_ref()).collect(),
    }
}

/// Read every element (recursively) through the bson crate; false on any error.
fn bson_reads_cleanly(doc: &bson::RawDocument) -> bool {
    doc.iter_elements().all(|element| {
        let Ok(element) = element else { return false };
        match element.value() {
            Ok(bson::RawBsonRef::Document(d)) => bson_reads_cleanly(d),
            Ok(bson::RawBsonRef::Array(a)) => {
                a.into_iter().all(|v| v.is_ok())
                    && bson::RawDocument::from_bytes(a.as_bytes()).is_ok_and(bson_reads_cleanly)
            }
            Ok(bson::RawBsonRef::JavaScriptCodeWithScope(c)) => bson_reads_cleanly(c.scope),
            Ok(_) => true,
            Err(_) => false,
        }
    })
}

#[test]
fn documents_the_walk_accepts_read_cleanly_with_bson() {
    let (seed, cases) = seed_and_cases();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xb50);
    let mut accepted = 0;
    for case in 0..cases {
        let mut doc = random_doc(&mut rng, 0).into_bytes();
        let what = mutate(&mut rng, &mut doc);
        let outcome = catch_unwind(|| match wire::validate_document(&doc) {
            Ok(()) => Some(
                bson::RawDocument::from_bytes(&doc)
                    .map(bson_reads_cleanly)
                    .unwrap_or(false),
            ),
            Err(_) => None,
        });
        match outcome {
            Ok(Some(clean)) => {
                accepted += 1;
                assert!(
                    clean,
                    "seed {seed} case {case}: walk accepted after {what}, bson failed"
                );
            }
            Ok(None) => {}
            Err(_) => panic!("seed {seed} case {case}: panic after {what}"),
        }
    }
    eprintln!("{accepted} mutated documents accepted");
}
