//! A sans-I/O video player model: start-up, rebuffering, play deadlines, jump-to-CDN and QoE metrics.
//!
//! The player plays a constant-bitrate video of `duration`, consuming the download's in-order
//! bytes at `bitrate_bps`. Byte `b` holds video time `b·8/bitrate`. Time only comes in as
//! arguments (`on_delivered`, `advance`); a delivery reported at instant `t` counts for anything
//! due at `t`, so events at exactly the latest input's instant are settled by the next input.
//!
//! States: *waiting* (before the first frame) → *playing* ⇄ *stalled* → *finished*. Playback
//! starts when `startup` seconds of video are buffered (or the whole video is); the buffer running
//! dry while playing is a rebuffer, which lasts until `resume` seconds are buffered ahead of the
//! playhead again (or the rest of the video is).
//!
//! Metrics ([`PlayerStats`]) and where they come from:
//! - **First-frame latency**: from `Player::new`'s `started` to the first frame (XLINK's
//!   first-video-frame acceleration targets it; Pscheduler §V-C reports start-up among QoE).
//! - **Rebuffer count**: the number of times the buffer ran dry while playing; this is Kondo et
//!   al.'s *buffer underflow* count (the number of underflow events at the video client buffer).
//! - **Rebuffer ratio**: stalled time ÷ play time, the rebuffering rate of Pscheduler §V-C
//!   (Douyin's QoE indicator, reduced by 30% in its A/B test).
//! - **Stall percentage**: stalled time ÷ (play time + stalled time) × 100, the share of the
//!   viewing session spent frozen after the first frame.
//! - **Jump-to-CDN rate**: segments moved to the CDN ÷ segments (Pscheduler §V-C4 "video jump
//!   rate": jump duration ÷ total playback time; with equal-length segments, as in Douyin's PCDN
//!   (§III-A, 10 s by default), the two are the same ratio of video time). The rule
//!   ([`JumpToCdn`]): rebuffering, or a buffer below a threshold, moves the rest of the segment
//!   being downloaded to the CDN origin, each segment at most once.
//! - **GOP pauses** (MPRD §V, Fig. 8(a)): a pause is counted when a GOP (one second in MPRD) is
//!   not completely delivered at the instant it is due to be played, i.e. when the playhead,
//!   while playing, reaches the GOP's first frame; reported as a count and as a percentage of
//!   the video's GOPs. A GOP that starts exactly where a stall froze the playhead is due when
//!   playback resumes. This is stricter than the rebuffer count: a GOP that completes while its
//!   first frames play is a pause for MPRD but not a stall.
//! - **Picture discard** (Kondo et al., INTERNET 2021: "frames discarded by the video decoder"): the
//!   video is `fps` frames a second; a frame is discarded when its bytes are not all in order at
//!   the instant the playhead reaches its first byte (an incomplete frame is dropped, not
//!   waited for). Judged like GOP pauses, at frame granularity.

use std::collections::BTreeMap;

use crate::time::{Duration, Instant};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// A constant-bitrate video, as the player and the scheduler see it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VideoSpec {
    /// Encoding rate in bit/s.
    pub bitrate_bps: u64,
    /// Length of the video.
    pub duration: Duration,
    /// Segment length (Douyin's PCDN downloads 10 s segments, Pscheduler §III-A).
    pub segment: Duration,
    /// GOP length (MPRD's videos: one keyframe per second).
    pub gop: Duration,
    /// Video buffered before the first frame is shown.
    pub startup: Duration,
    /// Video buffered ahead of the playhead before a stalled playback resumes.
    pub resume: Duration,
    /// Frames per second, for picture discard (30 unless given).
    #[serde(default = "default_fps")]
    pub fps: u32,
}

/// Frame rate of a [`VideoSpec`] that does not name one.
pub const DEFAULT_FPS: u32 = 30;

fn default_fps() -> u32 {
    DEFAULT_FPS
}

/// A player attached to a download (`DownloadConfig::video`): the video, and optionally
/// Douyin's jump-to-CDN rule.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlayerConfig {
    pub spec: VideoSpec,
    pub jump_to_cdn: Option<JumpToCdn>,
}

/// Why a [`VideoSpec`] was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("video spec: `{field}` must be greater than zero")]
    Zero { field: &'static str },
    #[error("video spec: {bitrate_bps} bit/s for {duration:?} is more than u64::MAX bytes")]
    TooLarge { bitrate_bps: u64, duration: Duration },
}

