#!/usr/bin/env bash
# mongosh against `cairn --auth` (launch.py --auth made the root user): logs in with
# SCRAM-SHA-256 and SCRAM-SHA-1 and reads connectionStatus; a wrong password must fail.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sh="$here/node_modules/.bin/mongosh"
for mech in SCRAM-SHA-256 SCRAM-SHA-1; do
    out=$("$sh" "$CAIRN_URI" --quiet --norc --username "$CAIRN_ROOT_USER" --password="$CAIRN_ROOT_PASSWORD" \
        --authenticationDatabase admin --authenticationMechanism "$mech" \
        --eval 'const s = db.runCommand({connectionStatus: 1}).authInfo; print("user " + s.authenticatedUsers[0].user); printjson(db.getSiblingDB("m").c.insertOne({x: 1}).acknowledged)')
    echo "$mech: $out"
    grep -q "^user $CAIRN_ROOT_USER\$" <<<"$out"
    grep -q '^true$' <<<"$out"
done
if "$sh" "$CAIRN_URI" --quiet --norc --username "$CAIRN_ROOT_USER" --password wrong \
    --authenticationDatabase admin --eval 'db.runCommand({ping: 1})' >/tmp/mongosh-bad.$$ 2>&1; then
    echo "a wrong password logged in"; exit 1
fi
grep -q "Authentication failed" /tmp/mongosh-bad.$$
rm -f /tmp/mongosh-bad.$$
