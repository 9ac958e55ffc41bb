// The Node.js driver against a running cairn: handshake and admin commands.
// Exits non-zero on the first failed expectation.
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

async function main() {
  const client = new MongoClient(process.env.CAIRN_URI, { serverSelectionTimeoutMS: 10000 });
  await client.connect();
  const admin = client.db('admin');
  assert.equal((await admin.command({ ping: 1 })).ok, 1);
  const hello = await admin.command({ hello: 1 });
  assert.equal(hello.isWritablePrimary, true);
  assert.equal(hello.maxWireVersion, 25);
  const info = await admin.command({ buildInfo: 1 });
  assert.match(info.version, /^8\.0\./);
  const dbs = await admin.command({ listDatabases: 1 });
  assert.ok(Array.isArray(dbs.databases));
  await assert.rejects(admin.command({ definitelyNotACommand: 1 }), (e) => e.code === 59);
  console.log(`node driver: ok (server ${info.version})`);
  await client.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
