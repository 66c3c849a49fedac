//! The sampler: deterministic per seed, within its documented ranges, and reaching every
//! kind of world it promises.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::link::{JitterDist, Loss, Rate};
use crate::world::WorldSpec;

fn compare() -> Compare {
    Compare {
        schedulers: vec!["minrtt".into(), "weave".into()],
        ccs: vec!["default".into()],
        repeat: 2,
    }
}

fn mean_rate(rate: &Rate) -> f64 {
    match rate {
        Rate::Fixed(bps) => *bps as f64,
        Rate::Trace(t) => t.mean_rate_bps(),
        Rate::TraceFile(_) => panic!("a drawn world names no trace file"),
    }
}

/// Every documented range of `config`, checked on the world as the runner sees it.
fn check_ranges(world: &RandomWorld, config: &RandomConfig) {
    let point = &world.scenario.points[0];
    let w: &WorldSpec = &point.world;
    let (lo, hi) = config.rate_bps;
    // A trace's mean is the drawn mean to within one opportunity per period.
    let slack = f64::from(OPPORTUNITY_BYTES) * 8.0 / (config.trace_period_ms as f64 / 1e3) + 1.0;
    assert!(
        (config.servers.0..=config.servers.1).contains(&w.servers.len()),
        "{} servers",
        w.servers.len()
    );
    assert!(w.servers[0].origin && w.servers[0].fail_at.is_none() && w.servers[0].upload_limit.is_none());
    assert_eq!(w.servers.iter().filter(|s| s.origin).count(), 1);
    for s in &w.servers {
        let rate = mean_rate(&s.link.rate);
        assert!(rate >= lo - slack && rate <= hi + slack, "{}: rate {rate}", s.name);
        let delay = s.link.delay.as_secs_f64() * 1e3;
        assert!(
            delay >= config.delay_ms.0 - 1e-3 && delay <= config.delay_ms.1 + 1e-3,
            "delay {delay}"
        );
        let loss = s.link.loss.mean_loss();
        match s.link.loss {
            Loss::None => {}
            _ => assert!(
                loss >= config.loss.0 - 1e-9 && loss <= config.loss.1 + 1e-9,
                "loss {loss}"
            ),
        }
        if let Loss::GilbertElliott(g) = s.link.loss {
            let burst = 1.0 / g.p_bad_to_good;
            assert!(burst >= config.burst_packets.0 - 1e-9 && burst <= config.burst_packets.1 + 1e-9);
        }
        let spread = match s.link.jitter.dist {
            JitterDist::None => None,
            JitterDist::Uniform(d) | JitterDist::Normal(d) => Some(d),
        };
        if let Some(d) = spread {
            let ms = d.as_secs_f64() * 1e3;
            assert!(ms <= config.jitter_ms.1 + 1e-3 && ms <= delay + 1e-3, "jitter {ms}");
            assert!(ms >= config.jitter_ms.0.min(delay) - 1e-3, "jitter {ms}");
        }
        if let Some(cap) = s.upload_limit {
            let f = cap as f64 / rate;
            assert!(
                f >= config.upload_cap_fraction.0 - 0.01 && f <= config.upload_cap_fraction.1 + 0.01,
                "cap {f}"
            );
        }
        if let (Some(fail), Some(recover)) = (s.fail_at, s.recover_at) {
            assert!(recover > fail);
        }
        assert!(s.fail_at.is_none_or(|t| t < w.duration));
    }
    for b in &w.bottlenecks {
        let rate = mean_rate(&b.link.rate);
        assert!(rate >= lo - 1.0 && rate <= hi + 1.0, "bottleneck {rate}");
        assert!(b.servers.len() >= 2);
    }
    assert!(w.bottlenecks.len() <= 1);
    assert!(w.duration >= Duration::from_secs(config.min_duration_s));
    let (min_size, max_size) = config.size_bytes;
    assert!(w.content_length <= max_size, "size {}", w.content_length);
    match (&point.video, world.kind) {
        (None, WorldKind::Download) => {
            assert!(w.content_length >= min_size);
            assert_eq!(w.task_size, None);
        }
        (None, WorldKind::Segmented) => {
            assert!(w.content_length >= min_size);
            let tasks = w
                .content_length
                .div_ceil(w.task_size.expect("a segmented world has tasks"));
            assert!(tasks <= config.tasks.1 && tasks >= 2, "{tasks} tasks");
        }
        (Some(v), WorldKind::Video) => {
            let b = v.spec.bitrate_bps;
            assert!(b >= config.video_bitrate_bps.0.min(max_size * 8 / v.spec.duration.as_secs()));
            assert!(b <= config.video_bitrate_bps.1);
            let secs = v.spec.duration.as_secs();
            assert!((config.video_s.0..=config.video_s.1).contains(&secs));
            let seg = v.spec.segment.as_secs();
            assert!((config.segment_s.0..=config.segment_s.1).contains(&seg));
        }
        (video, kind) => panic!("{kind:?} with video {}", video.is_some()),
    }
    assert_eq!(point.repeat, 2);
    assert_eq!(point.schedulers, ["minrtt", "weave"]);
}

