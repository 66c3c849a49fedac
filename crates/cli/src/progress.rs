//! Progress of a long command on stderr: a bar on a terminal, and otherwise (a log file, CI, a
//! pipe) one plain line every few seconds, so that a run of minutes is never silent.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a plain progress line is printed when stderr is not a terminal: often enough to show
/// the run is alive, rarely enough that a 40-minute run writes a few hundred lines.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Counts finished units of work (runs, videos) out of a known total.
pub struct Progress {
    bar: ProgressBar,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    printer: Option<JoinHandle<()>>,
}

impl Progress {
    /// Progress over `total` `units` (e.g. "runs") of the work called `what`. `quiet`: nothing
    /// at all (machine-readable output on a terminal's stderr is still fine, but asked away).
    pub fn new(what: &str, total: u64, units: &'static str, quiet: bool) -> Progress {
        if !quiet && !std::io::stderr().is_terminal() {
            return Progress::plain(what, total, units, Box::new(std::io::stderr()), PLAIN_EVERY);
        }
        Progress::bar(what, total, units, quiet)
    }

    /// Plain lines to `out` every `every`.
    fn plain(what: &str, total: u64, units: &'static str, mut out: Box<dyn Write + Send>, every: Duration) -> Progress {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (what, done_by_printer, stop_printer) = (what.to_owned(), Arc::clone(&done), Arc::clone(&stop));
        let printer = std::thread::spawn(move || {
            plain_lines(&what, total, units, &done_by_printer, &stop_printer, every, &mut out);
        });
        Progress {
            bar: ProgressBar::hidden(),
            done,
            stop,
            printer: Some(printer),
        }
    }

    /// A bar on stderr (hidden if `quiet`).
    fn bar(what: &str, total: u64, units: &'static str, quiet: bool) -> Progress {
        let done = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        if quiet {
            return Progress {
                bar: ProgressBar::hidden(),
                done,
                stop,
                printer: None,
            };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "[{{bar:30}}] {{pos}}/{{len}} {units}, {{elapsed}} (eta {{eta}}) {{wide_msg}}"
            ))
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_message(what.to_owned());
        Progress {
            bar,
            done,
            stop,
            printer: None,
        }
    }

    /// One more unit done.
    pub fn inc(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.bar.inc(1);
    }

    /// `done` units done so far (work measured in a quantity, e.g. simulated seconds).
    pub fn set(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
        self.bar.set_position(done);
    }

    /// What the bar says beside its count (the unit under way); plain lines leave it out.
    pub fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }

    /// Clears the bar, or stops the plain lines.
    pub fn finish(mut self) {
        self.stop_printer();
        self.bar.finish_and_clear();
    }

    fn stop_printer(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(printer) = self.printer.take() {
            printer.thread().unpark();
            let _ = printer.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_printer();
    }
}

/// `what: 12/40 runs, 1m05s elapsed, about 2m30s left`, every `every` until stopped.
fn plain_lines(
    what: &str,
    total: u64,
    units: &str,
    done: &AtomicU64,
    stop: &AtomicBool,
    every: Duration,
    out: &mut dyn Write,
) {
    let start = Instant::now();
    let mut next = start + every;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::park_timeout(next - now);
            continue;
        }
        next += every;
        let _ = writeln!(
            out,
            "{}",
            plain_line(what, done.load(Ordering::Relaxed), total, units, now - start)
        );
    }
}

fn plain_line(what: &str, done: u64, total: u64, units: &str, elapsed: Duration) -> String {
    let left = if done == 0 || done >= total {
        String::new()
    } else {
        let rest = elapsed.mul_f64((total - done) as f64 / done as f64);
        format!(", about {} left", clock(rest))
    };
    format!("{what}: {done}/{total} {units}, {} elapsed{left}", clock(elapsed))
}

/// `1h02m03s`, `2m05s`, `7s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_line_gives_the_count_the_time_and_what_is_left() {
        let line = plain_line("kondo-c", 10, 40, "runs", Duration::from_secs(65));
        assert_eq!(line, "kondo-c: 10/40 runs, 1m05s elapsed, about 3m15s left");
        assert_eq!(
            plain_line("x", 0, 4, "runs", Duration::from_secs(3)),
            "x: 0/4 runs, 3s elapsed"
        );
        assert_eq!(clock(Duration::from_secs(3723)), "1h02m03s");
    }

    /// A `Write` whose bytes a test reads while the printer writes.
    #[derive(Clone, Default)]
    struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn work_measured_in_a_quantity_sets_its_count() {
        let out = Shared::default();
        let progress = Progress::plain(
            "fleet",
            360,
            "simulated s",
            Box::new(out.clone()),
            Duration::from_millis(20),
        );
        progress.set(120);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !String::from_utf8_lossy(&out.0.lock().unwrap()).contains("fleet: 120/360 simulated s") {
            assert!(Instant::now() < deadline, "no progress line in 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        progress.finish();
    }

    #[test]
    fn without_a_terminal_lines_come_while_work_goes_on_and_stop_with_it() {
        let out = Shared::default();
        let progress = Progress::plain("fig15", 3, "runs", Box::new(out.clone()), Duration::from_millis(20));
        progress.inc();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !String::from_utf8_lossy(&out.0.lock().unwrap()).contains("fig15: 1/3 runs") {
            assert!(Instant::now() < deadline, "no progress line in 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        progress.finish();
        let printed = out.0.lock().unwrap().len();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(out.0.lock().unwrap().len(), printed, "no line after finish");
    }
}
