//! The player model against hand-computed timelines: start-up, stalls, GOP pauses, jump-to-CDN.

use pcdn_core::player::{JumpToCdn, Player, SpecError, VideoSpec};
use pcdn_core::time::{Duration, Instant};

/// 8 Mbit/s, so one byte is one microsecond of video and 1 MB is one second.
const BITRATE: u64 = 8_000_000;
const MB: u64 = 1_000_000;

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

fn video(secs: u64) -> VideoSpec {
    VideoSpec::new(BITRATE, Duration::from_secs(secs))
}

/// Reports `step_bytes` more every `step` from `from` until the video is delivered, advancing
/// the player to each delivery first.
fn deliver_steadily(player: &mut Player, from: Instant, step: Duration, step_bytes: u64, already: u64) -> Instant {
    let total = player.spec().total_bytes();
    let (mut now, mut delivered) = (from, already);
    while delivered < total {
        now += step;
        delivered = (delivered + step_bytes).min(total);
        player.on_delivered(now, delivered);
    }
    now
}

#[test]
fn a_download_faster_than_the_bitrate_never_stalls() {
    // 2 MB/s against 1 MB/s of video: 0.2 MB every 100 ms.
    let mut p = Player::new(video(10), Instant::ZERO).unwrap();
    let mut delivered = 0;
    for step in 1..=50 {
        delivered += 200_000;
        p.on_delivered(ms(100 * step), delivered);
        assert!(!p.is_stalled());
    }
    // The start-up second (1 MB) is buffered after 5 steps: first frame at 500 ms.
    let stats = p.stats();
    assert_eq!(stats.first_frame_latency, Some(Duration::from_millis(500)));
    p.advance(ms(10_499));
    assert!(!p.is_finished());
    p.advance(ms(10_500));
    assert!(p.is_finished());
    assert_eq!(p.finished_at(), Some(ms(10_500)));
    let stats = p.stats();
    assert_eq!(stats.rebuffer_count, 0);
    assert_eq!(stats.stalled_time, Duration::ZERO);
    assert_eq!(stats.play_time, Duration::from_secs(10));
    assert_eq!(stats.gop_pauses, 0);
    assert_eq!(stats.gops_judged, 10);
    assert_eq!(stats.rebuffer_ratio, 0.0);
    assert!(stats.finished);
}

#[test]
fn first_frame_waits_for_the_startup_amount() {
    let mut spec = video(10);
    spec.startup = Duration::from_millis(2500);
    let mut p = Player::new(spec, ms(1000)).unwrap();
    p.on_delivered(ms(1200), 2_499_999);
    assert!(!p.has_started());
    assert_eq!(p.buffer_level(ms(1200)), Duration::from_micros(2_499_999));
    p.on_delivered(ms(1700), 2_500_000);
    assert_eq!(p.stats().first_frame_latency, Some(Duration::from_millis(700)));
}

