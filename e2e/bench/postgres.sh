#!/usr/bin/env bash
# A throw-away PostgreSQL for `cairn-bench sweep --pg` (benchmarks only, never CI): installs
# PostgreSQL from Debian if missing, initialises a cluster in a temp dir, starts it on a free
# loopback port (as the `postgres` user when run as root: initdb refuses root) with
# synchronous_commit=on and fsync=on, and prints its URI on stdout. The stop command goes to
# stderr.
#
#   PG_URI=$(e2e/bench/postgres.sh)
#   target/release/cairn-bench sweep ... --pg "$PG_URI"
#
# PG_BENCH_DIR=/some/dir puts the cluster there (on the filesystem you want to measure).
set -euo pipefail

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
bin=$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n 1)

dir=${PG_BENCH_DIR:-$(mktemp -d /tmp/cairn-pg.XXXXXX)}
mkdir -p "$dir"
run=()
if [ "$(id -u)" = 0 ]; then
  chown -R postgres: "$dir"
  run=(runuser -u postgres --)
fi

# A port nothing answers on (bash's /dev/tcp: a refused connect means free).
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
port=$(free_port)

"${run[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log"
"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c synchronous_commit=on -c fsync=on" \
  start >&2

echo "stop with: ${run[*]} $bin/pg_ctl -D $dir/data stop -m fast && rm -rf $dir" >&2
echo "postgresql://postgres@127.0.0.1:$port/postgres"
