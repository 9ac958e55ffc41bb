//! Proves that every opcode encodes to exactly the bytes the wire spec describes and decodes back.
//! How: each test hand-assembles the expected frame field by field, compares it with the encoder's output, then decodes it.

use bson::{RawDocumentBuf, rawdoc};
use wire::{
    Body, Compressor, DocumentSequence, FLAG_CHECKSUM_PRESENT, FLAG_EXHAUST_ALLOWED,
    FLAG_MORE_TO_COME, Header, Message, OpCode, OpMsg, OpQuery, OpReply, decode, encode_msg,
    encode_query, encode_reply, frame_length,
};

fn i32le(v: i32) -> [u8; 4] {
    v.to_le_bytes()
}

/// Header + payload, with the length filled in.
fn frame(request_id: i32, response_to: i32, op: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(i32le(16 + payload.len() as i32));
    out.extend(i32le(request_id));
    out.extend(i32le(response_to));
    out.extend(i32le(op));
    out.extend_from_slice(payload);
    out
}

fn hello() -> RawDocumentBuf {
    rawdoc! { "hello": 1, "$db": "admin" }
}

fn check_roundtrip(bytes: &[u8], expected: &Message) {
    assert_eq!(frame_length(bytes).unwrap(), Some(bytes.len()));
    assert_eq!(frame_length(&bytes[..bytes.len() - 1]).unwrap(), None);
    assert_eq!(&decode(bytes).unwrap(), expected);
}

fn msg_message(request_id: i32, response_to: i32, len: usize, msg: OpMsg) -> Message {
    let header = Header {
        message_length: len as i32,
        request_id,
        response_to,
        op_code: OpCode::Msg as i32,
    };
    Message {
        header,
        body: Body::Msg(msg),
        compressor: None,
    }
}

#[test]
fn op_msg_body_only() {
    let msg = OpMsg::new(hello());
    let mut payload = vec![0, 0, 0, 0, 0];
    payload.extend_from_slice(hello().as_bytes());
    let expected = frame(42, 0, 2013, &payload);
    let encoded = encode_msg(42, 0, &msg, None).unwrap();
    assert_eq!(encoded, expected);
    check_roundtrip(&encoded, &msg_message(42, 0, expected.len(), msg));
}

#[test]
fn op_msg_two_sequences() {
    let docs_a = vec![rawdoc! { "_id": 1 }, rawdoc! { "_id": 2, "x": "y" }];
    let docs_b = vec![rawdoc! { "q": {}, "u": { "$set": { "a": 1 } } }];
    let body = rawdoc! { "insert": "c", "$db": "test" };
    let msg = OpMsg {
        flags: 0,
        body: body.clone(),
        sequences: vec![
            DocumentSequence {
                identifier: "documents".into(),
                documents: shared(&docs_a),
            },
            DocumentSequence {
                identifier: "updates".into(),
                documents: shared(&docs_b),
            },
        ],
    };
    let mut payload = i32le(0).to_vec();
    payload.push(0);
    payload.extend_from_slice(body.as_bytes());
    for (id, docs) in [("documents", &docs_a), ("updates", &docs_b)] {
        payload.push(1);
        let size: usize = 4 + id.len() + 1 + docs.iter().map(|d| d.as_bytes().len()).sum::<usize>();
        payload.extend(i32le(size as i32));
        payload.extend_from_slice(id.as_bytes());
        payload.push(0);
        docs.iter()
            .for_each(|d| payload.extend_from_slice(d.as_bytes()));
    }
    let expected = frame(7, 0, 2013, &payload);
    let encoded = encode_msg(7, 0, &msg, None).unwrap();
    assert_eq!(encoded, expected);
    check_roundtrip(&encoded, &msg_message(7, 0, expected.len(), msg.clone()));
    assert_eq!(msg.sequence("updates").unwrap().documents, shared(&docs_b));
}

#[test]
fn op_msg_with_checksum() {
    let msg = OpMsg {
        flags: FLAG_CHECKSUM_PRESENT,
        body: hello(),
        sequences: vec![],
    };
    let mut payload = i32le(1).to_vec();
    payload.push(0);
    payload.extend_from_slice(hello().as_bytes());
    payload.extend([0, 0, 0, 0]); // checksum placeholder, counted in the length
    let mut expected = frame(9, 0, 2013, &payload);
    let crc_at = expected.len() - 4;
    let crc = crc32c::crc32c(&expected[..crc_at]);
    expected[crc_at..].copy_from_slice(&crc.to_le_bytes());
    let encoded = encode_msg(9, 0, &msg, None).unwrap();
    assert_eq!(encoded, expected);
    let decoded = decode(&encoded).unwrap();
    let Body::Msg(m) = &decoded.body else {
        panic!("not OP_MSG")
    };
    assert!(m.checksum_present() && !m.more_to_come());
    check_roundtrip(&encoded, &msg_message(9, 0, expected.len(), msg));
}

