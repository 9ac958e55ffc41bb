//! The arithmetic of the report: medians, target/reference ratios, and the regression gate's
//! decision. Kept apart from I/O so that it is unit-tested exactly.

use crate::compare::workloads::Better;

/// Median of the finite values; the mean of the middle two for an even count.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// The `q`-quantile (0 <= q <= 1) of the finite values by the nearest-rank rule: the smallest
/// value with at least `q` of the values at or below it (p99 of 100 values is the 99th smallest).
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() || !(0.0..=1.0).contains(&q) {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = (q * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// target / reference; absent when either side failed or the reference is zero.
pub fn ratio(target: Option<f64>, reference: Option<f64>) -> Option<f64> {
    match (target, reference) {
        (Some(t), Some(r)) if r != 0.0 && t.is_finite() && r.is_finite() => Some(t / r),
        _ => None,
    }
}

/// How much worse `run` is than `baseline`, as a factor >= 0 where 1.0 means "the same" and 1.2
/// means "20% worse", taking the unit's good direction into account.
pub fn regression(baseline: f64, run: f64, better: Better) -> f64 {
    match better {
        Better::Lower => run / baseline,
        Better::Higher => baseline / run,
    }
}

/// The gate's decision: pass while the regression factor stays within `threshold`.
pub fn gate_passes(baseline: f64, run: f64, better: Better, threshold: f64) -> bool {
    let factor = regression(baseline, run, better);
    factor.is_finite() && factor <= threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even_and_non_finite() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        // Fewer than 100 samples: p99 is the largest.
        assert_eq!(percentile(&[5.0, 1.0, 3.0], 0.99), Some(5.0));
        assert_eq!(percentile(&[2.0, f64::NAN], 0.5), Some(2.0));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[1.0], 1.5), None);
    }

    #[test]
    fn ratio_is_target_over_reference() {
        assert_eq!(ratio(Some(2.0), Some(4.0)), Some(0.5));
        assert_eq!(ratio(Some(2.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }

    #[test]
    fn gate_respects_direction_and_threshold() {
        // Time per op: 1.0 -> 1.1 is 10% worse.
        assert!(gate_passes(1.0, 1.1, Better::Lower, 1.2));
        assert!(!gate_passes(1.0, 1.3, Better::Lower, 1.2));
        assert!(gate_passes(1.0, 0.5, Better::Lower, 1.0));
        // Throughput: 2.0 -> 1.0 is twice as bad.
        assert!(!gate_passes(2.0, 1.0, Better::Higher, 1.5));
        assert!(gate_passes(2.0, 3.0, Better::Higher, 1.0));
        assert!(!gate_passes(0.0, 1.0, Better::Lower, 10.0));
    }
}
