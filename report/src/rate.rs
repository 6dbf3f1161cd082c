//! Rates from a timeline's cumulative counts: elements per second over a moving window.
//!
//! A pipeline that ends in `batch` hands out its elements in bursts (64 at a time, a second
//! apart), so the rate between neighbouring samples jumps between zero and a spike. The
//! rate is taken over a window instead: at least three of the run's output steps (the
//! median time between samples where its output grew, times three), at least a
//! fiftieth of the run and at least one sampling interval.

use sluice_core::observe::Sample;

use crate::run::Run;

/// The window the rates of `run` are averaged over, in seconds.
pub(crate) fn window(run: &Run) -> f64 {
    let samples = run.samples();
    let interval = run.timeline.as_ref().map_or(0.0, |t| t.interval_seconds);
    let mut last_change = 0.0;
    let mut gaps = Vec::new();
    let mut prev = 0;
    for s in samples {
        if s.elements > prev {
            gaps.push(s.t - last_change);
            last_change = s.t;
            prev = s.elements;
        }
    }
    gaps.sort_by(f64::total_cmp);
    let median = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
    let span = samples.last().map_or(0.0, |s| s.t);
    (3.0 * median).max(span / 50.0).max(interval)
}

/// `value` per second at each sample, over the `window` seconds before it (from the
/// start, at 0, while the run is younger than the window). Samples `value` says nothing
/// of are left out.
pub(crate) fn rates(
    samples: &[Sample],
    window: f64,
    value: impl Fn(&Sample) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let points: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
        .chain(samples.iter().filter_map(|s| value(s).map(|v| (s.t, v))))
        .collect();
    let mut out = Vec::new();
    let mut j = 0;
    for i in 1..points.len() {
        let (t, v) = points[i];
        // The latest point at least `window` before this one.
        while j + 1 < i && points[j + 1].0 <= t - window {
            j += 1;
        }
        let (t0, v0) = points[j];
        if t - t0 > 1e-9 {
            out.push((t, ((v - v0) / (t - t0)).max(0.0)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, elements: u64) -> Sample {
        Sample {
            t,
            epoch: 0,
            elements,
            records: None,
            buffered_bytes: 0,
            bottleneck: None,
            stages: vec![],
            knobs: vec![],
        }
    }

    #[test]
    fn bursts_are_averaged_over_three_steps() {
        // 64 elements every second, sampled every 0.1 s.
        let samples: Vec<Sample> = (1..=100)
            .map(|k| sample(k as f64 * 0.1, (k / 10) as u64 * 64))
            .collect();
        let run = Run {
            timeline: Some(sluice_core::observe::TimelineData {
                interval_seconds: 0.1,
                samples: samples.clone(),
                ..Default::default()
            }),
            ..Run::default()
        };
        let w = window(&run);
        assert!((w - 3.0).abs() < 1e-6, "{w}");
        let r = rates(&samples, w, |s| Some(s.elements as f64));
        assert_eq!(r.len(), 100);
        // After the first window, the rate stays near 64/s.
        assert!(
            r[40..].iter().all(|(_, v)| (*v - 64.0).abs() < 22.0),
            "{r:?}"
        );
        // Between neighbouring samples it would be 0 or 640.
        let raw = rates(&samples, 0.0, |s| Some(s.elements as f64));
        assert!(raw.iter().any(|(_, v)| *v > 600.0));
    }
}