#[test]
fn a_download_at_half_the_bitrate_stalls_as_computed_by_hand() {
    // 10 s video at 1 MB/s, delivered 0.5 MB (0.5 s of video) at t = 1, 2, ..., 20 s.
    // Start-up and resume need 1 s buffered ahead of the playhead.
    // - t = 2: 1 MB buffered, play from position 0. At t = 3 the playhead reaches 1.0 just as
    //   the third delivery arrives (a delivery at t counts at t), buffer end 1.5: at t = 3.5 the
    //   playhead hits 1.5 and stalls.
    // - Resuming at 1.5 needs 2.5 s buffered: t = 5. So each cycle plays 1.5 s then stalls 1.5 s:
    //   plays [2, 3.5), [5, 6.5), [8, 9.5), [11, 12.5), [14, 15.5), [17, 18.5), stalls after each.
    // - The sixth stall at position 9 ends when 10 s are buffered, at t = 20 (the whole video);
    //   the last second plays [20, 21).
    // Rebuffers 6, stalled 6 × 1.5 = 9 s, played 10 s: ratio 0.9, stall 9 / 19 = 47.37 %.
    let mut p = Player::new(video(10), Instant::ZERO).unwrap();
    let mut stall_starts = Vec::new();
    for second in 1..=20 {
        let before = p.is_stalled();
        p.advance(ms(1000 * second - 1));
        if p.is_stalled() && !before {
            stall_starts.push(second);
        }
        p.on_delivered(ms(1000 * second), 500_000 * second);
    }
    assert_eq!(stall_starts, [4, 7, 10, 13, 16, 19]);
    p.advance(ms(20_999));
    assert!(!p.is_finished());
    p.advance(ms(21_000));
    assert!(p.is_finished());
    let stats = p.stats();
    assert_eq!(stats.first_frame_latency, Some(Duration::from_secs(2)));
    assert_eq!(stats.rebuffer_count, 6);
    assert_eq!(stats.stalled_time, Duration::from_secs(9));
    assert_eq!(stats.play_time, Duration::from_secs(10));
    assert!((stats.rebuffer_ratio - 0.9).abs() < 1e-12);
    assert!((stats.stall_percentage - 900.0 / 19.0).abs() < 1e-9);
    // GOP i is due when the playhead reaches i s while playing:
    // GOP 0 at t = 2 (1 MB, complete); 1 at t = 3 (1.5 < 2 MB, pause); 2 at t = 5.5 (2.5 < 3,
    // pause); 3 starts at the stall point 3.0, due at the resume t = 8 (4 ≥ 4, complete); then
    // 4, 5 pause, 6 complete, 7, 8 pause, 9 complete: 6 pauses of 10 GOPs.
    assert_eq!(stats.gop_pauses, 6);
    assert_eq!(stats.gops_judged, 10);
    assert!((stats.gop_pause_percentage - 60.0).abs() < 1e-12);
}

#[test]
fn a_three_second_delivery_gap_gives_one_rebuffer_of_the_right_length() {
    // 2 MB/s in 100 ms steps (0.2 s of video each), but nothing between t = 2.0 s and t = 5.0 s.
    // First frame at 0.5 s; at t = 2.0 the playhead is at 1.5 with 4.0 s buffered, so it runs dry
    // at t = 4.5. Deliveries come back at 5.0, 5.1, ... and the 1 s resume threshold (5.0 s
    // buffered) is met by the fifth of them, at t = 5.4: one rebuffer of 0.9 s.
    let mut p = Player::new(video(10), Instant::ZERO).unwrap();
    let mut delivered = 0;
    for step in 1..=20 {
        delivered += 200_000;
        p.on_delivered(ms(100 * step), delivered);
    }
    assert_eq!(p.buffer_level(ms(2000)), Duration::from_millis(2500));
    p.advance(ms(4500));
    assert!(
        !p.is_stalled(),
        "the playhead reaches the buffer end at 4.5 s, not before"
    );
    p.advance(ms(4501));
    assert!(p.is_stalled());
    assert_eq!(p.buffer_level(ms(4501)), Duration::ZERO);
    delivered += 200_000;
    p.on_delivered(ms(5000), delivered);
    let end = deliver_steadily(&mut p, ms(5000), Duration::from_millis(100), 200_000, delivered);
    assert_eq!(end, ms(7900));
    p.advance(ms(11_400));
    assert!(p.is_finished());
    let stats = p.stats();
    assert_eq!(stats.rebuffer_count, 1);
    assert_eq!(stats.stalled_time, Duration::from_millis(900));
    assert_eq!(stats.play_time, Duration::from_secs(10));
    assert_eq!(p.finished_at(), Some(ms(11_400)));
}

