"""pymongo against `cairn --auth` (launch.py --auth made the root user): logins with SCRAM-SHA-256
(speculative, the default) and SCRAM-SHA-1, wrong password -> 18, role checks -> 13 (read user
writing, readWrite on db A reading db B, userAdmin reading data), a custom role, logout by closing.
Exits non-zero on the first failed expectation."""
import os

import pymongo
from pymongo.errors import OperationFailure

uri = os.environ["CAIRN_URI"]
root_user, root_pw = os.environ["CAIRN_ROOT_USER"], os.environ["CAIRN_ROOT_PASSWORD"]


def login(user, pwd, source="admin", mech=None):
    kw = {"authMechanism": mech} if mech else {}
    return pymongo.MongoClient(uri, username=user, password=pwd, authSource=source,
                               serverSelectionTimeoutMS=10000, **kw)


def code_of(fn):
    try:
        fn()
    except OperationFailure as e:
        return e.code
    raise AssertionError("expected an error")


for mech in (None, "SCRAM-SHA-256", "SCRAM-SHA-1"):
    with login(root_user, root_pw, mech=mech) as c:
        status = c.admin.command("connectionStatus")["authInfo"]
        assert status["authenticatedUsers"] == [{"user": root_user, "db": "admin"}], status
        c.a.c.insert_one({"mech": mech or "default"})

with pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000) as anon:
    assert anon.admin.command("ping")["ok"] == 1.0
    assert code_of(lambda: anon.a.c.find_one()) == 13
    hello = anon.admin.command("hello", saslSupportedMechs=f"admin.{root_user}")
    assert hello["saslSupportedMechs"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"], hello

with login(root_user, "not-the-password") as bad:
    assert code_of(lambda: bad.admin.command("ping")) == 18

root = login(root_user, root_pw)
root.b.c.insert_one({"_id": 1})
root.a.command("createUser", "reader", pwd="reader-pw", roles=["read"])
root.a.command("createUser", "writer", pwd="writer-pw", roles=["readWrite"], mechanisms=["SCRAM-SHA-1"])
root.a.command("createUser", "ua", pwd="ua-pw", roles=["userAdmin"])
root.a.command("createRole", "countOnly", privileges=[
    {"resource": {"db": "a", "collection": "c"}, "actions": ["find"]}], roles=[])
root.a.command("createUser", "counter", pwd="counter-pw", roles=["countOnly"])

with login("reader", "reader-pw", "a") as r:
    assert r.a.c.count_documents({}) == 3
    try:
        r.a.c.insert_one({"x": 1})
        raise AssertionError("a read user inserted")
    except OperationFailure as e:
        assert e.code == 13 and e.details["errmsg"].startswith("not authorized on a to execute command"), e.details
with login("writer", "writer-pw", "a") as w:  # SCRAM-SHA-1 only: negotiated via saslSupportedMechs
    w.a.c.insert_one({"x": 2})
    assert code_of(lambda: w.b.c.find_one()) == 13
    assert w.list_database_names() == ["a"]
with login("ua", "ua-pw", "a") as ua:
    ua.a.command("createUser", "made", pwd="made-pw", roles=["read"])
    assert code_of(lambda: ua.a.c.find_one()) == 13
with login("counter", "counter-pw", "a") as cnt:
    assert cnt.a.c.count_documents({}) == 4
    assert code_of(lambda: cnt.a.other.find_one()) == 13
info = root.a.command("usersInfo", "writer")["users"][0]
assert info["mechanisms"] == ["SCRAM-SHA-1"] and "credentials" not in info, info
root.a.command("dropAllUsersFromDatabase")
root.close()
print(f"pymongo {pymongo.version} auth: ok")
