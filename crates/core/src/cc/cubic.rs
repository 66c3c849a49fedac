//! Cubic congestion control, receiver-driven.

use super::{Controller, ControllerFactory, DataArrival, Loss};
use crate::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct CubicConfig {}

impl ControllerFactory for CubicConfig {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn build(&self, now: Instant, mss: u64) -> Box<dyn Controller> {
        let _ = (now, mss);
        unimplemented!("cc helper")
    }
}

#[derive(Debug)]
pub struct Cubic {}

impl Controller for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }
    fn on_request_sent(&mut self, _now: Instant, _bytes: u64, _in_flight_bytes: u64) {}
    fn on_data(&mut self, _arrival: &DataArrival) {}
    fn on_loss(&mut self, _loss: &Loss) {}
    fn window(&self) -> u64 {
        unimplemented!()
    }
}