#[test]
fn gop_pauses_are_counted_on_a_hand_built_timeline() {
    // A 4 s video, 1 s GOPs (1 MB each), start-up 1 s.
    // t = 0.5: 1.0 MB -> play from 0.5, GOP 0 due at 0.5 and complete.
    // t = 1.0: 1.6 MB; GOP 1 due at 1.5 with 1.6 < 2 MB: pause (no stall: buffer end 1.6 is
    //          reached at t = 2.1, after the next delivery).
    // t = 1.9: 3.0 MB; GOP 2 due at 2.5: complete.
    // t = 3.5: 4.0 MB, exactly when GOP 3 is due and the playhead reaches the buffer end 3.0:
    //          a delivery at the due instant is in time, so no pause and no stall.
    let mut p = Player::new(video(4), Instant::ZERO).unwrap();
    p.on_delivered(ms(500), MB);
    p.on_delivered(ms(1000), 1_600_000);
    p.on_delivered(ms(1900), 3 * MB);
    p.on_delivered(ms(3500), 4 * MB);
    p.advance(ms(4500));
    let stats = p.stats();
    assert!(stats.finished);
    assert_eq!((stats.gop_pauses, stats.gops_judged, stats.rebuffer_count), (1, 4, 0));
    assert!((stats.gop_pause_percentage - 25.0).abs() < 1e-12);

    // The same, but the last delivery comes 1 µs late: the playhead stalls at 3.0 at t = 3.5,
    // and GOP 3, which starts at the stall point, is due at the resume (t = 3.5 s + 1 µs), when
    // it is complete. One stall, still one pause.
    let mut late = Player::new(video(4), Instant::ZERO).unwrap();
    late.on_delivered(ms(500), MB);
    late.on_delivered(ms(1000), 1_600_000);
    late.on_delivered(ms(1900), 3 * MB);
    late.on_delivered(ms(3500) + Duration::from_micros(1), 4 * MB);
    late.advance(ms(5000));
    let stats = late.stats();
    assert!(stats.finished);
    assert_eq!((stats.gop_pauses, stats.rebuffer_count), (1, 1));
    assert_eq!(stats.stalled_time, Duration::from_micros(1));

    // And if GOP 3 were still short at the resume, it would pause too: resume 0.5 s, 3.5 MB.
    let mut spec = video(4);
    spec.resume = Duration::from_millis(500);
    let mut short = Player::new(spec, Instant::ZERO).unwrap();
    short.on_delivered(ms(500), MB);
    short.on_delivered(ms(1000), 1_600_000);
    short.on_delivered(ms(1900), 3 * MB);
    short.on_delivered(ms(3600), 3_500_000);
    short.on_delivered(ms(3800), 4 * MB);
    short.advance(ms(5000));
    let stats = short.stats();
    assert_eq!((stats.gop_pauses, stats.rebuffer_count), (2, 1));
}

#[test]
fn jump_to_cdn_fires_once_per_segment_and_only_under_its_condition() {
    // 10 s video in 2 s segments (2 MB each); jump when less than 1.5 s is buffered.
    let mut spec = video(10);
    spec.segment = Duration::from_secs(2);
    let rule = JumpToCdn {
        buffer_below: Duration::from_millis(1500),
    };
    let mut p = Player::new(spec.clone(), Instant::ZERO).unwrap().with_jump_to_cdn(rule);

    p.on_delivered(ms(500), 500_000);
    assert_eq!(p.should_jump(ms(600)), None, "no jump during start-up");
    p.on_delivered(ms(1000), MB);
    // Playing with 1.0 s buffered < 1.5 s: the first undelivered byte is in segment 0.
    assert_eq!(p.should_jump(ms(1000)), Some(0));
    assert_eq!(p.should_jump(ms(1000)), None, "segment 0 jumps once");
    p.on_delivered(ms(1100), 2_500_000);
    // 2.5 - 0.1 = 2.4 s buffered: healthy, no jump.
    assert_eq!(p.should_jump(ms(1100)), None);
    // At t = 2.1 the playhead is at 1.1: 1.4 s buffered, below the threshold, segment 1.
    assert_eq!(p.should_jump(ms(2000)), None);
    assert_eq!(p.should_jump(ms(2100)), Some(1));
    // Stalled at 2.5 from t = 3.5; still segment 1, already jumped.
    assert_eq!(p.should_jump(ms(3600)), None);
    assert!(p.is_stalled());
    // Exactly 4 MB delivered: the first missing byte opens segment 2, and the player is stalled.
    p.on_delivered(ms(3700), 3 * MB);
    p.on_delivered(ms(3800), 4 * MB);
    assert!(!p.is_stalled(), "1.5 s ahead of 2.5 meets the 1 s resume threshold");
    assert_eq!(p.should_jump(ms(3800)), None, "1.5 s buffered is not below 1.5 s");
    assert_eq!(p.should_jump(ms(3801)), Some(2));
    p.on_delivered(ms(3900), 10 * MB);
    assert_eq!(p.should_jump(ms(9000)), None, "nothing left to fetch");
    assert_eq!(p.jumped_segments().collect::<Vec<_>>(), [0, 1, 2]);
    let stats = p.stats();
    assert_eq!((stats.segments, stats.segments_jumped), (5, 3));
    assert!((stats.jump_to_cdn_rate - 0.6).abs() < 1e-12);

    // Without the rule the same timeline never jumps.
    let mut plain = Player::new(spec, Instant::ZERO).unwrap();
    plain.on_delivered(ms(1000), MB);
    assert_eq!(plain.should_jump(ms(3000)), None);
    assert!(plain.is_stalled());
    assert_eq!(plain.stats().jump_to_cdn_rate, 0.0);
}

