//! Fleet runs on small hand-built fleets: determinism, conservation of bytes, the CDN share
//! with and without edges, and a device that fails mid-run.

use super::*;
use crate::link::QueueLimit;

fn video() -> VideoSpec {
    // 1 Mbit/s for 8 s: 1 MB.
    VideoSpec::new(1_000_000, Duration::from_secs(8))
}

fn fleet(viewers: usize, devices: usize, holds: bool) -> FleetSpec {
    let ms = Duration::from_millis;
    let queue = QueueLimit::packets(200);
    FleetSpec {
        weave: Default::default(),
        videos: vec![video(); 3],
        viewers: ViewerSpec {
            count: viewers,
            arrival_window: Duration::from_secs(20),
            load_profile: Vec::new(),
            zipf: 0.8,
            watch: (1.0, 1.0),
            access_down: LinkConfig::fixed(50_000_000, ms(5)).with_queue(queue),
            access_up: LinkConfig::fixed(10_000_000, ms(5)).with_queue(queue),
            edges_per_viewer: 2,
            jump_to_cdn: None,
        },
        devices: (0..devices)
            .map(|i| DeviceSpec {
                name: format!("edge{i}"),
                uplink: LinkConfig::fixed(4_000_000, ms(10 + 5 * i as u64)).with_queue(queue),
                downlink: LinkConfig::fixed(50_000_000, ms(10 + 5 * i as u64)).with_queue(queue),
                holds: if holds { vec![0, 1, 2] } else { Vec::new() },
                cache_bytes: 2_000_000,
                outages: Vec::new(),
            })
            .collect(),
        origin_uplink: LinkConfig::fixed(1_000_000_000, ms(30)).with_queue(QueueLimit::packets(1000)),
        origin_downlink: LinkConfig::fixed(1_000_000_000, ms(30)).with_queue(QueueLimit::packets(1000)),
        packet_size: 1200,
        reorder_buffer: 4_000_000,
        duration: Duration::from_secs(120),
        placement: PlacementSpec::named("none"),
    }
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let spec = fleet(6, 3, true);
    let a = run(&spec, &["weave"], "cubic", 1).unwrap();
    let b = run(&spec, &["weave"], "cubic", 1).unwrap();
    assert_eq!(a.viewers, b.viewers);
    assert_eq!(a.device_bytes, b.device_bytes);
    let c = run(&spec, &["weave"], "cubic", 2).unwrap();
    assert_ne!(a.viewers, c.viewers);
}

#[test]
fn every_viewer_watches_its_video_and_served_bytes_are_received_bytes() {
    let spec = fleet(8, 3, true);
    let out = run(&spec, &["minrtt"], "cubic", 3).unwrap();
    assert_eq!(out.viewers.len(), 8);
    assert!(out.viewers.iter().all(|v| v.finished), "{:#?}", out.viewers);
    assert!(out.viewers.iter().all(|v| v.first_frame_s.is_some()));
    // Lossless links and queues that never overflow at these rates, and every viewer stays
    // until its last frame: every payload byte a server sent reached a viewer.
    let received: u64 = out.viewers.iter().map(|v| v.origin_bytes + v.edge_bytes).sum();
    let served: u64 = out.device_bytes.iter().sum::<u64>() + out.origin_window_bytes.iter().sum::<u64>();
    assert_eq!(served, received);
    assert!(received >= 8 * video().total_bytes());
    // The edges took part.
    assert!(out.device_bytes.iter().all(|&b| b > 0), "{:?}", out.device_bytes);
    assert!(out.cdn_share() < 1.0);
    assert!(out.edge_utilization > 0.0 && out.edge_utilization <= 1.0);
}

#[test]
fn with_empty_edges_the_cdn_serves_everything() {
    let out = run(&fleet(5, 3, false), &["weave"], "cubic", 4).unwrap();
    assert_eq!(out.cdn_share(), 1.0);
    assert!(out.device_bytes.iter().all(|&b| b == 0));
    assert!(out.cdn_p95_mbps() > 0.0);
}

#[test]
fn a_device_that_fails_mid_run_costs_no_viewer_its_video() {
    let mut spec = fleet(8, 2, true);
    spec.devices[0].outages = vec![Outage {
        at: Duration::from_secs(6),
        back: None,
    }];
    let out = run(&spec, &["weave"], "cubic", 5).unwrap();
    assert!(out.viewers.iter().all(|v| v.finished), "{:#?}", out.viewers);
    assert!(out.device_bytes[0] > 0, "the device served before it failed");
}

