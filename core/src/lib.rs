//! `sluice-core`: the Sluice pipeline runtime — what `tf.data` is, in Rust, reproducible.
//!
//! ```
//! use sluice_core::prelude::*;
//!
//! # fn main() -> sluice_core::Result<()> {
//! // Read TFRecord shards four files at a time, shuffle, parse, map in parallel, batch.
//! let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tfrecord");
//! let dataset = Dataset::tfrecord([format!("{fixtures}/images.tfrecord-*")])?
//!     .interleave(InterleaveSpec::new(4).num_parallel(2))
//!     .shuffle(16)
//!     .parse_example(ParseExampleSpec::new([
//!         ("image", FeatureSpec::scalar(FeatureType::String)),
//!         ("label", FeatureSpec::scalar(FeatureType::Int64)),
//!     ]))
//!     .map_with(MapSpec::parallel(2), |element, _rng| Ok(element))
//!     .batch(8)
//!     .prefetch(BufferSize::Auto)
//!     .with_options(Options::default().with_seed(42));
//!
//! let mut labels = 0;
//! for batch in dataset.iter()? {
//!     let batch = batch?;
//!     assert_eq!(batch.tensor("image").unwrap().shape(), &[8]);
//!     labels += batch.tensor("label").unwrap().len();
//! }
//! assert_eq!(labels, 32);
//! println!("{}", dataset.stats().unwrap().report());
//! # Ok(())
//! # }
//! ```
//!
//! - [`Element`]s are named [`Tensor`]s (dense) or [`Ragged`] values, with an id and a
//!   provenance (file, offset); clones share buffers.
//! - A [`Dataset`] is a definition; [`Dataset::iter`] runs one epoch, pulling through the
//!   stages. Parallel stages own bounded worker threads; dropping the iterator joins them.
//! - Randomness is keyed by (seed, epoch, stage, element id) ([`rng`]): a seed fixes every
//!   batch bit for bit, at any parallelism.
//! - [`Dataset::stats`] gives per-stage statistics and names the bottleneck.
//! - [`checkpoint`]: [`PipelineIter::checkpoint`] gives a small [`Checkpoint`] and
//!   [`Dataset::resume`] continues from it with exactly the elements an uninterrupted run
//!   would have yielded.
//! - [`autotune`]: `NumParallel::Auto` and `BufferSize::Auto` are tuned while the pipeline
//!   runs, within the CPU and RAM budgets of [`Options`]; every decision is explained in the
//!   stats.
//! - [`pipeline_file`]: a whole pipeline as a TOML file ([`pipeline_file::PipelineFile`]).
#![deny(unsafe_code)]

// The model's concepts with their own documentation.
pub mod autotune;
pub mod checkpoint;
pub mod elastic;
pub mod example;
#[doc(hidden)]
pub mod fuzzing;
pub mod observe;
pub mod optimize;
pub mod pipeline_file;
pub mod plan;
pub mod registry;
pub mod rng;

// The implementation: what users and plugin hosts need of it is re-exported below, at the
// root (the model and what a custom stage is written with) or in the [`prelude`] (the specs
// a pipeline is written with).
mod builder;
mod codec;
mod dataset;
mod element;
mod error;
mod executor;
mod histogram;
mod invalid;
mod metrics;
mod options;
mod parallelism;
mod params;
mod process_cpu;
mod run;
mod sources;
mod stage;
mod stages;
mod stats;
mod stream;
mod sync;
#[cfg(test)]
mod tests;

// The model: a dataset, its elements, its options, its errors, a run and its statistics.
pub use checkpoint::Checkpoint;
pub use dataset::Dataset;
pub use element::{Element, ElementId, Provenance, Ragged, Value};
pub use error::{Error, ErrorKind, Result};
pub use histogram::TimeDistribution;
pub use metrics::StageStats;
pub use options::{ErrorPolicy, Options};
pub use parallelism::NumParallel;
pub use run::{ByteLedger, Canceller, MemoryUsage, PipelineIter};
pub use sluice_tensor::{DType, Shape, Shared, Tensor, TensorData};
/// TFDS data directories: [`tfds::TfdsSpec`], [`Dataset::tfds`], the info and listing.
pub use sources::tfds;
pub use stages::preprocessing::adapt;
pub use stats::{PipelineStats, RecordAccount};

// What a custom stage (a plugin host's, or a user's) is written with.
pub use executor::shutdown::Shutdown;
pub use invalid::{Invalid, Key, PathDisplay};
pub use metrics::StageMetrics;
pub use params::Params;
pub use plan::PlanNode;
pub use run::{BuildContext, Input};
pub use stage::{Arity, OpenFn, Stage};
/// The running stage of [`Dataset::map_chunks`], for a plugin host to build with its own
/// [`ChunkFn`](prelude::ChunkFn) and the label its stats show.
pub use stages::map_chunks::MapChunksStage;
pub use stream::{BoxStream, ElementStream, IterStream};