#[test]
fn play_deadlines_follow_the_playhead() {
    let mut p = Player::new(video(10), ms(100)).unwrap();
    // Before the first frame: as if playback started at the latest input.
    assert_eq!(p.play_deadline(0), Some(ms(100)));
    p.on_delivered(ms(300), 400_000);
    assert_eq!(p.play_deadline(2 * MB), Some(ms(2300)));
    p.on_delivered(ms(1000), 3 * MB);
    // Playing from t = 1.0 at position 0: byte b (b µs of video) is due at 1.0 s + b µs.
    assert_eq!(p.play_deadline(0), Some(ms(1000)));
    assert_eq!(p.play_deadline(2_500_000), Some(ms(3500)));
    // The first undelivered byte is due exactly when the buffer runs out.
    for now in [1000, 1700, 2999] {
        p.advance(ms(now));
        let due = p.play_deadline(3 * MB).unwrap();
        assert_eq!(due - ms(now), p.buffer_level(ms(now)));
        assert_eq!(p.position(ms(now)), Duration::from_millis(now - 1000));
    }
    p.advance(ms(2500));
    assert_eq!(p.play_deadline(MB), None, "already played");
    // Stall at 3.0 from t = 4.0; resumed at t = 5.5 with 4 s buffered: deadlines shift by 1.5 s.
    p.advance(ms(4001));
    assert!(p.is_stalled());
    assert_eq!(
        p.play_deadline(3 * MB),
        Some(ms(4001)),
        "overdue: needed as soon as it comes"
    );
    p.on_delivered(ms(5500), 4 * MB);
    assert_eq!(p.play_deadline(3_500_000), Some(ms(6000)));
    assert_eq!(p.play_deadline(10 * MB), None, "past the video");
    p.on_delivered(ms(5600), 10 * MB);
    p.advance(ms(20_000));
    assert!(p.is_finished());
    assert_eq!(p.play_deadline(9 * MB), None);
    let stats = p.stats();
    assert_eq!(stats.stalled_time, Duration::from_millis(1500));
    assert_eq!(stats.first_frame_latency, Some(Duration::from_millis(900)));
}

#[test]
fn bad_specs_give_clear_errors() {
    type Spoil = fn(&mut VideoSpec);
    let cases: [(Spoil, &str); 6] = [
        (|s| s.bitrate_bps = 0, "bitrate_bps"),
        (|s| s.duration = Duration::ZERO, "duration"),
        (|s| s.segment = Duration::ZERO, "segment"),
        (|s| s.gop = Duration::ZERO, "gop"),
        (|s| s.startup = Duration::ZERO, "startup"),
        (|s| s.resume = Duration::ZERO, "resume"),
    ];
    for (spoil, field) in cases {
        let mut spec = video(10);
        spoil(&mut spec);
        let err = Player::new(spec, Instant::ZERO).unwrap_err();
        assert_eq!(err, SpecError::Zero { field });
        assert_eq!(
            err.to_string(),
            format!("video spec: `{field}` must be greater than zero")
        );
    }
    let err = VideoSpec::new(u64::MAX, Duration::from_secs(3600))
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("more than u64::MAX bytes"), "{err}");
}

