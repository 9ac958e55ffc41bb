//! Tables of the connection and server commands: the handshake (`hello.idl`'s fields, typed;
//! fields it does not list pass, so no driver's handshake fails on a new field), the
//! SASL conversation (`sasl_commands.idl`), and the hand-parsed `getParameter`, `setParameter`
//! and `configureFailPoint`, whose other fields are parameter names or ignored (`strict: false`:
//! their values are checked by the parameter or fail point they name).

use super::{CommandSpec, Field, Ty, opt, req};

/// `hello.idl`'s `HelloCommand` (also `isMaster`/`ismaster`): its fields are typed as the IDL
/// types them. Unlike the IDL, unknown fields pass: drivers add handshake fields before servers
/// list them (the Rust driver 3.x sends `backpressure`, drivers in load-balanced mode
/// `loadBalanced`), and a handshake refused for one of them fails every connection.
pub static HELLO: CommandSpec = CommandSpec {
    name: "hello",
    strict: false,
    target: None,
    fields: &[
        opt("forShell", Ty::SafeBool),
        opt("hostInfo", Ty::String),
        opt("hangUpOnStepDown", Ty::SafeBool),
        opt("internalClient", Ty::Object),
        // `ClientMetadata`: its shape is the handler's (and its log line's).
        opt("client", Ty::Object),
        opt("topologyVersion", Ty::Object),
        Field {
            name: "maxAwaitTimeMS",
            ty: Ty::SafeInt64,
            required: false,
            min: Some(0),
        },
        opt("helloOk", Ty::SafeBool),
        opt("compression", Ty::StringArray),
        // `UserName`: "<db>.<user>".
        opt("saslSupportedMechs", Ty::String),
        opt("speculativeAuthenticate", Ty::Object),
        opt("loadBalanced", Ty::SafeBool),
        opt("backpressure", Ty::Any),
    ],
};

pub static SASL_START: CommandSpec = CommandSpec {
    name: "saslStart",
    strict: true,
    target: None,
    fields: &[
        req("mechanism", Ty::String),
        // Ignored (always true), but typed.
        opt("autoAuthorize", Ty::SafeBool),
        opt("options", Ty::Object),
        req("payload", Ty::SaslPayload),
    ],
};

pub static SASL_CONTINUE: CommandSpec = CommandSpec {
    name: "saslContinue",
    strict: true,
    target: None,
    fields: &[
        req("conversationId", Ty::Int),
        req("payload", Ty::SaslPayload),
    ],
};

/// `getParameter: 1 | "*" | {allParameters, showDetails}`, then parameter names (values
/// ignored). Names it does not know are skipped; none known at all is InvalidOptions.
pub static GET_PARAMETER: CommandSpec = CommandSpec {
    name: "getParameter",
    strict: false,
    target: None,
    fields: &[],
};

/// `setParameter: 1, <name>: <value>, ...`: every name must be a parameter settable at
/// runtime (InvalidOptions for an unknown one, IllegalOperation for a startup-only one), each
/// value is checked by its parameter (BadValue, or TypeMismatch where mongod's has its own).
pub static SET_PARAMETER: CommandSpec = CommandSpec {
    name: "setParameter",
    strict: false,
    target: None,
    fields: &[],
};

/// `configureFailPoint: <name>, mode, data` (test commands only): mongod's `FailPoint::parseBSON`
/// reads `mode` and `data` by hand (missing mode IllegalOperation, a mode of the wrong type or
/// a `data` that is not a document TypeMismatch) and ignores other fields.
pub static CONFIGURE_FAIL_POINT: CommandSpec = CommandSpec {
    name: "configureFailPoint",
    strict: false,
    target: None,
    fields: &[opt("mode", Ty::Any), opt("data", Ty::Any)],
};

