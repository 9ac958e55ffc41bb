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
assert hello["maxWireVersion"] == 21, hello
info = admin.command("buildInfo")
assert info["version"].startswith("7.0."), info
dbs = admin.command("listDatabases")
assert isinstance(dbs["databases"], list), dbs
assert client.server_info()["version"] == info["version"]

try:
    admin.command("definitelyNotACommand")
    sys.exit("unknown command did not fail")
except pymongo.errors.OperationFailure as e:
    assert e.code == 59, e.details

print(f"pymongo {pymongo.version}: ok (server {info['version']})")