#[test]
fn viewers_who_watch_part_of_a_video_leave_early() {
    // No edge and a slow origin: downloads take longer than a quarter of the video.
    let mut spec = fleet(6, 0, true);
    spec.origin_uplink = LinkConfig::fixed(1_500_000, Duration::from_millis(30));
    spec.viewers.watch = (0.25, 0.25);
    let out = run(&spec, &["weave"], "cubic", 6).unwrap();
    assert!(out.viewers.iter().all(|v| v.finished));
    let received: u64 = out.viewers.iter().map(|v| v.origin_bytes + v.edge_bytes).sum();
    // They left after a quarter of the video, with some of the rest in flight or buffered.
    assert!(received < 6 * video().total_bytes(), "{received}");
}

#[test]
fn bad_input_is_refused_with_its_reason() {
    let mut spec = fleet(1, 1, true);
    spec.devices[0].holds = vec![7];
    let e = run(&spec, &["weave"], "cubic", 1).unwrap_err().to_string();
    assert!(e.contains("edge0") && e.contains("video 7"), "{e}");
    let mut spec = fleet(1, 1, true);
    spec.viewers.watch = (0.0, 1.0);
    assert!(matches!(run(&spec, &["weave"], "cubic", 1), Err(FleetError::Watch(_))));
    assert!(matches!(
        run(&fleet(1, 1, true), &["nope"], "cubic", 1),
        Err(FleetError::UnknownScheduler(_))
    ));
}

#[test]
fn quantiles_are_nearest_rank() {
    let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
    assert_eq!(quantile(&mut v, 0.5), Some(3.0));
    assert_eq!(quantile(&mut v, 0.95), Some(5.0));
    assert_eq!(quantile(&mut [], 0.5), None);
}

#[test]
fn popularity_placement_fills_empty_edges_over_their_links_and_takes_load_off_the_cdn() {
    let mut spec = fleet(24, 3, false);
    spec.viewers.arrival_window = Duration::from_secs(60);
    spec.duration = Duration::from_secs(150);
    let none = run(&spec, &["weave"], "cubic", 7).unwrap();
    assert_eq!(none.cdn_share(), 1.0);
    spec.placement = PlacementSpec {
        interval: Duration::from_secs(5),
        ..PlacementSpec::named("popularity")
    };
    let placed = run(&spec, &["weave"], "cubic", 7).unwrap();
    assert!(placed.fill_bytes >= video().total_bytes(), "{}", placed.fill_bytes);
    assert!(placed.device_bytes.iter().any(|&b| b > 0), "{:?}", placed.device_bytes);
    assert!(placed.cdn_share() < 1.0, "{}", placed.cdn_share());
    assert!(placed.viewers.iter().all(|v| v.finished));
    // Same seed, same run, rounds and fills included.
    let again = run(&spec, &["weave"], "cubic", 7).unwrap();
    assert_eq!(placed.viewers, again.viewers);
    assert_eq!(placed.fill_bytes, again.fill_bytes);
}

#[test]
fn an_unknown_placement_is_refused() {
    let mut spec = fleet(1, 1, false);
    spec.placement = PlacementSpec::named("everywhere");
    let e = run(&spec, &["weave"], "cubic", 1).unwrap_err().to_string();
    assert!(e.contains("everywhere") && e.contains("popularity"), "{e}");
}

#[test]
fn a_device_that_restarts_serves_again_from_the_cache_it_kept() {
    let mut spec = fleet(16, 1, true);
    spec.viewers.arrival_window = Duration::from_secs(40);
    spec.devices[0].outages = vec![Outage {
        at: Duration::from_secs(5),
        back: Some(Duration::from_secs(15)),
    }];
    let out = run(&spec, &["weave"], "cubic", 9).unwrap();
    assert!(out.viewers.iter().all(|v| v.finished));
    // Viewers arriving after it came back got bytes from it: it kept its videos.
    let late_edge: u64 = out
        .viewers
        .iter()
        .filter(|v| v.arrived_s > 16.0)
        .map(|v| v.edge_bytes)
        .sum();
    assert!(late_edge > 0, "{:#?}", out.viewers);
    let mut bad = spec.clone();
    bad.devices[0].outages[0].back = Some(Duration::from_secs(2));
    assert!(matches!(run(&bad, &["weave"], "cubic", 9), Err(FleetError::Outages(_))));
}

