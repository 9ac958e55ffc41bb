//! Proves that each kind of malformed frame is rejected with its own `WireError` variant (or is "incomplete"), never a panic.
//! How: start from a valid hand-built frame, break exactly one thing, and match the error returned by `frame_length`/`decode`.

use bson::{RawDocumentBuf, rawdoc};
use wire::limits::{BSON_OBJECT_SIZE_INTERNAL_MAX, MESSAGE_SIZE_MAX};
use wire::{Compressor, FrameReader, OpMsg, WireError, decode, encode_msg, frame_length};

fn frame(op: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend((16 + payload.len() as i32).to_le_bytes());
    out.extend(1i32.to_le_bytes());
    out.extend(0i32.to_le_bytes());
    out.extend(op.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn body() -> RawDocumentBuf {
    rawdoc! { "ping": 1, "$db": "admin" }
}

/// OP_MSG payload from flags and raw section bytes.
fn msg_frame(flags: u32, sections: &[u8]) -> Vec<u8> {
    let mut payload = flags.to_le_bytes().to_vec();
    payload.extend_from_slice(sections);
    frame(2013, &payload)
}

fn kind0(doc: &RawDocumentBuf) -> Vec<u8> {
    let mut s = vec![0u8];
    s.extend_from_slice(doc.as_bytes());
    s
}

fn kind1(id: &str, docs: &[RawDocumentBuf], size_delta: i32) -> Vec<u8> {
    let mut content = id.as_bytes().to_vec();
    content.push(0);
    docs.iter()
        .for_each(|d| content.extend_from_slice(d.as_bytes()));
    let mut s = vec![1u8];
    s.extend((content.len() as i32 + 4 + size_delta).to_le_bytes());
    s.extend(content);
    s
}

#[test]
fn truncated_frame_is_incomplete_not_error() {
    let whole = encode_msg(1, 0, &OpMsg::new(body()), None).unwrap();
    for cut in 0..whole.len() {
        assert_eq!(frame_length(&whole[..cut]).unwrap(), None, "cut at {cut}");
    }
    assert!(matches!(
        decode(&whole[..whole.len() - 1]),
        Err(WireError::FrameLengthMismatch { .. })
    ));
    assert!(matches!(
        decode(&whole[..10]),
        Err(WireError::MessageTooSmall { .. })
    ));
}

#[test]
fn huge_declared_length_rejected_from_four_bytes() {
    let len = 100_000_000i32.to_le_bytes();
    assert!(matches!(
        frame_length(&len),
        Err(WireError::MessageTooLarge {
            length_bytes: 100_000_000,
            ..
        })
    ));
    let mut reader = FrameReader::new();
    reader.extend_from_slice(&len);
    assert!(reader.bytes_needed().is_err());
    assert!(reader.next_frame().is_err());
    let just_over = (MESSAGE_SIZE_MAX as i32 + 1).to_le_bytes();
    assert!(matches!(
        frame_length(&just_over),
        Err(WireError::MessageTooLarge { .. })
    ));
}

#[test]
fn length_below_header_size() {
    for len in [-1i32, 0, 15, i32::MIN] {
        let err = frame_length(&len.to_le_bytes()).unwrap_err();
        assert!(
            matches!(err, WireError::MessageTooSmall { .. }),
            "{len}: {err}"
        );
    }
    assert_eq!(frame_length(&16i32.to_le_bytes()).unwrap(), None);
}

#[test]
fn unknown_and_removed_opcodes() {
    assert_eq!(
        decode(&frame(9999, &[])),
        Err(WireError::UnknownOpCode(9999))
    );
    assert_eq!(
        decode(&frame(2002, &[0; 8])),
        Err(WireError::UnsupportedOpCode(2002))
    );
}

#[test]
fn bad_checksum_and_missing_checksum() {
    let msg = OpMsg {
        flags: wire::FLAG_CHECKSUM_PRESENT,
        ..OpMsg::new(body())
    };
    let mut bytes = encode_msg(1, 0, &msg, None).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    assert!(matches!(decode(&bytes), Err(WireError::Checksum { .. })));
    // A body byte changed under a correct-looking checksum fails the same way.
    let mut bytes = encode_msg(1, 0, &msg, None).unwrap();
    bytes[30] ^= 1;
    assert!(matches!(decode(&bytes), Err(WireError::Checksum { .. })));
    // Flag set, but the frame ends right after the flags: no room for a checksum.
    assert!(matches!(
        decode(&msg_frame(1, &[])),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn section_length_overrunning() {
    let mut sections = kind0(&body());
    sections.extend(kind1("documents", &[rawdoc! { "a": 1 }], 1));
    assert!(matches!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::SectionLength { .. })
    ));
    let mut sections = kind0(&body());
    sections.extend(kind1("documents", &[], -100));
    assert!(matches!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::SectionLength { .. })
    ));
    // Body document longer than the message.
    let mut sections = kind0(&body());
    sections.truncate(sections.len() - 2);
    assert!(matches!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn sequence_document_overrunning_its_section() {
    let mut sections = kind0(&body());
    // The section size is one short, so the last document's final byte falls outside it.
    sections.extend(kind1("documents", &[rawdoc! { "a": 1 }], -1));
    sections.push(0);
    assert!(matches!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn body_section_count_must_be_one() {
    let mut two = kind0(&body());
    two.extend(kind0(&body()));
    assert_eq!(
        decode(&msg_frame(0, &two)),
        Err(WireError::BodySectionCount(2))
    );
    let none = kind1("documents", &[rawdoc! { "a": 1 }], 0);
    assert_eq!(
        decode(&msg_frame(0, &none)),
        Err(WireError::BodySectionCount(0))
    );
    assert_eq!(
        decode(&msg_frame(0, &[])),
        Err(WireError::BodySectionCount(0))
    );
}

#[test]
fn unknown_section_kind_and_duplicate_sequence() {
    let mut sections = kind0(&body());
    sections.push(2);
    assert_eq!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::UnknownSectionKind(2))
    );
    let mut sections = kind0(&body());
    sections.extend(kind1("documents", &[], 0));
    sections.extend(kind1("documents", &[], 0));
    assert!(
        matches!(decode(&msg_frame(0, &sections)), Err(WireError::DuplicateSequence(id)) if id == "documents")
    );
}

#[test]
fn unknown_required_flag_bits_rejected_optional_ignored() {
    for bit in 2..16 {
        let err = decode(&msg_frame(1 << bit, &kind0(&body()))).unwrap_err();
        assert_eq!(err, WireError::UnknownRequiredFlags(1 << bit));
    }
    for bit in 16..32 {
        assert!(
            decode(&msg_frame(1 << bit, &kind0(&body()))).is_ok(),
            "optional bit {bit}"
        );
    }
}

#[test]
fn invalid_bson_in_body() {
    let mut bad = body().into_bytes();
    bad[4] = 0x42; // element type that does not exist
    let mut sections = vec![0u8];
    sections.extend(bad);
    assert!(matches!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::InvalidBson { .. })
    ));
}

#[test]
fn oversized_document_rejected() {
    let big = rawdoc! { "b": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0; BSON_OBJECT_SIZE_INTERNAL_MAX] } };
    let frame = msg_frame(0, &kind0(&big));
    assert!(matches!(
        decode(&frame),
        Err(WireError::DocumentTooLarge { .. })
    ));
}