impl VideoSpec {
    /// A video with the defaults: 10 s segments, 1 s GOPs, 1 s of video to start and to resume,
    /// 30 frames a second.
    pub fn new(bitrate_bps: u64, duration: Duration) -> VideoSpec {
        VideoSpec {
            bitrate_bps,
            duration,
            segment: Duration::from_secs(10),
            gop: Duration::from_secs(1),
            startup: Duration::from_secs(1),
            resume: Duration::from_secs(1),
            fps: DEFAULT_FPS,
        }
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), SpecError> {
        let fields = [
            ("bitrate_bps", self.bitrate_bps == 0),
            ("duration", self.duration.is_zero()),
            ("segment", self.segment.is_zero()),
            ("gop", self.gop.is_zero()),
            ("startup", self.startup.is_zero()),
            ("resume", self.resume.is_zero()),
            ("fps", self.fps == 0),
        ];
        if let Some((field, _)) = fields.iter().find(|(_, zero)| *zero) {
            return Err(SpecError::Zero { field });
        }
        let bits = u128::from(self.bitrate_bps) * self.duration.as_nanos();
        if bits.div_ceil(8 * NANOS_PER_SEC) > u128::from(u64::MAX) || self.duration.as_nanos() > u128::from(u64::MAX) {
            return Err(SpecError::TooLarge {
                bitrate_bps: self.bitrate_bps,
                duration: self.duration,
            });
        }
        Ok(())
    }

    /// Size of the whole video in bytes.
    pub fn total_bytes(&self) -> u64 {
        self.bytes_at(self.duration)
    }

    /// Bytes needed to play up to video time `t` (rounded up, so `bytes_at(duration)` is the size).
    pub fn bytes_at(&self, t: Duration) -> u64 {
        let t = t.min(self.duration).as_nanos();
        let bytes = (u128::from(self.bitrate_bps) * t).div_ceil(8 * NANOS_PER_SEC);
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// Video time held by the first `bytes` bytes (rounded down, at most the duration).
    pub fn time_of(&self, bytes: u64) -> Duration {
        if bytes >= self.total_bytes() {
            return self.duration;
        }
        let nanos = u128::from(bytes) * 8 * NANOS_PER_SEC / u128::from(self.bitrate_bps);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).min(self.duration)
    }

    /// Number of segments (the last may be shorter).
    pub fn segments(&self) -> u64 {
        count_slices(self.duration, self.segment)
    }

    /// Number of GOPs (the last may be shorter).
    pub fn gops(&self) -> u64 {
        count_slices(self.duration, self.gop)
    }

    /// The segment holding byte `offset`, or `None` past the end.
    pub fn segment_of(&self, offset: u64) -> Option<u64> {
        if offset >= self.total_bytes() {
            return None;
        }
        let index = self.time_of(offset).as_nanos() / self.segment.as_nanos();
        // `time_of` rounds down, so a byte is never placed in a later segment than its own.
        let mut index = u64::try_from(index).unwrap_or(u64::MAX);
        while index > 0 && self.segment_bytes(index).start > offset {
            index -= 1;
        }
        while self.segment_bytes(index).end <= offset {
            index += 1;
        }
        Some(index)
    }

    /// Byte range `[start, end)` of segment `index`.
    pub fn segment_bytes(&self, index: u64) -> std::ops::Range<u64> {
        self.bytes_at(slice_start(self.segment, index))..self.bytes_at(slice_start(self.segment, index + 1))
    }

    /// Byte range `[start, end)` of GOP `index`.
    pub fn gop_bytes(&self, index: u64) -> std::ops::Range<u64> {
        self.bytes_at(slice_start(self.gop, index))..self.bytes_at(slice_start(self.gop, index + 1))
    }

    /// Number of frames (the last may be shorter).
    pub fn frames(&self) -> u64 {
        u64::try_from((self.duration.as_nanos() * u128::from(self.fps)).div_ceil(NANOS_PER_SEC)).unwrap_or(u64::MAX)
    }

    /// Video time at which frame `index` starts (frame times are exact to the nanosecond
    /// below, so a frame never starts later than its true time).
    pub fn frame_start(&self, index: u64) -> Duration {
        let nanos = u128::from(index) * NANOS_PER_SEC / u128::from(self.fps.max(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX)).min(self.duration)
    }