#[test]
fn op_msg_more_to_come_and_exhaust() {
    let flags = FLAG_MORE_TO_COME | FLAG_EXHAUST_ALLOWED;
    let msg = OpMsg {
        flags,
        body: rawdoc! { "ok": 1.0 },
        sequences: vec![],
    };
    let mut payload = flags.to_le_bytes().to_vec();
    assert_eq!(payload, [2, 0, 1, 0]);
    payload.push(0);
    payload.extend_from_slice(rawdoc! { "ok": 1.0 }.as_bytes());
    let expected = frame(11, 10, 2013, &payload);
    let encoded = encode_msg(11, 10, &msg, None).unwrap();
    assert_eq!(encoded, expected);
    let Body::Msg(m) = decode(&encoded).unwrap().body else {
        panic!("not OP_MSG")
    };
    assert!(m.more_to_come() && m.exhaust_allowed() && !m.checksum_present());
}

fn sample_query() -> OpQuery {
    OpQuery {
        flags: 4,
        full_collection_name: "admin.$cmd".into(),
        number_to_skip: 0,
        number_to_return: -1,
        query: rawdoc! { "isMaster": 1, "client": { "driver": "x" } },
        return_fields: None,
    }
}

#[test]
fn op_query_with_and_without_selector() {
    for fields in [None, Some(rawdoc! { "a": 1 })] {
        let query = OpQuery {
            return_fields: fields.clone(),
            ..sample_query()
        };
        let mut payload = i32le(4).to_vec();
        payload.extend_from_slice(b"admin.$cmd\0");
        payload.extend(i32le(0));
        payload.extend(i32le(-1));
        payload.extend_from_slice(query.query.as_bytes());
        if let Some(f) = &fields {
            payload.extend_from_slice(f.as_bytes());
        }
        let expected = frame(1, 0, 2004, &payload);
        let encoded = encode_query(1, 0, &query, None).unwrap();
        assert_eq!(encoded, expected);
        let header = Header {
            message_length: expected.len() as i32,
            request_id: 1,
            response_to: 0,
            op_code: 2004,
        };
        check_roundtrip(
            &encoded,
            &Message {
                header,
                body: Body::Query(query.clone()),
                compressor: None,
            },
        );
        assert_eq!(query.database(), "admin");
    }
}

fn sample_reply() -> OpReply {
    OpReply {
        response_flags: 8,
        cursor_id: 0x0102_0304_0506_0708,
        starting_from: 3,
        documents: vec![rawdoc! { "ismaster": true, "ok": 1.0 }, rawdoc! {}],
    }
}

#[test]
fn op_reply() {
    let reply = sample_reply();
    let mut payload = i32le(8).to_vec();
    payload.extend(0x0102_0304_0506_0708i64.to_le_bytes());
    payload.extend(i32le(3));
    payload.extend(i32le(2));
    reply
        .documents
        .iter()
        .for_each(|d| payload.extend_from_slice(d.as_bytes()));
    let expected = frame(5, 1, 1, &payload);
    let encoded = encode_reply(5, 1, &reply, None).unwrap();
    assert_eq!(encoded, expected);
    let header = Header {
        message_length: expected.len() as i32,
        request_id: 5,
        response_to: 1,
        op_code: 1,
    };
    check_roundtrip(
        &encoded,
        &Message {
            header,
            body: Body::Reply(reply),
            compressor: None,
        },
    );
}

/// Expected OP_COMPRESSED bytes around an already-encoded plain frame.
fn compressed_frame(plain: &[u8], compressor: Compressor, compressed: &[u8]) -> Vec<u8> {
    let mut payload = plain[12..16].to_vec(); // original opCode
    payload.extend(i32le(plain.len() as i32 - 16));
    payload.push(compressor as u8);
    payload.extend_from_slice(compressed);
    let request_id = i32::from_le_bytes(plain[4..8].try_into().unwrap());
    let response_to = i32::from_le_bytes(plain[8..12].try_into().unwrap());
    frame(request_id, response_to, 2012, &payload)
}

fn independent_compress(compressor: Compressor, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match compressor {
        Compressor::Noop => data.to_vec(),
        Compressor::Snappy => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        Compressor::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Zstd => zstd::bulk::compress(data, 0).unwrap(),
    }
}

