//! The simulator's ground truth with the real protocol core on top: capacity is reached,
//! shared bottlenecks cap their paths, failures are survived, and a seed fixes the run.

use pcdn_core::scheduler::{Pick, Scheduler, View};
use pcdn_core::time::Duration;
use pcdn_sim::link::{LinkConfig, Loss, QueueLimit};
use pcdn_sim::world::{BottleneckSpec, ServerSpec, World, WorldSpec, run};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn server(name: &str, mbit: u64, delay_ms: u64, loss: f64) -> ServerSpec {
    let mut link = LinkConfig::fixed(mbit * 1_000_000, ms(delay_ms));
    if loss > 0.0 {
        link = link.with_loss(Loss::Bernoulli(loss));
    }
    ServerSpec {
        name: name.into(),
        origin: false,
        uplink: LinkConfig::fixed(10_000_000_000, ms(delay_ms)).with_queue(QueueLimit::UNLIMITED),
        link,
        fail_at: None,
        recover_at: None,
        upload_limit: None,
    }
}

fn world(size: u64, servers: Vec<ServerSpec>) -> WorldSpec {
    WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length: size,
        packet_size: 1400,
        task_size: None,
        reorder_buffer: 4_000_000,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(600),
    }
}

#[test]
fn one_path_alone_reaches_97_percent_of_its_capacity() {
    let spec = world(100_000_000, vec![server("edge", 10, 20, 0.0)]);
    // Loss-based controls keep the queue busy; BBR gives up a few percent to ProbeRTT by design.
    for cc in ["cubic", "newreno"] {
        let out = run(&spec, "minrtt", cc, 1).unwrap();
        assert!(out.completed);
        let aggregation = out.stats.aggregation(out.capacity_bps);
        println!("{cc}: aggregation {aggregation:.4}, losses {}", out.stats.losses);
        assert!(aggregation >= 0.97, "{cc}: {aggregation}");
    }
}

#[test]
fn a_shared_bottleneck_caps_its_paths() {
    let mut spec = world(30_000_000, vec![server("a", 20, 10, 0.0), server("b", 20, 15, 0.0)]);
    spec.bottlenecks.push(BottleneckSpec {
        link: LinkConfig::fixed(30_000_000, ms(5)),
        servers: vec![0, 1],
    });
    assert_eq!(spec.capacity_bps(), 30_000_000.0);
    let out = run(&spec, "minrtt", "cubic", 2).unwrap();
    assert!(out.completed);
    let goodput = out.stats.goodput_bps();
    println!("goodput through the 30 Mbit/s bottleneck: {:.2} Mbit/s", goodput / 1e6);
    assert!(goodput <= 30_000_000.0);
    assert!(goodput > 0.8 * 30_000_000.0, "both paths together fill the bottleneck");
}

#[test]
fn capacity_counts_loss_and_upload_caps() {
    let mut a = server("a", 10, 10, 0.1);
    a.upload_limit = Some(4_000_000);
    let spec = world(1_000_000, vec![a, server("b", 5, 10, 0.0)]);
    assert!((spec.capacity_bps() - (4_000_000.0 * 0.9 + 5_000_000.0)).abs() < 1.0);
}

#[test]
fn an_upload_cap_limits_a_fast_link() {
    let mut a = server("a", 100, 10, 0.0);
    a.upload_limit = Some(4_000_000);
    let spec = world(10_000_000, vec![a]);
    let out = run(&spec, "minrtt", "cubic", 3).unwrap();
    assert!(out.completed);
    let goodput = out.stats.goodput_bps();
    assert!(goodput < 4_000_000.0 && goodput > 3_400_000.0, "goodput {goodput}");
}

#[test]
fn a_failed_edge_is_survived_and_a_recovered_one_is_used_again() {
    let mut edge = server("edge", 10, 20, 0.0);
    edge.fail_at = Some(Duration::from_secs(2));
    // Down long enough (6 timeouts backing off from 200 ms take 12.6 s) to be given up.
    edge.recover_at = Some(Duration::from_secs(20));
    let mut cdn = server("cdn", 2, 10, 0.0);
    cdn.origin = true;
    let spec = world(30_000_000, vec![cdn, edge]);
    let out = run(&spec, "minrtt", "cubic", 4).unwrap();
    assert!(out.completed, "the download finishes");
    let edge_paths: Vec<_> = out.stats.paths.iter().filter(|p| p.name == "edge").collect();
    assert_eq!(edge_paths.len(), 2, "the recovered edge got a new path");
    assert!(edge_paths[1].bytes > 0, "and carried data again");
    assert!(out.stats.cdn_share() > 0.0);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let mut b = server("b", 6, 35, 0.05);
    b.link = b.link.with_jitter(pcdn_sim::link::Jitter::uniform(ms(5), true));
    let spec = world(5_000_000, vec![server("a", 10, 15, 0.01), b]);
    let key = |seed| {
        let out = run(&spec, "minrtt", "cubic", seed).unwrap();
        format!(
            "{:?}",
            (out.end, &out.stats.paths, out.stats.ofo_sum, &out.stats.waits_us)
        )
    };
    assert_eq!(key(7), key(7));
    assert_ne!(key(7), key(8));
}

#[test]
fn a_run_that_cannot_finish_stops_at_its_duration() {
    let mut spec = world(100_000_000, vec![server("slow", 1, 10, 0.0)]);
    spec.duration = Duration::from_secs(5);
    let out = run(&spec, "minrtt", "cubic", 5).unwrap();
    assert!(!out.completed);
    assert_eq!(out.end.since_epoch(), Duration::from_secs(5));
    assert!(out.stats.bytes_delivered > 0);
}

#[test]
fn unknown_names_are_errors() {
    let spec = world(1000, vec![server("a", 1, 1, 0.0)]);
    assert!(run(&spec, "nope", "cubic", 1).unwrap_err().to_string().contains("nope"));
    assert!(
        run(&spec, "minrtt", "nope", 1)
            .unwrap_err()
            .to_string()
            .contains("nope")
    );
}

/// A scheduler of this test's own: every request on the path of the named server.
#[derive(Debug)]
struct OnlyPath(pcdn_core::path::PathId);

impl Scheduler for OnlyPath {
    fn name(&self) -> &'static str {
        "only-path"
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let path = view.sendable().find(|p| p.id == self.0)?;
        Some(Pick {
            path: path.id,
            seq: view.pending.first()?,
        })
    }
}

#[test]
fn a_scheduler_object_runs_in_the_world_as_a_registered_one_does() {
    let spec = world(2_000_000, vec![server("a", 10, 10, 0.0), server("b", 10, 30, 0.0)]);
    // Paths are numbered in the order of the servers, from 0.
    let only_b = Box::new(OnlyPath(pcdn_core::path::PathId(1)));
    let out = World::with_scheduler(&spec, None, only_b, "cubic", 1)
        .unwrap()
        .run()
        .unwrap();
    assert!(out.completed);
    let packets: Vec<u64> = out.stats.paths.iter().map(|p| p.packets).collect();
    assert_eq!(packets[0], 0, "{packets:?}");
    assert!(packets[1] >= 2_000_000 / 1400, "{packets:?}");
    // A registered scheduler as an object runs exactly as it does by name.
    let minrtt = pcdn_core::scheduler::by_name("minrtt", 1).unwrap();
    let by_object = World::with_scheduler(&spec, None, minrtt, "cubic", 1)
        .unwrap()
        .run()
        .unwrap();
    let by_name = run(&spec, "minrtt", "cubic", 1).unwrap();
    assert_eq!(format!("{:?}", by_object.stats), format!("{:?}", by_name.stats));
}
