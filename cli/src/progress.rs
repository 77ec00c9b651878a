//! Progress of long runs on stderr: steps done, steps per second and the
//! time left, redrawn in place at most a few times a second — only when
//! stderr is a terminal (nothing when piped or redirected) and only once a
//! run has lasted a second, so short runs print nothing.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    total: u64,
    start: Instant,
    last: Option<Instant>,
    enabled: bool,
}

const FIRST: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(250);

impl Progress {
    /// A progress line for `total` steps (silent unless stderr is a terminal).
    pub fn new(total: u64) -> Progress {
        Progress { total, start: Instant::now(), last: None, enabled: total > 1 && std::io::stderr().is_terminal() }
    }

    /// Records that `done` steps are finished.
    pub fn step(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        let elapsed = now - self.start;
        if elapsed < FIRST || self.last.is_some_and(|l| now - l < EVERY) {
            return;
        }
        self.last = Some(now);
        eprint!("\r\x1b[K{}", line(done, self.total, elapsed));
        let _ = std::io::stderr().flush();
    }

    /// Clears the line (if one was drawn).
    pub fn finish(&mut self) {
        if self.last.is_some() {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
        }
    }
}

/// `step 40/100  20.0 steps/s  ETA 3s`.
fn line(done: u64, total: u64, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    let eta = if rate > 0.0 { (total - done.min(total)) as f64 / rate } else { f64::INFINITY };
    let eta = if eta.is_finite() { format!("{:.0}s", eta.ceil()) } else { "?".into() };
    format!("step {done}/{total}  {rate:.1} steps/s  ETA {eta}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rate_and_eta() {
        assert_eq!(line(40, 100, Duration::from_secs(2)), "step 40/100  20.0 steps/s  ETA 3s");
        assert_eq!(line(0, 10, Duration::from_secs(2)), "step 0/10  0.0 steps/s  ETA ?");
        assert_eq!(line(10, 10, Duration::from_secs(1)), "step 10/10  10.0 steps/s  ETA 0s");
    }
}
