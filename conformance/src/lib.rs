//! `sluice-conformance`: the properties every Sluice stage must keep, as reusable checks,
//! and proptest strategies to drive them. Sluice runs them against every built-in stage in
//! CI (`tests/builtin_stages.rs`); use them in the tests of your own stages and plugin
//! stages.
//!
//! ```
//! use sluice_conformance::{check_deterministic, check_ordered, values_of};
//! use sluice_core::prelude::*;
//!
//! // A stage under test: a parallel map that doubles `value`.
//! let double = |ds: Dataset| {
//!     ds.map_with(MapSpec::parallel(3), |e, _| {
//!         let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
//!         Ok(Element::scalar_i64(e.id(), "value", v * 2))
//!     })
//! };
//! // Its output is the reference model's, in order, and the same at any thread count.
//! check_ordered(double, 100, |input| input.iter().map(|v| v * 2).collect()).unwrap();
//! check_deterministic(double, 100, 7).unwrap();
//! assert_eq!(values_of(&double(Dataset::range(0, 3))).unwrap(), vec![0, 2, 4]);
//! ```
//!
//! Every check takes the stage as a function from an input [`Dataset`](sluice_core::Dataset)
//! to its output, runs it over `Dataset::range(0, n)` (elements with an `i64` scalar
//! `value`), and returns `Err` with a message saying what broke, so it can be used with
//! `?` in a test or with `prop_assert!` inside a proptest:
//!
//! | check | the property |
//! |---|---|
//! | [`check_ordered`] | the output values are the reference model's, in its order |
//! | [`check_exactly_once`] | the output values are the reference model's as a multiset (any order) |
//! | [`check_deterministic`] | the same seed gives bit-identical output at 1 and at 4 threads; another seed may differ |
//! | [`check_bounded`] | with a slow consumer, the stage pulls at most `bound` elements ahead of it, and under a tight RAM budget its buffers hold at most the budget and one item per buffer (the byte ledger); both seen at every pull while it runs |
//! | [`check_error_propagation`] | an error at element `k` surfaces in order, naming its stage and element, under the fail policy; under skip it is counted and the rest arrives |
//! | [`check_drop_stops_threads`] | dropping the iterator half-way joins every thread it started |
//!
//! The matrix of which built-in stage keeps which property is in `tests/builtin_stages.rs`.

mod checks;
mod strategies;

pub use checks::{
    check_bounded, check_deterministic, check_drop_stops_threads, check_error_propagation,
    check_exactly_once, check_ordered, values_of,
};
pub use strategies::{StageParams, image_batch, image_element, parallelism, sizes};