#[test]
fn op_compressed_each_compressor_each_opcode() {
    let msg = OpMsg {
        flags: FLAG_CHECKSUM_PRESENT,
        ..OpMsg::new(rawdoc! { "find": "c", "filter": { "a": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" } })
    };
    for compressor in Compressor::ALL {
        let plains = [
            (
                encode_msg(3, 2, &msg, None).unwrap(),
                encode_msg(3, 2, &msg, Some(compressor)).unwrap(),
            ),
            (
                encode_reply(4, 3, &sample_reply(), None).unwrap(),
                encode_reply(4, 3, &sample_reply(), Some(compressor)).unwrap(),
            ),
            (
                encode_query(5, 0, &sample_query(), None).unwrap(),
                encode_query(5, 0, &sample_query(), Some(compressor)).unwrap(),
            ),
        ];
        for (plain, encoded) in plains {
            let expected = compressed_frame(
                &plain,
                compressor,
                &independent_compress(compressor, &plain[16..]),
            );
            assert_eq!(encoded, expected, "{compressor:?}");
            let mut want = decode(&plain).unwrap();
            want.compressor = Some(compressor);
            check_roundtrip(&encoded, &want);
        }
        assert_eq!(Compressor::from_name(compressor.name()), Some(compressor));
        assert_eq!(Compressor::from_id(compressor.id()), Some(compressor));
    }
}

#[test]
fn msg_writer_matches_encode_msg() {
    let stored = rawdoc! { "_id": 1, "v": [1, 2, { "z": null }] };
    let mut w = wire::MsgWriter::new(8, 7, FLAG_CHECKSUM_PRESENT);
    w.body()
        .begin_document("cursor")
        .begin_array("firstBatch")
        .append_raw_document("", &stored)
        .append_raw_document("", &stored)
        .end()
        .append_i64("id", 0)
        .append_str("ns", "db.c")
        .end()
        .append_f64("ok", 1.0);
    let built = w.finish(None).unwrap();
    let body = rawdoc! {
        "cursor": { "firstBatch": [stored.clone(), stored.clone()], "id": 0i64, "ns": "db.c" },
        "ok": 1.0,
    };
    let msg = OpMsg {
        flags: FLAG_CHECKSUM_PRESENT,
        body,
        sequences: vec![],
    };
    assert_eq!(built, encode_msg(8, 7, &msg, None).unwrap());
}

#[test]
fn doc_writer_append_bson_any_value() {
    let oid = bson::oid::ObjectId::from_bytes([7; 12]);
    let mut w = wire::DocWriter::new();
    w.append_bson("o", oid)
        .append_bson("n", bson::RawBson::Null)
        .append_bool("b", true)
        .append_null("z");
    w.begin_array("a")
        .append_i32("", 5)
        .append_bson("", "s")
        .end();
    let want = rawdoc! { "o": oid, "n": null, "b": true, "z": null, "a": [5, "s"] };
    assert_eq!(w.finish(), want);
}

#[test]
fn large_zstd_batch_near_the_limit_decodes() {
    // A 40 MB one-shot zstd frame (window = content size) must be accepted.
    let docs = vec![
        rawdoc! { "x": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![7; 4_000_000] } };
        10
    ];
    let seq = DocumentSequence {
        identifier: "documents".into(),
        documents: shared(&docs),
    };
    let msg = OpMsg {
        sequences: vec![seq],
        ..OpMsg::new(rawdoc! { "insert": "c" })
    };
    let frame = encode_msg(1, 0, &msg, Some(Compressor::Zstd)).unwrap();
    assert!(frame.len() < 1_000_000);
    assert_eq!(decode(&frame).unwrap().body, Body::Msg(msg));
}

#[test]
fn hand_written_snappy_literal_block_decodes() {
    // Snappy raw format: varint uncompressed length, then a literal element whose tag byte is
    // (length - 1) << 2 for lengths up to 60, then the bytes themselves.
    let plain = encode_msg(21, 0, &OpMsg::new(rawdoc! { "a": 1 }), None).unwrap();
    let inner = &plain[16..];
    assert!(inner.len() <= 60);
    let mut block = vec![inner.len() as u8, ((inner.len() - 1) << 2) as u8];
    block.extend_from_slice(inner);
    let framed = compressed_frame(&plain, Compressor::Snappy, &block);
    let mut want = decode(&plain).unwrap();
    want.compressor = Some(Compressor::Snappy);
    assert_eq!(decode(&framed).unwrap(), want);
}

/// Documents as a sequence carries them.
fn shared(docs: &[bson::RawDocumentBuf]) -> Vec<wire::SharedDocument> {
    docs.iter().cloned().map(Into::into).collect()
}
