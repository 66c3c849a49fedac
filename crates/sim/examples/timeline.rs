//! A per-path timeline of one simulated run, to see where a download waits:
//! `cargo run --release -p pcdn-sim --example timeline -- FILE SCHEDULER CC TRANSPORT [SEED] [BIN_MS]`
//!
//! Runs the first sweep point of scenario FILE once and prints, per time bin (1 s by default):
//! the MB delivered in order during the bin and the largest gap between in-order deliveries in
//! it (a stall), then per path the requests sent (retransmissions included), the data packets
//! that arrived, and the requests declared lost.

use pcdn_core::Transport;
use pcdn_core::scheduler::{self, Pick, SchedEvent, Scheduler, View};
use pcdn_core::time::{Duration, Instant};
use pcdn_sim::scenario::Scenario;
use pcdn_sim::world::World;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Per bin and path: requests sent, packets arrived, requests lost.
type Counts = BTreeMap<(u64, u32), [u64; 3]>;

/// The scheduler under study, counting what happens on each path.
#[derive(Debug)]
struct Counting {
    inner: Box<dyn Scheduler>,
    bin: Duration,
    counts: Arc<Mutex<Counts>>,
}

impl Scheduler for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        self.inner.next(view)
    }
    fn on_event(&mut self, now: Instant, event: &SchedEvent) {
        let bin = now.as_nanos() / self.bin.as_nanos() as u64;
        let slot = match *event {
            SchedEvent::Sent { path, .. } => Some((path, 0)),
            SchedEvent::Arrived { path, .. } => Some((path, 1)),
            SchedEvent::Lost { path, .. } => Some((path, 2)),
            _ => None,
        };
        if let Some((path, i)) = slot {
            self.counts.lock().unwrap().entry((bin, path.0)).or_default()[i] += 1;
        }
        self.inner.on_event(now, event);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        eprintln!("usage: timeline FILE SCHEDULER CC TRANSPORT [SEED] [BIN_MS]");
        std::process::exit(2);
    }
    let scenario = Scenario::load(std::path::Path::new(&args[0])).unwrap_or_else(|e| panic!("{e}"));
    let point = &scenario.points[0];
    let seed: u64 = args.get(4).map_or(point.seed, |s| s.parse().expect("seed"));
    let bin = Duration::from_millis(args.get(5).map_or(1000, |s| s.parse().expect("bin ms")));
    let transport = Transport::by_name(&args[3]).expect("transport: pull, subflow or subflow-or");
    let counts = Arc::new(Mutex::new(Counts::new()));
    let sched = Counting {
        inner: scheduler::by_name_with(&args[1], seed, &point.world.weave).expect("scheduler"),
        bin,
        counts: counts.clone(),
    };
    let world = World::with_transport(
        &point.world,
        point.video.as_ref(),
        Box::new(sched),
        &args[2],
        transport,
        seed,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // In-order bytes per bin, and the longest wait between two in-order deliveries.
    let mut delivered: BTreeMap<u64, (u64, Duration)> = BTreeMap::new();
    let (mut last_bytes, mut last_at) = (0u64, Instant::ZERO);
    let outcome = world
        .run_observing(|now, bytes| {
            let b = now.as_nanos() / bin.as_nanos() as u64;
            let e = delivered.entry(b).or_default();
            e.0 += bytes - last_bytes;
            e.1 = e.1.max(now - last_at);
            (last_bytes, last_at) = (bytes, now);
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = point.world.servers.iter().map(|s| s.name.as_str()).collect();
    let s = &outcome.stats;
    println!(
        "{} / {} / {} / {}, seed {seed}: {}, goodput {:.2} Mbit/s of {:.2}",
        args[0],
        args[1],
        args[2],
        args[3],
        if outcome.completed {
            "completed"
        } else {
            "not completed"
        },
        s.goodput_bps() / 1e6,
        outcome.capacity_bps / 1e6,
    );
    let mut header = format!("{:>7} {:>9} {:>9}", "t s", "in-order", "stall ms");
    for n in &names {
        header += &format!(" | {n:>8} sent {:>6} {:>5}", "arrived", "lost");
    }
    println!("{header}");
    let counts = counts.lock().unwrap();
    let last_bin = counts
        .keys()
        .map(|k| k.0)
        .chain(delivered.keys().copied())
        .max()
        .unwrap_or(0);
    for b in 0..=last_bin {
        let (bytes, stall) = delivered.get(&b).copied().unwrap_or_default();
        let mut line = format!(
            "{:>7.1} {:>7.2}MB {:>9.0}",
            (b as f64) * bin.as_secs_f64(),
            bytes as f64 / 1e6,
            stall.as_secs_f64() * 1e3
        );
        for p in 0..names.len() {
            let c = counts.get(&(b, p as u32)).copied().unwrap_or_default();
            line += &format!(" | {:>13} {:>6} {:>5}", c[0], c[1], c[2]);
        }
        println!("{line}");
    }
}
