//! `cairn-create-user HOST:PORT DB USER ROLE` (password on stdin): one `createUser` of USER in
//! DB with ROLE (of DB). The Docker entrypoint makes `MONGO_INITDB_ROOT_USERNAME` with it on the
//! first start, through the localhost exception of a temporary `--auth` server. The password is
//! read from stdin so that it never shows in a process list; exit 0 when the server says ok.

use cairn_e2e::compare::limits::HEALTHCHECK_TIMEOUT;
use std::io::Read;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, db, user, role] = args.as_slice() else {
        eprintln!("usage: cairn-create-user HOST:PORT DB USER ROLE  (password on stdin)");
        return ExitCode::from(2);
    };
    let mut password = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut password) {
        eprintln!("cairn-create-user: cannot read the password from stdin: {e}");
        return ExitCode::FAILURE;
    }
    let body = bson::rawdoc! {
        "createUser": user.as_str(),
        "pwd": password.as_str(),
        "roles": [{ "role": role.as_str(), "db": db.as_str() }],
        "$db": db.as_str(),
    };
    match cairn_e2e::compare::ping::command(addr, &body, HEALTHCHECK_TIMEOUT) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-create-user: createUser {user}@{db} on {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}
