//! Compares schedulers on a few worlds, for quick looks while designing one:
//! `cargo run --release -p pcdn-sim --example compare [scheduler ...]`

use pcdn_core::time::Duration;
use pcdn_sim::link::{LinkConfig, Loss, QueueLimit};
use pcdn_sim::world::{ServerSpec, WorldSpec, run};

fn server(name: &str, origin: bool, mbit: u64, delay_ms: u64, loss: f64) -> ServerSpec {
    let delay = Duration::from_millis(delay_ms);
    let mut link = LinkConfig::fixed(mbit * 1_000_000, delay);
    if loss > 0.0 {
        link = link.with_loss(Loss::Bernoulli(loss));
    }
    ServerSpec {
        name: name.into(),
        origin,
        link,
        uplink: LinkConfig::fixed(100_000_000_000, delay).with_queue(QueueLimit::UNLIMITED),
        fail_at: None,
        recover_at: None,
        upload_limit: None,
    }
}

fn world(size_mb: u64, task_mb: Option<u64>, servers: Vec<ServerSpec>) -> WorldSpec {
    WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length: size_mb * 1_000_000,
        packet_size: 1400,
        task_size: task_mb.map(|t| t * 1_000_000),
        reorder_buffer: 4_000_000,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(600),
    }
}

fn main() {
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        names = [
            "minrtt",
            "blest",
            "ecf",
            "pscheduler",
            "pscheduler-nr",
            "mprd",
            "default",
        ]
        .map(String::from)
        .to_vec();
    }
    let worlds = [
        (
            "mprd low 5, no loss",
            "bbr",
            world(
                50,
                None,
                vec![
                    server("cdn", true, 10, 10, 0.0),
                    server("e1", false, 4, 20, 0.0),
                    server("e2", false, 4, 20, 0.0),
                    server("e3", false, 3, 20, 0.0),
                    server("e4", false, 1, 20, 0.0),
                ],
            ),
        ),
        (
            "mprd low 3, e1 10% loss",
            "bbr",
            world(
                50,
                None,
                vec![
                    server("cdn", true, 10, 10, 0.0),
                    server("e1", false, 4, 20, 0.1),
                    server("e2", false, 4, 20, 0.0),
                ],
            ),
        ),
        (
            "mprd low 5, e1 10% loss",
            "bbr",
            world(
                50,
                None,
                vec![
                    server("cdn", true, 10, 10, 0.0),
                    server("e1", false, 4, 20, 0.1),
                    server("e2", false, 4, 20, 0.0),
                    server("e3", false, 3, 20, 0.0),
                    server("e4", false, 1, 20, 0.0),
                ],
            ),
        ),
        (
            "ps fig15 rtt 30/90, 1MB tasks",
            "bbr",
            world(
                20,
                Some(1),
                vec![server("p1", false, 10, 15, 0.0), server("p2", false, 10, 45, 0.0)],
            ),
        ),
        (
            "ps fig18 5 paths",
            "bbr",
            world(
                20,
                Some(1),
                (0..5).map(|i| server("p", false, 5, 15 + 5 * i, 0.0)).collect(),
            ),
        ),
    ];
    for (label, cc, spec) in &worlds {
        println!("\n{label} ({cc}), capacity {:.1} Mbit/s", spec.capacity_bps() / 1e6);
        println!(
            "{:<14} {:>6} {:>10} {:>10} {:>9} {:>9} {:>8} {:>7}",
            "scheduler", "aggr", "ofo mean", "ofo max", "wait ms", "p99 ms", "done s", "waste"
        );
        for name in &names {
            let out = run(spec, name, cc, 1).unwrap();
            let s = &out.stats;
            println!(
                "{:<14} {:>6.3} {:>10.0} {:>10} {:>9.1} {:>9.1} {:>8.2} {:>7.4}{}",
                name,
                s.aggregation(out.capacity_bps),
                s.ofo_mean_bytes(),
                s.ofo_max_bytes(),
                s.wait_mean().as_secs_f64() * 1e3,
                s.wait_p99().as_secs_f64() * 1e3,
                s.completion_time().map_or(f64::NAN, |d| d.as_secs_f64()),
                s.request_waste(),
                if out.completed { "" } else { "  (incomplete)" }
            );
        }
    }
}
