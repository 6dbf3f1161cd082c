//! Proptest strategies for the checks' parameters.

use proptest::prelude::*;
use sluice_core::NumParallel;

/// Input sizes: empty, tiny, and a few hundred elements.
pub fn sizes() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0i64), 1i64..8, 8i64..300]
}

/// Sequential or 1 to 4 threads.
pub fn parallelism() -> impl Strategy<Value = NumParallel> {
    prop_oneof![
        Just(NumParallel::Sequential),
        (1usize..=4).prop_map(NumParallel::Fixed),
    ]
}

/// A stage's common knobs, for property tests over configurations.
#[derive(Debug, Clone)]
pub struct StageParams {
    /// Input size.
    pub n: i64,
    /// A size parameter of the stage (batch size, buffer, count), at least 1.
    pub size: usize,
    /// Threads.
    pub parallel: NumParallel,
    /// The pipeline seed.
    pub seed: u64,
}

impl Arbitrary for StageParams {
    type Parameters = ();
    type Strategy = BoxedStrategy<StageParams>;

    fn arbitrary_with((): ()) -> Self::Strategy {
        (sizes(), 1usize..40, parallelism(), any::<u64>())
            .prop_map(|(n, size, parallel, seed)| StageParams {
                n,
                size,
                parallel,
                seed,
            })
            .boxed()
    }
}

/// An element with id `(0, index)` holding a `u8` HWC `image` (1 to 8 pixels a side, 1 or 3
/// channels) and an `i64` `label`.
pub fn image_element(index: u64) -> impl Strategy<Value = sluice_core::Element> {
    (
        1usize..=8,
        1usize..=8,
        prop_oneof![Just(1usize), Just(3usize)],
        any::<i64>(),
    )
        .prop_flat_map(move |(h, w, c, label)| {
            prop::collection::vec(any::<u8>(), h * w * c).prop_map(move |pixels| {
                sluice_core::Element::new(sluice_core::ElementId::new(0, index))
                    .with(
                        "image",
                        sluice_core::Tensor::new(
                            &[h, w, c],
                            sluice_core::TensorData::U8(pixels.into()),
                        )
                        .expect("h * w * c values"),
                    )
                    .with(
                        "label",
                        sluice_core::Tensor::new(
                            &[],
                            sluice_core::TensorData::I64(vec![label].into()),
                        )
                        .expect("a scalar"),
                    )
            })
        })
}

/// A batch of 1 to `max` image elements with ids `(0, 0..)`, for plugin stages and batch
/// stages.
pub fn image_batch(max: usize) -> impl Strategy<Value = Vec<sluice_core::Element>> {
    (1..=max.max(1)).prop_flat_map(|n| (0..n as u64).map(image_element).collect::<Vec<_>>())
}
