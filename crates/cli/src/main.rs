//! The `pcdn` command.
fn main() {}
