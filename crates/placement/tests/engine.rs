//! The placement policies on hand-built inputs: demand proportionality, disk budgets,
//! hysteresis, a device leaving, determinism, and `on-miss`'s LRU eviction.

use pcdn_placement::{Assignment, Content, Device, Input, PlacementConfig, moves, policy};
use pcdn_wire::ContentId;
use proptest::prelude::*;
use std::collections::BTreeSet;

const MBIT: u64 = 1_000_000;
const MB: u64 = 1_000_000;

fn id(byte: u8) -> ContentId {
    ContentId([byte; 32])
}

fn device(name: &str, capacity_mbit: u64, disk_mb: u64) -> Device {
    Device {
        id: name.into(),
        upload_capacity_bps: capacity_mbit * MBIT,
        upload_bps: 0,
        disk_bytes: disk_mb * MB,
        healthy: true,
        region: None,
        holds: BTreeSet::new(),
    }
}

fn content(byte: u8, size_mb: u64, demand_mbit: f64) -> Content {
    Content {
        id: id(byte),
        size: size_mb * MB,
        bitrate_bps: 0,
        demand_bps: demand_mbit * MBIT as f64,
        last_lookup_ms: 0,
    }
}

fn devices(n: usize, capacity_mbit: u64, disk_mb: u64) -> Vec<Device> {
    (0..n)
        .map(|i| device(&format!("edge-{i:02}"), capacity_mbit, disk_mb))
        .collect()
}

fn run(name: &str, input: &Input) -> Assignment {
    policy(name).unwrap().place(input, &PlacementConfig::default())
}

fn replicas(assignment: &Assignment, content: ContentId) -> usize {
    assignment.values().filter(|set| set.contains(&content)).count()
}

/// The next round's input: devices hold what they were assigned.
fn next_round(mut input: Input, assignment: &Assignment) -> Input {
    for device in &mut input.devices {
        device.holds = assignment.get(&device.id).cloned().unwrap_or_default();
    }
    input.previous = assignment.clone();
    input
}

#[test]
fn replicas_follow_demand_over_device_upload() {
    // 10 devices of 10 Mbit/s planned at 50 %: 5 Mbit/s per replica.
    let input = Input {
        devices: devices(10, 10, 10_000),
        contents: vec![
            content(1, 100, 40.0),
            content(2, 100, 20.0),
            content(3, 100, 10.0),
            content(4, 100, 1.0),
        ],
        ..Input::default()
    };
    let assignment = run("popularity", &input);
    assert_eq!(replicas(&assignment, id(1)), 8);
    assert_eq!(replicas(&assignment, id(2)), 4);
    assert_eq!(replicas(&assignment, id(3)), 2);
    // Below two replicas' worth, the floor of min_replicas holds.
    assert_eq!(replicas(&assignment, id(4)), 2);
    // At most one replica per device, and demand beyond every device caps at all of them.
    let more = Input {
        contents: vec![content(1, 100, 500.0)],
        ..input
    };
    assert_eq!(replicas(&run("popularity", &more), id(1)), 10);
}

#[test]
fn planned_upload_is_spread_over_devices() {
    let input = Input {
        devices: devices(4, 10, 10_000),
        contents: (1..=8).map(|i| content(i, 10, 5.0)).collect(),
        ..Input::default()
    };
    let assignment = run("popularity", &input);
    // 8 contents × 2 replicas over 4 devices: 4 each.
    for (device, set) in &assignment {
        assert_eq!(set.len(), 4, "{device}: {assignment:?}");
    }
}

#[test]
fn disk_budgets_hold_and_the_most_demanded_win_disk() {
    // Each device fits two 100 MB contents; five contents wanting two replicas each.
    let mut input = Input {
        devices: devices(3, 10, 250),
        contents: (1..=5).map(|i| content(i, 100, f64::from(i))).collect(),
        ..Input::default()
    };
    input.devices[2].disk_bytes = 0; // not a cache
    input.devices[1].healthy = false;
    input.devices.push(device("edge-big", 10, 300));
    let assignment = run("popularity", &input);
    assert!(!assignment.contains_key("edge-02") && !assignment.contains_key("edge-01"));
    for (name, set) in &assignment {
        let disk = input.devices.iter().find(|d| &d.id == name).unwrap().disk_bytes;
        assert!(set.len() as u64 * 100 * MB <= disk, "{name}: {set:?}");
    }
    // Five slots: the two most demanded contents (5, 4) get both replicas, 3 the one left.
    assert_eq!(replicas(&assignment, id(5)), 2);
    assert_eq!(replicas(&assignment, id(4)), 2);
    assert_eq!(replicas(&assignment, id(3)), 1);
    assert_eq!(replicas(&assignment, id(2)) + replicas(&assignment, id(1)), 0);
    // A content bigger than any budget is never assigned.
    let huge = Input {
        contents: vec![content(9, 5_000, 50.0)],
        ..input
    };
    assert!(run("popularity", &huge).values().all(BTreeSet::is_empty));
}

