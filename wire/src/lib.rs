//! The MongoDB wire protocol: message headers, OP_MSG, OP_QUERY/OP_REPLY (legacy handshake only)
//! and OP_COMPRESSED. Bytes in, messages out, and back. This crate knows nothing of sockets or
//! databases; every length a peer declares is checked against `limits` before anything is
//! allocated for it.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]
