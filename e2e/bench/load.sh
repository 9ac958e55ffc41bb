#!/usr/bin/env bash
# cairn against PostgreSQL jsonb under YCSB load (benchmarks only, never CI): builds release
# cairn and cairn-load, starts a throw-away PostgreSQL (e2e/bench/postgres.sh: the Debian
# package, installed if missing, a temp cluster on a free port with synchronous_commit=on) and a
# release cairn on its own temp data directory on the same disk, runs cairn-load against both
# with the group-commit floor beside the insert cells, writes OUT/load.{json,md,png}, and stops
# and removes both servers. Everything after OUT goes to cairn-load as it is, e.g.
#
#   e2e/bench/load.sh target/load --records 100000 --connections 1,8,64 --rounds 3 --seconds 5
#
# CAIRN_LOAD_SKIP_BUILD=1 uses the binaries already in target/release; CAIRN_BIN=PATH runs that
# cairn instead of target/release/cairn.
set -euo pipefail

out=${1:?usage: e2e/bench/load.sh OUT_DIR [cairn-load options...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

if [ -z "${CAIRN_LOAD_SKIP_BUILD:-}" ]; then
  cargo build --release -p cairn -p cairn-e2e --bin cairn --bin cairn-load >&2
fi

work=$(mktemp -d /tmp/cairn-load.XXXXXX)
chmod 755 "$work" # the postgres user reaches its cluster below it
pg_dir="$work/pg"
cairn_pid=
cleanup() {
  if [ -n "$cairn_pid" ]; then
    kill "$cairn_pid" 2>/dev/null || true
    wait "$cairn_pid" 2>/dev/null || true
  fi
  if [ -f "$pg_dir/data/postmaster.pid" ]; then
    bin=$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1)
    if [ "$(id -u)" = 0 ]; then
      runuser -u postgres -- "$bin/pg_ctl" -D "$pg_dir/data" stop -m fast >&2 || true
    else
      "$bin/pg_ctl" -D "$pg_dir/data" stop -m fast >&2 || true
    fi
  fi
  rm -rf "$work"
}
trap cleanup EXIT

pg_uri=$(PG_BENCH_DIR="$pg_dir" e2e/bench/postgres.sh 2>"$work/pg-start.log")
pg_pid=$(head -n 1 "$pg_dir/data/postmaster.pid")

# cairn prints its port in its JSON "Waiting for connections" line; poll the log for it.
mkdir -p "$work/cairn"
${CAIRN_BIN:-target/release/cairn} --port 0 --log-format json --dbpath "$work/cairn/db" \
  >/dev/null 2>"$work/cairn.log" &
cairn_pid=$!
port=
for _ in $(seq 600); do
  port=$(grep -m1 'Waiting for connections' "$work/cairn.log" 2>/dev/null |
    sed -n 's/.*"port":\([0-9]*\).*/\1/p' || true)
  [ -n "$port" ] && break
  kill -0 "$cairn_pid" 2>/dev/null || { cat "$work/cairn.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "cairn did not start" >&2; exit 1; }

echo "cairn pid $cairn_pid port $port; PostgreSQL pid $pg_pid at $pg_uri; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
target/release/cairn-load \
  --uri "mongodb://127.0.0.1:$port/?directConnection=true" --server-pid "$cairn_pid" \
  --pg "$pg_uri" --pg-pid "$pg_pid" \
  --floor-dir "$work" --out "$out" "$@"