/// Every table of this file, for the derived tests and the generated document.
#[cfg(test)]
pub static ALL: &[&CommandSpec] = &[
    &HELLO,
    &SASL_START,
    &SASL_CONTINUE,
    &GET_PARAMETER,
    &SET_PARAMETER,
    &CONFIGURE_FAIL_POINT,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::argspec::check;
    use bson::{Bson, doc, oid::ObjectId};

    fn code(spec: &CommandSpec, body: bson::Document) -> Option<i32> {
        check(spec, &body).err().map(|e| e.code.code())
    }

    /// Handshakes as the drivers send them (first, awaitable monitoring, legacy OP_QUERY,
    /// load-balanced, speculative authentication) all pass the table.
    #[test]
    fn driver_handshakes_pass() {
        let client = doc! {
            "driver": { "name": "PyMongo", "version": "4.9" },
            "os": { "type": "Linux" },
            "platform": "CPython",
            "application": { "name": "app" },
        };
        let handshakes = [
            doc! { "hello": 1, "helloOk": true, "client": client.clone(),
            "compression": ["zstd", "snappy"], "$db": "admin" },
            doc! { "isMaster": 1, "helloOk": true, "client": client.clone(),
            "saslSupportedMechs": "admin.u", "speculativeAuthenticate": {
                "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": "", "db": "admin" } },
            doc! { "hello": 1, "topologyVersion": { "processId": ObjectId::new(), "counter": 0_i64 },
            "maxAwaitTimeMS": 10_000, "$db": "admin" },
            doc! { "ismaster": 1, "$readPreference": { "mode": "primaryPreferred" } },
            doc! { "hello": 1, "loadBalanced": true, "backpressure": true, "client": client.clone(), "apiVersion": "1",
            "apiStrict": false, "$db": "admin" },
            doc! { "isMaster": 1, "forShell": 1, "hostInfo": "h:1", "hangUpOnStepDown": false,
            "comment": "x", "lsid": { "id": 1 }, "$clusterTime": {} },
        ];
        for h in handshakes {
            assert_eq!(code(&HELLO, h.clone()), None, "{h}");
        }
    }

    #[test]
    fn hello_fields_answer_mongods_codes() {
        assert_eq!(
            code(&HELLO, doc! { "hello": 1, "compression": "zstd" }),
            Some(14)
        );
        assert_eq!(
            code(&HELLO, doc! { "hello": 1, "compression": [1] }),
            Some(14)
        );
        assert_eq!(code(&HELLO, doc! { "hello": 1, "client": "x" }), Some(14));
        assert_eq!(
            code(&HELLO, doc! { "hello": 1, "maxAwaitTimeMS": -1 }),
            Some(51024)
        );
        assert_eq!(
            code(&HELLO, doc! { "hello": 1, "helloOk": "yes" }),
            Some(14)
        );
        // Unknown fields never fail a handshake.
        assert_eq!(code(&HELLO, doc! { "hello": 1, "bogus": 1 }), None);
    }

    #[test]
    fn sasl_fields_answer_mongods_codes() {
        let bin = Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: vec![1],
        });
        let start = doc! { "saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin.clone() };
        assert_eq!(code(&SASL_START, start.clone()), None);
        let mut b = start.clone();
        b.insert("payload", 5);
        assert_eq!(code(&SASL_START, b), Some(2));
        let mut b = start.clone();
        b.insert("mechanism", 5);
        assert_eq!(code(&SASL_START, b), Some(14));
        let mut b = start.clone();
        b.remove("mechanism");
        assert_eq!(code(&SASL_START, b), Some(40414));
        let mut b = start.clone();
        b.insert("db", "admin");
        assert_eq!(code(&SASL_START, b), Some(40415));
        let cont = doc! { "saslContinue": 1, "conversationId": 1, "payload": bin };
        assert_eq!(code(&SASL_CONTINUE, cont.clone()), None);
        let mut b = cont.clone();
        b.insert("conversationId", 1_i64);
        assert_eq!(code(&SASL_CONTINUE, b), Some(14));
        let mut b = cont;
        b.remove("payload");
        assert_eq!(code(&SASL_CONTINUE, b), Some(40414));
    }
}