#[test]
fn the_same_seed_draws_the_same_file() {
    let config = RandomConfig::default();
    for seed in [0, 1, 7001, u64::MAX] {
        let a = draw(seed, &config, &compare()).unwrap();
        let b = draw(seed, &config, &compare()).unwrap();
        assert_eq!(a.toml, b.toml);
        assert_eq!(a.kind, b.kind);
    }
    assert_ne!(
        draw(1, &config, &compare()).unwrap().toml,
        draw(2, &config, &compare()).unwrap().toml
    );
}

#[test]
fn a_written_world_loads_as_the_same_scenario() {
    let config = RandomConfig::default();
    let world = draw(11, &config, &compare()).unwrap();
    let again = Scenario::parse(&world.toml, "w.toml", Path::new(".")).unwrap();
    let (a, b) = (&world.scenario.points[0], &again.points[0]);
    assert_eq!(format!("{:?}", a.world), format!("{:?}", b.world));
    assert_eq!(a.seed, b.seed);
}

#[test]
fn two_hundred_worlds_reach_every_kind_of_world() {
    let config = RandomConfig::default();
    let worlds: Vec<RandomWorld> = (0..200).map(|s| draw(s, &config, &compare()).unwrap()).collect();
    let servers = || worlds.iter().flat_map(|w| &w.scenario.points[0].world.servers);
    let count = |f: &dyn Fn(&RandomWorld) -> bool| worlds.iter().filter(|w| f(w)).count();
    for kind in [WorldKind::Download, WorldKind::Segmented, WorldKind::Video] {
        assert!(count(&|w| w.kind == kind) > 20, "{kind:?}");
    }
    assert!(count(&|w| !w.scenario.points[0].world.bottlenecks.is_empty()) > 10);
    assert!(servers().any(|s| matches!(s.link.rate, Rate::Trace(_))));
    assert!(servers().any(|s| matches!(s.link.loss, Loss::GilbertElliott(_))));
    assert!(servers().any(|s| matches!(s.link.loss, Loss::Bernoulli(_))));
    assert!(servers().any(|s| s.link.jitter.reorder));
    assert!(servers().any(|s| s.link.jitter.dist != JitterDist::None && !s.link.jitter.reorder));
    assert!(servers().any(|s| s.recover_at.is_some()));
    assert!(servers().any(|s| s.fail_at.is_some() && s.recover_at.is_none()));
    assert!(servers().any(|s| s.upload_limit.is_some()));
    for n in 2..=8 {
        assert!(
            count(&|w| w.scenario.points[0].world.servers.len() == n) > 0,
            "{n} servers"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_world_stays_within_the_documented_ranges(seed in any::<u64>()) {
        let config = RandomConfig::default();
        check_ranges(&draw(seed, &config, &compare()).unwrap(), &config);
    }

    #[test]
    fn quick_worlds_stay_within_theirs(seed in any::<u64>()) {
        let config = RandomConfig::quick();
        check_ranges(&draw(seed, &config, &compare()).unwrap(), &config);
    }
}
