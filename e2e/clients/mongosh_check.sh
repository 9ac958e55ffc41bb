#!/usr/bin/env bash
# mongosh against a running cairn: prints the server's version and the ping reply, and fails
# unless both look right.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/node_modules/.bin/mongosh" "$CAIRN_URI" --quiet --norc --eval 'print("version " + db.version()); printjson(db.runCommand({ping: 1}))')
echo "$out"
grep -q '^version 8\.0\.' <<<"$out"
grep -Eq 'ok: 1' <<<"$out"
