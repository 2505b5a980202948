//! Timing shared by the learning benches.

use std::time::Instant;

/// The best per-iteration time (seconds) of `rounds` runs of `iters` calls.
pub fn best_of<F: FnMut()>(rounds: usize, iters: usize, mut f: F) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / iters as f64);
    }
    best
}
