//! Scenario parsing, validation messages, sweep expansion, repeat seeds and aggregation.

use super::*;

/// The issue's example, verbatim.
const EXAMPLE: &str = r#"
name = "two heterogeneous paths"
seed = 1
repeat = 3                  # seeds seed..seed+2; rows report the mean, with "repeats" = 3
duration = "60s"            # virtual-time limit

[content]
size = "20MB"               # MB = 10^6 bytes, MiB = 2^20; "mbit" = 10^6 bit/s
packet_size = 1400
task_size = "2MB"           # ordered tasks of this size; omitted = the whole content at once

[client]
schedulers = ["minrtt", "round-robin", "default"]   # "default" = the default scheduler
cc = ["cubic"]
reorder_buffer = "4MB"

[[server]]
name = "cdn"
origin = true
link = { rate = "10mbit", delay = "15ms", loss = 0.0 }     # server -> client (data)
uplink = { rate = "100mbit", delay = "15ms" }              # client -> server; default: same delay, no rate limit

[[server]]
name = "edge1"
link = { rate = "4mbit", delay = "40ms", loss = 0.10, jitter = "5ms" }
fail_at = "20s"             # optional: the server stops answering at this time

[[bottleneck]]              # optional: a link that several servers' data share
rate = "30mbit"
delay = "5ms"
servers = ["cdn", "edge1"]

[sweep]                     # optional: one key varied over a list
key = "server.edge1.link.delay"
values = ["40ms", "60ms", "80ms", "100ms"]
"#;

/// A small valid scenario that errors are made from by replacing one line.
const SMALL: &str = r#"name = "small"
duration = "30s"
[content]
size = "200kB"
[client]
schedulers = ["default", "round-robin"]
[[server]]
name = "cdn"
origin = true
link = { rate = "10mbit", delay = "10ms" }
[[server]]
name = "edge1"
link = { rate = "4mbit", delay = "30ms" }
"#;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "scenarios/x.toml", Path::new("."))
}

