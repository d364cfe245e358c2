//! The parts of the `ferry` command that are worth using without running it: the server's
//! configuration (file, `FERRY_*` variables and flags, checked), for the binary and for the
//! fuzz target in `fuzz/` that feeds it arbitrary files and variables.

pub mod config;
