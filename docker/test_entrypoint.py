"""Checks docker/entrypoint.sh's MONGO_INITDB_ROOT_* handling outside Docker: the script runs as
an unprivileged user (as it does in the image after dropping root) with the freshly built
binaries on PATH, against a temporary data directory, and pymongo checks what a user would.

Usage: python docker/test_entrypoint.py BIN_DIR   (BIN_DIR holds cairn, cairn-healthcheck and
cairn-create-user, e.g. target/debug). Prints one line per check and 'N passed, N failed'.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pymongo

BIN_DIR = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug")
HERE = os.path.dirname(os.path.abspath(__file__))
NOBODY = 65534
START_TIMEOUT_S = 90
results = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """One entrypoint run: `entrypoint.sh cairn --port P --dbpath D` with `env` added."""

    def __init__(self, dbpath, env, args=(), port=None):
        self.port = port or free_port()
        full = dict(os.environ, PATH=f"{BIN_DIR}:{os.environ['PATH']}",
                    CAIRN_INITDB_PORT=str(free_port()))
        full.update(env)
        where = [] if dbpath is None else ["--port", str(self.port), "--bind_ip", "127.0.0.1",
                                           "--dbpath", dbpath]
        cmd = ["bash", os.path.join(HERE, "entrypoint.sh"), "cairn", *where,
               "--log-format", "json", *args]
        if os.getuid() == 0:
            cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]
        self.proc = subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.out, self.err = [], []
        self.ready = threading.Event()
        self.drains = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self.out, True), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self.err, False), daemon=True),
        ]
        for t in self.drains:
            t.start()

    def _drain(self, pipe, sink, watch):
        for line in pipe:
            sink.append(line)
            if watch and "Waiting for connections" in line:
                try:
                    if json.loads(line).get("port") == self.port:
                        self.ready.set()
                except ValueError:
                    pass

    def wait_ready(self):
        if not self.ready.wait(START_TIMEOUT_S):
            raise AssertionError("server did not start:\n" + "".join(self.err[-20:] + self.out[-20:]))

    def wait_exit(self, timeout=START_TIMEOUT_S):
        code = self.proc.wait(timeout=timeout)
        # The pipes end with the process; without the join, text() could be read before the
        # drains took the last lines (a refusal then looked like an exit with no message).
        for t in self.drains:
            t.join(timeout)
        return code

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=60)
        assert code == 0, f"exit {code}"

    def client(self, **kw):
        return pymongo.MongoClient("127.0.0.1", self.port, directConnection=True,
                                   serverSelectionTimeoutMS=20000, **kw)

    def text(self):
        return "".join(self.out + self.err)


def check(name, fn):
    try:
        detail = fn()
        results.append(True)
        print(f"PASS: {name}" + (f" ({detail})" if detail else ""), flush=True)
    except Exception as e:  # one failing check must not hide the others
        results.append(False)
        print(f"FAIL: {name}: {e}", flush=True)


def datadir():
    d = tempfile.mkdtemp(prefix="cairn-entrypoint-")
    os.chmod(d, 0o777)
    db = os.path.join(d, "db")
    os.mkdir(db)
    os.chmod(db, 0o777)
    return d, db


ROOT = {"MONGO_INITDB_ROOT_USERNAME": "root", "MONGO_INITDB_ROOT_PASSWORD": "pw with spaces"}


def root_user_then_auth():
    top, db = datadir()
    try:
        r = Run(db, ROOT)
        r.wait_ready()
        with r.client(username="root", password="pw with spaces", authSource="admin") as c:
            c.app.t.insert_one({"_id": 1})
            opts = c.admin.command("getCmdLineOpts")["parsed"]
            assert opts["security"]["authorization"] == "enabled", opts
        with r.client() as c:
            try:
                c.app.t.find_one()
                raise AssertionError("unauthenticated read served")
            except pymongo.errors.OperationFailure as e:
                assert e.code == 13, e.details
        assert "creating the root user 'root'" in r.text()
        r.stop()
        assert "pw with spaces" not in r.text(), "the password reached the output"
        again = Run(db, ROOT)
        again.wait_ready()
        with again.client(username="root", password="pw with spaces", authSource="admin") as c:
            assert c.app.t.count_documents({}) == 1
        again.stop()
        assert "creating the root user" not in again.text(), "user created twice"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def password_file():
    top, db = datadir()
    try:
        secret = os.path.join(top, "pw")
        with open(secret, "w") as f:
            f.write("from-a-file\n")
        os.chmod(secret, 0o444)
        r = Run(db, {"MONGO_INITDB_ROOT_USERNAME": "admin", "MONGO_INITDB_ROOT_PASSWORD_FILE": secret})
        r.wait_ready()
        with r.client(username="admin", password="from-a-file", authSource="admin",
                      authMechanism="SCRAM-SHA-1") as c:
            c.admin.command("ping")
        r.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def dash_password_reaches_mongosh_whole():
    """A password beginning with '-' logs in, and mongosh gets it as one --password=VALUE token
    (a fake mongosh on PATH records its arguments; as two tokens it was read as an option)."""
    top, db = datadir()
    try:
        fake_bin, scripts = os.path.join(top, "bin"), os.path.join(top, "initdb")
        argv_file = os.path.join(top, "mongosh-argv")
        for d in (fake_bin, scripts):
            os.mkdir(d)
            os.chmod(d, 0o777)
        with open(os.path.join(fake_bin, "mongosh"), "w") as f:
            f.write(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {argv_file}\n')
        os.chmod(os.path.join(fake_bin, "mongosh"), 0o755)
        with open(os.path.join(scripts, "init.js"), "w") as f:
            f.write("db.t.insertOne({})\n")
        os.chmod(os.path.join(scripts, "init.js"), 0o644)
        pw = "-starts-with-a-dash"
        env = {"MONGO_INITDB_ROOT_USERNAME": "root", "MONGO_INITDB_ROOT_PASSWORD": pw,
               "CAIRN_INITDB_DIR": scripts, "PATH": f"{fake_bin}:{BIN_DIR}:{os.environ['PATH']}"}
        r = Run(db, env)
        r.wait_ready()
        with r.client(username="root", password=pw, authSource="admin") as c:
            c.admin.command("ping")
        r.stop()
        with open(argv_file) as f:
            argv = f.read().splitlines()
        assert f"--password={pw}" in argv and "--username=root" in argv, argv
        assert pw not in r.text(), "the password reached the output"
        return " ".join(a for a in argv if not a.startswith("--password"))
    finally:
        shutil.rmtree(top, ignore_errors=True)


def refused(env, args, needle):
    top, db = datadir()
    try:
        r = Run(db, env, args)
        code = r.wait_exit()
        assert code == 1 and needle in r.text(), f"exit {code}: {r.text()[-500:]}"
        return f"exit {code}"
    finally:
        shutil.rmtree(top, ignore_errors=True)


def no_variables_no_auth():
    top, db = datadir()
    try:
        r = Run(db, {})
        r.wait_ready()
        with r.client() as c:
            c.app.t.insert_one({"open": True})
            assert "security" not in c.admin.command("getCmdLineOpts")["parsed"]
        r.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


def config_file_paths():
    """-f FILE: the file's dbPath and bindIp stand; the entrypoint adds neither default."""
    top, db = datadir()
    try:
        port = free_port()
        conf = os.path.join(top, "mongod.conf")
        with open(conf, "w") as f:
            f.write(f"net:\n  port: {port}\n  bindIp: 127.0.0.1  # loopback\n"
                    f"storage:\n  dbPath: \"{db}\"\n")
        os.chmod(conf, 0o644)
        r = Run(None, {}, ("-f", conf), port=port)
        r.wait_ready()
        with r.client() as c:
            parsed = c.admin.command("getCmdLineOpts")["parsed"]
            assert parsed["storage"]["dbPath"] == db, parsed
            assert parsed["net"]["bindIp"] == "127.0.0.1", parsed
        r.stop()
    finally:
        shutil.rmtree(top, ignore_errors=True)


check("root user created on first start, --auth then and after a restart", root_user_then_auth)
check("MONGO_INITDB_ROOT_PASSWORD_FILE", password_file)
check("a password starting with '-': one --password=VALUE for mongosh", dash_password_reaches_mongosh_whole)
check("only the user name: refused",
      lambda: refused({"MONGO_INITDB_ROOT_USERNAME": "root"}, (), "both must be set"))
check("both the password and its _FILE: refused",
      lambda: refused(dict(ROOT, MONGO_INITDB_ROOT_PASSWORD_FILE="/nonexistent"), (), "are exclusive"))
check("root user with --noauth: refused", lambda: refused(ROOT, ("--noauth",), "--noauth"))
check("no variables: an open server, as before", no_variables_no_auth)
check("-f mongod.conf: its dbPath and bindIp are kept", config_file_paths)
failed = results.count(False)
print(f"{results.count(True)} passed, {failed} failed")
sys.exit(1 if failed else 0)
