// The Node.js driver against `cairn --auth` (launch.py --auth made the root user): SCRAM-SHA-256
// (the default, speculative) and SCRAM-SHA-1 logins, wrong password -> 18, a read user's insert
// -> 13. Exits non-zero on the first failed expectation.
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

const base = process.env.CAIRN_URI;
const user = encodeURIComponent(process.env.CAIRN_ROOT_USER);
const pwd = encodeURIComponent(process.env.CAIRN_ROOT_PASSWORD);
const withCreds = (u, p, extra) =>
  base.replace('mongodb://', `mongodb://${u}:${p}@`) + `&authSource=admin&serverSelectionTimeoutMS=10000${extra}`;

async function main() {
  for (const mech of ['', '&authMechanism=SCRAM-SHA-256', '&authMechanism=SCRAM-SHA-1']) {
    const c = new MongoClient(withCreds(user, pwd, mech));
    await c.connect();
    const status = await c.db('admin').command({ connectionStatus: 1 });
    assert.deepEqual(status.authInfo.authenticatedUsers, [{ user: process.env.CAIRN_ROOT_USER, db: 'admin' }]);
    await c.db('n').collection('c').insertOne({ mech });
    await c.close();
  }
  const bad = new MongoClient(withCreds(user, 'wrong', ''));
  await assert.rejects(bad.connect(), (e) => e.code === 18 || e.cause?.code === 18);
  await bad.close();

  const root = new MongoClient(withCreds(user, pwd, ''));
  await root.connect();
  await root.db('admin').command({ createUser: 'nreader', pwd: 'nreader-pw', roles: [{ role: 'read', db: 'n' }] });
  const reader = new MongoClient(withCreds('nreader', 'nreader-pw', ''));
  await reader.connect();
  assert.equal(await reader.db('n').collection('c').countDocuments(), 3);
  await assert.rejects(reader.db('n').collection('c').insertOne({ x: 1 }), (e) => e.code === 13);
  await reader.close();
  await root.db('admin').command({ dropUser: 'nreader' });
  await root.close();
  console.log('node driver auth: ok');
}

main().catch((e) => { console.error(e); process.exit(1); });
