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