#[test]
fn legacy_count_and_trailing_bytes() {
    // OP_REPLY claiming 2 documents but carrying 1.
    let mut payload = 0i32.to_le_bytes().to_vec();
    payload.extend(0i64.to_le_bytes());
    payload.extend(0i32.to_le_bytes());
    payload.extend(2i32.to_le_bytes());
    payload.extend_from_slice(body().as_bytes());
    assert!(matches!(
        decode(&frame(1, &payload)),
        Err(WireError::ReplyCount {
            declared: 2,
            found: 1
        })
    ));
    // OP_QUERY with bytes after the selector, and with an unterminated namespace.
    let mut payload = 0i32.to_le_bytes().to_vec();
    payload.extend_from_slice(b"admin.$cmd\0");
    payload.extend([0; 8]);
    payload.extend_from_slice(body().as_bytes());
    payload.extend_from_slice(body().as_bytes());
    payload.push(7);
    assert!(matches!(
        decode(&frame(2004, &payload)),
        Err(WireError::TrailingBytes { count: 1, .. })
    ));
    assert!(matches!(
        decode(&frame(2004, b"\0\0\0\0admin")),
        Err(WireError::InvalidCString { .. })
    ));
}

fn compressed(original: i32, declared: i32, id: u8, data: &[u8]) -> Vec<u8> {
    let mut payload = original.to_le_bytes().to_vec();
    payload.extend(declared.to_le_bytes());
    payload.push(id);
    payload.extend_from_slice(data);
    frame(2012, &payload)
}

#[test]
fn compressed_size_lies() {
    let inner = &encode_msg(1, 0, &OpMsg::new(body()), None).unwrap()[16..];
    let real = inner.len() as i32;
    for compressor in Compressor::ALL {
        let data = compressor.compress(inner).unwrap();
        let ok = compressed(2013, real, compressor.id(), &data);
        assert!(decode(&ok).is_ok(), "{compressor:?}");
        for declared in [real - 1, real + 1, 0] {
            let err = decode(&compressed(2013, declared, compressor.id(), &data)).unwrap_err();
            let mismatch = matches!(
                err,
                WireError::DecompressedSizeMismatch { .. } | WireError::Decompress { .. }
            );
            assert!(mismatch, "{compressor:?} declared {declared}: {err}");
        }
        for declared in [-1, i32::MAX, (MESSAGE_SIZE_MAX - 15) as i32] {
            let err = decode(&compressed(2013, declared, compressor.id(), &data)).unwrap_err();
            assert!(
                matches!(err, WireError::UncompressedSizeInvalid { .. }),
                "{err}"
            );
        }
    }
}

