"""Checks every promise of the cairn image (docs/DOCKER.md) as a user meets it: containers started
with the docker CLI, a real driver (pymongo) on the host, ports published on 127.0.0.1 only.

Usage: python docker/test_image.py IMAGE   (docker/test.sh builds the image and calls this)
Prints one line per check, then a closing 'N passed, N failed' line; exit 1 when any failed.
Everything it makes (containers, volumes, directories) carries this run's id and is removed at
the end.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import bson
import pymongo

IMAGE = sys.argv[1] if len(sys.argv) > 1 else "cairn:test"
RUN_ID = f"cairn-test-{os.getpid()}"
STOP_GRACE_S = 10  # docker stop's default before SIGKILL
HEALTHY_WAIT_S = 60  # the image probes every 10 s, first after 10 s
CONNECT_TIMEOUT_MS = 30_000
CAIRN_UID = 999

CHECKS = []
state = {}  # what one check leaves for the next: the main container and its volume
containers = []
volumes = []
tmpdirs = []
results = []


def docker(*args, check=True, timeout=120):
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


def volume():
    name = f"{RUN_ID}-{len(volumes)}"
    docker("volume", "create", name)
    volumes.append(name)
    return name


def tmpdir(mode=0o755):
    path = tempfile.mkdtemp(prefix=f"{RUN_ID}-")
    os.chmod(path, mode)
    tmpdirs.append(path)
    return path


def start(*opts, args=(), image=None):
    """`docker run -d OPTS IMAGE ARGS` with 27017 published on a free 127.0.0.1 port."""
    cid = docker("run", "-d", "--label", RUN_ID, "-p", "127.0.0.1::27017", *opts,
                 image or IMAGE, *args).stdout.strip()
    containers.append(cid)
    return cid


def client(cid):
    mapping = docker("port", cid, "27017/tcp").stdout.split()[0]  # 127.0.0.1:49153
    host, port = mapping.rsplit(":", 1)
    return pymongo.MongoClient(host, int(port), directConnection=True,
                               serverSelectionTimeoutMS=CONNECT_TIMEOUT_MS)


def logs(cid):
    """(stdout, stderr) of the container, kept apart as the docker CLI passes them on."""
    proc = docker("logs", cid)
    return proc.stdout, proc.stderr


def inspect(cid, fmt):
    return docker("inspect", "-f", fmt, cid).stdout.strip()


def wait_exit(cid, timeout_s=60):
    return int(docker("wait", cid, timeout=timeout_s).stdout.strip())


def check(name):
    """Registers a check; main() runs them in order. A check passes when it returns (an optional
    detail string) and fails on any exception; the others still run."""
    def register(fn):
        CHECKS.append((name, fn))
        return fn
    return register


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def op_msg(body):
    """An OP_MSG frame with one kind-0 section: what an initdb shell script can send over bash's
    /dev/tcp when the image has no client."""
    payload = struct.pack("<I", 0) + b"\x00" + bson.encode(body)
    return struct.pack("<iiii", 16 + len(payload), 1, 0, 2013) + payload


# --- the checks, in the order a user meets them -------------------------------------------------

@check("image metadata: port 27017, volume /data/db, HEALTHCHECK, entrypoint + CMD cairn")
def _():
    cfg = json.loads(docker("image", "inspect", "-f", "{{json .Config}}", IMAGE).stdout)
    expect("27017/tcp" in cfg["ExposedPorts"], cfg["ExposedPorts"])
    expect("/data/db" in cfg["Volumes"], cfg["Volumes"])
    expect(cfg["Healthcheck"]["Test"][0] == "CMD", cfg["Healthcheck"])
    expect(cfg["Entrypoint"] == ["docker-entrypoint.sh"] and cfg["Cmd"] == ["cairn"],
           (cfg["Entrypoint"], cfg["Cmd"]))
    size_mb = int(docker("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout) / 1e6
    return f"size {size_mb:.0f} MB"


@check("docker run -d -p -v VOLUME:/data/db: connect, write, read back")
def _():
    state["volume"] = volume()
    state["main"] = start("-v", f"{state['volume']}:/data/db")
    with client(state["main"]) as c:
        c.app.things.insert_many([{"_id": i, "n": i * i} for i in range(100)])
        expect(c.app.things.count_documents({}) == 100, "count after insert")
        expect(c.app.things.find_one({"_id": 7})["n"] == 49, "read back")
        opts = c.admin.command("getCmdLineOpts")["parsed"]
        expect(opts["net"].get("bindIpAll") is True, opts)
        expect(opts["storage"]["dbPath"] == "/data/db", opts)


@check("the server runs as the unprivileged cairn user, which owns a fresh volume's files")
def _():
    uid = docker("exec", state["main"], "sh", "-c", "awk '/^Uid:/{print $2}' /proc/1/status").stdout
    expect(uid.strip() == str(CAIRN_UID), f"PID 1 runs as uid {uid.strip()}")
    owners = docker("exec", state["main"], "sh", "-c", "stat -c %u /data/db /data/db/* | sort -u").stdout
    expect(owners.split() == [str(CAIRN_UID)], f"owners {owners.split()}")


@check("HEALTHCHECK becomes healthy")
def _():
    deadline = time.monotonic() + HEALTHY_WAIT_S
    while (status := inspect(state["main"], "{{.State.Health.Status}}")) != "healthy":
        expect(status in ("starting", "") and time.monotonic() < deadline, f"health {status}")
        time.sleep(0.5)


@check("docker restart keeps the data")
def _():
    docker("restart", state["main"])
    with client(state["main"]) as c:
        expect(c.app.things.count_documents({}) == 100, "count after restart")


@check("a second container on a volume in use refuses to start (the LOCK file)")
def _():
    other = start("-v", f"{state['volume']}:/data/db")
    code = wait_exit(other)
    out, err = logs(other)
    expect(code != 0, "second server started on a locked data directory")
    expect("is locked by another process" in out, f"exit {code} but not for the lock: {out!r}")
    return f"exit {code}"


@check(f"docker stop: SIGTERM, clean shutdown, exit 0 within the {STOP_GRACE_S} s grace")
def _():
    started = time.monotonic()
    docker("stop", state["main"], timeout=STOP_GRACE_S + 30)
    took_s = time.monotonic() - started
    code = int(inspect(state["main"], "{{.State.ExitCode}}"))
    out, _ = logs(state["main"])
    expect(code == 0, f"exit {code}")
    expect(took_s < STOP_GRACE_S, f"took {took_s:.1f} s")
    expect("cairn stopped cleanly" in out, "no 'cairn stopped cleanly' on stdout")
    return f"{took_s:.2f} s"


@check("a second container on the same volume sees the data")
def _():
    second = start("-v", f"{state['volume']}:/data/db")
    with client(second) as c:
        expect(c.app.things.count_documents({}) == 100, "count in the second container")
    docker("stop", second)


@check("a bind-mounted directory owned by root is handed to cairn")
def _():
    host = tmpdir(0o755)
    expect(os.stat(host).st_uid == 0, "the test itself must run as root")
    cid = start("-v", f"{host}:/data/db")
    with client(cid) as c:
        c.app.bound.insert_one({"_id": 1})
    docker("stop", cid)
    owners = {os.stat(os.path.join(host, f)).st_uid for f in os.listdir(host)} | {os.stat(host).st_uid}
    expect(owners == {CAIRN_UID}, f"owners on the host: {owners}")


@check("docker run --user UID with a directory that UID owns (no root at all)")
def _():
    host = tmpdir(0o755)
    os.chown(host, 12345, 12345)
    cid = start("--user", "12345:12345", "-v", f"{host}:/data/db")
    with client(cid) as c:
        c.app.bound.insert_one({"_id": 1})
    docker("stop", cid)


@check("initdb: *.sh run once on first start against the fresh server (executable run, others sourced)")
def _():
    scripts, out = tmpdir(0o755), tmpdir(0o777)
    with open(os.path.join(out, "insert.bin"), "wb") as f:
        f.write(op_msg({"insert": "seed", "documents": [{"_id": 1, "from": "initdb"}],
                        "$db": "app"}))
    with open(os.path.join(scripts, "10-run.sh"), "w") as f:
        f.write("#!/bin/bash\nset -e\n"
                "cairn-healthcheck 127.0.0.1:27017\n"
                "echo ran >> /initdb-out/runs\n"
                # No client in the image: the raw insert, then wait for the reply's first bytes.
                "exec 3<>/dev/tcp/127.0.0.1/27017\n"
                "cat /initdb-out/insert.bin >&3\n"
                "timeout 10 head -c 20 <&3 >/dev/null\n")
    os.chmod(os.path.join(scripts, "10-run.sh"), 0o755)
    with open(os.path.join(scripts, "20-sourced.sh"), "w") as f:
        f.write('echo "sourced with dbpath=$dbpath" >> /initdb-out/runs\n')
    vol = volume()
    mounts = ["-v", f"{vol}:/data/db", "-v", f"{scripts}:/docker-entrypoint-initdb.d:ro",
              "-v", f"{out}:/initdb-out"]
    cid = start(*mounts)
    with client(cid) as c:
        expect(c.app.seed.find_one({"_id": 1}) == {"_id": 1, "from": "initdb"}, "seeded document")
    docker("restart", cid)
    with client(cid) as c:
        c.admin.command("ping")
    docker("stop", cid)
    again = start(*mounts)
    with client(again) as c:
        c.admin.command("ping")
    docker("stop", again)
    with open(os.path.join(out, "runs")) as f:
        runs = f.read().splitlines()
    expect(runs == ["ran", "sourced with dbpath=/data/db"], f"runs file: {runs}")


@check("initdb: a failing script stops the first start (exit non-zero), the server stopped cleanly")
def _():
    scripts = tmpdir(0o755)
    with open(os.path.join(scripts, "10-fail.sh"), "w") as f:
        f.write("#!/bin/sh\necho about to fail\nexit 3\n")
    os.chmod(os.path.join(scripts, "10-fail.sh"), 0o755)
    cid = start("-v", f"{scripts}:/docker-entrypoint-initdb.d:ro")
    code = wait_exit(cid)
    out, _ = logs(cid)
    expect(code != 0 and "about to fail" in out, f"exit {code}, stdout {out!r}")
    expect("cairn stopped cleanly" in out, "the temporary server was not stopped cleanly")
    return f"exit {code}"


@check("initdb: a scripts directory the cairn user cannot read is refused, not skipped")
def _():
    scripts = tmpdir(0o700)  # root's, as mktemp -d makes it
    with open(os.path.join(scripts, "10-run.sh"), "w") as f:
        f.write("#!/bin/sh\ntrue\n")
    cid = start("-v", f"{scripts}:/docker-entrypoint-initdb.d:ro")
    code = wait_exit(cid)
    _, err = logs(cid)
    expect(code == 1 and "is not readable" in err, f"exit {code}, stderr {err!r}")


@check("initdb: *.js without mongosh in the image stops the first start with a clear message")
def _():
    scripts = tmpdir(0o755)
    with open(os.path.join(scripts, "10-users.js"), "w") as f:
        f.write("db.users.insertOne({name: 'a'});\n")
    cid = start("-v", f"{scripts}:/docker-entrypoint-initdb.d:ro")
    code = wait_exit(cid)
    _, err = logs(cid)
    expect(code == 1 and "needs mongosh" in err, f"exit {code}, stderr {err!r}")


@check("initdb: *.js run by mongosh when an image adds it (a stand-in that records its call)")
def _():
    ctx = tmpdir(0o755)
    with open(os.path.join(ctx, "mongosh"), "w") as f:
        f.write('#!/bin/sh\necho "$@" >> /initdb-out/mongosh-calls\n')
    os.chmod(os.path.join(ctx, "mongosh"), 0o755)
    with open(os.path.join(ctx, "Dockerfile"), "w") as f:
        f.write(f"FROM {IMAGE}\nCOPY mongosh /usr/local/bin/mongosh\n")
    derived = f"{RUN_ID}-mongosh"
    docker("build", "-q", "-t", derived, ctx)
    try:
        scripts, out = tmpdir(0o755), tmpdir(0o777)
        with open(os.path.join(scripts, "10-users.js"), "w") as f:
            f.write("db.users.insertOne({name: 'a'});\n")
        cid = start("-e", "MONGO_INITDB_DATABASE=app", "-v", f"{scripts}:/docker-entrypoint-initdb.d:ro",
                    "-v", f"{out}:/initdb-out", image=derived)
        with client(cid) as c:
            c.admin.command("ping")
        docker("rm", "-f", "-v", cid)
        with open(os.path.join(out, "mongosh-calls")) as f:
            calls = f.read().strip()
        expect(calls == "--quiet --norc mongodb://127.0.0.1:27017/app "
                        "/docker-entrypoint-initdb.d/10-users.js", f"mongosh called with {calls!r}")
    finally:
        docker("rmi", "-f", derived, check=False)


@check("arguments after the image name go to cairn (and the defaults stay)")
def _():
    cid = start(args=["--setParameter", "cursorTimeoutMillis=4321", "--slowms", "250"])
    with client(cid) as c:
        reply = c.admin.command("getCmdLineOpts")
        expect("--setParameter" in reply["argv"] and "cursorTimeoutMillis=4321" in reply["argv"],
               reply["argv"])
        parsed = reply["parsed"]
        expect(parsed["setParameter"]["cursorTimeoutMillis"] == "4321", parsed)
        expect(parsed["net"].get("bindIpAll") is True and parsed["storage"]["dbPath"] == "/data/db",
               parsed)
    docker("rm", "-f", "-v", cid)
    version = docker("run", "--rm", IMAGE, "--version").stdout
    expect("cairn" in version.lower(), f"--version printed {version!r}")


@check("a first argument that is not a flag runs that program")
def _():
    out = docker("run", "--rm", IMAGE, "sh", "-c", "echo hello $((6 * 7)) from $(id -u)").stdout
    expect(out.strip() == "hello 42 from 0", repr(out))
    probe = docker("run", "--rm", IMAGE, "cairn-healthcheck", "127.0.0.1:1", check=False)
    expect(probe.returncode == 1, f"cairn-healthcheck against nothing exited {probe.returncode}")


@check("--log-format json: the log on stdout is one JSON object per line")
def _():
    cid = start(args=["--log-format", "json"])
    with client(cid) as c:
        c.admin.command("ping")
    docker("stop", cid)
    out, err = logs(cid)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    messages = [line.get("message") for line in lines]
    expect("Waiting for connections" in messages and "cairn stopped cleanly" in messages, messages)
    expect(err == "", f"stderr {err!r}")
    return f"{len(lines)} lines"


def authed(cid, user, password):
    mapping = docker("port", cid, "27017/tcp").stdout.split()[0]
    host, port = mapping.rsplit(":", 1)
    return pymongo.MongoClient(host, int(port), directConnection=True, username=user,
                               password=password, authSource="admin",
                               serverSelectionTimeoutMS=CONNECT_TIMEOUT_MS)


@check("MONGO_INITDB_ROOT_USERNAME/_PASSWORD: a root user on first start, then --auth always")
def _():
    vol = volume()
    env = ["-e", "MONGO_INITDB_ROOT_USERNAME=root", "-e", "MONGO_INITDB_ROOT_PASSWORD=s3cret pw"]
    cid = start(*env, "-v", f"{vol}:/data/db")
    with authed(cid, "root", "s3cret pw") as c:
        c.app.things.insert_one({"_id": 1})
        expect(c.admin.command("getCmdLineOpts")["parsed"]["security"]["authorization"] == "enabled",
               "not started with --auth")
    with client(cid) as c:
        try:
            c.app.things.find_one({})
            raise AssertionError("an unauthenticated read was served")
        except pymongo.errors.OperationFailure as e:
            expect(e.code == 13, e.details)
    docker("restart", cid)
    with authed(cid, "root", "s3cret pw") as c:
        expect(c.app.things.count_documents({}) == 1, "data after restart")
    out, err = logs(cid)
    expect("s3cret" not in out + err, "the password reached the logs")
    docker("rm", "-f", "-v", cid)


@check("MONGO_INITDB_ROOT_PASSWORD_FILE (a secret file) works; half the pair is refused")
def _():
    secrets = tmpdir(0o755)
    with open(os.path.join(secrets, "pw"), "w") as f:
        f.write("from-a-file\n")
    os.chmod(os.path.join(secrets, "pw"), 0o400)  # root's only: read before dropping to cairn
    cid = start("-e", "MONGO_INITDB_ROOT_USERNAME=admin", "-e", "MONGO_INITDB_ROOT_PASSWORD_FILE=/run/s/pw",
                "-v", f"{secrets}:/run/s:ro")
    with authed(cid, "admin", "from-a-file") as c:
        c.admin.command("ping")
        c.app.x.insert_one({"a": 1})
    docker("rm", "-f", "-v", cid)
    half = start("-e", "MONGO_INITDB_ROOT_USERNAME=root")
    code = wait_exit(half)
    _, err = logs(half)
    expect(code == 1 and "both must be set" in err, f"exit {code}, stderr {err!r}")


def cleanup():
    for cid in containers:
        docker("rm", "-f", "-v", cid, check=False)
    for name in volumes:
        docker("volume", "rm", "-f", name, check=False)
    for path in tmpdirs:
        shutil.rmtree(path, ignore_errors=True)


def main():
    try:
        for name, fn in CHECKS:
            started = time.monotonic()
            try:
                detail = fn() or ""
                results.append((name, True))
                print(f"PASS {name} ({time.monotonic() - started:.1f} s) {detail}", flush=True)
            except Exception as e:
                results.append((name, False))
                print(f"FAIL {name} ({time.monotonic() - started:.1f} s): "
                      f"{type(e).__name__}: {e}", flush=True)
    finally:
        cleanup()
    passed = sum(ok for _, ok in results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
