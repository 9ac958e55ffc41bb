//! Harness for end-to-end tests: starts a real `cairn` process on a free port.