    /// Byte range `[start, end)` of frame `index`.
    pub fn frame_bytes(&self, index: u64) -> std::ops::Range<u64> {
        self.bytes_at(self.frame_start(index))..self.bytes_at(self.frame_start(index + 1))
    }

    /// The first frame that starts at or after video time `t` (`frames()` past the last).
    pub fn first_frame_from(&self, t: Duration) -> u64 {
        let fps = u128::from(self.fps.max(1));
        let guess = u64::try_from((t.as_nanos() * fps).div_ceil(NANOS_PER_SEC)).unwrap_or(u64::MAX);
        // `frame_start` rounds down to the nanosecond: step to the exact answer.
        let mut index = guess.min(self.frames());
        while index > 0 && self.frame_start(index - 1) >= t {
            index -= 1;
        }
        while index < self.frames() && self.frame_start(index) < t {
            index += 1;
        }
        index
    }
}

fn count_slices(total: Duration, slice: Duration) -> u64 {
    u64::try_from(total.as_nanos().div_ceil(slice.as_nanos())).unwrap_or(u64::MAX)
}

/// Start of slice `index` of length `slice`, saturating far past any real video.
fn slice_start(slice: Duration, index: u64) -> Duration {
    let nanos = slice.as_nanos().saturating_mul(u128::from(index));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Douyin's fallback rule (Pscheduler §III-A, §V-C4): once playing, rebuffering or a buffer below
/// `buffer_below` moves the rest of the segment being downloaded to the CDN origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JumpToCdn {
    pub buffer_below: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Waiting,
    /// Playing since `since`, when the playhead was at `position`.
    Playing {
        since: Instant,
        position: Duration,
    },
    /// Frozen at `position` since `since`.
    Stalled {
        since: Instant,
        position: Duration,
    },
    Finished {
        at: Instant,
    },
}

/// QoE of one playback, as of the player's latest input (definitions in the module doc).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct PlayerStats {
    /// From `started` to the first frame; `None` before it.
    #[serde(serialize_with = "secs_opt")]
    pub first_frame_latency: Option<Duration>,
    /// Times the buffer ran dry while playing (Kondo et al.'s buffer underflows).
    pub rebuffer_count: u64,
    /// Time spent rebuffering (start-up excluded).
    #[serde(serialize_with = "secs")]
    pub stalled_time: Duration,
    /// Time spent playing.
    #[serde(serialize_with = "secs")]
    pub play_time: Duration,
    /// `stalled_time / play_time`; 0 before any play.
    pub rebuffer_ratio: f64,
    /// `stalled_time / (play_time + stalled_time) × 100`.
    pub stall_percentage: f64,
    pub segments: u64,
    pub segments_jumped: u64,
    /// `segments_jumped / segments`.
    pub jump_to_cdn_rate: f64,
    pub gops: u64,
    /// GOPs whose due instant has passed (the rest are not judged yet).
    pub gops_judged: u64,
    /// GOPs not completely delivered when due (MPRD).
    pub gop_pauses: u64,
    /// `gop_pauses / gops × 100`.
    pub gop_pause_percentage: f64,
    pub frames: u64,
    /// Frames whose play instant has passed.
    pub frames_judged: u64,
    /// Frames not completely delivered when played (Kondo et al.'s picture discard).
    pub frames_discarded: u64,
    /// `frames_discarded / frames × 100`.
    pub frame_discard_percentage: f64,
    pub finished: bool,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn secs_opt<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// The player of one video: feed it the download's in-order byte count and the time.
#[derive(Clone, Debug)]
pub struct Player {
    spec: VideoSpec,
    total_bytes: u64,
    started: Instant,
    /// Latest input instant; the state is settled up to (not including) it.
    latest: Instant,
    delivered: u64,
    state: State,
    first_frame: Option<Instant>,
    rebuffers: u64,
    /// Stalled and played time of the periods already closed.
    stalled_closed: Duration,
    played_closed: Duration,
    /// Next GOP to judge; all before it are judged.
    next_gop: u64,
    gop_pauses: u64,
    /// Next frame to judge; all before it are judged.
    next_frame: u64,
    frames_discarded: u64,
    jump: Option<JumpToCdn>,
    /// Segments moved to the CDN, and when.
    jumped: BTreeMap<u64, Instant>,
}

