//! The approximate quantile summary of Keras's `Discretization.adapt`: what `adapt`'s
//! `quantiles` analyzer runs, step for step as Keras 3 does it
//! (`keras/src/layers/preprocessing/discretization.py`: `summarize`, `merge_summaries`,
//! `compress_summary`, `get_bin_boundaries`), with NumPy's arithmetic (`np.interp`, its
//! `arange`, float32 cumulative sums), so that the boundaries are Keras's bit for bit for
//! the same values in the same batches.
//!
//! Keras summarizes each batch it is given (one `update_state` per batch) and merges the
//! batch's summary into the running one, compressing it to about `1 / epsilon` points: the
//! result depends on how the values were cut into batches. The one difference: Keras sorts
//! a merged summary with NumPy's default (unstable) argsort, so tied values of different
//! weights may come in either order; here ties keep their order (the batch's points first),
//! which is what NumPy does on every case of the committed fixture.

use std::cmp::Ordering;

/// A summary: points (values) and their weights (how many values each stands for), in
/// increasing order of value (NaN last), float32 as Keras keeps them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuantileSummary {
    /// The points.
    pub values: Vec<f32>,
    /// Their weights.
    pub weights: Vec<f32>,
}

/// NumPy's sort order of floats: increasing, NaN last.
fn numpy_order(a: &f32, b: &f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
    }
}

impl QuantileSummary {
    /// An empty summary (Keras's `reset_state`).
    pub fn new() -> Self {
        QuantileSummary::default()
    }

    /// Points held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no point is held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Keras's `summarize(batch, epsilon)`: the batch sorted, every `step`-th value kept
    /// (`step = max(n * epsilon, 1)`, truncated), each weighing `step`.
    pub fn of_batch(mut batch: Vec<f32>, epsilon: f64) -> Self {
        batch.sort_by(numpy_order);
        let increment = batch.len() as f64 / (1.0 / epsilon);
        let step = if increment > 1.0 { increment } else { 1.0 };
        let (start, stride) = ((step - 1.0) as usize, (step as usize).max(1));
        let values: Vec<f32> = batch.into_iter().skip(start).step_by(stride).collect();
        let weights = vec![step as f32; values.len()];
        QuantileSummary { values, weights }
    }

    /// Keras's `update_state(batch)`: the batch summarized and merged into this summary
    /// (`merge_summaries(batch_summary, self, epsilon)`).
    pub fn update(&mut self, batch: Vec<f32>, epsilon: f64) {
        let new = QuantileSummary::of_batch(batch, epsilon);
        let mut points: Vec<(f32, f32)> = new
            .values
            .into_iter()
            .zip(new.weights)
            .chain(
                self.values
                    .iter()
                    .copied()
                    .zip(self.weights.iter().copied()),
            )
            .collect();
        points.sort_by(|a, b| numpy_order(&a.0, &b.0));
        let merged = QuantileSummary {
            values: points.iter().map(|p| p.0).collect(),
            weights: points.iter().map(|p| p.1).collect(),
        };
        *self = merged.compress(epsilon);
    }

    /// Keras's `compress_summary(summary, epsilon)`: the points at cumulative weight
    /// fractions `epsilon, 2 epsilon, ..., 1` by linear interpolation (unchanged when it
    /// holds fewer than `1 / epsilon` points).
    pub fn compress(&self, epsilon: f64) -> QuantileSummary {
        if self.len() as f64 * epsilon < 1.0 {
            return self.clone();
        }
        let percents: Vec<f64> = arange(0.0, 1.0, epsilon)
            .into_iter()
            .map(|a| epsilon + a)
            .collect();
        // float32 cumulative sum (sequential, as `np.cumsum`), float32 fractions.
        let mut cum = Vec::with_capacity(self.len());
        let mut total = 0f32;
        for &w in &self.weights {
            total += w;
            cum.push(total);
        }
        let last = *cum.last().unwrap_or(&0.0);
        let fractions: Vec<f64> = cum.iter().map(|&c| f64::from(c / last)).collect();
        let values: Vec<f64> = self.values.iter().map(|&v| f64::from(v)).collect();
        let cum: Vec<f64> = cum.iter().map(|&c| f64::from(c)).collect();
        let new_bins = interp(&percents, &fractions, &values);
        let cum_weights = interp(&percents, &fractions, &cum);
        let new_weights = (0..cum_weights.len()).map(|i| {
            let before = if i == 0 { 0.0 } else { cum_weights[i - 1] };
            (cum_weights[i] - before) as f32
        });
        QuantileSummary {
            values: new_bins.into_iter().map(|v| v as f32).collect(),
            weights: new_weights.collect(),
        }
    }

    /// Keras's `get_bin_boundaries(summary, num_bins)`: the summary compressed to
    /// `num_bins` points, the last one dropped (fewer when the summary holds fewer than
    /// `num_bins` points: then its own points but the last).
    pub fn bin_boundaries(&self, num_bins: usize) -> Vec<f32> {
        let mut values = self.compress(1.0 / num_bins as f64).values;
        values.pop();
        values
    }
}

