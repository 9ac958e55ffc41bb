"""Runs the real-client checks against a real cairn process.

Starts the cairn binary given as argv[1] on an ephemeral port with a fresh data directory (the
port is read from the server's own JSON "Waiting for connections" log line, no sleeping), runs each
check command given after `--` with CAIRN_URI set, then shuts the server down with SIGTERM and
requires a clean exit. Prints one line per check and a closing 'N passed, N failed' line.

`launch.py BINARY --auth -- CHECKS...` starts the server with --auth and creates a root user
through the localhost exception first; the checks get CAIRN_ROOT_USER and CAIRN_ROOT_PASSWORD
(CAIRN_URI stays without credentials). Any other options before `--` go to cairn as they are
(`--replSet rs0` for the replica-set checks).
"""
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading


def start(binary, dbpath, extra):
    proc = subprocess.Popen(
        [binary, "--port", "0", "--log-format", "json", "--dbpath", dbpath, *extra],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    port = None
    log = []
    for line in proc.stderr:
        log.append(line)
        if "Waiting for connections" in line:
            port = json.loads(line)["port"]
            break
    if port is None:
        sys.exit("cairn did not start:\n" + "".join(log))
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [log.append(l) for l in proc.stderr], daemon=True).start()
    return proc, port, log


def main():
    binary = sys.argv[1]
    extra = sys.argv[2:sys.argv.index("--")]
    auth = "--auth" in extra
    checks = sys.argv[sys.argv.index("--") + 1:]
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, log = start(binary, os.path.join(tmp, "db"), extra)
        env = dict(os.environ, CAIRN_URI=f"mongodb://127.0.0.1:{port}/?directConnection=true")
        if auth:
            import pymongo  # the checks' venv has it
            # A letter first: a password beginning with "-" reads as an option to a shell tool.
            password = "p" + secrets.token_urlsafe(12)
            with pymongo.MongoClient(env["CAIRN_URI"], serverSelectionTimeoutMS=10000) as c:
                c.admin.command("createUser", "root", pwd=password, roles=["root"])
            env.update(CAIRN_ROOT_USER="root", CAIRN_ROOT_PASSWORD=password)
        passed = failed = 0
        for check in checks:
            result = subprocess.run(check, shell=True, env=env, timeout=300)
            ok = result.returncode == 0
            passed += ok
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'}: {check}", flush=True)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        if code != 0:
            failed += 1
            print(f"FAIL: cairn exited with {code} after SIGTERM\n" + "".join(log[-40:]))
        if auth and env["CAIRN_ROOT_PASSWORD"] in "".join(log):
            failed += 1
            print("FAIL: the root password reached the server log")
        print(f"{passed} passed, {failed} failed")
        sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