impl Player {
    /// A player whose viewer pressed play at `started`.
    pub fn new(spec: VideoSpec, started: Instant) -> Result<Player, SpecError> {
        spec.validate()?;
        Ok(Player {
            total_bytes: spec.total_bytes(),
            spec,
            started,
            latest: started,
            delivered: 0,
            state: State::Waiting,
            first_frame: None,
            rebuffers: 0,
            stalled_closed: Duration::ZERO,
            played_closed: Duration::ZERO,
            next_gop: 0,
            gop_pauses: 0,
            next_frame: 0,
            frames_discarded: 0,
            jump: None,
            jumped: BTreeMap::new(),
        })
    }

    /// Enables Douyin's jump-to-CDN rule.
    pub fn with_jump_to_cdn(mut self, rule: JumpToCdn) -> Player {
        self.jump = Some(rule);
        self
    }

    pub fn spec(&self) -> &VideoSpec {
        &self.spec
    }

    /// The download's in-order byte count reached `in_order_bytes_total` at `now`. A smaller
    /// count than before is ignored (the count is monotonic); bytes past the video are ignored.
    pub fn on_delivered(&mut self, now: Instant, in_order_bytes_total: u64) {
        self.advance(now);
        let now = self.latest;
        self.delivered = self.delivered.max(in_order_bytes_total.min(self.total_bytes));
        let all_delivered = self.delivered >= self.total_bytes;
        let buffered_end = self.buffered_end();
        match self.state {
            State::Waiting if all_delivered || buffered_end >= self.spec.startup => {
                self.first_frame = Some(now);
                self.state = State::Playing {
                    since: now,
                    position: Duration::ZERO,
                };
            }
            State::Stalled { since, position } if all_delivered || buffered_end >= position + self.spec.resume => {
                self.stalled_closed += now - since;
                self.state = State::Playing { since: now, position };
            }
            _ => {}
        }
    }

    /// Moves time forward to `now`: the playhead advances, stalls and the end of the video
    /// happen where they fall. An earlier `now` than the latest input is treated as the latest.
    pub fn advance(&mut self, now: Instant) {
        let now = now.max(self.latest);
        self.latest = now;
        let State::Playing { since, position } = self.state else {
            return;
        };
        let buffered_end = self.buffered_end();
        let stop_time = since + (buffered_end - position);
        // MPRD's pauses: judge each GOP whose first frame the playhead reached before `now`.
        while self.next_gop < self.spec.gops() {
            let gop_start = slice_start(self.spec.gop, self.next_gop);
            let due = since + (gop_start - position);
            if gop_start >= buffered_end || due >= now {
                break;
            }
            if self.delivered < self.spec.gop_bytes(self.next_gop).end {
                self.gop_pauses += 1;
            }
            self.next_gop += 1;
        }
        // Kondo's picture discard: the same judgement for every frame.
        let frames = self.spec.frames();
        while self.next_frame < frames {
            let frame_start = self.spec.frame_start(self.next_frame);
            let due = since + (frame_start - position);
            if frame_start >= buffered_end || due >= now {
                break;
            }
            if self.delivered < self.spec.frame_bytes(self.next_frame).end {
                self.frames_discarded += 1;
            }
            self.next_frame += 1;
        }
        if buffered_end >= self.spec.duration {
            if stop_time <= now {
                self.played_closed += stop_time - since;
                self.state = State::Finished { at: stop_time };
            }
        } else if stop_time < now {
            self.played_closed += stop_time - since;
            self.rebuffers += 1;
            self.state = State::Stalled {
                since: stop_time,
                position: buffered_end,
            };
        }
    }

    /// Video time held by the in-order bytes.
    fn buffered_end(&self) -> Duration {
        self.spec.time_of(self.delivered)
    }

    /// The playhead at `now` (video time), clamped to what is buffered.
    pub fn position(&self, now: Instant) -> Duration {
        match self.state {
            State::Waiting => Duration::ZERO,
            State::Playing { since, position } => (position + (now - since)).min(self.buffered_end()),
            State::Stalled { position, .. } => position,
            State::Finished { .. } => self.spec.duration,
        }
    }

    /// Seconds of video buffered ahead of the playhead at `now` (what QoE-aware schedulers read).
    pub fn buffer_level(&self, now: Instant) -> Duration {
        self.buffered_end().saturating_sub(self.position(now))
    }