/// `np.arange(start, stop, step)` for floats: `ceil((stop - start) / step)` values, the
/// i-th `start + i * delta` where `delta = (start + step) - start`.
fn arange(start: f64, stop: f64, step: f64) -> Vec<f64> {
    let len = ((stop - start) / step).ceil();
    if len.is_nan() || len <= 0.0 {
        return Vec::new();
    }
    let len = len as usize;
    let delta = (start + step) - start;
    (0..len)
        .map(|i| match i {
            0 => start,
            1 => start + step,
            _ => start + i as f64 * delta,
        })
        .collect()
}

/// NumPy's `binary_search_with_guess`: the last `j` with `arr[j] <= key` (-1 below the
/// first, `len` above the last), starting near `guess`.
fn binary_search_with_guess(key: f64, arr: &[f64], guess: isize) -> isize {
    const LIKELY_IN_CACHE_SIZE: isize = 8;
    let len = arr.len() as isize;
    let at = |i: isize| arr[i as usize];
    let (mut imin, mut imax) = (0isize, len);
    if key > at(len - 1) {
        return len;
    } else if key < at(0) {
        return -1;
    }
    if len <= 4 {
        let mut i = 1;
        while i < len && key >= at(i) {
            i += 1;
        }
        return i - 1;
    }
    let guess = guess.min(len - 3).max(1);
    if key < at(guess) {
        if key < at(guess - 1) {
            imax = guess - 1;
            if guess > LIKELY_IN_CACHE_SIZE && key >= at(guess - LIKELY_IN_CACHE_SIZE) {
                imin = guess - LIKELY_IN_CACHE_SIZE;
            }
        } else {
            return guess - 1;
        }
    } else if key < at(guess + 1) {
        return guess;
    } else if key < at(guess + 2) {
        return guess + 1;
    } else {
        imin = guess + 2;
        if guess < len - LIKELY_IN_CACHE_SIZE - 1 && key < at(guess + LIKELY_IN_CACHE_SIZE) {
            imax = guess + LIKELY_IN_CACHE_SIZE;
        }
    }
    while imin < imax {
        let imid = imin + ((imax - imin) >> 1);
        if key >= at(imid) {
            imin = imid + 1;
        } else {
            imax = imid;
        }
    }
    imin - 1
}

/// `np.interp(x, xp, fp)` (float64, `left`/`right` the end values), as NumPy computes it.
fn interp(x: &[f64], xp: &[f64], fp: &[f64]) -> Vec<f64> {
    let n = xp.len();
    if n == 0 {
        // NumPy refuses an empty `xp`; a summary compressed here always has points.
        return vec![f64::NAN; x.len()];
    }
    let (left, right) = (fp[0], fp[n - 1]);
    if n == 1 {
        return x
            .iter()
            .map(|&v| {
                if v < xp[0] {
                    left
                } else if v > xp[0] {
                    right
                } else {
                    fp[0]
                }
            })
            .collect();
    }
    let mut j: isize = 0;
    x.iter()
        .map(|&v| {
            if v.is_nan() {
                return v;
            }
            j = binary_search_with_guess(v, xp, j);
            if j == -1 {
                return left;
            }
            let ju = j as usize;
            if ju == n {
                right
            } else if ju == n - 1 || xp[ju] == v {
                fp[ju]
            } else {
                let slope = (fp[ju + 1] - fp[ju]) / (xp[ju + 1] - xp[ju]);
                let mut r = slope * (v - xp[ju]) + fp[ju];
                if r.is_nan() {
                    r = slope * (v - xp[ju + 1]) + fp[ju + 1];
                    if r.is_nan() && fp[ju] == fp[ju + 1] {
                        r = fp[ju];
                    }
                }
                r
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arange_is_numpys() {
        // np.arange(0.0, 1.0, 1/3) has 3 values; np.arange(0.0, 1.0, 0.1) 10.
        assert_eq!(arange(0.0, 1.0, 1.0 / 3.0).len(), 3);
        assert_eq!(arange(0.0, 1.0, 0.1).len(), 10);
        assert_eq!(arange(0.0, 1.0, 0.01).len(), 100);
        assert_eq!(arange(0.0, 1.0, 0.1)[7], 7.0 * 0.1);
    }

    #[test]
    fn interp_matches_numpy_at_the_edges() {
        let xp = [0.0, 0.5, 0.5, 1.0, 2.0, 3.0];
        let fp = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
        // np.interp([-1, 0, 0.25, 0.5, 0.75, 3, 4], xp, fp)
        assert_eq!(
            interp(&[-1.0, 0.0, 0.25, 0.5, 0.75, 3.0, 4.0], &xp, &fp),
            [10.0, 10.0, 15.0, 30.0, 35.0, 60.0, 60.0]
        );
    }

    #[test]
    fn a_small_batch_is_kept_whole() {
        let mut s = QuantileSummary::new();
        s.update(vec![3.0, 1.0, 2.0], 0.01);
        assert_eq!(s.values, [1.0, 2.0, 3.0]);
        assert_eq!(s.weights, [1.0, 1.0, 1.0]);
        // 3 points, 10 bins: the points but the last.
        assert_eq!(s.bin_boundaries(10), [1.0, 2.0]);
    }
}
