//! `rejection_resample`: resample a stream towards a target class distribution
//! (`tf.data.Dataset.rejection_resample`).

use std::collections::VecDeque;
use std::sync::Arc;

use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::invalid::{Invalid, Key};
use crate::params::Params;
use crate::registry::{AppendContext, Spec};
use crate::rng::{StreamKey, StreamRng};
use crate::run::{BuildContext, Input};
use crate::stage::Stage;
use crate::stream::{BoxStream, ElementStream};
use crate::tensor::TensorData;

/// Resamples the stream so that the classes of its elements (the integer scalar feature
/// `class`, in `[0, len(target_dist))`) follow `target_dist`: tf.data's
/// `rejection_resample(class_func, target_dist, initial_dist, seed)`, with TensorFlow's
/// acceptance probabilities (`_calculate_acceptance_probs_with_mixing`). With `p` the
/// input's class distribution (`initial_dist`) and `t` the target, `r = t / p`,
/// `m = min(r)`: each output is, with probability `m`, the next element as it comes,
/// else the next one accepted by rejection sampling with per-class probability
/// `a = (r - m) / (max(r) - m)`; the mixture has exactly the distribution `t` and rejects
/// as little as possible.
///
/// Without `initial_dist`, `p` is estimated online as TensorFlow does: class counts
/// starting at 10 each, updated per batch of 32 elements, each element seeing the
/// estimate after its whole batch (the stage reads 32 elements ahead for it).
///
/// Where Sluice differs: TensorFlow returns `(class, element)` pairs, here the element (its
/// class is already a feature); TensorFlow reads its input twice (one iteration for each
/// branch of the mixture, so an element can come out twice), Sluice reads it once, both
/// branches taking the next element of the one stream (the same distribution, no
/// duplicates, each input used at most once; the output ends with the input); when the
/// input is already at the target (every `r` equal) TensorFlow's formula divides 0 by 0 and
/// here every element is kept. The distributions are normalized when they do not sum to 1.
/// Draws come from the stage's random stream (seeded by `seed` or the pipeline's seed,
/// the epoch and the stage): a seed gives the same output at any parallelism, and a
/// checkpoint resumes exactly (its state, the counts and the stream's position, is
/// re-derived by replaying the input).
///
/// ```toml
/// [[stage]]
/// kind = "rejection_resample"
/// class = "label"
/// target_dist = [0.5, 0.5]
/// initial_dist = [0.9, 0.1]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RejectionResampleSpec {
    /// The feature holding each element's class: an integer scalar in
    /// `[0, len(target_dist))`.
    #[serde(rename = "class")]
    pub class_feature: String,
    /// The wanted class distribution, one weight per class.
    pub target_dist: Vec<f64>,
    /// The input's class distribution; default: estimated online.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_dist: Option<Vec<f64>>,
    /// A seed for this stage; default: the pipeline's seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl RejectionResampleSpec {
    /// Resampling the classes in `class_feature` to `target_dist`, the input's distribution
    /// estimated online.
    pub fn new(class_feature: impl Into<String>, target_dist: Vec<f64>) -> Self {
        RejectionResampleSpec {
            class_feature: class_feature.into(),
            target_dist,
            initial_dist: None,
            seed: None,
        }
    }

    /// This spec with the input's class distribution known.
    pub fn initial_dist(mut self, initial_dist: Vec<f64>) -> Self {
        self.initial_dist = Some(initial_dist);
        self
    }

    /// This spec with its own seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
}

/// Checks a distribution's weights (`key` names it in the problem).
fn check_dist(key: &str, dist: &[f64]) -> std::result::Result<(), Invalid> {
    if dist.is_empty() {
        return Err(Invalid::at(
            key,
            format!("rejection_resample: `{key}` is empty: give one weight per class"),
        ));
    }
    if let Some((i, w)) = dist
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return Err(Invalid::new(
            vec![Key::name(key), Key::Index(i)],
            format!("rejection_resample: `{key}[{i}]` is {w}: weights are finite and at least 0"),
        ));
    }
    if dist.iter().sum::<f64>() <= 0.0 {
        return Err(Invalid::at(
            key,
            format!("rejection_resample: `{key}` sums to 0"),
        ));
    }
    Ok(())
}

/// A distribution as TensorFlow holds it (float32), normalized when it does not sum to 1.
fn normalized(dist: &[f64]) -> Vec<f32> {
    let sum: f64 = dist.iter().sum();
    if (sum - 1.0).abs() <= 1e-6 {
        dist.iter().map(|&w| w as f32).collect()
    } else {
        dist.iter().map(|&w| (w / sum) as f32).collect()
    }
}

impl Spec for RejectionResampleSpec {
    const KIND: &'static str = "rejection_resample";
    const SUMMARY: &'static str =
        "resample towards a target class distribution (`tf.data`'s `rejection_resample`)";

