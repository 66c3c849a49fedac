//! pcdn's sans-I/O protocol core: paths, estimators, congestion control, schedulers, the
//! client `Download`, the `ServerSession` and the metrics. No sockets, clocks or threads:
//! time and randomness come in as arguments.

pub mod cc;
pub mod estimate;
pub mod time;