#[test]
fn stats_serialize_with_seconds() {
    let mut p = Player::new(video(2), Instant::ZERO).unwrap();
    p.on_delivered(ms(250), 2 * MB);
    p.advance(ms(3000));
    let json = serde_json::to_value(p.stats()).unwrap();
    assert_eq!(json["first_frame_latency"], 0.25);
    assert_eq!(json["play_time"], 2.0);
    assert_eq!(json["rebuffer_count"], 0);
    assert_eq!(json["finished"], true);
}

#[test]
fn counts_going_backwards_or_past_the_end_are_ignored() {
    let mut p = Player::new(video(2), Instant::ZERO).unwrap();
    p.on_delivered(ms(100), 1_500_000);
    p.on_delivered(ms(200), 10);
    assert_eq!(p.buffer_level(ms(200)), Duration::from_millis(1400));
    p.on_delivered(ms(300), u64::MAX);
    // Earlier time than the latest input counts as the latest.
    p.advance(ms(50));
    assert_eq!(p.buffer_level(ms(300)), Duration::from_millis(1800));
    p.advance(ms(2100));
    assert!(p.is_finished());
}

proptest::proptest! {
    /// Whatever the delivery timeline, a finished playback's time adds up: wall time from the
    /// press of play is first-frame latency + play time (the whole video) + stalled time.
    #[test]
    fn wall_time_is_startup_plus_play_plus_stalls(
        steps in proptest::collection::vec((1u64..3_000, 0u64..800_000), 1..60),
        startup_ms in 1u64..3_000,
        resume_ms in 1u64..3_000,
    ) {
        let mut spec = video(5);
        spec.startup = Duration::from_millis(startup_ms);
        spec.resume = Duration::from_millis(resume_ms);
        let mut p = Player::new(spec, ms(7)).unwrap();
        let (mut now, mut delivered) = (ms(7), 0);
        for (gap_ms, bytes) in steps {
            now += Duration::from_millis(gap_ms);
            delivered += bytes;
            p.on_delivered(now, delivered);
            let level = p.buffer_level(now);
            proptest::prop_assert!(level <= Duration::from_secs(5));
            if p.is_stalled() {
                proptest::prop_assert!(level < Duration::from_millis(resume_ms));
            }
        }
        p.on_delivered(now + Duration::from_millis(1), 5 * MB);
        p.advance(now + Duration::from_secs(60));
        let stats = p.stats();
        proptest::prop_assert!(stats.finished);
        proptest::prop_assert_eq!(stats.play_time, Duration::from_secs(5));
        proptest::prop_assert_eq!(stats.gops_judged, 5);
        let wall = p.finished_at().unwrap() - ms(7);
        proptest::prop_assert_eq!(wall, stats.first_frame_latency.unwrap() + stats.play_time + stats.stalled_time);
        proptest::prop_assert!(stats.gop_pauses <= 5);
    }
}

#[test]
fn frames_missing_bytes_at_their_play_instant_are_discarded() {
    // 2 s at 8 Mbit/s and 10 fps: a frame is 100 ms of video, 100 kB.
    let mut spec = video(2);
    spec.fps = 10;
    assert_eq!(spec.frames(), 20);
    assert_eq!(spec.frame_bytes(10), MB..1_100_000);
    let mut p = Player::new(spec, Instant::ZERO).unwrap();
    p.on_delivered(Instant::ZERO, MB);
    // Half of frame 10 arrives; the playhead reaches it at 1.0 s and stalls at 1.05 s.
    p.on_delivered(ms(500), 1_050_000);
    p.advance(ms(2000));
    assert!(p.is_stalled());
    let stats = p.stats();
    assert_eq!((stats.frames_judged, stats.frames_discarded), (11, 1));
    // The rest arrives at 3 s: playback resumes, the later frames are all whole.
    p.on_delivered(ms(3000), 2 * MB);
    p.advance(ms(4000));
    let stats = p.stats();
    assert!(stats.finished);
    assert_eq!((stats.frames, stats.frames_judged, stats.frames_discarded), (20, 20, 1));
    assert!((stats.frame_discard_percentage - 5.0).abs() < 1e-12);
    // The GOP starting at 1 s was not complete when due either.
    assert_eq!(stats.gop_pauses, 1);
    // A zero frame rate is refused by name.
    let mut bad = video(2);
    bad.fps = 0;
    assert_eq!(bad.validate(), Err(SpecError::Zero { field: "fps" }));
}

