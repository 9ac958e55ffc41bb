//! Operations in progress, as `currentOp` shows them and `killOp` and shutdown reach them: every
//! command a connection runs (registered for as long as it runs, with its interrupt token) and
//! index builds with their progress. Bounded by the connections (one request in flight each)
//! plus the concurrent index builds (each holds its collection's write lock).

use crate::interrupt::{Interrupt, Reason};
use bson::{Bson, Document, doc};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// A command's body in `currentOp` is cut to about this many bytes (mongod shows
/// `{$truncated: ...}` past 1 KB too), so a 16 MB filter is not copied into every listing.
const COMMAND_SHOWN_BYTES_MAX: usize = 1024;

/// Commands whose arguments may carry secrets: `currentOp` shows only their name.
const REDACTED: &[&str] = &[
    "saslStart",
    "saslContinue",
    "authenticate",
    "createUser",
    "updateUser",
];

enum Kind {
    IndexBuild {
        index: String,
        done: u64,
        total: u64,
    },
    Command(CommandOp),
}

struct CommandOp {
    connection_id: i64,
    client: String,
    command: Shown,
    op_type: &'static str,
    interrupt: Interrupt,
    /// The key of the session the command runs in (its `lsid`), for killSessions.
    session: Option<crate::sessions::registry::SessionId>,
}

/// The command `currentOp` shows: built when someone asks (most commands end unseen), from a
/// copy of the body's bytes; a body that came without them is built at once.
enum Shown {
    Ready(Document),
    Raw {
        name: String,
        body: bson::RawDocumentBuf,
    },
}

impl Shown {
    fn document(&self) -> Document {
        match self {
            Shown::Ready(d) => d.clone(),
            Shown::Raw { name, body } => match Document::try_from(body.as_ref()) {
                Ok(d) => shown_command(name, &d, body.as_bytes().len()),
                Err(_) => Document::new(),
            },
        }
    }
}

struct Op {
    ns: String,
    started: Instant,
    kind: Kind,
}

/// What a connection says about the command it registers.
pub struct CommandInfo<'a> {
    pub connection_id: i64,
    pub client: String,
    pub name: &'a str,
    pub db: &'a str,
    pub body: &'a Document,
    /// The body's size on the wire.
    pub body_bytes: usize,
    /// The body's bytes as received, when kept: `currentOp` builds its view of the command
    /// from them only when asked.
    pub raw_body: Option<&'a bson::RawDocumentBuf>,
    pub interrupt: Interrupt,
    /// The session the command names (its `lsid`, as `dispatch` parsed it).
    pub session: Option<crate::sessions::registry::SessionId>,
}

#[derive(Default)]
pub struct OpRegistry {
    next_id: AtomicU64,
    ops: Mutex<BTreeMap<u64, Op>>,
    /// Set at shutdown: operations registered later are interrupted at once.
    shutting_down: AtomicBool,
}

/// Ends a command's registration when dropped (however the command ends).
pub struct Registered<'a> {
    registry: &'a OpRegistry,
    pub opid: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.registry.end(self.opid);
    }
}

