// The Node.js driver against a running cairn: handshake, admin commands and the 8.0 client
// bulkWrite.
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
  // MongoDB 8.0: the client-level bulkWrite over two databases (one bulkWrite command).
  const ns1 = 'node_check.bw';
  const ns2 = 'node_check_other.bw';
  await client.db('node_check').dropDatabase();
  await client.db('node_check_other').dropDatabase();
  const res = await client.bulkWrite([
    { name: 'insertOne', namespace: ns1, document: { _id: 1, n: 0 } },
    { name: 'insertOne', namespace: ns2, document: { _id: 1, n: 0 } },
    { name: 'updateOne', namespace: ns1, filter: { _id: 1 }, update: { $inc: { n: 1 } } },
    { name: 'deleteOne', namespace: ns2, filter: { _id: 1 } },
  ], { verboseResults: true });
  assert.equal(res.insertedCount, 2);
  assert.equal(res.matchedCount, 1);
  assert.equal(res.modifiedCount, 1);
  assert.equal(res.deletedCount, 1);
  assert.equal(res.updateResults.get(2).modifiedCount, 1);
  assert.deepEqual(await client.db('node_check').collection('bw').findOne({ _id: 1 }), { _id: 1, n: 1 });
  await assert.rejects(
    client.bulkWrite([{ name: 'insertOne', namespace: ns1, document: { _id: 1 } }]),
    (e) => e.name === 'MongoClientBulkWriteError' && e.writeErrors.get(0).code === 11000,
  );
  console.log(`node driver: ok (server ${info.version})`);
  await client.close();
}

main().catch((e) => { console.error(e); process.exit(1); });
