"""pymongo against cairn started with --replSet rs0: initiate, discover the set, then a change
stream on a collection sees insert, update and delete in mongod's shapes and resumes from a
token; a retryable write whose reply is lost (the onPrimaryTransactionalWrite fail point, when
the server runs with enableTestCommands) is retried by pymongo and applied once; a transfer in
`with_transaction` is seen inside the transaction only until it commits, and an aborted
transaction leaves nothing. Exits non-zero
on the first thing that looks wrong."""
import os

import pymongo
from pymongo.errors import OperationFailure

uri = os.environ["CAIRN_URI"]
with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as direct:
    try:
        direct.admin.command("replSetInitiate")
    except OperationFailure as e:
        assert e.code == 23, e  # AlreadyInitialized: another check got there first
    hello = direct.admin.command("hello")
    assert hello["setName"] == "rs0" and hello["isWritablePrimary"], hello
    me = hello["me"]

with pymongo.MongoClient(f"mongodb://{me}/?replicaSet=rs0", serverSelectionTimeoutMS=10000) as c:
    items = c.rs_check.items
    items.drop()
    with items.watch(max_await_time_ms=5000) as stream:
        items.insert_one({"_id": 1, "n": 1})
        items.update_one({"_id": 1}, {"$set": {"n": 2}})
        items.delete_one({"_id": 1})
        events = [stream.next() for _ in range(3)]
    kinds = [e["operationType"] for e in events]
    assert kinds == ["insert", "update", "delete"], kinds
    assert events[0]["fullDocument"] == {"_id": 1, "n": 1}, events[0]
    assert events[0]["documentKey"] == {"_id": 1}, events[0]
    assert events[1]["updateDescription"]["updatedFields"] == {"n": 2}, events[1]
    assert events[2]["ns"] == {"db": "rs_check", "coll": "items"}, events[2]
    with items.watch(resume_after=events[0]["_id"], max_await_time_ms=5000) as again:
        assert again.next()["operationType"] == "update"
    assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
    status = c.admin.command("replSetGetStatus")
    assert status["members"][0]["stateStr"] == "PRIMARY", status
    # Retryable writes: the first reply is lost, pymongo retries, the write applies once.
    counters = c.rs_check.counters
    counters.drop()
    counters.insert_one({"_id": 1, "n": 0})
    lose = {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": {"times": 1}}
    try:
        c.admin.command(lose)
        lost = True
    except OperationFailure as e:
        assert e.code == 59, e  # no test commands: the plain retryable path only
        lost = False
    r = counters.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert (r.matched_count, r.modified_count) == (1, 1), r.raw_result
    assert counters.find_one({"_id": 1})["n"] == 1, counters.find_one({"_id": 1})
    if lost:
        retried = c.admin.command("serverStatus")["transactions"]["retriedCommandsCount"]
        assert retried >= 1, retried
    # Multi-document transactions.
    accounts = c.rs_check.accounts
    accounts.drop()
    accounts.insert_many([{"_id": "a", "b": 100}, {"_id": "b", "b": 0}])

    def transfer(session):
        accounts.update_one({"_id": "a"}, {"$inc": {"b": -10}}, session=session)
        accounts.update_one({"_id": "b"}, {"$inc": {"b": 10}}, session=session)
        assert accounts.find_one({"_id": "b"}, session=session)["b"] == 10  # its own write
        assert accounts.find_one({"_id": "b"})["b"] == 0  # not seen outside before commit

    with c.start_session() as s:
        s.with_transaction(transfer)
        s.start_transaction()
        accounts.insert_one({"_id": "c", "b": 1}, session=s)
        s.abort_transaction()
    balances = sorted((d["_id"], d["b"]) for d in accounts.find())
    assert balances == [("a", 90), ("b", 10)], balances
print("pymongo replica set, change streams, retryable writes and transactions: ok")