#[test]
fn a_small_demand_change_moves_at_most_a_few_assignments() {
    // 30 contents wanting 3 to 12 replicas of 5 Mbit/s each, on 20 devices whose disks hold
    // a little less than all of them: both the replica counts and the competition for disk
    // are near their thresholds.
    let input = Input {
        devices: devices(20, 10, 340),
        contents: (1..=30).map(|i| content(i, 50, 12.0 + f64::from(i) * 1.6)).collect(),
        ..Input::default()
    };
    let first = run("popularity", &input);
    let mut second = next_round(input.clone(), &first);
    // Every demand moves by ±10 %.
    for (i, content) in second.contents.iter_mut().enumerate() {
        content.demand_bps *= if i % 2 == 0 { 1.1 } else { 0.9 };
    }
    let moved = moves(&first, &run("popularity", &second));
    assert!(moved <= 3, "moved {moved}");
    // Without hysteresis the same change moves many.
    let config = PlacementConfig {
        hysteresis: 0.0,
        ..PlacementConfig::default()
    };
    let popularity = policy("popularity").unwrap();
    let jumpy = moves(&first, &popularity.place(&second, &config));
    assert!(jumpy >= 10, "moved {jumpy} without hysteresis");
    // Unchanged input: nothing moves.
    let steady = next_round(input, &first);
    assert_eq!(moves(&first, &run("popularity", &steady)), 0);
}

#[test]
fn a_device_leaving_moves_only_its_contents() {
    let input = Input {
        devices: devices(6, 10, 300),
        contents: (1..=6).map(|i| content(i, 100, 6.0)).collect(),
        ..Input::default()
    };
    let first = run("popularity", &input);
    let mut after = next_round(input, &first);
    let gone = after.devices.remove(2);
    let lost = first[&gone.id].clone();
    assert!(!lost.is_empty());
    let second = run("popularity", &after);
    // Every content keeps its replicas on the devices left...
    for content in 1..=6 {
        assert_eq!(replicas(&second, id(content)), 2, "content {content}: {second:?}");
    }
    // ...and only the lost replicas moved: each device kept what it had.
    for (name, set) in &second {
        assert!(first[name].is_subset(set), "{name}: {:?} → {set:?}", first[name]);
    }
    let mut remaining = first.clone();
    remaining.remove(&gone.id);
    assert_eq!(moves(&remaining, &second), lost.len());
}

#[test]
fn replicas_spread_over_regions_first() {
    let mut input = Input {
        devices: devices(4, 10, 1_000),
        contents: vec![content(1, 10, 1.0)],
        ..Input::default()
    };
    for (device, region) in input.devices.iter_mut().zip(["a", "a", "b", "b"]) {
        device.region = Some(region.into());
    }
    let assignment = run("popularity", &input);
    let regions: BTreeSet<&str> = assignment
        .iter()
        .filter(|(_, set)| set.contains(&id(1)))
        .map(|(name, _)| {
            input
                .devices
                .iter()
                .find(|d| &d.id == name)
                .unwrap()
                .region
                .as_deref()
                .unwrap()
        })
        .collect();
    assert_eq!(regions.len(), 2, "{assignment:?}");
}

#[test]
fn the_bitrate_sets_a_floor_of_replicas() {
    let mut high = content(1, 100, 0.5);
    high.bitrate_bps = 25 * MBIT; // three 10 Mbit/s devices together carry one viewer
    let input = Input {
        devices: devices(5, 10, 1_000),
        contents: vec![high],
        ..Input::default()
    };
    assert_eq!(replicas(&run("popularity", &input), id(1)), 3);
}

