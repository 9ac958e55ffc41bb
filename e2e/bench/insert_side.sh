#!/usr/bin/env bash
# Two builds of cairn side by side on durable single inserts (benchmarks only, never CI): starts
# BEFORE_DIR/cairn and AFTER_DIR/cairn on fresh data directories on the same disk (with
# --metricsPort), runs AFTER_DIR/cairn-load's insert cells with the two servers and the
# group-commit floor taking turns in every cell, writes OUT/load.{json,md,png} and each server's
# group-commit counters (OUT/metrics-{before,after}.txt), and stops both. WORKLOADS=A,F,insert
# runs those workloads instead of the inserts alone (the floor still sits beside the inserts).
# E.g.
#
#   e2e/bench/insert_side.sh target/side /tmp/gc-before target/release \
#     --connections 1,8,64 --rounds 3 --seconds 3 --warmup 1 --records 1000
set -euo pipefail
out=${1:?usage: e2e/bench/insert_side.sh OUT BEFORE_DIR AFTER_DIR [cairn-load options...]}
before=${2:?BEFORE_DIR}
after=${3:?AFTER_DIR}
shift 3
work=$(mktemp -d /tmp/cairn-side.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# start BIN DIR METRICS_PORT: prints "pid port" once cairn logs its port.
start() {
  mkdir -p "$2"
  "$1" --port 0 --log-format json --dbpath "$2/db" --metricsPort "$3" >/dev/null 2>"$2/cairn.log" &
  local pid=$! port=
  for _ in $(seq 600); do
    port=$(grep -m1 'Waiting for connections' "$2/cairn.log" 2>/dev/null |
      sed -n 's/.*"port":\([0-9]*\).*/\1/p' || true)
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$2/cairn.log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "cairn did not start" >&2; exit 1; }
  echo "$pid $port"
}
mb=$((29100 + RANDOM % 400))
ma=$((mb + 500))
read -r bpid bport < <(start "$before/cairn" "$work/before" "$mb")
pids+=("$bpid")
read -r apid aport < <(start "$after/cairn" "$work/after" "$ma")
pids+=("$apid")
echo "before pid $bpid port $bport; after pid $apid port $aport; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$after/cairn-load" --uri "mongodb://127.0.0.1:$aport/?directConnection=true" --label after \
  --server-pid "$apid" --also-uri "mongodb://127.0.0.1:$bport/?directConnection=true" \
  --also-label before --also-server-pid "$bpid" --workloads "${WORKLOADS:-insert}" --floor-dir "$work" \
  --out "$out" "$@"
curl -s "http://127.0.0.1:$ma/metrics" | grep -E '^cairn_(group_commit|log_sync)' >"$out/metrics-after.txt" || true
curl -s "http://127.0.0.1:$mb/metrics" | grep -E '^cairn_(group_commit|log_sync)' >"$out/metrics-before.txt" || true
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)" >&2
