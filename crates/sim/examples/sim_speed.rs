//! Prints simulated DATA packets per second (wall clock and CPU) for the MPRD high-rate world.
//! `cargo run --release -p pcdn-sim --example sim_speed`

use cpu_time::ProcessTime;
use pcdn_sim::world::{World, mprd_high_rate};
use std::time::Instant;

fn main() {
    let mut spec = mprd_high_rate();
    let runs: u64 = std::env::args().nth(1).map_or(3, |a| a.parse().expect("runs"));
    if let Some(mb) = std::env::args().nth(2) {
        spec.content_length = mb.parse::<u64>().expect("size in MB") * 1_000_000;
    }
    for run in 1..=runs {
        let (wall, cpu) = (Instant::now(), ProcessTime::now());
        let out = World::new(&spec, "minrtt", "cubic", run).unwrap().run().unwrap();
        let (wall, cpu) = (wall.elapsed().as_secs_f64(), cpu.elapsed().as_secs_f64());
        let n = out.data_packets as f64;
        println!(
            "run {run}: {} data packets; {:.0} k/s wall ({wall:.3} s), {:.0} k/s CPU ({cpu:.3} s); completed {}",
            out.data_packets,
            n / wall / 1e3,
            n / cpu / 1e3,
            out.completed
        );
    }
}