#[test]
fn none_places_nothing() {
    let input = Input {
        devices: devices(3, 10, 1_000),
        contents: vec![content(1, 10, 50.0)],
        ..Input::default()
    };
    assert!(run("none", &input).is_empty());
}

#[test]
fn on_miss_assigns_misses_to_the_least_loaded_and_evicts_the_least_recently_used() {
    let mut input = Input {
        devices: devices(3, 10, 200),
        contents: vec![
            Content {
                last_lookup_ms: 10,
                ..content(1, 100, 0.0)
            },
            Content {
                last_lookup_ms: 20,
                ..content(2, 100, 0.0)
            },
            Content {
                last_lookup_ms: 30,
                ..content(3, 100, 0.0)
            },
        ],
        now_ms: 100,
        ..Input::default()
    };
    input.devices[0].upload_bps = 9 * MBIT;
    input.devices[1].upload_bps = MBIT;
    input.devices[2].upload_bps = 2 * MBIT;
    // Nothing looked up: nothing placed.
    assert!(run("on-miss", &input).values().all(BTreeSet::is_empty));
    // Content 4 is looked up now and held nowhere: the two least loaded devices take it.
    input.contents.push(Content {
        last_lookup_ms: 100,
        ..content(4, 100, 3.0)
    });
    let first = run("on-miss", &input);
    assert_eq!(first["edge-01"], BTreeSet::from([id(4)]));
    assert_eq!(first["edge-02"], BTreeSet::from([id(4)]));
    assert!(first["edge-00"].is_empty());
    // Full devices evict their least recently looked-up content for a new miss.
    let mut full = next_round(input.clone(), &first);
    for device in &mut full.devices {
        device.holds = BTreeSet::from([id(1), id(2)]);
    }
    full.previous.clear();
    full.contents.iter_mut().for_each(|c| c.demand_bps = 0.0);
    // Long after the first lookups (older than the on-miss window): those contents are stale.
    full.now_ms = 100_000;
    full.contents.push(Content {
        last_lookup_ms: 100_000,
        ..content(5, 100, 2.0)
    });
    let second = run("on-miss", &full);
    assert_eq!(second["edge-01"], BTreeSet::from([id(2), id(5)]));
    assert_eq!(second["edge-02"], BTreeSet::from([id(2), id(5)]));
    assert_eq!(second["edge-00"], BTreeSet::from([id(1), id(2)]));
}

fn arbitrary_input() -> impl Strategy<Value = Input> {
    let devices = (1u64..50, 0u64..2_000, any::<bool>(), 0u8..3);
    let contents = (1u64..300, 0.0f64..80.0, 0u64..10);
    (
        prop::collection::vec(devices, 1..15),
        prop::collection::vec(contents, 1..30),
    )
        .prop_map(|(devices, contents)| Input {
            devices: devices
                .into_iter()
                .enumerate()
                .map(|(i, (capacity, disk, healthy, region))| Device {
                    healthy: healthy || i % 3 != 0,
                    region: Some(format!("r{region}")),
                    ..device(&format!("d{i}"), capacity, disk)
                })
                .collect(),
            contents: contents
                .into_iter()
                .enumerate()
                .map(|(i, (size, demand, seen))| Content {
                    last_lookup_ms: seen,
                    ..content(i as u8, size, demand)
                })
                .collect(),
            ..Input::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_policy_is_deterministic_and_keeps_disk_budgets(input in arbitrary_input()) {
        for name in ["popularity", "on-miss"] {
            let assignment = run(name, &input);
            // The same input in another order gives the same assignment.
            let mut shuffled = input.clone();
            shuffled.devices.reverse();
            shuffled.contents.reverse();
            prop_assert_eq!(&assignment, &run(name, &shuffled));
            for (device_id, set) in &assignment {
                let device = input.devices.iter().find(|d| &d.id == device_id).unwrap();
                prop_assert!(device.healthy && device.disk_bytes > 0);
                let used: u64 = set
                    .iter()
                    .map(|c| input.contents.iter().find(|x| x.id == *c).unwrap().size)
                    .sum();
                prop_assert!(used <= device.disk_bytes, "{name} {device_id}: {used} > {}", device.disk_bytes);
            }
            // Rerunning on its own result with the same demand moves nothing.
            let steady = next_round(input.clone(), &assignment);
            prop_assert_eq!(moves(&assignment, &run(name, &steady)), 0, "{}", name);
        }
    }
}
