#!/usr/bin/env bash
# Two cairn binaries side by side under any cairn-load workloads (benchmarks only, never CI):
# starts BEFORE_BIN and AFTER_BIN on fresh data directories, runs target/release/cairn-load with
# the two servers taking turns in every cell, writes OUT/load.{json,md,png}, and stops both.
# (e2e/bench/insert_side.sh does the same for durable inserts with the group-commit floor.) E.g.
#
#   e2e/bench/load_side.sh target/side /tmp/base/cairn target/release/cairn \
#     --workloads A,C,E,insert --connections 1,8,64 --rounds 3 --seconds 3 --warmup 1 --records 20000
set -euo pipefail
out=${1:?usage: e2e/bench/load_side.sh OUT BEFORE_BIN AFTER_BIN [cairn-load options...]}
before=${2:?BEFORE_BIN}
after=${3:?AFTER_BIN}
shift 3
work=$(mktemp -d /tmp/rss-side.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
start() {
  mkdir -p "$2"
  "$1" --port 0 --log-format json --dbpath "$2/db" >/dev/null 2>"$2/cairn.log" &
  local pid=$! port=
  for _ in $(seq 600); do
    port=$(grep -m1 'Waiting for connections' "$2/cairn.log" 2>/dev/null | sed -n 's/.*"port":\([0-9]*\).*/\1/p' || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  echo "$pid $port"
}
read -r bpid bport < <(start "$before" "$work/before")
pids+=("$bpid")
read -r apid aport < <(start "$after" "$work/after")
pids+=("$apid")
echo "load at the start $(cut -d' ' -f1-3 /proc/loadavg)" >&2
target/release/cairn-load --uri "mongodb://127.0.0.1:$aport/?directConnection=true" --label after \
  --server-pid "$apid" --also-uri "mongodb://127.0.0.1:$bport/?directConnection=true" \
  --also-label before --also-server-pid "$bpid" --out "$out" "$@"
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)" >&2