    /// When byte `byte_offset` will be played. While playing, from the current play period;
    /// before the first frame or while stalled, the earliest it could be needed: as if playback
    /// (re)started at the latest input. `None` for bytes the playhead had passed at the latest
    /// input, bytes past the video, and once finished.
    pub fn play_deadline(&self, byte_offset: u64) -> Option<Instant> {
        if byte_offset >= self.total_bytes {
            return None;
        }
        let byte_time = self.spec.time_of(byte_offset);
        let (from, position) = match self.state {
            State::Waiting => (self.latest, Duration::ZERO),
            State::Playing { since, position } => (since, position),
            State::Stalled { position, .. } => (self.latest, position),
            State::Finished { .. } => return None,
        };
        if byte_time < self.position(self.latest) {
            return None;
        }
        Some(from + (byte_time - position))
    }

    /// While playing, the instant the playhead will reach the end of what is buffered if
    /// nothing more arrives (a stall, or the end of the video); `None` otherwise.
    pub fn runs_dry_at(&self) -> Option<Instant> {
        match self.state {
            State::Playing { since, position } => Some(since + (self.buffered_end() - position)),
            _ => None,
        }
    }

    /// The jump-to-CDN rule, when enabled.
    pub fn jump_rule(&self) -> Option<JumpToCdn> {
        self.jump
    }

    /// While waiting for the first frame, the in-order byte count at which it shows
    /// (`startup` seconds of video, or the whole video if shorter); `None` once shown.
    pub fn first_frame_bytes(&self) -> Option<u64> {
        matches!(self.state, State::Waiting).then(|| self.spec.bytes_at(self.spec.startup))
    }

    /// Whether playback is frozen by a rebuffer (as of the latest input).
    pub fn is_stalled(&self) -> bool {
        matches!(self.state, State::Stalled { .. })
    }

    /// Whether the first frame has been shown.
    pub fn has_started(&self) -> bool {
        self.first_frame.is_some()
    }