/// The error of `SMALL` with `extra` appended (later keys of a table go after it).
fn error_of(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn the_issue_example_parses_with_shorthands_and_defaults() {
    let s = parse(EXAMPLE).unwrap();
    assert_eq!(s.name, "two heterogeneous paths");
    assert_eq!(s.sweep_key.as_deref(), Some("server.edge1.link.delay"));
    assert_eq!(s.points.len(), 4);
    let p = &s.points[0];
    assert_eq!(p.sweep.as_deref(), Some("40ms"));
    assert_eq!((p.seed, p.repeat), (1, 3));
    assert_eq!(p.schedulers, ["minrtt", "round-robin", "default"]);
    assert_eq!(p.ccs, ["cubic"]);
    let w = &p.world;
    assert_eq!(w.content_length, 20_000_000);
    assert_eq!(w.packet_size, 1400);
    assert_eq!(w.task_size, Some(2_000_000));
    assert_eq!(w.reorder_buffer, 4_000_000);
    assert_eq!(w.duration, Duration::from_secs(60));

    let cdn = &w.servers[0];
    assert_eq!((cdn.name.as_str(), cdn.origin), ("cdn", true));
    assert_eq!(cdn.link.rate, Rate::Fixed(10_000_000));
    assert_eq!(cdn.link.delay, ms(15));
    assert_eq!(cdn.link.loss, Loss::Bernoulli(0.0));
    assert_eq!(cdn.uplink.rate, Rate::Fixed(100_000_000));
    assert_eq!(cdn.fail_at, None);

    let edge = &w.servers[1];
    assert!(!edge.origin);
    assert_eq!(edge.link.loss, Loss::Bernoulli(0.10));
    assert_eq!(edge.link.jitter, Jitter::uniform(ms(5), false));
    assert_eq!(edge.fail_at, Some(Duration::from_secs(20)));
    // The default uplink: the link's delay, no rate limit, no loss.
    assert_eq!(edge.uplink.delay, ms(40));
    assert_eq!(edge.uplink.rate, Rate::Fixed(UNLIMITED_RATE_BPS));
    assert_eq!(edge.uplink.loss, Loss::None);

    assert_eq!(w.bottlenecks.len(), 1);
    assert_eq!(w.bottlenecks[0].servers, [0, 1]);
    assert_eq!(w.bottlenecks[0].link.rate, Rate::Fixed(30_000_000));
    assert_eq!(w.bottlenecks[0].link.delay, ms(5));

    // The sweep varies only its key; the default uplink follows the swept delay.
    let delays: Vec<Duration> = s.points.iter().map(|p| p.world.servers[1].link.delay).collect();
    assert_eq!(delays, [ms(40), ms(60), ms(80), ms(100)]);
    assert_eq!(s.points[3].world.servers[1].uplink.delay, ms(100));
    assert_eq!(s.points[3].world.servers[0].link.delay, ms(15));
}

#[test]
fn defaults_fill_everything_optional() {
    let s = parse("[content]\nsize = 1000\n[[server]]\nname = \"a\"\nlink = {}\n").unwrap();
    assert_eq!(s.name, "x");
    assert_eq!(s.sweep_key, None);
    let p = &s.points[0];
    assert_eq!(p.sweep, None);
    assert_eq!((p.seed, p.repeat), (1, 1));
    assert_eq!(
        (p.schedulers.as_slice(), p.ccs.as_slice()),
        (&["default".to_owned()][..], &["default".to_owned()][..])
    );
    assert_eq!(p.world.duration, Duration::from_secs(60));
    assert_eq!(p.world.packet_size, 1400);
    assert_eq!(p.world.task_size, None);
    assert_eq!(p.world.reorder_buffer, 4_000_000);
    assert_eq!(p.world.servers[0].link, LinkConfig::default());
    assert!(p.world.bottlenecks.is_empty());
}

#[test]
fn full_link_tables_and_the_extra_server_keys() {
    let s = parse(
        r#"
[content]
size = "1MiB"
task_size = "256KiB"
[[server]]
name = "a"
recover_at = "12s"
fail_at = "10s"
upload_limit = "4mbit"
[server.link]
rate = "8mbit"
jitter = { normal = "2ms", reorder = true }
loss = { gilbert_elliott = { p_good_to_bad = 0.01, p_bad_to_good = 0.25 } }
queue = { packets = 50 }
blackouts = [{ start = "1s", end = "2s" }]
changes = [{ at = "5s", loss = 0.2 }, { at = "6s", jitter = "3ms" }, { at = "7s", rate = "2mbit" }]
"#,
    )
    .unwrap();
    let w = &s.points[0].world;
    assert_eq!(w.content_length, 1 << 20);
    assert_eq!(w.task_size, Some(256 << 10));
    let a = &w.servers[0];
    assert_eq!(
        (a.fail_at, a.recover_at),
        (Some(Duration::from_secs(10)), Some(Duration::from_secs(12)))
    );
    assert_eq!(a.upload_limit, Some(4_000_000));
    assert_eq!(a.link.jitter, Jitter::normal(ms(2), true));
    assert_eq!(a.link.queue, QueueLimit::packets(50));
    assert_eq!(a.link.blackouts.len(), 1);
    use crate::link::Change;
    assert_eq!(a.link.changes[0].change, Change::Loss(Loss::Bernoulli(0.2)));
    assert_eq!(a.link.changes[1].change, Change::Jitter(Jitter::uniform(ms(3), false)));
    assert_eq!(a.link.changes[2].change, Change::Rate(Rate::Fixed(2_000_000)));
    // No delay given: the uplink takes the link's default delay.
    assert_eq!(a.uplink.delay, LinkConfig::default().delay);
}

#[test]
fn trace_files_resolve_relative_to_the_scenario_folder() {
    let dir = std::env::temp_dir().join(format!("pcdn-scenario-trace-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    std::fs::write(dir.join("traces/one.down"), "1\n").unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        "[content]\nsize = 1000\n[[server]]\nname = \"a\"\nlink = { rate = { trace_file = \"traces/one.down\" } }\n",
    )
    .unwrap();
    let s = Scenario::load(&file).unwrap();
    assert_eq!(
        s.points[0].world.servers[0].link.rate,
        Rate::Trace(crate::link::Trace::constant(1))
    );
    std::fs::write(
        &file,
        "[content]\nsize = 1000\n[[server]]\nname = \"a\"\nlink = { rate = { trace_file = \"nope.down\" } }\n",
    )
    .unwrap();
    let e = Scenario::load(&file).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:5: server.a.link.rate: ", file.display())),
        "{e}"
    );
    assert!(e.contains("nope.down"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_file_is_named() {
    let e = Scenario::load(Path::new("no/such/scenario.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("no/such/scenario.toml: cannot read"), "{e}");
}

#[test]
fn bad_values_name_the_file_line_key_and_expectation() {
    let e = error_of(&SMALL.replace("rate = \"4mbit\"", "rate = \"fast\""));
    assert!(
        e.starts_with("scenarios/x.toml:13: server.edge1.link.rate: expected a rate such as \"10mbit\""),
        "{e}"
    );
    assert!(e.contains("got \"fast\""), "{e}");

    let e = error_of(&SMALL.replace("delay = \"30ms\"", "delay = \"30\""));
    assert!(
        e.starts_with("scenarios/x.toml:13: server.edge1.link.delay: expected a duration"),
        "{e}"
    );

    let e = error_of(&SMALL.replace("size = \"200kB\"", "size = \"200kbit\""));
    assert!(
        e.starts_with("scenarios/x.toml:4: content.size: expected a size"),
        "{e}"
    );

    let e = error_of(&SMALL.replace("duration = \"30s\"", "duration = 30"));
    assert!(e.starts_with("scenarios/x.toml:2: duration: "), "{e}");

    let e = error_of(&SMALL.replace("origin = true", "origin = \"yes\""));
    assert!(
        e.starts_with("scenarios/x.toml:9: server.cdn.origin: invalid type"),
        "{e}"
    );

    let e = error_of(&format!("{SMALL}fail_at = \"soon\"\n"));
    assert!(e.contains("server.edge1.fail_at: expected a duration"), "{e}");

    let e = error_of(&SMALL.replace("delay = \"30ms\"", "delay = \"30ms\", loss = 1.5"));
    assert!(
        e.contains("server.edge1.link: invalid loss model: bernoulli = 1.5"),
        "{e}"
    );

    let e = error_of("seed = -1\n[content]\nsize = 1\n");
    assert!(e.starts_with("scenarios/x.toml:1: seed: invalid value"), "{e}");
}

#[test]
fn unknown_keys_are_named() {
    let e = error_of(&SMALL.replace("delay = \"30ms\"", "delai = \"30ms\""));
    assert!(
        e.starts_with("scenarios/x.toml:13: server.edge1.link.delai: unknown key `delai`"),
        "{e}"
    );
    let e = error_of(&format!("colour = \"blue\"\n{SMALL}"));
    assert!(
        e.starts_with("scenarios/x.toml:1: colour: unknown key `colour`, expected one of the keys"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("[client]", "[client]\nscheduler = \"minrtt\""));
    assert!(
        e.starts_with("scenarios/x.toml:6: client.scheduler: unknown key `scheduler`"),
        "{e}"
    );
    let e = error_of(&format!(
        "{SMALL}[[bottleneck]]\nrate = \"1mbit\"\nserver = [\"cdn\"]\n"
    ));
    assert!(
        e.contains(":16: bottleneck.0.server: unknown key `server`, expected one of the keys `servers`, `rate`"),
        "{e}"
    );
    let e = error_of(&format!("{SMALL}[sweep]\nkey = \"duration\"\nvalue = [\"1s\"]\n"));
    assert!(e.contains(":16: sweep.value: unknown key `value`"), "{e}");
}

#[test]
fn weave_switches_and_constants_are_read_from_the_client_table() {
    let scenario = parse(&SMALL.replace(
        "[client]",
        "[client]\nweave = { tail_copies = false, pipe_gain = 1.5, hold_slack = \"100ms\" }",
    ))
    .unwrap();
    let weave = &scenario.points[0].world.weave;
    assert!(!weave.tail_copies && weave.first_frame_copies);
    assert_eq!(weave.pipe_gain, 1.5);
    assert_eq!(weave.hold_slack, Duration::from_millis(100));
    // Without the key, weave as it ships.
    assert_eq!(parse(SMALL).unwrap().points[0].world.weave, WeaveConfig::default());
    let e = error_of(&SMALL.replace("[client]", "[client]\nweave = { tail_copy = false }"));
    assert!(
        e.starts_with("scenarios/x.toml:6: client.weave.tail_copy: unknown key `tail_copy`, expected one of the keys"),
        "{e}"
    );
}

#[test]
fn the_reordering_window_is_read_from_the_client_table() {
    let scenario = parse(&SMALL.replace(
        "[client]",
        "[client]\nreordering = { adaptive = false, persist_recoveries = 8 }",
    ))
    .unwrap();
    let reordering = &scenario.points[0].world.reordering;
    assert!(!reordering.adaptive);
    assert_eq!(reordering.persist_recoveries, 8);
    assert_eq!(reordering.min_rtt_divisor, 4, "the rest as shipped");
    let e = error_of(&SMALL.replace("[client]", "[client]\nreordering = { adaptiv = false }"));
    assert!(e.contains("client.reordering.adaptiv: unknown key `adaptiv`"), "{e}");
}

#[test]
fn tail_probes_are_on_unless_the_client_table_turns_them_off() {
    assert!(parse(SMALL).unwrap().points[0].world.tail_probes);
    let off = parse(&SMALL.replace("[client]", "[client]\ntail_probes = false")).unwrap();
    assert!(!off.points[0].world.tail_probes);
    let e = error_of(&SMALL.replace("[client]", "[client]\ntail_probes = 1"));
    assert!(e.contains("tail_probes"), "{e}");
}

#[test]
fn missing_keys_and_toml_syntax_errors() {
    let e = error_of("[[server]]\nname = \"a\"\nlink = {}\n");
    assert!(
        e.starts_with("scenarios/x.toml") && e.contains("content.size: missing key: expected a size"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("name = \"edge1\"\n", ""));
    assert!(e.contains("server.1: missing key `name`"), "{e}");
    let e = error_of(&SMALL.replace("size = \"200kB\"", "size = "));
    assert!(e.starts_with("scenarios/x.toml:4: invalid TOML: "), "{e}");
}

#[test]
fn all_names_every_registered_scheduler_and_control_and_nothing_else() {
    let text = SMALL.replace(
        "schedulers = [\"default\", \"round-robin\"]",
        "schedulers = \"all\"\ncc = \"all\"",
    );
    let p = &parse(&text).unwrap().points[0];
    let schedulers: Vec<&str> = pcdn_core::scheduler::REGISTRY.iter().map(|r| r.name).collect();
    let ccs: Vec<&str> = pcdn_core::cc::REGISTRY.iter().map(|r| r.name).collect();
    assert_eq!(p.schedulers, schedulers);
    assert_eq!(p.ccs, ccs);
    // Aliases ("default" = weave) are not run twice.
    assert!(!p.schedulers.iter().any(|n| n == "default" || n == "lrf"));
    assert!(schedulers.len() > 10 && ccs.len() > 5);
    // Any other single word is an error that names the key and the choices.
    let e = error_of(&SMALL.replace("[\"default\", \"round-robin\"]", "\"weave\""));
    assert!(
        e.contains("client.schedulers") && e.contains("\"weave\"") && e.contains("or \"all\""),
        "{e}"
    );
}

#[test]
fn unknown_schedulers_and_controls_list_the_known_ones() {
    let e = error_of(&SMALL.replace("\"round-robin\"", "\"fastest\""));
    assert!(
        e.starts_with("scenarios/x.toml:6: client.schedulers.1: unknown scheduler \"fastest\"; known: "),
        "{e}"
    );
    for (name, _) in pcdn_core::scheduler::SCHEDULERS {
        assert!(e.contains(name), "{name} missing from {e}");
    }
    let e = error_of(&SMALL.replace("[client]", "[client]\ncc = [\"cubic\", \"vegas\"]"));
    assert!(
        e.contains("client.cc.1: unknown congestion control \"vegas\"; known: "),
        "{e}"
    );
    for (name, _) in pcdn_core::cc::CONTROLLERS {
        assert!(e.contains(name), "{name} missing from {e}");
    }
    let e = error_of(&SMALL.replace("\"round-robin\"", "\"default\""));
    assert!(
        e.contains("client.schedulers.1: scheduler \"default\" is listed twice"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("schedulers = [\"default\", \"round-robin\"]", "schedulers = []"));
    assert!(
        e.contains("client.schedulers: expected at least one scheduler name"),
        "{e}"
    );
}

#[test]
fn servers_and_bottlenecks_are_checked() {
    let e = error_of("[content]\nsize = 1\n");
    assert_eq!(
        e,
        "scenarios/x.toml: server: a scenario needs at least one [[server]] table"
    );
    let e = error_of(&SMALL.replace("\"edge1\"", "\"cdn\""));
    assert!(
        e.starts_with("scenarios/x.toml:12: server.1.name: duplicate server name \"cdn\" (server 0 has it too)"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("\"edge1\"", "\"edge.1\""));
    assert!(
        e.contains("server.1.name: expected a non-empty name without dots"),
        "{e}"
    );
    let e = error_of(&format!(
        "{SMALL}[[bottleneck]]\nrate = \"1mbit\"\nservers = [\"cdn\", \"edge2\"]\n"
    ));
    assert!(
        e.starts_with("scenarios/x.toml:16: bottleneck.0.servers: unknown server \"edge2\"; known: cdn, edge1"),
        "{e}"
    );
    let two = "[[bottleneck]]\nservers = [\"cdn\"]\n[[bottleneck]]\nservers = [\"edge1\", \"cdn\"]\n";
    let e = error_of(&format!("{SMALL}{two}"));
    assert!(
        e.contains(":17: bottleneck.1.servers: server \"cdn\" is already behind bottleneck 0"),
        "{e}"
    );
    let e = error_of(&format!("{SMALL}[[bottleneck]]\nrate = \"1mbit\"\nservers = []\n"));
    assert!(e.contains("bottleneck.0.servers: expected the names"), "{e}");
    let e = error_of(&format!(
        "{SMALL}[[bottleneck]]\nrate = \"1mbps\"\nservers = [\"cdn\"]\n"
    ));
    assert!(
        e.starts_with("scenarios/x.toml:15: bottleneck.0.rate: expected a rate"),
        "{e}"
    );
    assert!(e.contains("ambiguous"), "{e}");
    let e = error_of(&format!("{SMALL}recover_at = \"5s\"\n"));
    assert!(e.contains("server.edge1.recover_at: recover_at needs a fail_at"), "{e}");
    let e = error_of(&format!("{SMALL}recover_at = \"5s\"\nfail_at = \"6s\"\n"));
    assert!(
        e.contains("server.edge1.recover_at: expected a time after fail_at"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("[content]", "repeat = 0\n[content]"));
    assert!(e.contains(":3: repeat: expected at least 1"), "{e}");
    let e = error_of(&SMALL.replace("size = \"200kB\"", "size = \"200kB\"\npacket_size = 1500"));
    assert!(e.contains("content.packet_size: expected payload bytes in 1..="), "{e}");
}

#[test]
fn sweeps_expand_any_table_path() {
    let with = |key: &str, values: &str| parse(&format!("{SMALL}[sweep]\nkey = \"{key}\"\nvalues = {values}\n"));
    let s = with("content.size", "[\"1MB\", 2000]").unwrap();
    let sizes: Vec<u64> = s.points.iter().map(|p| p.world.content_length).collect();
    assert_eq!(sizes, [1_000_000, 2000]);
    let labels: Vec<Option<&str>> = s.points.iter().map(|p| p.sweep.as_deref()).collect();
    assert_eq!(labels, [Some("1MB"), Some("2000")]);

    let s = with("client.reorder_buffer", "[\"64kB\", \"1MB\"]").unwrap();
    assert_eq!(s.points[0].world.reorder_buffer, 64_000);
    let s = with("duration", "[\"5s\"]").unwrap();
    assert_eq!(s.points[0].world.duration, Duration::from_secs(5));
    // Servers by name or index; a key absent from an existing table is added.
    let s = with("server.1.link.loss", "[0.0, 0.05]").unwrap();
    assert_eq!(s.points[1].world.servers[1].link.loss, Loss::Bernoulli(0.05));
    assert_eq!(s.points[1].sweep.as_deref(), Some("0.05"));
    let s = with("server.cdn.upload_limit", "[\"1mbit\"]").unwrap();
    assert_eq!(s.points[0].world.servers[0].upload_limit, Some(1_000_000));
    let s = with("client.schedulers", "[[\"default\"], [\"round-robin\"]]").unwrap();
    assert_eq!(s.points[1].schedulers, ["round-robin"]);

    let bottleneck = format!(
        "{SMALL}[[bottleneck]]\nrate = \"8mbit\"\nservers = [\"cdn\", \"edge1\"]\n\
         [sweep]\nkey = \"bottleneck.0.rate\"\nvalues = [\"4mbit\", \"6mbit\"]\n"
    );
    let s = parse(&bottleneck).unwrap();
    assert_eq!(s.points[1].world.bottlenecks[0].link.rate, Rate::Fixed(6_000_000));
}

#[test]
fn bad_sweeps_are_errors() {
    let with = |key: &str, values: &str| error_of(&format!("{SMALL}[sweep]\nkey = \"{key}\"\nvalues = {values}\n"));
    let e = with("server.edge9.link.delay", "[\"1ms\"]");
    assert_eq!(
        e,
        "scenarios/x.toml:15: sweep.key: \"server.edge9.link.delay\": server has no element \"edge9\" (known: cdn, edge1)"
    );
    let e = with("server.edge1.uplink.delay", "[\"1ms\"]");
    assert!(
        e.ends_with("sweep.key: \"server.edge1.uplink.delay\": server.edge1.uplink does not exist"),
        "{e}"
    );
    let e = with("server.edge1.link.delai", "[\"1ms\"]");
    assert!(
        e.contains(":15: sweep.key: \"server.edge1.link.delai\" does not exist: unknown key `delai`"),
        "{e}"
    );
    let e = with("colour", "[1]");
    assert!(e.contains("sweep.key: \"colour\" does not exist"), "{e}");
    let e = with("content.size.x", "[1]");
    assert!(e.contains("content.size is a string, not a table"), "{e}");
    let e = with("server.edge1.link.delay", "[]");
    assert!(e.contains(":16: sweep.values: expected at least one value"), "{e}");
    // A bad value points at the sweep's values and says which one.
    let e = with("server.edge1.link.delay", "[\"1ms\", \"soon\"]");
    assert!(
        e.starts_with("scenarios/x.toml:16: server.edge1.link.delay: expected a duration"),
        "{e}"
    );
    assert!(e.ends_with("(with sweep value 2 of sweep.values, \"soon\")"), "{e}");
    let e = with("repeat", "[0]");
    assert!(e.contains("repeat: expected at least 1"), "{e}");
    // A mistake of the file itself is not blamed on the sweep.
    let e = error_of(&format!(
        "{}[sweep]\nkey = \"duration\"\nvalues = [\"1s\"]\n",
        SMALL.replace("\"round-robin\"", "\"fastest\"")
    ));
    assert!(e.ends_with(&format!("known: {}", known_schedulers())), "{e}");
    let e = error_of(&format!("{SMALL}[sweep]\nvalues = [1]\n"));
    assert!(e.contains("sweep: missing key `key`"), "{e}");
}

#[test]
fn runs_expand_scheduler_cc_sweep_and_repeat_seeds() {
    let text = format!(
        "{}[sweep]\nkey = \"server.edge1.link.delay\"\nvalues = [\"30ms\", \"60ms\"]\n",
        SMALL
            .replace("[content]", "seed = 7\nrepeat = 3\n[content]")
            .replace("[client]", "[client]\ncc = [\"cubic\", \"newreno\"]")
    );
    let mut s = parse(&text).unwrap();
    let runs = s.runs();
    assert_eq!(runs.len(), 2 * 2 * 2 * 3);
    let r = |i: usize| {
        (
            runs[i].point,
            runs[i].scheduler,
            runs[i].cc,
            runs[i].repeat,
            runs[i].seed,
        )
    };
    assert_eq!(r(0), (0, "default", "cubic", 0, 7));
    assert_eq!(r(2), (0, "default", "cubic", 2, 9));
    assert_eq!(r(3), (0, "default", "newreno", 0, 7));
    assert_eq!(r(6), (0, "round-robin", "cubic", 0, 7));
    assert_eq!(r(12), (1, "default", "cubic", 0, 7));
    assert_eq!(runs[12].sweep, Some("60ms"));
    assert_eq!(runs[12].world.servers[1].link.delay, ms(60));

    s.set_seed(100);
    s.set_repeat(2);
    let runs = s.runs();
    assert_eq!(runs.len(), 16);
    assert_eq!((runs[1].seed, runs[1].repeat), (101, 1));
}

#[test]
fn one_cell_of_a_file_keeps_its_control_and_sweep_point() {
    let text = format!(
        "{}[sweep]\nkey = \"server.edge1.link.delay\"\nvalues = [\"30ms\", \"60ms\", \"90ms\"]\n",
        SMALL.replace("[client]", "[client]\ncc = [\"cubic\", \"newreno\", \"bbr\"]")
    );
    let mut s = parse(&text).unwrap();
    s.keep_ccs(&["bbr".to_owned(), "cubic".to_owned()]).unwrap();
    s.keep_points(&["60ms".to_owned()]).unwrap();
    let cells: Vec<_> = s.runs().iter().map(|r| (r.sweep, r.scheduler, r.cc)).collect();
    assert_eq!(
        cells,
        [
            (Some("60ms"), "default", "cubic"),
            (Some("60ms"), "default", "bbr"),
            (Some("60ms"), "round-robin", "cubic"),
            (Some("60ms"), "round-robin", "bbr"),
        ]
    );
    assert_eq!(s.points[0].world.servers[1].link.delay, ms(60));
    let e = s.keep_ccs(&["copa".to_owned()]).unwrap_err();
    assert_eq!(e, "\"copa\" is not among the file's [client] cc (cubic, bbr)");
    let e = s.keep_points(&["30ms".to_owned()]).unwrap_err();
    assert_eq!(e, "\"30ms\" is not among sweep.values (60ms)");
    let e = parse(SMALL).unwrap().keep_points(&["30ms".to_owned()]).unwrap_err();
    assert_eq!(e, "the scenario has no [sweep]");
}

#[test]
fn rows_average_repeats_in_a_fixed_order() {
    let text = SMALL.replace("[content]", "repeat = 2\n[content]");
    let s = parse(&text).unwrap();
    let rows = s.run(2, &|| {}).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0].scheduler.as_str(), rows[1].scheduler.as_str()),
        ("default", "round-robin")
    );
    for row in &rows {
        assert_eq!(
            (row.cc.as_str(), row.sweep.as_deref(), row.repeats),
            ("default", None, 2)
        );
        assert_eq!(row.completed, 2, "{row:?}");
        assert!(row.completion_s.unwrap() > 0.0);
        assert!((row.capacity_mbps - 14.0).abs() < 1e-9, "{row:?}");
        assert!(row.goodput_mbps > 0.0 && row.aggregation > 0.0, "{row:?}");
        assert!(row.cdn_share > 0.0 && row.cdn_share < 1.0, "{row:?}");
    }
    // The mean of the repeats run one by one.
    let mut one = s.clone();
    one.set_repeat(1);
    let first = one.run(1, &|| {}).unwrap();
    one.set_seed(2);
    let second = one.run(1, &|| {}).unwrap();
    let mean = (first[0].goodput_mbps + second[0].goodput_mbps) / 2.0;
    assert!((rows[0].goodput_mbps - mean).abs() < 1e-9);
    // Threads change nothing.
    assert_eq!(s.run(1, &|| {}).unwrap(), rows);
    // The progress callback is called once per run.
    let count = AtomicCounter::default();
    s.run(0, &|| count.bump()).unwrap();
    assert_eq!(count.get(), 4);
}

#[test]
fn an_incomplete_run_has_no_completion_time() {
    let text = SMALL.replace("duration = \"30s\"", "duration = \"50ms\"");
    let rows = parse(&text).unwrap().run(0, &|| {}).unwrap();
    assert_eq!(rows[0].completed, 0);
    assert_eq!(rows[0].completion_s, None);
}

fn known_schedulers() -> String {
    let names: Vec<&str> = pcdn_core::scheduler::SCHEDULERS.iter().map(|(n, _)| *n).collect();
    names.join(", ")
}

#[derive(Default)]
struct AtomicCounter(std::sync::atomic::AtomicUsize);

impl AtomicCounter {
    fn bump(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[test]
fn transport_is_one_name_or_a_list_and_each_gives_its_own_rows() {
    assert_eq!(parse(SMALL).unwrap().points[0].transports, ["pull"], "pull by default");
    let one = parse(&SMALL.replace("[client]", "[client]\ntransport = \"subflow\"")).unwrap();
    assert_eq!(one.points[0].transports, ["subflow"]);
    let text = SMALL.replace("[client]", "[client]\ntransport = [\"subflow\", \"pull\"]");
    let s = parse(&text).unwrap();
    let cells: Vec<_> = s.runs().iter().map(|r| (r.scheduler, r.transport)).collect();
    assert_eq!(
        cells,
        [
            ("default", "subflow"),
            ("default", "pull"),
            ("round-robin", "subflow"),
            ("round-robin", "pull")
        ]
    );
    let rows = s.run(0, &|| {}).unwrap();
    let transports: Vec<&str> = rows.iter().map(|r| r.transport.as_str()).collect();
    assert_eq!(transports, ["subflow", "pull", "subflow", "pull"]);
    assert!(rows.iter().all(|r| r.completed == 1), "{rows:?}");
    // An unknown name is an error naming the file, the key and the choices.
    let e = error_of(&SMALL.replace("[client]", "[client]\ntransport = [\"pull\", \"tcp\"]"));
    assert!(
        e.starts_with(
            "scenarios/x.toml:6: client.transport.1: unknown transport \"tcp\"; known: pull, subflow, subflow-or"
        ),
        "{e}"
    );
    let e = error_of(&SMALL.replace("[client]", "[client]\ntransport = \"tcp\""));
    assert!(
        e.contains("client.transport") && e.contains("unknown transport \"tcp\"; known: pull, subflow"),
        "{e}"
    );
    let e = error_of(&SMALL.replace("[client]", "[client]\ntransport = 3"));
    assert!(e.contains("client.transport") && e.contains("\"subflow\""), "{e}");
}

#[test]
fn plot_selects_rows_of_the_client_lists_and_needs_a_sweep() {
    let sweep = "[sweep]\nkey = \"server.edge1.link.delay\"\nvalues = [\"30ms\", \"60ms\"]\n";
    let s = parse(&format!(
        "{SMALL}{sweep}[plot]\nschedulers = [\"round-robin\"]\nx_label = \"RTT (ms)\"\nx_scale = 2\n"
    ))
    .unwrap();
    assert_eq!(s.plot.schedulers.as_deref(), Some(&["round-robin".to_owned()][..]));
    assert_eq!((s.plot.x_label.as_deref(), s.plot.x_scale), (Some("RTT (ms)"), 2.0));
    assert!(s.plot.shows("round-robin", "default") && !s.plot.shows("default", "default"));
    assert!(s.plot.selects());
    let plain = parse(&format!("{SMALL}{sweep}")).unwrap();
    assert_eq!(plain.plot, PlotSpec::default());
    assert!(plain.plot.shows("default", "cubic") && !plain.plot.selects());

    let e = error_of(&format!("{SMALL}{sweep}[plot]\nschedulers = [\"minrtt\"]\n"));
    assert!(
        e.contains("plot.schedulers") && e.contains("\"minrtt\" is not in client.schedulers"),
        "{e}"
    );
    let e = error_of(&format!("{SMALL}{sweep}[plot]\ncc = [\"bbr\"]\n"));
    assert!(
        e.contains("plot.cc") && e.contains("\"bbr\" is not in client.cc"),
        "{e}"
    );
    let e = error_of(&format!("{SMALL}{sweep}[plot]\nx_scale = 0\n"));
    assert!(e.contains("plot.x_scale") && e.contains("positive"), "{e}");
    let e = error_of(&format!("{SMALL}{sweep}[plot]\ncolour = \"red\"\n"));
    assert!(e.contains("unknown key") && e.contains("colour"), "{e}");
    let e = error_of(&format!("{SMALL}[plot]\nschedulers = [\"default\"]\n"));
    assert!(e.contains("has none"), "{e}");
}