impl OpRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Op>> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, op: Op) -> u64 {
        let id = self.next_id.fetch_add(1, Relaxed) + 1;
        self.map().insert(id, op);
        id
    }

    pub fn begin_index_build(&self, ns: &str, index: &str) -> u64 {
        self.insert(Op {
            ns: ns.into(),
            started: Instant::now(),
            kind: Kind::IndexBuild {
                index: index.into(),
                done: 0,
                total: 0,
            },
        })
    }

    /// Registers a running command; `killOp` and shutdown interrupt it through its token.
    pub fn begin_command(&self, info: CommandInfo<'_>) -> Registered<'_> {
        if self.shutting_down.load(Relaxed) {
            info.interrupt.interrupt(Reason::Shutdown);
        }
        let target = info.body.get(info.name).and_then(Bson::as_str);
        let ns = match target {
            Some(coll) if !coll.is_empty() => format!("{}.{coll}", info.db),
            _ => format!("{}.$cmd", info.db),
        };
        let op = Op {
            ns,
            started: Instant::now(),
            kind: Kind::Command(CommandOp {
                connection_id: info.connection_id,
                client: info.client,
                command: match info.raw_body {
                    Some(raw) => Shown::Raw {
                        name: info.name.to_string(),
                        body: raw.clone(),
                    },
                    None => Shown::Ready(shown_command(info.name, info.body, info.body_bytes)),
                },
                op_type: op_type(info.name),
                interrupt: info.interrupt,
                session: info.session,
            }),
        };
        Registered {
            registry: self,
            opid: self.insert(op),
        }
    }

    /// Interrupts (as killOp does) the running commands of the sessions with these keys, or of
    /// every session, except the operation `except` (the killing command); returns how many.
    pub fn kill_sessions(
        &self,
        keys: Option<&[crate::sessions::registry::SessionId]>,
        except: &Interrupt,
    ) -> usize {
        let mut n = 0;
        for op in self.map().values() {
            if let Kind::Command(c) = &op.kind
                && let Some(k) = &c.session
                && keys.is_none_or(|ks| ks.contains(k))
                && !c.interrupt.same(except)
            {
                c.interrupt.interrupt(Reason::Killed);
                n += 1;
            }
        }
        n
    }

    pub fn progress(&self, id: u64, done: u64, total: u64) {
        if let Some(Op {
            kind: Kind::IndexBuild {
                done: d, total: t, ..
            },
            ..
        }) = self.map().get_mut(&id)
        {
            *d = done;
            *t = total;
        }
    }

    pub fn end(&self, id: u64) {
        self.map().remove(&id);
    }

    /// `killOp`: interrupts the command `opid` (Interrupted at its next yield point); false when
    /// no command has that id. mongod answers ok either way.
    pub fn kill(&self, opid: u64) -> bool {
        match self.map().get(&opid) {
            Some(Op {
                kind: Kind::Command(c),
                ..
            }) => {
                c.interrupt.interrupt(Reason::Killed);
                true
            }
            _ => false,
        }
    }

    /// Shutdown: every running command stops at its next yield point (InterruptedAtShutdown),
    /// and so does any registered afterwards.
    pub fn interrupt_all(&self) {
        self.shutting_down.store(true, Relaxed);
        for op in self.map().values() {
            if let Kind::Command(c) = &op.kind {
                c.interrupt.interrupt(Reason::Shutdown);
            }
        }
    }

    /// `currentOp`'s `inprog` entries.
    pub fn in_progress(&self) -> Vec<Document> {
        self.map()
            .iter()
            .map(|(id, op)| {
                let elapsed = op.started.elapsed();
                let mut d = match &op.kind {
                    Kind::IndexBuild { index, done, total } => {
                        index_build_doc(op, index, *done, *total)
                    }
                    Kind::Command(c) => command_doc(op, c),
                };
                d.insert("opid", *id as i64);
                d.insert("secs_running", elapsed.as_secs() as i64);
                d.insert("microsecs_running", elapsed.as_micros() as i64);
                d
            })
            .collect()
    }
}

fn index_build_doc(op: &Op, index: &str, done: u64, total: u64) -> Document {
    let pct = (done * 100).checked_div(total).unwrap_or(0);
    let coll = op.ns.split_once('.').map_or("", |(_, c)| c);
    doc! {
        "type": "op",
        "active": true,
        "op": "command",
        "ns": op.ns.clone(),
        "command": { "createIndexes": coll, "indexes": [ { "name": index } ] },
        "msg": format!("Index Build: scanning collection Index Build: {done}/{total} {pct}%"),
        "progress": { "done": done as i64, "total": total as i64 },
    }
}

fn command_doc(op: &Op, c: &CommandOp) -> Document {
    let mut d = doc! {
        "type": "op",
        "desc": format!("conn{}", c.connection_id),
        "connectionId": c.connection_id,
        "client": c.client.clone(),
        "active": true,
        "op": c.op_type,
        "ns": op.ns.clone(),
        "command": c.command.document(),
    };
    if let Some(reason) = c.interrupt.reason() {
        d.insert("killPending", true);
        d.insert("interruptReason", format!("{reason:?}"));
    }
    d
}

/// `currentOp`'s `op` field for a command.
fn op_type(name: &str) -> &'static str {
    match name {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    }
}

