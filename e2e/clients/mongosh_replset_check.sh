#!/usr/bin/env bash
# mongosh against cairn started with --replSet rs0: rs.initiate() (or already initiated),
# rs.status() says PRIMARY, db.c.watch() sees an insert made after it was opened, and a
# session.startTransaction() ... commitTransaction() transfer is invisible until committed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/node_modules/.bin/mongosh" "$CAIRN_URI" --quiet --norc --eval '
try { rs.initiate(); } catch (e) { if (e.code !== 23) throw e; }
print("state " + rs.status().members[0].stateStr);
print("set " + rs.conf()._id);
const c = db.getSiblingDB("sh_rs_check").items;
const cs = c.watch();
cs.tryNext();
c.insertOne({_id: 1, n: 1});
const ev = cs.next();
print("event " + ev.operationType + " " + ev.documentKey._id);
cs.close();
const plain = db.getSiblingDB("sh_rs_check").accounts;
plain.drop();
plain.insertMany([{_id: "a", b: 100}, {_id: "b", b: 0}]);
const s = db.getMongo().startSession();
const acc = s.getDatabase("sh_rs_check").accounts;
s.startTransaction();
acc.updateOne({_id: "a"}, {$inc: {b: -10}});
acc.updateOne({_id: "b"}, {$inc: {b: 10}});
const inside = acc.findOne({_id: "b"}).b;
const outside = plain.findOne({_id: "b"}).b;
s.commitTransaction();
print("txn " + inside + " " + outside + " " + plain.findOne({_id: "b"}).b);
s.endSession();')
echo "$out"
grep -q '^state PRIMARY' <<<"$out"
grep -q '^set rs0' <<<"$out"
grep -q '^event insert 1' <<<"$out"
grep -q '^txn 10 0 10' <<<"$out"
