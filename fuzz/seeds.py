#!/usr/bin/env python3
"""Writes the seed corpora of the byte-level fuzz targets (wire_frame, bson_validate) into
fuzz/seeds/<target>/: OP_MSG and OP_QUERY frames of the commands drivers send first, and BSON
documents holding every type with edge values. Run once after changing it; the files are
committed. The structured targets (filter, update, ...) need no seeds: their inputs are
choices among a vocabulary, which libFuzzer explores from an empty corpus."""

import datetime
import os
import struct
import uuid

import bson
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.codec_options import CodecOptions

HERE = os.path.dirname(os.path.abspath(__file__))
OPTS = CodecOptions(uuid_representation=4)

DOCS = [
    {},
    {"_id": 1, "a": "x"},
    {"n": None, "t": True, "f": False, "i": 2**31 - 1, "l": Int64(-(2**63)), "d": float("nan")},
    {"inf": float("inf"), "neg0": -0.0, "dec": Decimal128("-1.000E-6176"), "big": Decimal128("9.999999999999999999999999999999999E+6144")},
    {"oid": ObjectId("64b7f0c2a1b2c3d4e5f60718"), "date": datetime.datetime(1969, 12, 31, 23, 59, 59), "ts": Timestamp(1, 2)},
    {"bin": Binary(b"\x00\x01", 0), "uuid": Binary(uuid.UUID(int=1).bytes, 4), "old": Binary(b"\x04\x00\x00\x00abcd", 2)},
    {"re": Regex("^a.*", "imsx"), "code": Code("x"), "scoped": Code("x", {"a": 1}), "min": MinKey(), "max": MaxKey()},
    {"a": [1, [2, [3, {"b": [4]}]]], "s": "é\u0000"[:1], "deep": {"x": {"y": {"z": {}}}}},
]

COMMANDS = [
    {"hello": 1, "$db": "admin", "client": {"driver": {"name": "seed", "version": "1"}}},
    {"insert": "c", "documents": [{"_id": 1}], "ordered": True, "$db": "db"},
    {"find": "c", "filter": {"a": {"$gt": 1}}, "sort": {"a": -1}, "limit": 5, "$db": "db"},
    {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "multi": True}], "$db": "db"},
    {"aggregate": "c", "pipeline": [{"$group": {"_id": "$a", "n": {"$sum": 1}}}], "cursor": {}, "$db": "db"},
    {"getMore": Int64(1), "collection": "c", "$db": "db"},
]


def op_msg(body, request_id, sequence=None, checksum=False):
    payload = struct.pack("<I", 2 if checksum else 0) + b"\x00" + bson.encode(body, codec_options=OPTS)
    if sequence is not None:
        ident, docs = sequence
        items = b"".join(bson.encode(d, codec_options=OPTS) for d in docs)
        section = ident.encode() + b"\x00" + items
        payload += b"\x01" + struct.pack("<i", 4 + len(section)) + section
    if checksum:
        payload += b"\x00\x00\x00\x00"
    header = struct.pack("<iiii", 16 + len(payload), request_id, 0, 2013)
    return header + payload


def op_query(body, request_id):
    payload = struct.pack("<i", 0) + b"admin.$cmd\x00" + struct.pack("<ii", 0, -1) + bson.encode(body)
    return struct.pack("<iiii", 16 + len(payload), request_id, 0, 2004) + payload


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for i, doc in enumerate(DOCS):
        write("bson_validate", f"doc{i}", bson.encode(doc, codec_options=OPTS))
    for i, cmd in enumerate(COMMANDS):
        write("wire_frame", f"msg{i}", op_msg(cmd, i + 1))
    write("wire_frame", "sequence", op_msg({"insert": "c", "$db": "db"}, 90, ("documents", DOCS[1:4])))
    write("wire_frame", "checksum", op_msg({"ping": 1, "$db": "admin"}, 91, checksum=True))
    write("wire_frame", "query", op_query({"isMaster": 1}, 92))
    write("wire_frame", "two", op_msg(COMMANDS[0], 93) + op_msg(COMMANDS[2], 94))


if __name__ == "__main__":
    main()
