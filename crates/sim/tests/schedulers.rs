//! Each registered scheduler's characteristic behaviour, shown in the deterministic simulator.
//!
//! Every test builds a small world (two or three servers, a few megabytes), runs the real
//! protocol core over the link model and asserts the behaviour that defines one scheduler, with
//! margins taken from measured runs. Each margin was checked to fail for another scheduler:
//! the comment above each assertion names it and gives its value. The runs go through
//! [`traced`], which runs the world (`World::with_scheduler`) with the scheduler wrapped so that
//! every request (server, sequence number, time, whether it copies one in flight elsewhere) is
//! logged; `the_traced_driver_reproduces_the_world` checks the wrapper changes nothing.

use pcdn_core::PathId;
use pcdn_core::scheduler::{self, Pick, SchedEvent, Scheduler, View};
use pcdn_core::stats::Stats;
use pcdn_core::time::{Duration, Instant};
use pcdn_sim::link::{Change, LinkChange, LinkConfig, Loss, QueueLimit};
use pcdn_sim::world::{BottleneckSpec, ServerSpec, World, WorldSpec, run};
use std::sync::{Arc, Mutex};

/// The congestion control of every run: the loss-based default of the scenario files.
const CC: &str = "cubic";
const PACKET: u64 = 1400;
const SEED: u64 = 1;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A server `mbit` Mbit/s and `delay_ms` one way from the client, behind the default 100-packet
/// drop-tail queue; requests travel on an uncongested uplink.
fn server(name: &str, mbit: u64, delay_ms: u64) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        origin: false,
        link: LinkConfig::fixed(mbit * 1_000_000, ms(delay_ms)),
        uplink: LinkConfig::fixed(10_000_000_000, ms(delay_ms)).with_queue(QueueLimit::UNLIMITED),
        fail_at: None,
        recover_at: None,
        upload_limit: None,
    }
}

/// Bernoulli loss on the data direction.
fn lossy(mut s: ServerSpec, loss: f64) -> ServerSpec {
    s.link = s.link.with_loss(Loss::Bernoulli(loss));
    s
}

/// A shallow data-direction queue, which keeps a loss-based window small.
fn shallow(mut s: ServerSpec, packets: u64) -> ServerSpec {
    s.link = s.link.with_queue(QueueLimit::packets(packets));
    s
}

fn origin(mut s: ServerSpec) -> ServerSpec {
    s.origin = true;
    s
}

fn world(content_length: u64, reorder_buffer: u64, servers: Vec<ServerSpec>) -> WorldSpec {
    WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length,
        packet_size: PACKET as u32,
        task_size: None,
        reorder_buffer,
        servers,
        bottlenecks: Vec::new(),
        duration: Duration::from_secs(120),
    }
}

/// One request the download sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sent {
    /// Index of the server in the world's spec.
    server: usize,
    seq: u64,
    at: Instant,
    /// The number was in flight on another path when it was picked: a redundant copy.
    copy: bool,
}

#[derive(Debug, Default)]
struct Log {
    /// The last pick and whether it was a copy, until the download reports it sent.
    picked: Option<(Pick, bool)>,
    sent: Vec<(PathId, u64, Instant, bool)>,
}

/// Wraps a registered scheduler and logs every request the download carries out.
#[derive(Debug)]
struct Recorder {
    inner: Box<dyn Scheduler>,
    log: Arc<Mutex<Log>>,
}

