//! The units of scenario files, defined in `pcdn_core::units` and shared with the runtime and the CLI.

pub use pcdn_core::units::*;