#[test]
fn a_fleet_of_one_viewer_is_the_single_viewer_world_of_the_same_links() {
    use crate::world::{BottleneckSpec, ServerSpec, World, WorldSpec};
    use pcdn_core::player::PlayerConfig;
    let mut spec = fleet(1, 3, true);
    spec.videos.truncate(1);
    spec.devices.iter_mut().for_each(|d| d.holds = vec![0]);
    spec.viewers.edges_per_viewer = 3;
    let fleet_viewer = run(&spec, &["minrtt"], "cubic", 7).unwrap().viewers.remove(0);
    // The same servers in the order the fleet's lookup lists them (the edges by free upload,
    // equal here, so by position, then the origin), each data route through the viewer's
    // access line as the fleet's are; requests, which cross the viewer's upstream line in
    // the fleet, get its delay on their own link.
    let with_access_up = |link: &LinkConfig| LinkConfig {
        delay: link.delay + spec.viewers.access_up.delay,
        ..link.clone()
    };
    let mut servers: Vec<ServerSpec> = spec
        .devices
        .iter()
        .map(|d| ServerSpec {
            name: d.name.clone(),
            origin: false,
            link: d.uplink.clone(),
            uplink: with_access_up(&d.downlink),
            fail_at: None,
            recover_at: None,
            upload_limit: None,
        })
        .collect();
    servers.push(ServerSpec {
        name: "origin".into(),
        origin: true,
        link: spec.origin_uplink.clone(),
        uplink: with_access_up(&spec.origin_downlink),
        fail_at: None,
        recover_at: None,
        upload_limit: None,
    });
    let world = WorldSpec {
        weave: Default::default(),
        reordering: Default::default(),
        tail_probes: true,
        content_length: video().total_bytes(),
        packet_size: spec.packet_size,
        task_size: None,
        reorder_buffer: spec.reorder_buffer,
        bottlenecks: vec![BottleneckSpec {
            link: spec.viewers.access_down.clone(),
            servers: (0..servers.len()).collect(),
        }],
        servers,
        duration: spec.duration,
    };
    let player = PlayerConfig {
        spec: video(),
        jump_to_cdn: None,
    };
    let single = World::with_video(&world, Some(&player), "minrtt", "cubic", 7)
        .unwrap()
        .run()
        .unwrap();
    let stats = &single.stats;
    let origin: u64 = stats.paths.iter().filter(|p| p.origin).map(|p| p.bytes).sum();
    let edges: u64 = stats.paths.iter().filter(|p| !p.origin).map(|p| p.bytes).sum();
    let first_frame = stats
        .player
        .as_ref()
        .unwrap()
        .first_frame_latency
        .unwrap()
        .as_secs_f64();
    // Lossless links and the same scheduler: the same bytes from every side, and the same
    // first frame and goodput but for the few microseconds the requests spend serialised on
    // the fleet's shared upstream line.
    assert_eq!((fleet_viewer.origin_bytes, fleet_viewer.edge_bytes), (origin, edges));
    assert_eq!(fleet_viewer.received_packets, stats.packets_received);
    let fleet_first = fleet_viewer.first_frame_s.unwrap();
    assert!(
        (fleet_first - first_frame).abs() < 1e-3,
        "{fleet_first} vs {first_frame}"
    );
    assert_eq!(fleet_viewer.rebuffers, stats.player.as_ref().unwrap().rebuffer_count);
    assert!(((fleet_viewer.goodput_bps - stats.goodput_bps()) / stats.goodput_bps()).abs() < 0.01);
}

#[test]
fn an_observed_run_reports_each_window_and_runs_as_the_plain_one() {
    let mut spec = fleet(4, 2, true);
    // Viewers arriving over 150 s keep the run going past two windows.
    spec.viewers.arrival_window = Duration::from_secs(150);
    spec.duration = Duration::from_secs(200);
    let mut seen = Vec::new();
    let observed = run_observed(&spec, &["weave"], "cubic", 4, &mut |now_s, _| seen.push(now_s)).unwrap();
    let windows: Vec<f64> = (1..=seen.len()).map(|k| 60.0 * k as f64).collect();
    assert!(!seen.is_empty() && seen == windows, "{seen:?}");
    assert!(
        seen[seen.len() - 1] <= observed.end_s,
        "{seen:?} past the end {}",
        observed.end_s
    );
    assert_eq!(observed.viewers, run(&spec, &["weave"], "cubic", 4).unwrap().viewers);
}

#[test]
fn a_device_that_joins_mid_run_serves_the_viewers_after_it() {
    let mut spec = fleet(10, 1, true);
    spec.devices[0].outages = vec![Outage {
        at: Duration::ZERO,
        back: Some(Duration::from_secs(10)),
    }];
    let out = run(&spec, &["weave"], "cubic", 8).unwrap();
    assert!(out.viewers.iter().all(|v| v.finished), "{:#?}", out.viewers);
    // Before it joins, the viewers' lookups list the origin only.
    let early: Vec<&ViewerRecord> = out.viewers.iter().filter(|v| v.arrived_s < 9.0).collect();
    assert!(!early.is_empty());
    assert!(early.iter().all(|v| v.edge_bytes == 0), "{early:#?}");
    let late = out.viewers.iter().filter(|v| v.arrived_s > 10.5);
    assert!(
        late.clone().any(|v| v.edge_bytes > 0),
        "{:#?}",
        late.collect::<Vec<_>>()
    );
}
