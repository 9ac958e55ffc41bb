#!/usr/bin/env python3
"""RSS of a cairn process around 5,000 abandoned cursors (issue 12's finding 3).

Starts `cairn` (path in argv[1]) on a fresh data directory, loads 100 documents of 1 KiB, opens
5,000 cursors with `find` batchSize 1 that are never closed, sets cursorTimeoutMillis to 1 so the
reaper closes them all at its next pass, then leaves the server idle (no commands) and reads its
RSS at 5, 15 and 30 s. Prints RSS (MiB) at each step as one JSON line. Extra environment (e.g. `_RJEM_MALLOC_CONF=background_thread:false`)
passes through to the server, so allocator settings can be compared on one binary.

    python3 e2e/bench/cursor_rss.py target/release/cairn
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import pymongo

CURSORS = 5000
DOCS = 100
PAD_BYTES = 1024


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def start(binary, dbpath):
    proc = subprocess.Popen(
        [binary, "--port", "0", "--dbpath", dbpath, "--log-format", "json",
         ],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "Waiting for connections" in line:
            port = int(re.search(r'"port":(\d+)', line).group(1))
            return proc, port
    raise SystemExit("cairn did not start")


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(binary, os.path.join(tmp, "db"))
        try:
            client = pymongo.MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true")
            db = client.rss
            db.c.insert_many([{"_id": i, "pad": "p" * PAD_BYTES} for i in range(DOCS)])
            time.sleep(2)
            out = {"baseline_mib": rss_mib(proc.pid)}
            for _ in range(CURSORS):
                db.command("find", "c", batchSize=1)
            out["cursors_open_mib"] = rss_mib(proc.pid)
            client.admin.command("setParameter", 1, cursorTimeoutMillis=1)
            status = db.command("serverStatus")
            out["cursors_open"] = status.get("metrics", {}).get("cursor", {}).get("open", {}).get("total")
            deadline = time.time() + 120
            while time.time() < deadline:
                open_now = db.command("serverStatus")["metrics"]["cursor"]["open"]["total"]
                if open_now == 0:
                    break
                time.sleep(0.5)
            out["reaped_after_s"] = round(120 - (deadline - time.time()), 1)
            out["after_reap_mib"] = rss_mib(proc.pid)
            for wait in (5, 15, 30):
                time.sleep(wait - (0 if wait == 5 else (5 if wait == 15 else 15)))
                out[f"after_reap_{wait}s_mib"] = rss_mib(proc.pid)
            print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in out.items()}))
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
