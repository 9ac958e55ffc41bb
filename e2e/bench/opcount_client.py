#!/usr/bin/env python3
"""Sends N insertOne and N findOne-by-_id commands to a cairn server over raw OP_MSG, one at a
time, shaped as the Rust driver sends them (an lsid, `$db`). For instruction counts of the
server under callgrind: two runs of different N differ by the per-op cost alone.

Usage: opcount_client.py HOST:PORT N [--kind insert|find|both]
"""
import socket
import struct
import sys


def cstring(s):
    return s.encode() + b"\x00"


def element(key, value):
    if isinstance(value, bool):
        return b"\x08" + cstring(key) + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x10" + cstring(key) + struct.pack("<i", value)
    if isinstance(value, str):
        data = value.encode() + b"\x00"
        return b"\x02" + cstring(key) + struct.pack("<i", len(data)) + data
    if isinstance(value, bytes):  # a UUID binary
        return b"\x05" + cstring(key) + struct.pack("<i", len(value)) + b"\x04" + value
    if isinstance(value, list):
        return b"\x04" + cstring(key) + document({str(i): v for i, v in enumerate(value)})
    if isinstance(value, dict):
        return b"\x03" + cstring(key) + document(value)
    raise TypeError(type(value))


def document(d):
    body = b"".join(element(k, v) for k, v in d.items())
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


class Conn:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.request_id = 0

    def command(self, body, sequence=None):
        self.request_id += 1
        payload = struct.pack("<I", 0) + b"\x00" + document(body)
        if sequence:  # a kind-1 section, as drivers send inserted documents
            name, docs = sequence
            data = cstring(name) + b"".join(document(d) for d in docs)
            payload += b"\x01" + struct.pack("<i", len(data) + 4) + data
        header = struct.pack("<iiii", 16 + len(payload), self.request_id, 0, 2013)
        self.sock.sendall(header + payload)
        size = struct.unpack("<i", self.recv(4))[0]
        reply = self.recv(size - 4)
        # ok: 1.0 appears as a double element named "ok"
        if b"\x01ok\x00" not in reply or b"errmsg" in reply:
            raise RuntimeError(f"command failed: {body} -> {reply!r}")

    def recv(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise RuntimeError("connection closed")
            out += chunk
        return out


def main():
    addr, n = sys.argv[1], int(sys.argv[2])
    kind = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--kind" else "both"
    conn = Conn(addr)
    lsid = {"id": bytes(range(16))}
    if kind in ("insert", "both"):
        for i in range(n):
            conn.command({"insert": "c", "ordered": True, "$db": "bench", "lsid": lsid},
                         ("documents", [{"_id": i, "name": "user" + str(i), "n": i}]))
    if kind in ("find", "both"):
        for i in range(n):
            conn.command({"find": "c", "filter": {"_id": i}, "limit": 1, "singleBatch": True,
                          "$db": "bench", "lsid": lsid})


if __name__ == "__main__":
    main()
