//! Proves a real client can connect. How: starts the `cairn` binary and pings it.