/// A seeded permutation of `[0, n)` in O(1) memory: the order in which a global shuffle
/// ([`GlobalShuffleSpec`](prelude::GlobalShuffleSpec)) reads records (what
/// `tf.random.experimental.index_shuffle` is to tf.data), for a shuffled order over anything
/// addressed by position without holding the order.
///
/// ```
/// use sluice_core::Permutation;
///
/// let p = Permutation::new(10, 42);
/// let mut seen: Vec<u64> = (0..10).map(|i| p.apply(i)).collect();
/// seen.sort();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// ```
pub use sources::permutation::Permutation;

/// The image library ([`sluice_image`]): decoding, geometry, colour and fused point chains.
pub use sluice_image as image;
/// TensorFlow's `tf.train.Example` messages and TFRecord files, read and written as
/// TensorFlow does ([`sluice_proto`]).
pub use sluice_proto as proto;
/// Tensors ([`sluice_tensor`]): [`Tensor`], [`TensorData`], [`DType`], [`Shape`], [`Shared`],
/// and the recycling of large buffers ([`tensor::pool`]).
pub use sluice_tensor as tensor;
// Stages recycle their large buffers through `crate::pool`.
use sluice_tensor::pool;

/// Everything needed to write pipelines: the [`Dataset`], its elements and options, and the
/// spec of every built-in source and stage.
pub mod prelude {
    pub use crate::sources::csv::{ColumnDefault, ColumnRef, CsvSpec, CsvType, CsvValue};
    pub use crate::sources::files::FilesSpec;
    pub use crate::sources::fixed_length::FixedLengthSpec;
    pub use crate::sources::format::{
        Chunk, ChunkReader, ChunkRecords, FileFormat, OpenedFile, Opening, ReadFiles, Record,
        RecordError, RecordReader,
    };
    pub use crate::sources::global_shuffle::GlobalShuffleSpec;
    pub use crate::sources::image_folder::{
        ColorMode, ImageFolderIndex, ImageFolderSpec, Interpolation, LabelMode, Labels, Subset,
    };
    pub use crate::sources::memory::RangeSpec;
    pub use crate::sources::numpy::NumpySpec;
    pub use crate::sources::sql::{SqlSpec, SqlValue};
    pub use crate::sources::storage::StorageSpec;
    pub use crate::sources::text_lines::TextLinesSpec;
    pub use crate::sources::tfds::TfdsSpec;
    pub use crate::sources::tfrecord::TfRecordSpec;
    #[cfg(feature = "columnar")]
    pub use crate::sources::{arrow_ipc::ArrowSpec, columnar::NullValue, parquet::ParquetSpec};
    pub use crate::stages::batch::BatchSpec;
    pub use crate::stages::bucket_by_sequence_length::BucketBySequenceLengthSpec;
    pub use crate::stages::cache::CacheSpec;
    pub use crate::stages::choose_from::ChooseFromSpec;
    pub use crate::stages::concatenate::ConcatenateSpec;
    pub use crate::stages::enumerate::EnumerateSpec;
    pub use crate::stages::filter::{FilterSpec, Literal};
    pub use crate::stages::group_by_window::GroupByWindowSpec;
    pub use crate::stages::image_ops::{ImageOp, ImageOpsSpec, PadSpec, Resample};
    pub use crate::stages::interleave::InterleaveSpec;
    pub use crate::stages::map::MapSpec;
    pub use crate::stages::map_chunks::{ChunkFn, MapChunksSpec};
    pub use crate::stages::padded_batch::{PadValue, PaddedBatchSpec};
    pub use crate::stages::parse_example::{FeatureSpec, FeatureType, ParseExampleSpec};
    pub use crate::stages::parse_example::{ParseSequenceExampleSpec, Partition};
    pub use crate::stages::prefetch::{BufferSize, PrefetchSpec};
    pub use crate::stages::preprocessing::{
        CategoryEncodingSpec, ClipSpec, CrossingMode, DecodeRawSpec, DiscretizationSpec,
        EncodingMode, FeatureLayer, HashedCrossingSpec, HashingSpec, IntegerLookupSpec, LayerFn,
        Log1pSpec, LookupOutput, LookupSpec, LookupToken, Ngrams, NormalizationSpec, OovMethod,
        RawType, RegexReplaceSpec, Salt, Standardize, Stat, StringLookupSpec, TextOutput,
        TextSplit, TextVectorizationSpec, Token, Vocabulary, fingerprint_cat64, fingerprint64,
        one_input, to_hash_bucket_fast, to_hash_bucket_strong,
    };
    pub use crate::stages::rejection_resample::{
        ClassEstimator, RejectionResampleSpec, acceptance_probs,
    };
    pub use crate::stages::repeat::RepeatSpec;
    pub use crate::stages::sample_from::SampleFromSpec;
    pub use crate::stages::scan::{ScanFn, ScanOp, ScanSpec};
    pub use crate::stages::shard::ShardSpec;
    pub use crate::stages::shuffle::ShuffleSpec;
    pub use crate::stages::skip::SkipSpec;
    pub use crate::stages::take::TakeSpec;
    pub use crate::stages::unbatch::UnbatchSpec;
    pub use crate::stages::window::WindowSpec;
    pub use crate::stages::zip::ZipSpec;
    pub use crate::{
        DType, Dataset, Element, ElementId, ErrorPolicy, NumParallel, Options, Result, Tensor,
        TensorData, Value,
    };
    pub use sluice_proto::tfrecord::Compression;
}
