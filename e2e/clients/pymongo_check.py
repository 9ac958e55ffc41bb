"""pymongo against a running cairn: handshake and admin commands, then CRUD round trips and
error codes where the server has them. Exits non-zero on the first failed expectation."""
import os
import sys

import pymongo

uri = os.environ["CAIRN_URI"]
client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
admin = client.admin

assert admin.command("ping")["ok"] == 1.0
hello = admin.command("hello")
assert hello["isWritablePrimary"] is True, hello
assert hello["maxWireVersion"] == 25, hello
info = admin.command("buildInfo")
assert info["version"].startswith("8.0."), info
dbs = admin.command("listDatabases")
assert isinstance(dbs["databases"], list), dbs
assert client.server_info()["version"] == info["version"]

try:
    admin.command("definitelyNotACommand")
    sys.exit("unknown command did not fail")
except pymongo.errors.OperationFailure as e:
    assert e.code == 59, e.details

# CRUD round trips and error codes.
db = client.pymongo_check
db.people.drop()
people = db.people
ada = people.insert_one({"name": "ada", "age": 36}).inserted_id
people.insert_many([{"_id": 2, "name": "bob", "age": 25}, {"_id": 3, "name": "cy", "age": 41, "tags": ["x", "y"]}])
assert people.find_one({"_id": ada})["name"] == "ada"
assert [d["age"] for d in people.find({"age": {"$gt": 30}}).sort("age", -1)] == [41, 36]
assert people.find_one({"tags": "y"})["_id"] == 3
assert people.find_one({"_id": 2}, {"name": 1, "_id": 0}) == {"name": "bob"}
assert people.count_documents({"age": {"$lt": 40}}) == 2
assert people.estimated_document_count() == 3
assert sorted(people.distinct("name")) == ["ada", "bob", "cy"]

r = people.update_one({"_id": 2}, {"$inc": {"age": 1}, "$set": {"seen": True}})
assert (r.matched_count, r.modified_count) == (1, 1)
assert people.find_one({"_id": 2})["age"] == 26
r = people.update_one({"_id": 2}, {"$set": {"seen": True}})
assert (r.matched_count, r.modified_count) == (1, 0), "no-op update is not modified"
r = people.update_one({"_id": 9, "name": "zed"}, {"$set": {"age": 1}}, upsert=True)
assert r.upserted_id == 9
assert people.find_one({"_id": 9}) == {"_id": 9, "name": "zed", "age": 1}
doc = people.find_one_and_update({"_id": 3}, {"$push": {"tags": "z"}}, return_document=pymongo.ReturnDocument.AFTER)
assert doc["tags"] == ["x", "y", "z"]
assert people.find_one_and_delete({"_id": 9})["name"] == "zed"
assert people.delete_many({"age": {"$gte": 30}}).deleted_count == 2
assert people.count_documents({}) == 1

def code_of(fn):
    try:
        fn()
    except pymongo.errors.OperationFailure as e:
        return e.code
    raise AssertionError("expected an error")

people.insert_one({"_id": 100})
assert code_of(lambda: people.insert_one({"_id": 100})) == 11000
assert code_of(lambda: people.update_one({"_id": 100}, {"$set": {"_id": 5}})) == 66
assert code_of(lambda: people.update_one({"_id": 100}, {"$set": {"a": 1}, "$inc": {"a": 1}})) == 40
assert code_of(lambda: list(people.find({"a": {"$bogus": 1}}))) == 2
assert code_of(lambda: people.update_one({"_id": 100}, {"$inc": {"x": "str"}})) == 14
# Aggregation pipelines.
sales = db.sales
sales.drop()
sales.insert_many([{"_id": i, "region": ["n", "s", "e"][i % 3], "amount": i, "tags": ["a", "b"][: i % 3]} for i in range(30)])
totals = list(sales.aggregate([{"$group": {"_id": "$region", "total": {"$sum": "$amount"}}}, {"$sort": {"_id": 1}}]))
assert totals == [{"_id": "e", "total": sum(i for i in range(30) if i % 3 == 2)},
                  {"_id": "n", "total": sum(i for i in range(30) if i % 3 == 0)},
                  {"_id": "s", "total": sum(i for i in range(30) if i % 3 == 1)}], totals
assert len(list(sales.aggregate([{"$unwind": "$tags"}]))) == sum(i % 3 for i in range(30))
top = list(sales.aggregate([{"$sort": {"amount": -1}}, {"$limit": 2}, {"$project": {"_id": 0, "amount": 1}}]))
assert top == [{"amount": 29}, {"amount": 28}], top
sales.aggregate([{"$match": {"region": "n"}}, {"$out": "sales_n"}])
assert db.sales_n.count_documents({}) == 10
assert code_of(lambda: list(sales.aggregate([{"$bogus": 1}]))) == 40324
sales.drop(); db.sales_n.drop()

# MongoDB 8.0: client-level bulk writes over two databases (pymongo sends the bulkWrite command
# because the server reports wire version 25), and update_one with sort.
from pymongo import DeleteOne, InsertOne, UpdateOne  # noqa: E402

client.pymongo_check_b.drop_collection("other")
res = client.bulk_write(
    [
        InsertOne({"_id": 1, "v": 1}, namespace="pymongo_check.bw"),
        InsertOne({"_id": 2, "v": 2}, namespace="pymongo_check.bw"),
        UpdateOne({"_id": 1}, {"$set": {"v": 10}}, namespace="pymongo_check.bw"),
        DeleteOne({"_id": 2}, namespace="pymongo_check.bw"),
        InsertOne({"_id": 1}, namespace="pymongo_check_b.other"),
    ],
    verbose_results=True,
)
assert (res.inserted_count, res.matched_count, res.modified_count, res.deleted_count) == (3, 1, 1, 1), res
assert res.update_results[2].modified_count == 1, res.update_results
assert client.pymongo_check_b.other.count_documents({}) == 1
try:
    client.bulk_write([InsertOne({"_id": 1}, namespace="pymongo_check.bw")])
    sys.exit("duplicate key in client.bulk_write did not fail")
except pymongo.errors.ClientBulkWriteException as e:
    assert e.write_errors[0]["code"] == 11000, e.write_errors
db.bw.drop(); client.pymongo_check_b.drop_collection("other")
srt = db.srt
srt.drop()
srt.insert_many([{"_id": 1, "v": 3}, {"_id": 2, "v": 1}, {"_id": 3, "v": 2}])
srt.update_one({}, {"$set": {"hit": True}}, sort={"v": 1})
assert srt.find_one({"hit": True})["_id"] == 2
srt.drop()

people.create_index("email", unique=True, sparse=True)
assert "email_1" in people.index_information()
db.people.drop()

print(f"pymongo {pymongo.version}: ok (server {info['version']})")