#[test]
fn compressed_garbage_and_bad_headers() {
    let garbage = [0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04, 0x05];
    for compressor in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
        let err = decode(&compressed(2013, 100, compressor.id(), &garbage)).unwrap_err();
        let rejected = matches!(
            err,
            WireError::Decompress { .. } | WireError::DecompressedSizeMismatch { .. }
        );
        assert!(rejected, "{compressor:?}: {err}");
    }
    // noop "decompresses" to garbage, which then fails as an OP_MSG.
    assert!(decode(&compressed(2013, 9, 0, &garbage)).is_err());
    assert_eq!(
        decode(&compressed(2013, 9, 9, &garbage)),
        Err(WireError::UnknownCompressor(9))
    );
    assert_eq!(
        decode(&compressed(2012, 9, 0, &garbage)),
        Err(WireError::CompressedOpCode(2012))
    );
    assert!(matches!(
        decode(&frame(2012, &[1, 2])),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn frame_reader_yields_frames_and_waits() {
    let a = encode_msg(1, 0, &OpMsg::new(body()), None).unwrap();
    let b = encode_msg(
        2,
        0,
        &OpMsg::new(rawdoc! { "x": 1 }),
        Some(Compressor::Zstd),
    )
    .unwrap();
    let mut reader = FrameReader::new();
    reader.extend_from_slice(&a[..3]);
    assert_eq!(reader.next_message().unwrap(), None);
    assert_eq!(reader.bytes_needed().unwrap(), 16 - 3);
    reader.extend_from_slice(&a[3..]);
    reader.extend_from_slice(&b[..20]);
    assert_eq!(reader.next_message().unwrap().unwrap().header.request_id, 1);
    assert_eq!(reader.bytes_needed().unwrap(), b.len() - 20);
    assert_eq!(reader.next_message().unwrap(), None);
    reader.extend_from_slice(&b[20..]);
    let m = reader.next_message().unwrap().unwrap();
    assert_eq!(
        (m.header.request_id, m.compressor),
        (2, Some(Compressor::Zstd))
    );
    assert_eq!(reader.buffered_len(), 0);
}

#[test]
fn too_many_sequences_and_body_field_clashes() {
    let mut sections = kind0(&body());
    for id in ["a", "b", "c"] {
        sections.extend(kind1(id, &[], 0));
    }
    assert_eq!(
        decode(&msg_frame(0, &sections)),
        Err(WireError::TooManySequences { count_max: 2 })
    );
    let clashes = [
        (
            rawdoc! { "insert": "c", "documents": [] },
            "documents",
            true,
        ),
        (rawdoc! { "a": { "b": 1 } }, "a.b", true),
        (rawdoc! { "a": [{ "b": 1 }] }, "a.b", true),
        (rawdoc! { "a": { "c": 1 } }, "a.b", false),
        (rawdoc! { "a": 1 }, "a.b", false),
        (rawdoc! { "documentsX": 1 }, "documents", false),
    ];
    for (body, id, clash) in clashes {
        let mut sections = kind0(&body);
        sections.extend(kind1(id, &[rawdoc! {}], 0));
        let result = decode(&msg_frame(0, &sections));
        if clash {
            assert_eq!(
                result,
                Err(WireError::DuplicateBodyField(id.into())),
                "{body:?} {id}"
            );
        } else {
            assert!(result.is_ok(), "{body:?} {id}");
        }
    }
}

#[test]
fn mongod_codes_and_connection_policy() {
    let cases = [
        (WireError::UnknownRequiredFlags(4), 223, true),
        (WireError::TooManySequences { count_max: 2 }, 233, true),
        (
            WireError::Checksum {
                declared: 1,
                computed: 2,
            },
            288,
            true,
        ),
        (WireError::BodySectionCount(0), 40587, false),
        (WireError::BodySectionCount(2), 40430, false),
        (WireError::DuplicateSequence("d".into()), 40431, false),
        (WireError::UnknownSectionKind(9), 40432, false),
        (WireError::DuplicateBodyField("d".into()), 40433, false),
        (
            WireError::InvalidBson {
                what: "x",
                reason: "y",
            },
            22,
            false,
        ),
        (
            WireError::MessageTooLarge {
                length_bytes: 1 << 30,
                max_bytes: MESSAGE_SIZE_MAX,
            },
            9,
            true,
        ),
    ];
    for (error, code, closes) in cases {
        assert_eq!(
            (error.mongod_code().0, error.closes_connection()),
            (code, closes),
            "{error}"
        );
    }
}
