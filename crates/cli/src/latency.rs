//! Latency summaries for the benchmarks' reports: percentiles of a run's
//! op latencies and a histogram in 1-2-5 buckets, as text and JSON.
//!
//! Pure functions over a sorted list of latencies; this module must never
//! time anything itself.

/// Upper bounds (milliseconds) of the histogram's buckets, 1-2-5 per
/// decade; a last bucket takes whatever is above the largest.
const BOUNDS_MS: [f64; 19] = [
    0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4,
    2e4, 5e4,
];

/// The latency at fraction `p` (0..=1) of `sorted` (ascending), 0 if empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(
        sorted.windows(2).all(|w| w[0] <= w[1]),
        "latencies unsorted"
    );
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
    sorted.get(i).copied().unwrap_or(0.0)
}

/// One bucket: ops with latency above the previous bucket's bound and at
/// most `le_ms` (`None`: above every bound).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Bucket {
    /// The bucket's upper bound, milliseconds (`None`: the open last one).
    pub le_ms: Option<f64>,
    /// Ops in the bucket.
    pub count: u64,
}

/// The histogram of `sorted_ms` (ascending, milliseconds): the buckets
/// from the first that holds an op to the last that does.
pub fn histogram(sorted_ms: &[f64]) -> Vec<Bucket> {
    debug_assert!(
        sorted_ms.windows(2).all(|w| w[0] <= w[1]),
        "latencies unsorted"
    );
    let mut out: Vec<Bucket> = BOUNDS_MS
        .iter()
        .map(|&b| Some(b))
        .chain([None])
        .map(|le_ms| Bucket { le_ms, count: 0 })
        .collect();
    for &l in sorted_ms {
        debug_assert!(l >= 0.0, "a latency of {l} ms");
        let i = BOUNDS_MS.partition_point(|&b| b < l);
        out[i].count += 1;
    }
    let first = out.iter().position(|b| b.count > 0);
    let last = out.iter().rposition(|b| b.count > 0);
    match (first, last) {
        (Some(f), Some(l)) => out.drain(f..=l).collect(),
        _ => Vec::new(),
    }
}

/// The histogram as text lines under a heading: bound, count, share and
/// running share.
pub fn histogram_text(buckets: &[Bucket]) -> Vec<String> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let mut seen = 0;
    let head = format!(
        "  {:>12} {:>10} {:>7} {:>8}",
        "latency", "ops", "share", "so far"
    );
    std::iter::once(head)
        .chain(buckets.iter().map(|b| {
            seen += b.count;
            let bound = match b.le_ms {
                Some(le) => format!("<= {le}"),
                None => format!("> {}", BOUNDS_MS[BOUNDS_MS.len() - 1]),
            };
            let share = |n: u64| 100.0 * n as f64 / total.max(1) as f64;
            format!(
                "  {bound:>9} ms {:>10} {:>6.2}% {:>7.2}%",
                b.count,
                share(b.count),
                share(seen)
            )
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_each_latency_once_at_its_bound() {
        // A latency on a bound falls in that bound's bucket; the range
        // printed runs from the first bucket used to the last.
        let lat = [0.3, 0.5, 0.51, 0.9, 3.0, 7.0, 7.5];
        let h = histogram(&lat);
        let got: Vec<(Option<f64>, u64)> = h.iter().map(|b| (b.le_ms, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (Some(0.5), 2),
                (Some(1.0), 2),
                (Some(2.0), 0),
                (Some(5.0), 1),
                (Some(10.0), 2)
            ]
        );
        assert_eq!(h.iter().map(|b| b.count).sum::<u64>(), lat.len() as u64);
        // Beyond the largest bound: the open last bucket.
        let h = histogram(&[1e6]);
        assert_eq!(
            h,
            vec![Bucket {
                le_ms: None,
                count: 1
            }]
        );
        assert!(histogram(&[]).is_empty());
        let text = histogram_text(&histogram(&lat));
        assert_eq!(text.len(), 6, "a heading and a line per bucket");
        assert!(text[5].trim_end().ends_with("100.00%"), "{}", text[5]);
    }

    #[test]
    fn percentiles_pick_from_the_sorted_run() {
        let lat: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&lat, 0.5), 51.0);
        assert_eq!(percentile(&lat, 0.99), 100.0);
        assert_eq!(percentile(&lat, 1.0), 100.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