impl Scheduler for Recorder {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn next(&mut self, view: &View<'_>) -> Option<Pick> {
        let pick = self.inner.next(view)?;
        self.log.lock().unwrap().picked = Some((pick, view.copies(pick.seq) > 0));
        Some(pick)
    }
    fn on_event(&mut self, now: Instant, event: &SchedEvent) {
        if let SchedEvent::Sent { path, seq } = *event {
            let mut log = self.log.lock().unwrap();
            let copy = log
                .picked
                .take()
                .is_some_and(|(pick, copy)| copy && pick == Pick { path, seq });
            log.sent.push((path, seq, now, copy));
        }
        self.inner.on_event(now, event);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
}

/// A run with the log of its requests.
struct Traced {
    stats: Stats,
    capacity_bps: f64,
    end: Instant,
    completed: bool,
    sent: Vec<Sent>,
}

impl Traced {
    /// Share of all requests sent to `server`.
    fn share(&self, server: usize) -> f64 {
        self.sent.iter().filter(|s| s.server == server).count() as f64 / self.sent.len().max(1) as f64
    }
    /// The largest share of requests any one server got.
    fn top_share(&self) -> f64 {
        let servers = self.sent.iter().map(|s| s.server + 1).max().unwrap_or(0);
        (0..servers).map(|i| self.share(i)).fold(0.0, f64::max)
    }
    /// Mean length of the runs of consecutive requests to one server.
    fn mean_run(&self) -> f64 {
        let switches = self.sent.windows(2).filter(|w| w[0].server != w[1].server).count();
        self.sent.len() as f64 / (switches + 1) as f64
    }
    /// Share of `server`'s consecutive requests that ask for a lower number than the one before.
    fn descending(&self, server: usize) -> f64 {
        let seqs: Vec<u64> = self.sent.iter().filter(|s| s.server == server).map(|s| s.seq).collect();
        let down = seqs.windows(2).filter(|w| w[1] < w[0]).count();
        down as f64 / seqs.len().saturating_sub(1).max(1) as f64
    }
    fn copies(&self) -> impl Iterator<Item = &Sent> {
        self.sent.iter().filter(|s| s.copy)
    }
    fn aggregation(&self) -> f64 {
        self.stats.aggregation(self.capacity_bps)
    }
    /// Whole-content completion time in seconds.
    fn completion_s(&self) -> f64 {
        assert!(self.completed, "the download completes");
        self.stats.completion_time().expect("complete").as_secs_f64()
    }
    fn wait_mean_ms(&self) -> f64 {
        self.stats.wait_mean().as_secs_f64() * 1e3
    }
}

/// Prints a measured value (`--nocapture` shows them all, for retuning) and asserts on it.
macro_rules! measured {
    ($ok:expr, $($what:tt)+) => {{
        let what = format!($($what)+);
        println!("{what}");
        assert!($ok, "{what}");
    }};
}

/// Runs `spec` with scheduler `name` in `pcdn_sim::world::World`, the scheduler wrapped in a
/// [`Recorder`] that logs every request.
fn traced(spec: &WorldSpec, name: &str) -> Traced {
    traced_with_seed(spec, name, SEED)
}

fn traced_with_seed(spec: &WorldSpec, name: &str, seed: u64) -> Traced {
    let log = Arc::new(Mutex::new(Log::default()));
    let recorder = Recorder {
        inner: scheduler::by_name(name, seed).unwrap_or_else(|| panic!("{name} is registered")),
        log: log.clone(),
    };
    let out = World::with_scheduler(spec, None, Box::new(recorder), CC, seed)
        .expect("a valid world")
        .run()
        .expect("the run ends");
    // The world adds one path per server, in the spec's order, numbered from 0.
    let server_of = |path: PathId| {
        let server = path.0 as usize;
        assert!(server < spec.servers.len(), "{path} is a server's path");
        server
    };
    let sent = log
        .lock()
        .unwrap()
        .sent
        .iter()
        .map(|&(path, seq, at, copy)| Sent {
            server: server_of(path),
            seq,
            at,
            copy,
        })
        .collect();
    Traced {
        stats: out.stats,
        capacity_bps: out.capacity_bps,
        end: out.end,
        completed: out.completed,
        sent,
    }
}

#[test]
fn the_traced_driver_reproduces_the_world() {
    let spec = world(
        2_000_000,
        500_000,
        vec![server("a", 10, 10), lossy(server("b", 5, 30), 0.02)],
    );
    for name in ["minrtt", "pscheduler"] {
        let t = traced(&spec, name);
        let out = run(&spec, name, CC, SEED).unwrap();
        assert!(t.completed && out.completed);
        assert_eq!(t.end, out.end, "{name}");
        assert_eq!(
            format!("{:?}", t.stats.paths),
            format!("{:?}", out.stats.paths),
            "{name}"
        );
        assert_eq!(t.stats.waits_us, out.stats.waits_us, "{name}");
        assert_eq!(
            t.sent.len() as u64,
            out.stats.requests_sent,
            "{name}: every request is logged"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// minrtt and lrf

/// Equal rates, very different RTTs, and a reorder buffer (100 kB) below the fast path's window:
/// both paths have room most of the time, so the choice between them is the scheduler's.
fn rtt_apart() -> WorldSpec {
    world(4_000_000, 100_000, vec![server("near", 10, 5), server("far", 10, 40)])
}

#[test]
fn minrtt_sends_to_the_lowest_rtt_path_while_it_has_room() {
    let t = traced(&rtt_apart(), "minrtt");
    // Measured 0.997. Checked against round-robin: 0.537.
    measured!(t.share(0) >= 0.95, "near share {:.3}", t.share(0));
}

/// A 5 Mbit/s path 5 ms away whose shallow queue keeps its window small, and a 20 Mbit/s path
/// 40 ms away with a deep queue and a large window; 150 kB of reorder buffer.
fn near_small_far_large() -> WorldSpec {
    world(
        4_000_000,
        150_000,
        vec![shallow(server("near", 5, 5), 10), server("far", 20, 40)],
    )
}

#[test]
fn lrf_makes_exactly_minrtts_decisions() {
    let spec = near_small_far_large();
    let lrf = traced(&spec, "lrf");
    let minrtt = traced(&spec, "minrtt");
    assert_eq!(
        first_difference(&lrf, &minrtt),
        None,
        "same requests, same order, same times"
    );
    assert_eq!(format!("{:?}", lrf.stats), format!("{:?}", minrtt.stats));
    // The world tells rules apart: checked against let, whose log differs from the 301st
    // request on (near share 0.07 against minrtt's 0.30).
    assert!(first_difference(&traced(&spec, "let"), &minrtt).is_some());
}

/// The first request (index, and what each run sent there) where two runs' logs differ.
fn first_difference(a: &Traced, b: &Traced) -> Option<(usize, Option<Sent>, Option<Sent>)> {
    (0..a.sent.len().max(b.sent.len()))
        .map(|i| (i, a.sent.get(i).copied(), b.sent.get(i).copied()))
        .find(|(_, x, y)| x != y)
}

// ---------------------------------------------------------------------------------------------
// round-robin

/// Two equal paths and a reorder buffer (70 kB) below their windows: both have room nearly
/// always.
fn equal_with_room() -> WorldSpec {
    world(4_000_000, 70_000, vec![server("a", 10, 20), server("b", 10, 20)])
}

#[test]
fn round_robin_alternates_between_equal_paths() {
    let t = traced(&equal_with_room(), "round-robin");
    // Measured 0.500 and 1.00. Checked against minrtt: 0.871 and 73 (it keeps to the path
    // whose sRTT happens to be lower).
    measured!((t.share(0) - 0.5).abs() <= 0.05, "share {:.3}", t.share(0));
    measured!(t.mean_run() <= 1.1, "mean run {:.2}", t.mean_run());
}

// ---------------------------------------------------------------------------------------------
// lpc and let

/// A 20 Mbit/s path 5 ms away with a shallow queue (a small window) and a 3 Mbit/s path 80 ms
/// away: the far path has more room, the near one the larger cwnd / sRTT.
fn room_versus_rate() -> WorldSpec {
    world(
        4_000_000,
        200_000,
        vec![shallow(server("near", 20, 5), 10), server("far", 3, 80)],
    )
}

#[test]
fn lpc_sends_to_the_path_with_the_most_window_room() {
    let t = traced(&near_small_far_large(), "lpc");
    // Measured 0.931. Checked against minrtt: 0.703.
    measured!(t.share(1) >= 0.85, "far share {:.3}", t.share(1));
    // As the rooms even out, requests alternate. Measured 15.8. Checked against let: 79.6.
    let t = traced(&room_versus_rate(), "lpc");
    measured!(t.mean_run() <= 30.0, "mean run {:.1}", t.mean_run());
}

#[test]
fn let_sends_to_the_path_with_the_largest_cwnd_per_srtt() {
    let t = traced(&near_small_far_large(), "let");
    // Measured 0.932. Checked against minrtt: 0.703.
    measured!(t.share(1) >= 0.85, "far share {:.3}", t.share(1));
    // Room does not matter, only the estimate: it stays with the near path's larger cwnd/sRTT
    // while that path can send. Measured 79.6. Checked against lpc: 2.9.
    let t = traced(&room_versus_rate(), "let");
    measured!(t.mean_run() >= 40.0, "mean run {:.1}", t.mean_run());
}

// ---------------------------------------------------------------------------------------------
// the sticky family

#[test]
fn gr_sty_stays_on_one_path_while_it_has_room() {
    let t = traced(&equal_with_room(), "gr-sty");
    // Its window never fills, so it never leaves. Measured 0.969. Checked against minrtt: 0.871.
    measured!(t.top_share() >= 0.95, "top share {:.3}", t.top_share());
}

#[test]
fn tp_sty_settles_on_the_highest_throughput_path() {
    // It starts on the 2 Mbit/s path 5 ms away (LRF's choice) and leaves it for good once the
    // 20 Mbit/s path estimates a larger throughput.
    let spec = world(4_000_000, 4_000_000, vec![server("near", 2, 5), server("fast", 20, 20)]);
    let t = traced(&spec, "tp-sty");
    assert_eq!(t.sent[0].server, 0, "starts where LRF would");
    // Measured 0.995. Checked against minrtt: 0.876.
    measured!(t.share(1) >= 0.97, "fast share {:.3}", t.share(1));
    // Between equal paths nothing is ever larger: it keeps the first. Measured 0.990. Checked
    // against tr-sty: 0.723.
    let equal = world(4_000_000, 4_000_000, vec![server("a", 10, 20), server("b", 10, 20)]);
    let t = traced(&equal, "tp-sty");
    measured!(t.top_share() >= 0.97, "top share {:.3}", t.top_share());
}

#[test]
fn tr_sty_also_moves_to_a_path_with_a_smaller_rtt_and_sends_runs() {
    // It starts on the 5 Mbit/s path 5 ms away; once that path's queue pushes its sRTT above
    // the 20 Mbit/s path's 60 ms, TR-STY moves there and finds the larger throughput.
    let spec = world(4_000_000, 4_000_000, vec![server("fast", 20, 30), server("near", 5, 5)]);
    let t = traced(&spec, "tr-sty");
    // Measured 0.898. Checked against tp-sty: 0.000 (it never learns the far path's rate).
    measured!(t.share(0) >= 0.5, "fast share {:.3}", t.share(0));
    // Measured 80.5. Checked against minrtt: 4.6.
    measured!(t.mean_run() >= 30.0, "mean run {:.1}", t.mean_run());
}

// ---------------------------------------------------------------------------------------------
// redundant

#[test]
fn redundant_fetches_every_packet_on_every_path() {
    let spec = world(
        3_000_000,
        3_000_000,
        vec![server("a", 10, 20), server("b", 10, 20), server("c", 10, 20)],
    );
    let t = traced(&spec, "redundant");
    let needed = t.stats.packets_needed;
    // About n − 1 = 2 extra copies of each packet. Measured 2.000, and every path delivered
    // every packet. Checked against minrtt: 0.000.
    measured!((1.8..=2.05).contains(&t.stats.waste()), "waste {:.3}", t.stats.waste());
    for p in &t.stats.paths {
        measured!(
            p.packets as f64 >= 0.9 * needed as f64,
            "{}: {} of {needed}",
            p.name,
            p.packets
        );
    }
}

// ---------------------------------------------------------------------------------------------
// blest and ecf

/// A 20 Mbit/s path 10 ms away and a 5 Mbit/s one 80 ms away; 500 kB of reorder buffer, which
/// the slow path's packets can pin for a long time.
fn slow_path_blocks() -> WorldSpec {
    world(4_000_000, 500_000, vec![server("fast", 20, 10), server("slow", 5, 80)])
}

/// `name` keeps the out-of-order bytes and the waiting time far below minrtt's.
fn assert_less_head_of_line_blocking_than_minrtt(name: &str, limit: f64) {
    let spec = slow_path_blocks();
    let t = traced(&spec, name);
    let minrtt = traced(&spec, "minrtt");
    let ofo = t.stats.ofo_mean_bytes() / minrtt.stats.ofo_mean_bytes();
    let wait = t.wait_mean_ms() / minrtt.wait_mean_ms();
    measured!(ofo <= limit, "{name}: OFO {ofo:.3} of minrtt's");
    measured!(wait <= limit, "{name}: waiting {wait:.3} of minrtt's");
}

#[test]
fn blest_avoids_head_of_line_blocking_on_heterogeneous_paths() {
    // Measured 0.112 and 0.092. Checked against pscheduler: OFO 0.696.
    assert_less_head_of_line_blocking_than_minrtt("blest", 0.35);
}

#[test]
fn ecf_avoids_head_of_line_blocking_on_heterogeneous_paths() {
    // Measured 0.112 and 0.093. Checked against pscheduler: OFO 0.696.
    assert_less_head_of_line_blocking_than_minrtt("ecf", 0.35);
}

// ---------------------------------------------------------------------------------------------
// xlink

#[test]
fn xlink_reinjects_around_a_stalled_path() {
    // Two equal paths; at 1.2 s one path's delay jumps to 1 s, stranding what it has in flight
    // while the 300 kB reorder buffer fills behind it.
    let mut stall = server("stall", 10, 10);
    stall.link = stall
        .link
        .with_change(LinkChange::new(Instant::ZERO + ms(1200), Change::Delay(ms(1000))));
    let spec = world(3_000_000, 300_000, vec![server("steady", 10, 10), stall]);
    let xlink = traced(&spec, "xlink");
    let minrtt = traced(&spec, "minrtt");
    let (mine, theirs) = (xlink.completion_s(), minrtt.completion_s());
    // Measured 0.868 (2.11 s against 2.43 s). Checked against weave: 0.675, pscheduler: 0.961,
    // mprd: 2.371, blest: 0.970.
    measured!(
        mine <= 0.92 * theirs,
        "completion {mine:.3} s against minrtt's {theirs:.3} s"
    );
    let copies = xlink.copies().count() as u64;
    // Re-injection is capped at 8 + 2% of requests (3% here: xlink also counts the picks the
    // download refused).
    let cap = 8 + xlink.stats.requests_sent * 3 / 100;
    // Measured 48 copies.
    measured!(copies > 0 && copies <= cap, "{copies} copies, cap {cap}");
}

// ---------------------------------------------------------------------------------------------
// pscheduler and pscheduler-nr

/// A 20 Mbit/s path 10 ms away and a 5 Mbit/s one 30 ms away, the whole content as buffer.
fn heterogeneous() -> WorldSpec {
    world(
        4_000_000,
        4_000_000,
        vec![server("fast", 20, 10), server("slow", 5, 30)],
    )
}

/// Paths picking packets at their Eq. 7 offsets: less out-of-order data and waiting than minrtt.
fn assert_paths_pick_packets_in_arrival_order(name: &str) {
    let spec = heterogeneous();
    let t = traced(&spec, name);
    let minrtt = traced(&spec, "minrtt");
    let ofo = t.stats.ofo_mean_bytes() / minrtt.stats.ofo_mean_bytes();
    let wait = t.wait_mean_ms() / minrtt.wait_mean_ms();
    // Measured 0.518 and 0.493 (pscheduler), 0.502 and 0.527 (pscheduler-nr). Checked against
    // blest: OFO 1.024.
    measured!(ofo <= 0.65, "{name}: OFO {ofo:.3} of minrtt's");
    measured!(wait <= 0.65, "{name}: waiting {wait:.3} of minrtt's");
}

/// Four 1 MB tasks over a 20 Mbit/s path 10 ms away and a 5 Mbit/s one 30 ms away whose
/// shallow queue keeps its RTT, and so its Eq. 7 offset, small: the tail it copies is short.
fn heterogeneous_tasks() -> WorldSpec {
    let mut spec = world(
        4_000_000,
        4_000_000,
        vec![server("fast", 20, 10), shallow(server("slow", 5, 30), 20)],
    );
    spec.task_size = Some(1_000_000);
    spec
}

/// For each copy in `t`, the share of its task not yet requested when it was made.
fn task_left_at_copies(t: &Traced, spec: &WorldSpec) -> Vec<f64> {
    let per_task = spec.task_size.expect("tasks").div_ceil(PACKET);
    let mut first_request = std::collections::HashMap::new();
    for s in &t.sent {
        first_request.entry(s.seq).or_insert(s.at);
    }
    t.copies()
        .map(|c| {
            let task = c.seq / per_task;
            let unrequested = (task * per_task..(task + 1) * per_task)
                .filter(|seq| first_request.get(seq).is_none_or(|&at| at > c.at))
                .count();
            unrequested as f64 / per_task as f64
        })
        .collect()
}

#[test]
fn pscheduler_orders_arrivals_and_copies_only_task_tails() {
    assert_paths_pick_packets_in_arrival_order("pscheduler");
    let spec = heterogeneous_tasks();
    let t = traced(&spec, "pscheduler");
    let left = task_left_at_copies(&t, &spec);
    let latest = left.iter().copied().fold(0.0, f64::max);
    // Measured 233 copies.
    measured!(left.len() >= 20, "{} copies", left.len());
    // Measured: none while more than 0.097 of its task was unrequested. Checked against
    // redundant: 0.958.
    measured!(latest <= 0.25, "a copy with {latest:.3} of its task unrequested");
}

#[test]
fn pscheduler_nr_orders_arrivals_without_copies() {
    assert_paths_pick_packets_in_arrival_order("pscheduler-nr");
    let t = traced(&heterogeneous_tasks(), "pscheduler-nr");
    // Checked against pscheduler: 245 copies.
    assert_eq!(t.copies().count(), 0);
}

// ---------------------------------------------------------------------------------------------
// mprd

/// MPRD's video setting (Srinivasan and Aryafar, ICDCS 2025, §V, Fig. 8): a 10 Mbit/s CDN origin and a 4 Mbit/s edge,
/// here with a 50 kB reorder buffer (about 28 ms of both links' data, so a hole the edge's
/// loss leaves holds the cursor long enough to stall the window); `loss` on the edge's data
/// direction.
fn cdn_and_edge(loss: f64) -> WorldSpec {
    world(
        4_000_000,
        50_000,
        vec![origin(server("cdn", 10, 10)), lossy(server("edge", 4, 15), loss)],
    )
}

/// Goodput with 10% loss on the edge ÷ goodput without, averaged over three loss patterns.
fn goodput_kept_under_edge_loss(name: &str) -> f64 {
    let seeds = [1, 2, 3];
    let kept: f64 = seeds
        .iter()
        .map(|&seed| {
            let lossy = traced_with_seed(&cdn_and_edge(0.1), name, seed).stats.goodput_bps();
            let clean = traced_with_seed(&cdn_and_edge(0.0), name, seed).stats.goodput_bps();
            lossy / clean
        })
        .sum();
    kept / seeds.len() as f64
}

#[test]
fn mprd_keeps_its_goodput_when_an_edge_loses_10_percent() {
    // The edge is a reverse server: what it loses is re-fetched by the forward CDN only when the
    // CDN reaches it, so the lossy edge cannot hold the in-order cursor. With a 150 kB buffer
    // the loss time threshold (RFC 9002 §6.1.2) repairs minrtt's holes before the window
    // fills, and minrtt kept 1.007 there as MPRD did.
    let mprd = goodput_kept_under_edge_loss("mprd");
    // Measured 0.994. Checked against pscheduler: 0.992, weave: 0.984.
    measured!(mprd >= 0.9, "mprd keeps {mprd:.3}");
    // minrtt's requests lost on the edge hold the cursor: measured 0.817.
    let minrtt = goodput_kept_under_edge_loss("minrtt");
    measured!(minrtt <= mprd - 0.05, "minrtt keeps {minrtt:.3}");
}

#[test]
fn mprd_reverse_servers_fetch_down_from_the_top_of_the_window() {
    let buffer = 300_000;
    let spec = world(
        4_000_000,
        buffer,
        vec![
            origin(server("cdn", 10, 10)),
            server("edge1", 4, 15),
            server("edge2", 4, 20),
        ],
    );
    let t = traced(&spec, "mprd");
    let window = buffer / PACKET;
    // The forward server climbs: measured 0.002.
    measured!(t.descending(0) <= 0.1, "cdn descends {:.3}", t.descending(0));
    for edge in [1, 2] {
        // Measured 0.914 and 0.915. Checked against minrtt: 0.003; pscheduler: 0.577.
        measured!(
            t.descending(edge) >= 0.75,
            "edge{edge} descends {:.3}",
            t.descending(edge)
        );
        // It starts high in the first window: measured 213 and 132 of 214. Checked against
        // minrtt: 10 and 20.
        let first = t.sent.iter().find(|s| s.server == edge).unwrap().seq;
        measured!(first >= window / 3, "edge{edge} starts at {first} of {window}");
    }
}

// ---------------------------------------------------------------------------------------------
// weave

#[test]
fn weave_aggregates_three_heterogeneous_paths_best() {
    let spec = world(
        8_000_000,
        1_000_000,
        vec![server("a", 20, 10), server("b", 10, 30), server("c", 5, 60)],
    );
    let weave = traced(&spec, "weave").aggregation();
    let minrtt = traced(&spec, "minrtt").aggregation();
    let pscheduler = traced(&spec, "pscheduler").aggregation();
    // Measured 0.911 against 0.715 and 0.749. Checked against mprd: 0.712, xlink: 0.708
    // (blest, 0.824, passes too).
    measured!(
        weave >= minrtt.max(pscheduler) + 0.03,
        "weave {weave:.3}, minrtt {minrtt:.3}, pscheduler {pscheduler:.3}"
    );
}

/// Pscheduler's Fig. 5 world: 30 and 90 ms paths whose 100 Mbit/s links meet at a shared
/// 30 Mbit/s bottleneck with 0.1 % loss; 10 MB in 2 MB tasks, a 1 MB reorder buffer.
fn one_bottleneck_two_rtts() -> WorldSpec {
    let mut spec = world(
        10_000_000,
        1_000_000,
        vec![server("near", 100, 15), server("far", 100, 45)],
    );
    spec.task_size = Some(2_000_000);
    spec.bottlenecks = vec![BottleneckSpec {
        link: LinkConfig::fixed(30_000_000, Duration::ZERO).with_loss(Loss::Bernoulli(0.001)),
        servers: vec![0, 1],
    }];
    spec
}

#[test]
fn weave_leaves_a_far_path_through_the_same_bottleneck_idle() {
    // The far path adds no rate behind the shared link, only packets that wait for the near
    // one's: weave finds the queue the two share and stops asking the far path, where BLEST
    // keeps sending on it as far as the reorder buffer allows.
    let spec = one_bottleneck_two_rtts();
    let outcome = |name: &str| run(&spec, name, "bbr", SEED).unwrap();
    let (weave, blest) = (outcome("weave"), outcome("blest"));
    let ofo = |o: &pcdn_sim::world::Outcome| o.stats.ofo_mean_bytes() / 1e3;
    let aggregation = |o: &pcdn_sim::world::Outcome| o.stats.aggregation(o.capacity_bps);
    // Measured: OFO 3.8 against 176.7 kB; aggregation 0.901 against 0.902. Without the shared
    // queue's rule weave's OFO is 89.6 kB.
    measured!(
        ofo(&weave) < 15.0 && ofo(&weave) < ofo(&blest) / 4.0,
        "OFO weave {:.1} kB, blest {:.1} kB",
        ofo(&weave),
        ofo(&blest)
    );
    measured!(
        aggregation(&weave) >= aggregation(&blest) - 0.01,
        "aggregation weave {:.3}, blest {:.3}",
        aggregation(&weave),
        aggregation(&blest)
    );
}

#[test]
fn weave_keeps_a_far_path_with_its_own_bottleneck() {
    // The same two RTTs, each path behind its own 15 Mbit/s link: the far path's rate adds
    // up, and whatever its queueing delay shares with the near one's (both fill at every
    // task's start), weave must not leave it idle.
    let mut spec = world(
        10_000_000,
        1_000_000,
        vec![server("near", 15, 15), server("far", 15, 45)],
    );
    spec.task_size = Some(2_000_000);
    let o = run(&spec, "weave", "bbr", SEED).unwrap();
    let aggregation = o.stats.aggregation(o.capacity_bps);
    // Measured 0.821; the near path alone could reach 0.5. With the coherence test bypassed,
    // a trial begins at a task's start and fails (the near path then carries 1 311 packets/s,
    // not 90 % of the 1 633 both carried): 0.793.
    measured!(aggregation > 0.75, "aggregation {aggregation:.3}");
}

#[test]
fn every_registered_scheduler_has_a_test_here() {
    let mut tested = vec![
        "minrtt",
        "round-robin",
        "lpc",
        "let",
        "gr-sty",
        "tp-sty",
        "tr-sty",
        "redundant",
        "blest",
        "ecf",
        "xlink",
        "pscheduler",
        "pscheduler-nr",
        "mprd",
        "weave",
    ];
    let mut registered: Vec<&str> = scheduler::SCHEDULERS.iter().map(|(name, _)| *name).collect();
    tested.sort_unstable();
    registered.sort_unstable();
    assert_eq!(
        registered, tested,
        "a new scheduler needs a characteristic test in this file"
    );
    // The weave test covers the default, and `lrf_makes_exactly_minrtts_decisions` lrf.
    assert_eq!(scheduler::by_name("default", SEED).unwrap().name(), "weave");
    assert_eq!(scheduler::by_name("lrf", SEED).unwrap().name(), "minrtt");
}

/// Every registered scheduler completes on the `subflow` transport (each path an in-order
/// stream, losses retransmitted on their own path) over lossy paths, with and without MPTCP's
/// opportunistic retransmission.
#[test]
fn every_scheduler_completes_on_subflows() {
    use pcdn_core::Transport;
    let spec = world(
        1_500_000,
        400_000,
        vec![
            origin(server("cdn", 10, 10)),
            lossy(server("edge1", 4, 20), 0.05),
            lossy(server("edge2", 4, 30), 0.01),
        ],
    );
    for transport in [
        Transport::Subflow { opportunistic: false },
        Transport::Subflow { opportunistic: true },
    ] {
        for &(name, _) in scheduler::SCHEDULERS {
            let sched = scheduler::by_name(name, SEED).unwrap();
            let outcome = World::with_transport(&spec, None, sched, CC, transport, SEED)
                .unwrap()
                .run()
                .unwrap();
            assert!(outcome.completed, "{name} on {transport:?} did not complete");
            assert_eq!(outcome.stats.bytes_delivered, 1_500_000, "{name} on {transport:?}");
        }
    }
}