mod download {
    //! The player inside a `Download`: fed by the in-order bytes, jumping to the CDN.

    use super::*;
    use pcdn_core::cc;
    use pcdn_core::download::ConfigError;
    use pcdn_core::harness::{Harness, PathSpec};
    use pcdn_core::player::PlayerConfig;
    use pcdn_core::scheduler::{self, Pick, SchedEvent, Scheduler, View};
    use pcdn_core::{Download, DownloadConfig, PathId};
    use std::sync::{Arc, Mutex};

    /// Every request the scheduler made: when, on which path, which packet.
    type Sends = Arc<Mutex<Vec<(Instant, PathId, u64)>>>;

    /// A registered scheduler that also notes every request it made.
    #[derive(Debug)]
    struct Recorder {
        inner: Box<dyn Scheduler>,
        sends: Sends,
    }

    impl Scheduler for Recorder {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn next(&mut self, view: &View<'_>) -> Option<Pick> {
            self.inner.next(view)
        }
        fn on_event(&mut self, now: Instant, event: &SchedEvent) {
            if let SchedEvent::Sent { path, seq } = *event {
                self.sends.lock().unwrap().push((now, path, seq));
            }
            self.inner.on_event(now, event);
        }
    }

    fn path(mbit_s: u64, one_way_ms: u64, loss: f64, origin: bool) -> PathSpec {
        let mut spec = PathSpec::new(mbit_s * 1_000_000, Duration::from_millis(one_way_ms), loss);
        spec.origin = origin;
        spec
    }

    fn config(spec: VideoSpec, jump: Option<JumpToCdn>) -> DownloadConfig {
        let mut config = DownloadConfig::new(Default::default(), spec.total_bytes(), 1400);
        config.tasks = (0..spec.segments()).map(|i| spec.segment_bytes(i)).collect();
        config.video = Some(PlayerConfig {
            spec,
            jump_to_cdn: jump,
        });
        config
    }

    fn harness(config: DownloadConfig, scheduler: &str, specs: &[PathSpec], sends: &Sends) -> Harness {
        let recorder = Recorder {
            inner: scheduler::by_name(scheduler, 0).unwrap(),
            sends: sends.clone(),
        };
        Harness::new(
            config,
            Box::new(recorder),
            cc::by_name("cubic").unwrap().as_ref(),
            specs,
            7,
        )
    }

    #[test]
    fn the_download_feeds_the_player_and_reports_its_qoe() {
        // 4 Mbit/s for 6 s over a clean 20 Mbit/s origin: no stall, the first frame within
        // the time to fetch one second of video and a few round trips.
        let spec = VideoSpec::new(4_000_000, Duration::from_secs(6));
        let sends = Sends::default();
        let mut h = harness(config(spec, None), "minrtt", &[path(20, 10, 0.0, true)], &sends);
        assert!(h.run(Duration::from_secs(30)));
        let player = h.client.player().expect("a player");
        assert_eq!(player.spec().bitrate_bps, 4_000_000);
        let first = h.client.stats().player.as_ref().unwrap().first_frame_latency.unwrap();
        assert!(
            first > Duration::from_millis(200) && first < Duration::from_secs(1),
            "{first:?}"
        );
        let done = h.now;
        h.client.advance_player(done + Duration::from_secs(60));
        let stats = h.client.stats().player.clone().unwrap();
        assert!(stats.finished);
        assert_eq!(stats.play_time, Duration::from_secs(6));
        assert_eq!(
            (stats.rebuffer_count, stats.gop_pauses, stats.frames_discarded),
            (0, 0, 0)
        );
        let json = serde_json::to_value(h.client.stats()).unwrap();
        assert_eq!(json["player"]["rebuffer_count"], 0);
        // Without a video there is no player, and no `player` key in the JSON.
        let plain = DownloadConfig::new(Default::default(), 1000, 1400);
        let d = Download::new(plain, scheduler::by_name("minrtt", 0).unwrap()).unwrap();
        assert!(d.player().is_none());
        assert!(serde_json::to_value(d.stats()).unwrap().get("player").is_none());
    }

