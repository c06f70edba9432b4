//! Percentiles of a set of latency samples (nearest rank, on the sorted values: with 500
//! samples p99 is the 495th, with fewer than 100 it is the maximum).

use std::time::Duration;

/// The figures the report shows for one case.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Samples taken.
    pub count: usize,
    /// Median, in ms.
    pub p50_ms: f64,
    /// 99th percentile, in ms.
    pub p99_ms: f64,
    /// Slowest, in ms.
    pub max_ms: f64,
}

impl Summary {
    /// Summarises `walls` (any order); all zero when empty.
    pub fn of(walls: &[Duration]) -> Summary {
        let mut ms: Vec<f64> = walls.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Summary {
            count: ms.len(),
            p50_ms: percentile(&ms, 50.0),
            p99_ms: percentile(&ms, 99.0),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }

    /// This p50 ÷ `base`'s p50 (0 when `base` has no samples): an arm against the arm it
    /// is compared with.
    pub fn p50_over(&self, base: &Summary) -> f64 {
        if base.p50_ms > 0.0 {
            self.p50_ms / base.p50_ms
        } else {
            0.0
        }
    }

    /// One Markdown table of arms: `| arm | <count> | p50 ms | p99 ms | max ms |`, a row per
    /// `(name, summary)`; `count` names what was counted (samples, pushes).
    pub fn table(count: &str, rows: &[(&str, &Summary)]) -> String {
        let mut md =
            format!("| arm | {count} | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|\n");
        for (name, s) in rows {
            md.push_str(&format!(
                "| {name} | {} | {:.2} | {:.2} | {:.2} |\n",
                s.count, s.p50_ms, s.p99_ms, s.max_ms
            ));
        }
        md
    }
}

/// The nearest-rank percentile `p` (0–100) of sorted values; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v[..10], 99.0), 10.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        let s = Summary::of(&[Duration::from_millis(3), Duration::from_millis(1)]);
        assert_eq!((s.count, s.p50_ms, s.max_ms), (2, 1.0, 3.0));
    }
}