    fn validate(&self) -> std::result::Result<(), Invalid> {
        if self.class_feature.is_empty() {
            return Err(Invalid::at(
                "class",
                "rejection_resample: `class` names no feature",
            ));
        }
        check_dist("target_dist", &self.target_dist)?;
        if let Some(initial) = &self.initial_dist {
            check_dist("initial_dist", initial)?;
            if initial.len() != self.target_dist.len() {
                return Err(Invalid::at(
                    "initial_dist",
                    format!(
                        "rejection_resample: `initial_dist` has {} classes, `target_dist` {}",
                        initial.len(),
                        self.target_dist.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(Dataset::from_stage(self.clone(), vec![input.clone()]))
    }
}

/// TensorFlow's `_calculate_acceptance_probs_with_mixing(initial, target)` in float32: the
/// per-class acceptance probabilities `a` of the rejection branch and the probability `m`
/// of taking an element as it comes. With `r = target / (initial + tiny)`:
/// `m = min(r)`, `a = (r - m) / (max(r) - m)` (NaN for every class when all `r` are
/// equal, as in TensorFlow; the stage then keeps every element).
pub fn acceptance_probs(initial: &[f32], target: &[f32]) -> (Vec<f32>, f32) {
    let ratio: Vec<f32> = target
        .iter()
        .zip(initial)
        .map(|(&t, &p)| t / (p + f32::MIN_POSITIVE))
        .collect();
    let max = ratio.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let min = ratio.iter().copied().fold(f32::INFINITY, f32::min);
    let accept = ratio.iter().map(|&r| (r - min) / (max - min)).collect();
    (accept, min)
}

/// The online estimate of a stream's class distribution that `rejection_resample` uses
/// without `initial_dist` (TensorFlow's `_estimate_initial_dist_ds`): counts starting at
/// [`ClassEstimator::SMOOTHING`] per class, updated with each batch of
/// [`ClassEstimator::BATCH`] classes; the elements of a batch all see the estimate after
/// it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassEstimator {
    counts: Vec<i64>,
}

impl ClassEstimator {
    /// The count every class starts with.
    pub const SMOOTHING: i64 = 10;
    /// Classes per update.
    pub const BATCH: usize = 32;

    /// An estimator for `num_classes` classes, at the smoothed start.
    pub fn new(num_classes: usize) -> Self {
        ClassEstimator {
            counts: vec![Self::SMOOTHING; num_classes],
        }
    }

    /// Adds a batch of classes (each below the number of classes) and returns the
    /// estimate after it, as TensorFlow computes it (int64 counts divided in float64,
    /// cast to float32).
    pub fn update(&mut self, classes: &[usize]) -> Vec<f32> {
        for &c in classes {
            self.counts[c] += 1;
        }
        self.distribution()
    }

    /// The current estimate.
    pub fn distribution(&self) -> Vec<f32> {
        let total: i64 = self.counts.iter().sum();
        self.counts
            .iter()
            .map(|&c| (c as f64 / total as f64) as f32)
            .collect()
    }
}

impl Stage for RejectionResampleSpec {
    fn name(&self) -> &'static str {
        "rejection_resample"
    }

    fn params(&self) -> Params {
        Params::of(self)
    }

    fn validate(&self) -> std::result::Result<(), Invalid> {
        Spec::validate(self)
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let upstream = crate::stages::single_input(inputs, "rejection_resample")?.open()?;
        let target = normalized(&self.target_dist);
        let (estimator, probs) = match &self.initial_dist {
            Some(initial) => (None, Probs::new(&normalized(initial), &target)),
            // Replaced by the first batch's estimate before any element is decided.
            None => (Some(ClassEstimator::new(target.len())), Probs::keep_all()),
        };
        let key = StreamKey {
            seed: self.seed.unwrap_or(ctx.seed()),
            epoch: ctx.epoch(),
            stage: ctx.index() as u64,
        };
        Ok(Box::new(Resampled {
            upstream: Some(upstream),
            class_feature: self.class_feature.clone(),
            target,
            estimator,
            probs: Arc::new(probs),
            ahead: VecDeque::new(),
            rng: key.rng(),
            ctx: ctx.clone(),
        }))
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        // Each output carries its input's records; rejected inputs are reported dropped.
        Ok(())
    }
}

/// The acceptance probabilities in use.
#[derive(Debug, Clone)]
struct Probs {
    accept: Vec<f32>,
    original: f32,
}

impl Probs {
    fn new(initial: &[f32], target: &[f32]) -> Probs {
        let (accept, original) = acceptance_probs(initial, target);
        // Every ratio equal: the input is at the target; keep everything.
        let accept = accept
            .into_iter()
            .map(|a| if a.is_nan() { 1.0 } else { a })
            .collect();
        Probs { accept, original }
    }

    fn keep_all() -> Probs {
        Probs {
            accept: Vec::new(),
            original: 1.0,
        }
    }
}

/// An input read ahead: an element and its class with the probabilities of its batch, or
/// an error in its place.
enum Ahead {
    Element(Element, usize, Arc<Probs>),
    Error(Error),
}

struct Resampled {
    upstream: Option<BoxStream>,
    class_feature: String,
    target: Vec<f32>,
    estimator: Option<ClassEstimator>,
    probs: Arc<Probs>,
    ahead: VecDeque<Ahead>,
    rng: StreamRng,
    ctx: BuildContext,
}

/// The class of `e` in its feature `name`: an integer scalar below `n`.
fn class_of(name: &str, n: usize, e: &Element) -> Result<usize> {
    let t = e.tensor(name).ok_or_else(|| {
        Error::data_of(
            name,
            format!("rejection_resample: no feature `{name}` (or it is ragged)"),
        )
    })?;
    if t.len() != 1 || t.rank() > 1 {
        return Err(Error::data_of(
            name,
            format!(
                "rejection_resample: class feature `{name}` has shape {:?}, expected a scalar",
                t.shape()
            ),
        ));
    }
    let class = match t.data() {
        TensorData::I64(v) => v[0],
        TensorData::I32(v) => i64::from(v[0]),
        TensorData::U8(v) => i64::from(v[0]),
        other => {
            return Err(Error::data_of(
                name,
                format!(
                    "rejection_resample: class feature `{name}` is {}, expected int64 (or int32)",
                    other.dtype().tf_name()
                ),
            ));
        }
    };
    if !(0..n as i64).contains(&class) {
        return Err(Error::data_of(
            name,
            format!(
                "rejection_resample: class {class} of feature `{name}` is outside [0, {n}) (`target_dist` has {n} classes)"
            ),
        ));
    }
    Ok(class as usize)
}

impl Resampled {
    /// Reads the next batch ahead: one input with a known `initial_dist`, else up to
    /// [`ClassEstimator::BATCH`] (stopping at an error), whose classes update the estimate.
    fn fill(&mut self) {
        let Some(upstream) = self.upstream.as_mut() else {
            return;
        };
        let want = if self.estimator.is_some() {
            ClassEstimator::BATCH
        } else {
            1
        };
        let mut batch: Vec<(Element, usize)> = Vec::with_capacity(want);
        let mut error = None;
        let mut ended = false;
        while batch.len() < want {
            match upstream.next() {
                Some(Ok(e)) => match class_of(&self.class_feature, self.target.len(), &e) {
                    Ok(c) => batch.push((e, c)),
                    Err(err) => {
                        if let Some(err) = self.ctx.on_element_error(&e, err) {
                            error = Some(err);
                            break;
                        }
                    }
                },
                Some(Err(err)) => {
                    error = Some(err);
                    break;
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if ended {
            self.upstream = None;
        }
        if let Some(estimator) = self.estimator.as_mut()
            && !batch.is_empty()
        {
            let classes: Vec<usize> = batch.iter().map(|(_, c)| *c).collect();
            self.probs = Arc::new(Probs::new(&estimator.update(&classes), &self.target));
        }
        for (e, c) in batch {
            self.ahead
                .push_back(Ahead::Element(e, c, Arc::clone(&self.probs)));
        }
        if let Some(err) = error {
            self.ahead.push_back(Ahead::Error(err));
        }
    }

    /// The next input read ahead (reading more when none is).
    fn next_ahead(&mut self) -> Option<Ahead> {
        if self.ahead.is_empty() {
            self.fill();
        }
        self.ahead.pop_front()
    }
}

impl ElementStream for Resampled {
    fn next(&mut self) -> Option<Result<Element>> {
        // Which branch: the element as it comes (probability `m` of the next input's
        // batch), or the next one the rejection sampler accepts.
        if self.ahead.is_empty() {
            self.fill();
        }
        let original = match self.ahead.front()? {
            Ahead::Element(_, _, probs) => probs.original,
            Ahead::Error(_) => 1.0,
        };
        let as_it_comes = self.rng.random::<f32>() < original;
        loop {
            match self.next_ahead()? {
                Ahead::Error(err) => return Some(Err(err)),
                Ahead::Element(e, _, _) if as_it_comes => return Some(Ok(e)),
                Ahead::Element(e, class, probs) => {
                    if self.rng.random::<f32>() < probs.accept[class] {
                        return Some(Ok(e));
                    }
                    self.ctx.filtered(e.units());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_ratios_keep_everything() {
        let (a, m) = acceptance_probs(&[0.25; 4], &[0.25; 4]);
        assert!(a.iter().all(|a| a.is_nan()), "{a:?}");
        assert_eq!(m, 1.0);
        let probs = Probs::new(&[0.25; 4], &[0.25; 4]);
        assert_eq!(probs.accept, vec![1.0; 4]);
    }

    #[test]
    fn weights_are_normalized_only_when_they_do_not_sum_to_one() {
        assert_eq!(normalized(&[0.2, 0.3, 0.5]), vec![0.2f32, 0.3, 0.5]);
        assert_eq!(normalized(&[1.0, 3.0]), vec![0.25f32, 0.75]);
    }
}