/// The command as `currentOp` shows it: generic fields dropped, secrets withheld, and a body of
/// more than `COMMAND_SHOWN_BYTES_MAX` (`body_bytes`, its size on the wire) cut to
/// `{$truncated: "<its start>"}` without copying or printing the rest.
pub(crate) fn shown_command(name: &str, body: &Document, body_bytes: usize) -> Document {
    if REDACTED.contains(&name) {
        return doc! { name: body.get(name).cloned().unwrap_or(Bson::Int32(1)) };
    }
    let generic = |k: &str| matches!(k, "lsid" | "$clusterTime" | "$readPreference");
    if body_bytes <= COMMAND_SHOWN_BYTES_MAX {
        return body
            .iter()
            .filter(|(k, _)| !generic(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
    }
    let mut text = Bounded(String::new());
    let _ = std::fmt::Write::write_str(&mut text, "{ ");
    for (k, v) in body.iter().filter(|(k, _)| !generic(k)) {
        // Display stops as soon as the bounded writer refuses more.
        if std::fmt::Write::write_fmt(&mut text, format_args!("{k}: {v}, ")).is_err() {
            break;
        }
    }
    doc! { "$truncated": format!("{}...", text.0) }
}

/// A string that takes at most `COMMAND_SHOWN_BYTES_MAX` bytes, then refuses writes.
struct Bounded(String);

impl std::fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = COMMAND_SHOWN_BYTES_MAX.saturating_sub(self.0.len());
        if s.len() <= room {
            self.0.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.0.push_str(&s[..end]);
        Err(std::fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info<'a>(body: &'a Document, name: &'a str, op: &Interrupt) -> CommandInfo<'a> {
        CommandInfo {
            connection_id: 7,
            client: "127.0.0.1:5000".into(),
            name,
            db: "t",
            body,
            body_bytes: 100,
            raw_body: None,
            interrupt: op.clone(),
            session: None,
        }
    }

    #[test]
    fn a_command_kept_as_bytes_is_shown_as_one_built_at_once() {
        for body in [
            doc! { "find": "c", "filter": { "a": 1 }, "lsid": { "id": 1 }, "$db": "t" },
            doc! { "createUser": "u", "pwd": "secret", "roles": [] },
        ] {
            let name = body.keys().next().cloned().unwrap_or_default();
            let raw = bson::RawDocumentBuf::try_from(&body).unwrap();
            let len = raw.as_bytes().len();
            let deferred = Shown::Raw {
                name: name.clone(),
                body: raw,
            };
            assert_eq!(deferred.document(), shown_command(&name, &body, len));
        }
    }

    #[test]
    fn commands_are_listed_killed_and_unlisted() {
        let reg = OpRegistry::default();
        let body = doc! { "find": "c", "filter": { "a": 1 }, "lsid": { "id": 1 } };
        let op = Interrupt::default();
        let opid = {
            let r = reg.begin_command(info(&body, "find", &op));
            let listed = reg.in_progress();
            assert_eq!(listed.len(), 1);
            let d = &listed[0];
            assert_eq!(d.get_i64("opid").unwrap(), r.opid as i64);
            assert_eq!(d.get_str("ns").unwrap(), "t.c");
            assert_eq!(d.get_str("op").unwrap(), "query");
            assert!(!d.get_document("command").unwrap().contains_key("lsid"));
            assert!(reg.kill(r.opid));
            assert_eq!(op.reason(), Some(Reason::Killed));
            r.opid
        };
        assert!(reg.in_progress().is_empty(), "dropping the guard unlists");
        assert!(!reg.kill(opid));
    }

    #[test]
    fn shutdown_interrupts_running_and_later_commands() {
        let reg = OpRegistry::default();
        let body = doc! { "aggregate": "c" };
        let (a, b) = (Interrupt::default(), Interrupt::default());
        let _r = reg.begin_command(info(&body, "aggregate", &a));
        reg.interrupt_all();
        assert_eq!(a.reason(), Some(Reason::Shutdown));
        let _s = reg.begin_command(info(&body, "aggregate", &b));
        assert_eq!(b.reason(), Some(Reason::Shutdown));
    }

    #[test]
    fn big_and_secret_commands_are_not_shown_whole() {
        let mut wide = doc! { "find": "c" };
        let filter: Document = (0..5000)
            .map(|i| (format!("f{i}"), Bson::Int32(i)))
            .collect();
        wide.insert("filter", filter);
        let shown = shown_command("find", &wide, 100_000);
        let text = shown.get_str("$truncated").unwrap();
        assert!(
            text.len() < 1100 && text.starts_with("{ find: \"c\""),
            "{text}"
        );
        let secret = doc! { "createUser": "u", "pwd": "hunter2" };
        assert_eq!(
            shown_command("createUser", &secret, 50),
            doc! { "createUser": "u" }
        );
    }
}