    /// Whether the whole video has been played.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Finished { .. })
    }

    /// When the last frame was played, once finished.
    pub fn finished_at(&self) -> Option<Instant> {
        match self.state {
            State::Finished { at } => Some(at),
            _ => None,
        }
    }

    /// Douyin's fallback rule: after advancing to `now`, if the rule is enabled, playback has
    /// started, and the player is rebuffering or its buffer is below the threshold, returns the
    /// segment holding the first byte not yet delivered, so the caller fetches its rest from
    /// the CDN. Each segment is returned at most once; the jump is recorded.
    pub fn should_jump(&mut self, now: Instant) -> Option<u64> {
        self.advance(now);
        let rule = self.jump?;
        // Before the first frame every buffer is below the threshold: that is start-up, not a
        // PCDN failure, and jumping then would send every video to the CDN.
        let triggered = match self.state {
            State::Stalled { .. } => true,
            State::Playing { .. } => self.buffer_level(self.latest) < rule.buffer_below,
            State::Waiting | State::Finished { .. } => false,
        };
        if !triggered {
            return None;
        }
        let segment = self.spec.segment_of(self.delivered)?;
        if self.jumped.contains_key(&segment) {
            return None;
        }
        self.jumped.insert(segment, self.latest);
        Some(segment)
    }

    /// Segments moved to the CDN so far, in order.
    pub fn jumped_segments(&self) -> impl Iterator<Item = u64> + '_ {
        self.jumped.keys().copied()
    }

    /// Segments moved to the CDN so far, in order, each with the instant of its jump.
    pub fn jumps(&self) -> impl Iterator<Item = (u64, Instant)> + '_ {
        self.jumped.iter().map(|(&segment, &at)| (segment, at))
    }

    /// The metrics as of the latest input.
    pub fn stats(&self) -> PlayerStats {
        let (mut played, mut stalled) = (self.played_closed, self.stalled_closed);
        match self.state {
            State::Playing { since, position } => {
                played += (self.latest - since).min(self.buffered_end() - position);
            }
            State::Stalled { since, .. } => stalled += self.latest - since,
            State::Waiting | State::Finished { .. } => {}
        }
        let segments = self.spec.segments();
        let gops = self.spec.gops();
        let frames = self.spec.frames();
        let ratio = |num: f64, den: f64| if den > 0.0 { num / den } else { 0.0 };
        PlayerStats {
            first_frame_latency: self.first_frame.map(|at| at - self.started),
            rebuffer_count: self.rebuffers,
            stalled_time: stalled,
            play_time: played,
            rebuffer_ratio: ratio(stalled.as_secs_f64(), played.as_secs_f64()),
            stall_percentage: 100.0 * ratio(stalled.as_secs_f64(), (played + stalled).as_secs_f64()),
            segments,
            segments_jumped: self.jumped.len() as u64,
            jump_to_cdn_rate: ratio(self.jumped.len() as f64, segments as f64),
            gops,
            gops_judged: self.next_gop,
            gop_pauses: self.gop_pauses,
            gop_pause_percentage: 100.0 * ratio(self.gop_pauses as f64, gops as f64),
            frames,
            frames_judged: self.next_frame,
            frames_discarded: self.frames_discarded,
            frame_discard_percentage: 100.0 * ratio(self.frames_discarded as f64, frames as f64),
            finished: self.is_finished(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VideoSpec {
        // 8 Mbit/s: one byte is one microsecond of video.
        VideoSpec::new(8_000_000, Duration::from_secs(25))
    }

    #[test]
    fn the_first_frame_from_an_instant_starts_at_or_after_it() {
        let spec = VideoSpec::new(8_000_000, Duration::from_secs(2));
        // 30 frames a second: frame 20 starts at 0.666… s, rounded down to the nanosecond.
        let start = spec.frame_start(20);
        assert_eq!(spec.first_frame_from(Duration::ZERO), 0);
        assert_eq!(spec.first_frame_from(start), 20);
        assert_eq!(spec.first_frame_from(start + Duration::from_nanos(1)), 21);
        assert_eq!(spec.first_frame_from(start - Duration::from_nanos(1)), 20);
        assert_eq!(spec.first_frame_from(Duration::from_secs(2)), spec.frames());
    }

    #[test]
    fn bytes_and_video_time_convert_both_ways() {
        let s = spec();
        assert_eq!(s.total_bytes(), 25_000_000);
        assert_eq!(s.bytes_at(Duration::from_millis(1500)), 1_500_000);
        assert_eq!(s.time_of(1_500_000), Duration::from_millis(1500));
        assert_eq!(s.time_of(u64::MAX), s.duration);
        // An odd bitrate rounds bytes up and time down, so buffering `bytes_at(t)` covers `t`.
        let odd = VideoSpec::new(3, Duration::from_secs(1));
        assert_eq!(odd.total_bytes(), 1);
        assert_eq!(odd.time_of(0), Duration::ZERO);
        assert_eq!(odd.time_of(1), odd.duration);
    }

    #[test]
    fn segments_and_gops_split_the_video() {
        let s = spec();
        assert_eq!(s.segments(), 3);
        assert_eq!(s.gops(), 25);
        assert_eq!(s.segment_bytes(2), 20_000_000..25_000_000);
        assert_eq!(s.gop_bytes(24), 24_000_000..25_000_000);
        assert_eq!(s.segment_of(0), Some(0));
        assert_eq!(s.segment_of(9_999_999), Some(0));
        assert_eq!(s.segment_of(10_000_000), Some(1));
        assert_eq!(s.segment_of(24_999_999), Some(2));
        assert_eq!(s.segment_of(25_000_000), None);
    }

    #[test]
    fn segment_of_agrees_with_segment_bytes_at_an_odd_bitrate() {
        let mut s = VideoSpec::new(7_777_777, Duration::from_millis(3333));
        s.segment = Duration::from_millis(333);
        for index in 0..s.segments() {
            let range = s.segment_bytes(index);
            assert_eq!(s.segment_of(range.start), Some(index));
            assert_eq!(s.segment_of(range.end - 1), Some(index));
        }
    }

    #[test]
    fn validation_names_the_bad_field() {
        let mut s = spec();
        s.gop = Duration::ZERO;
        assert_eq!(s.validate(), Err(SpecError::Zero { field: "gop" }));
        let huge = VideoSpec::new(u64::MAX, Duration::from_secs(100));
        assert!(matches!(huge.validate(), Err(SpecError::TooLarge { .. })));
        assert!(spec().validate().is_ok());
    }

    #[test]
    fn a_whole_short_video_starts_without_the_startup_amount() {
        let s = VideoSpec::new(8_000_000, Duration::from_millis(500));
        let mut p = Player::new(s, Instant::ZERO).unwrap();
        p.on_delivered(Instant::from_nanos(7), 500_000);
        assert_eq!(p.stats().first_frame_latency, Some(Duration::from_nanos(7)));
        p.advance(Instant::from_nanos(7) + Duration::from_millis(500));
        assert!(p.is_finished());
        assert_eq!(p.stats().gop_pauses, 0);
    }
}
