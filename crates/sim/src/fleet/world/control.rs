//! The fleet's control loop inside the world: placement rounds and the fills they start, and
//! the timeline's windows.

use super::{Client, FleetWorld, Timer, held_videos};
use crate::fleet::placement::{self, DeviceState};
use crate::fleet::{FleetError, Sample};
use pcdn_core::time::Instant;
use std::cmp::Reverse;

impl FleetWorld {
    /// Device `device` starts filling its cache with `video`, from the servers a lookup lists
    /// (as `pcdn serve --cache-size` does), over its own downstream line.
    pub(super) fn start_fill(&mut self, device: usize, video: usize) -> Result<(), FleetError> {
        let index = self.viewers.len();
        self.viewers.push(None);
        self.filling[device - 1].insert(video);
        let sources = self.lookup(video, Some(device));
        let down = self.servers[device].down;
        self.connect(index, video, sources, down, &[], Client::Fill { device })
    }

    /// Closes a timeline window.
    pub(super) fn sample(&mut self) {
        let now = self.now;
        let since = self.timeline.last().map_or(0.0, |s| s.t_s);
        let window_s = (now - Instant::ZERO).as_secs_f64() - since;
        if window_s <= 0.0 {
            return;
        }
        let capacity_bits: f64 = self.servers[1..]
            .iter()
            .filter(|s| s.session.is_some())
            .map(|s| s.upload_bps * window_s)
            .sum();
        let (mut viewers, mut stalled) = (0, 0);
        for &v in &self.active {
            if let Some(node) = self.viewers[v].as_mut()
                && let Client::Viewer { .. } = node.client
            {
                viewers += 1;
                node.download.advance_player(now);
                stalled += usize::from(node.download.player().is_some_and(|p| p.is_stalled()));
            }
        }
        self.timeline.push(Sample {
            t_s: (now - Instant::ZERO).as_secs_f64(),
            origin_bytes: std::mem::take(&mut self.window_origin_bytes),
            edge_bytes: std::mem::take(&mut self.window_edge_bytes),
            edge_capacity_bytes: (capacity_bits / 8.0) as u64,
            viewers,
            stalled,
        });
    }

    /// A placement round: the engine assigns videos to devices; each live device evicts what
    /// it is no longer assigned and starts filling what it lacks.
    pub(super) fn place(&mut self) -> Result<(), FleetError> {
        let Some(engine) = self.engine.as_deref() else {
            return Ok(());
        };
        let devices: Vec<DeviceState<'_>> = self.servers[1..]
            .iter()
            .zip(&self.spec.devices)
            .map(|(s, d)| DeviceState {
                name: &d.name,
                upload_bps: s.upload_bps as u64,
                load_bps: s.load_bps,
                cache_bytes: d.cache_bytes,
                alive: s.session.is_some(),
                holds: s
                    .session
                    .as_ref()
                    .map(|session| held_videos(session.source()))
                    .unwrap_or_default(),
            })
            .collect();
        let sizes: Vec<(u64, u64)> = self
            .spec
            .videos
            .iter()
            .map(|v| (v.total_bytes(), v.bitrate_bps))
            .collect();
        let (assignment, targets) = placement::round(
            engine,
            &self.spec.placement,
            &devices,
            &sizes,
            &self.demand,
            &self.assignment,
            self.now,
        );
        drop(devices);
        self.assignment = assignment;
        for (d, target) in targets.into_iter().enumerate() {
            let device = d + 1;
            let Some(session) = self.servers[device].session.as_mut() else {
                continue;
            };
            let shelf = session.source_mut();
            for video in 0..shelf.held.len() {
                if shelf.held[video] && !target.contains(&video) {
                    shelf.held[video] = false;
                }
            }
            let missing: Vec<usize> = target
                .into_iter()
                .filter(|&v| !shelf.held[v] && !self.filling[d].contains(&v))
                .collect();
            for video in missing {
                self.start_fill(device, video)?;
            }
        }
        self.timers
            .push(Reverse((self.now + self.spec.placement.interval, Timer::Placement)));
        Ok(())
    }
}