    #[test]
    fn bad_videos_are_refused_when_the_download_is_set_up() {
        let spec = VideoSpec::new(4_000_000, Duration::from_secs(6));
        let mut too_long = config(spec.clone(), None);
        too_long.content_length -= 1;
        too_long.tasks.clear();
        let err = Download::new(too_long, scheduler::by_name("minrtt", 0).unwrap()).unwrap_err();
        assert_eq!(
            err,
            ConfigError::VideoTooLong {
                video_bytes: 3_000_000,
                content_length: 2_999_999
            }
        );
        let mut zero = spec;
        zero.gop = Duration::ZERO;
        let err = Download::new(config(zero, None), scheduler::by_name("minrtt", 0).unwrap()).unwrap_err();
        assert_eq!(err, ConfigError::Video(SpecError::Zero { field: "gop" }));
    }

    /// A near edge that drops a third of its packets beside a clean origin at the video's
    /// bitrate: minrtt fills the edge first, its losses keep the buffer low, segments jump.
    /// Without tail loss probes, so that the edge's lost tails wait for its timeouts: with
    /// them this world no longer stalls, and the rule has nothing to shorten.
    fn lossy_edge_world(jump: Option<JumpToCdn>) -> (Harness, Sends) {
        let mut spec = VideoSpec::new(6_000_000, Duration::from_secs(20));
        spec.segment = Duration::from_secs(4);
        let sends = Sends::default();
        let specs = [path(6, 40, 0.0, true), path(6, 5, 0.33, false)];
        let mut h = harness(config(spec, jump).with_tail_probes(false), "minrtt", &specs, &sends);
        assert!(h.run(Duration::from_secs(120)), "the download completes");
        let done = h.now;
        h.client.advance_player(done + Duration::from_secs(60));
        (h, sends)
    }

    #[test]
    fn a_jumped_segment_is_asked_of_the_origin_only() {
        let rule = JumpToCdn {
            buffer_below: Duration::from_millis(500),
        };
        let (h, sends) = lossy_edge_world(Some(rule));
        let player = h.client.player().unwrap();
        let jumps: Vec<(u64, Instant)> = player.jumps().collect();
        assert!(!jumps.is_empty(), "the lossy edge makes the player jump");
        let origin = h.path_ids[0];
        let sends = sends.lock().unwrap();
        let mut after_jump = 0;
        for &(segment, at) in &jumps {
            let bytes = player.spec().segment_bytes(segment);
            let seqs = bytes.start / 1400..bytes.end.div_ceil(1400);
            for &(when, path, seq) in sends.iter().filter(|(when, _, seq)| *when > at && seqs.contains(seq)) {
                assert_eq!(
                    path, origin,
                    "packet {seq} of jumped segment {segment} asked of an edge at {when:?}"
                );
                after_jump += 1;
            }
        }
        assert!(after_jump > 0, "the jumped segments' rest came from the origin");
        assert_eq!(
            h.client.stats().player.as_ref().unwrap().segments_jumped,
            jumps.len() as u64
        );
    }

    #[test]
    fn jumping_to_the_cdn_shortens_the_stalls() {
        let rule = JumpToCdn {
            buffer_below: Duration::from_millis(500),
        };
        let (with, _) = lossy_edge_world(Some(rule));
        let (without, _) = lossy_edge_world(None);
        let with = with.client.stats().player.clone().unwrap();
        let without = without.client.stats().player.clone().unwrap();
        assert_eq!(without.segments_jumped, 0);
        assert!(without.stalled_time > Duration::ZERO, "{without:?}");
        assert!(
            with.stalled_time < without.stalled_time,
            "with {with:?}\nwithout {without:?}"
        );
    }
}
