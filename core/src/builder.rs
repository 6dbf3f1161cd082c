//! The tf.data-like builder methods of [`Dataset`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::Result;
use crate::rng::ElementRng;
use crate::sources::csv::CsvSpec;
use crate::sources::files::{FileList, FilesSpec};
use crate::sources::fixed_length::FixedLengthSpec;
use crate::sources::format::{FileFormat, ReadFiles};
use crate::sources::image_folder::{ImageFolderSpec, Subset};
use crate::sources::memory::{FromElements, RangeSpec};
use crate::sources::numpy::NumpySpec;
use crate::sources::sql::SqlSpec;
use crate::sources::storage::StorageSpec;
use crate::sources::text_lines::TextLinesSpec;
use crate::sources::tfrecord::TfRecordSpec;
#[cfg(feature = "columnar")]
use crate::sources::{arrow_ipc::ArrowSpec, parquet::ParquetSpec};
use crate::stages::batch::BatchSpec;
use crate::stages::cache::{CacheSpec, CacheStage};
use crate::stages::choose_from::ChooseFromSpec;
use crate::stages::concatenate::ConcatenateSpec;
use crate::stages::image_ops::ImageOpsSpec;
use crate::stages::interleave::{InterleaveSpec, InterleaveStage};
use crate::stages::map::{MapSpec, MapStage};
use crate::stages::map_chunks::{ChunkFn, MapChunksSpec, MapChunksStage};
use crate::stages::padded_batch::PaddedBatchSpec;
use crate::stages::parse_example::ParseExampleSpec;
use crate::stages::parse_example::ParseSequenceExampleSpec;
use crate::stages::prefetch::{BufferSize, PrefetchSpec};
use crate::stages::repeat::RepeatSpec;
use crate::stages::sample_from::SampleFromSpec;
use crate::stages::shard::ShardSpec;
use crate::stages::shuffle::ShuffleSpec;
use crate::stages::skip::SkipSpec;
use crate::stages::take::TakeSpec;
use crate::stages::unbatch::UnbatchSpec;
use crate::stages::zip::ZipSpec;

/// Sources.
impl Dataset {
    /// The files matching glob patterns (or plain paths), sorted per pattern; a pattern that
    /// matches nothing is an error naming it. Each element holds one `filename`.
    pub fn files<S: AsRef<str>>(patterns: impl IntoIterator<Item = S>) -> Result<Dataset> {
        Dataset::files_with(FilesSpec {
            patterns: patterns
                .into_iter()
                .map(|p| p.as_ref().to_string())
                .collect(),
            shuffle: false,
            storage: Default::default(),
        })
    }

    /// A file source from its spec (e.g. with `shuffle: true`, reshuffled each epoch).
    pub fn files_with(spec: FilesSpec) -> Result<Dataset> {
        Ok(Dataset::from_stage(spec.build_list()?, vec![]))
    }

    /// Exactly these files, in this order.
    pub fn file_list(files: Vec<PathBuf>) -> Dataset {
        Dataset::from_stage(FileList::new(files, false), vec![])
    }

    /// The records of the TFRecord files matching `patterns` (compression detected), read
    /// file after file; add [`interleave`](Dataset::interleave) to read several at once.
    pub fn tfrecord<S: AsRef<str>>(patterns: impl IntoIterator<Item = S>) -> Result<Dataset> {
        Ok(Dataset::files(patterns)?.read_tfrecord(TfRecordSpec::default()))
    }

    /// Reads the TFRecord files named by this file-list dataset.
    pub fn read_tfrecord(&self, spec: TfRecordSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Reads the files named by this file-list dataset with `format` (CSV, text lines,
    /// fixed-length records, or a format of one's own), file after file; add
    /// [`interleave`](Dataset::interleave) to read several at once.
    pub fn read_files(&self, format: impl FileFormat) -> Dataset {
        Dataset::from_stage(ReadFiles::new(format), vec![self.clone()])
    }

    /// The rows of the CSV files matching `patterns` (`tf.data.experimental.CsvDataset`;
    /// see [`CsvSpec`]).
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("prices.csv");
    /// std::fs::write(&path, "id,price\n1,9.5\n2,\n").unwrap();
    /// let spec = CsvSpec {
    ///     header: true,
    ///     record_defaults: vec![
    ///         ColumnDefault::required(CsvType::Int64),
    ///         ColumnDefault::with_default(CsvType::Float32, CsvValue::Float(0.0)),
    ///     ],
    ///     ..CsvSpec::default()
    /// };
    /// let rows = Dataset::csv([path.to_str().unwrap()], spec)?.collect()?;
    /// assert_eq!(rows[1].tensor("id").unwrap().as_i64().unwrap(), &[2]);
    /// assert_eq!(rows[1].tensor("price").unwrap().as_f32().unwrap(), &[0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn csv<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: CsvSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The lines of the text files matching `patterns` (`tf.data.TextLineDataset`; see
    /// [`TextLinesSpec`]).
    pub fn text_lines<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: TextLinesSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The fixed-length records of the files matching `patterns`
    /// (`tf.data.FixedLengthRecordDataset`; see [`FixedLengthSpec`]).
    pub fn fixed_length_records<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: FixedLengthSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The rows (first-axis slices) of the NumPy `.npy` / `.npz` files matching `patterns`,
    /// as `from_tensor_slices` slices arrays (see [`NumpySpec`]).
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("x.npy");
    /// // np.save of np.arange(6, dtype="<i8").reshape(3, 2):
    /// let header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }";
    /// let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    /// let padded = format!("{header:<117}\n");
    /// bytes.extend((padded.len() as u16).to_le_bytes());
    /// bytes.extend(padded.as_bytes());
    /// bytes.extend((0..6i64).flat_map(i64::to_le_bytes));
    /// std::fs::write(&path, bytes).unwrap();
    /// let rows = Dataset::numpy([path.to_str().unwrap()], NumpySpec::default())?.collect()?;
    /// assert_eq!(rows.len(), 3);
    /// assert_eq!(rows[1].tensor("value").unwrap().as_i64().unwrap(), &[2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn numpy<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: NumpySpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The rows of the Parquet files matching `patterns` (see [`ParquetSpec`]).
    #[cfg(feature = "columnar")]
    pub fn parquet<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: ParquetSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The rows of the Arrow IPC files (file or stream format, e.g. Hugging Face
    /// `datasets`' `data-*.arrow`) matching `patterns` (see [`ArrowSpec`]).
    #[cfg(feature = "columnar")]
    pub fn arrow<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        spec: ArrowSpec,
    ) -> Result<Dataset> {
        Ok(Dataset::files_in(patterns, &spec.storage)?.read_files(spec))
    }

    /// The images of `directory`'s class folders, labelled by folder, as
    /// `tf.keras.utils.image_dataset_from_directory` reads them (see [`ImageFolderSpec`]):
    /// elements `{image, label}`, in Keras's file order for the spec's seed.
    ///
    /// `subset = Both` is refused here: use [`Dataset::image_folder_both`].
    pub fn image_folder(directory: impl AsRef<Path>, spec: ImageFolderSpec) -> Result<Dataset> {
        if spec.subset == Some(Subset::Both) {
            return Err(crate::Error::invalid(
                "image_folder: subset = \"both\" makes two datasets: use Dataset::image_folder_both",
            ));
        }
        let directory = directory.as_ref();
        spec.dataset(&spec.index(directory)?, directory)
    }

    /// The training and validation datasets of a `validation_split`, as
    /// `image_dataset_from_directory(subset="both")` returns them (any `subset` in `spec`
    /// is ignored).
    pub fn image_folder_both(
        directory: impl AsRef<Path>,
        spec: ImageFolderSpec,
    ) -> Result<(Dataset, Dataset)> {
        let directory = directory.as_ref();
        let spec = ImageFolderSpec {
            subset: Some(Subset::Both),
            ..spec
        };
        let (train, val) = spec.split(spec.index(directory)?);
        Ok((
            spec.dataset(&train, directory)?,
            spec.dataset(&val, directory)?,
        ))
    }

    /// The rows of a SQL query on a SQLite file or a PostgreSQL server, one element per
    /// row, one scalar per column (see [`SqlSpec`]); with `partition_column`, one file-list
    /// entry per range of it, so `shard` and `interleave` split the reading.
    pub fn sql(spec: SqlSpec) -> Result<Dataset> {
        spec.dataset()
    }

    fn files_in<S: AsRef<str>>(
        patterns: impl IntoIterator<Item = S>,
        storage: &StorageSpec,
    ) -> Result<Dataset> {
        Dataset::files_with(FilesSpec {
            patterns: patterns
                .into_iter()
                .map(|p| p.as_ref().to_string())
                .collect(),
            shuffle: false,
            storage: storage.clone(),
        })
    }

    /// Elements held in memory, with ids `0:0`, `0:1`, ...
    pub fn from_elements(elements: Vec<Element>) -> Dataset {
        Dataset::from_stage(FromElements::new(elements), vec![])
    }

    /// `start..end` by 1, as scalar `i64` values named `value`.
    pub fn range(start: i64, end: i64) -> Dataset {
        Dataset::from_stage(
            RangeSpec {
                start,
                end,
                step: 1,
            },
            vec![],
        )
    }
}

/// Stages.
impl Dataset {
    /// Keeps shard `index` of `num_shards`: every `num_shards`-th element. On a file
    /// source (before `interleave` or after it, or a global shuffle) the file list is
    /// sharded instead, so each shard reads only its files (the
    /// [`ShardPushdown`](crate::optimize::ShardPushdown) rule).
    pub fn shard(&self, num_shards: u64, index: u64) -> Dataset {
        self.then(ShardSpec { num_shards, index })
    }

    /// Reads the files of a file source (such as [`Dataset::tfrecord`]) `cycle_length` at
    /// a time (see [`InterleaveSpec`]; the
    /// [`FilesToInterleave`](crate::optimize::FilesToInterleave) rule). On a dataset that
    /// is not a file source it is refused when the pipeline is built: use
    /// [`Dataset::interleave_with`].
    pub fn interleave(&self, spec: InterleaveSpec) -> Dataset {
        self.then(InterleaveStage::of_files(spec))
    }

    /// tf.data's `interleave(map_func)`: each element of this dataset opens the dataset
    /// `f` returns, and `spec.cycle_length` of those are read at once, `block_length`
    /// elements from each in turn. The sub-datasets run inside this stage (their work,
    /// errors and random draws are the interleave's).
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// // Each of 0, 1, 2 opens `range(10 * i, 10 * i + 3)`; two are read at a time.
    /// let d = Dataset::range(0, 3).interleave_with(InterleaveSpec::new(2), |e| {
    ///     let i = e.tensor("value").and_then(|t| t.as_i64()).map_or(0, |v| v[0]);
    ///     Ok(Dataset::range(10 * i, 10 * i + 3))
    /// });
    /// let values: Vec<i64> = d
    ///     .collect()?
    ///     .iter()
    ///     .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
    ///     .collect();
    /// assert_eq!(values, [0, 10, 1, 11, 2, 12, 20, 21, 22]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn interleave_with<F>(&self, spec: InterleaveSpec, f: F) -> Dataset
    where
        F: Fn(&Element) -> Result<Dataset> + Send + Sync + 'static,
    {
        let label = std::any::type_name::<F>();
        self.then(InterleaveStage::with_fn(spec, Arc::new(f), label))
    }

    /// Decodes and augments images with the built-in ops (see [`ImageOpsSpec`]).
    pub fn image_ops(&self, spec: ImageOpsSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Parses `tf.train.SequenceExample` records (see [`ParseSequenceExampleSpec`]).
    pub fn parse_sequence_example(&self, spec: ParseSequenceExampleSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Parses `tf.train.Example` records (see [`ParseExampleSpec`]).
    pub fn parse_example(&self, spec: ParseExampleSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Applies `f` to every element (sequentially; see [`Dataset::map_with`]).
    pub fn map<F>(&self, f: F) -> Dataset
    where
        F: Fn(Element) -> Result<Element> + Send + Sync + 'static,
    {
        self.map_with(MapSpec::default(), move |e, _| f(e))
    }

    /// Applies `f` to every element with `spec.num_parallel` threads. `f` receives the
    /// element's RNG, keyed by (seed, epoch, stage, element id): random transforms are
    /// reproducible at any parallelism.
    pub fn map_with<F>(&self, spec: MapSpec, f: F) -> Dataset
    where
        F: Fn(Element, &mut ElementRng) -> Result<Element> + Send + Sync + 'static,
    {
        let label = std::any::type_name::<F>();
        Dataset::from_stage(
            MapStage::new("map", spec, Arc::new(move |e, r| f(e, r).map(Some)), label),
            vec![self.clone()],
        )
    }

    /// Applies `f` to chunks of `spec.chunk_size` consecutive elements (see
    /// [`MapChunksSpec`](crate::prelude::MapChunksSpec)): `f` gets the chunk and one RNG per
    /// element, and returns the outputs, each with the index of its input in the chunk. A
    /// map, filter or flat map whose per-call cost is paid once per chunk (plugins run so).
    pub fn map_chunks<F>(&self, spec: MapChunksSpec, f: F) -> Dataset
    where
        F: Fn(Vec<Element>, &mut [ElementRng]) -> Result<Vec<(usize, Element)>>
            + Send
            + Sync
            + 'static,
    {
        self.map_chunks_labelled(spec, Arc::new(f), std::any::type_name::<F>())
    }

    /// [`Dataset::map_chunks`] with a shared function and the label that names it in cache
    /// fingerprints.
    pub fn map_chunks_labelled(&self, spec: MapChunksSpec, f: ChunkFn, label: &str) -> Dataset {
        Dataset::from_stage(MapChunksStage::new(spec, f, label), vec![self.clone()])
    }

    /// Keeps the elements for which `f` is true.
    pub fn filter<F>(&self, f: F) -> Dataset
    where
        F: Fn(&Element) -> Result<bool> + Send + Sync + 'static,
    {
        self.filter_with(MapSpec::default(), move |e, _| f(e))
    }

    /// [`Dataset::filter`] with threads and the element RNG.
    pub fn filter_with<F>(&self, spec: MapSpec, f: F) -> Dataset
    where
        F: Fn(&Element, &mut ElementRng) -> Result<bool> + Send + Sync + 'static,
    {
        let label = std::any::type_name::<F>();
        Dataset::from_stage(
            MapStage::new(
                "filter",
                spec,
                Arc::new(move |e, r| Ok(if f(&e, r)? { Some(e) } else { None })),
                label,
            ),
            vec![self.clone()],
        )
    }

    /// Windows of elements, each batched (tf.data's `window`; see
    /// [`WindowSpec`](crate::stages::window::WindowSpec)).
    pub fn window(&self, spec: crate::stages::window::WindowSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Batches of elements sharing a key (tf.data's `group_by_window` with a `batch` or
    /// `padded_batch` of each window; see
    /// [`GroupByWindowSpec`](crate::stages::group_by_window::GroupByWindowSpec)).
    pub fn group_by_window(
        &self,
        spec: crate::stages::group_by_window::GroupByWindowSpec,
    ) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Padded batches of elements of similar length (tf.data's
    /// `bucket_by_sequence_length`; see
    /// [`BucketBySequenceLengthSpec`](crate::stages::bucket_by_sequence_length::BucketBySequenceLengthSpec)).
    pub fn bucket_by_sequence_length(
        &self,
        spec: crate::stages::bucket_by_sequence_length::BucketBySequenceLengthSpec,
    ) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// tf.data's `flat_map` with a function returning elements, not a dataset: `f` maps
    /// each element to any number of elements (none drops it), in order (sequentially; see
    /// [`Dataset::flat_map_with`] for threads). An input with exactly one output keeps its
    /// id; the outputs of an input with any other number get the ids `id.child(0..k)`.
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// // Each n becomes n copies of itself.
    /// let d = Dataset::range(0, 4).flat_map(|e| {
    ///     let n = e.tensor("value").unwrap().as_i64().unwrap()[0];
    ///     Ok(vec![e; n as usize])
    /// });
    /// let values: Vec<i64> = d
    ///     .collect()?
    ///     .iter()
    ///     .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
    ///     .collect();
    /// assert_eq!(values, [1, 2, 2, 3, 3, 3]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// In a pipeline file, a flat map is a `plugin` stage whose plugin returns many
    /// elements (its kind `flat_map`): closures cannot be written there.
    pub fn flat_map<F>(&self, f: F) -> Dataset
    where
        F: Fn(Element) -> Result<Vec<Element>> + Send + Sync + 'static,
    {
        self.flat_map_labelled(
            MapSpec::default(),
            std::any::type_name::<F>(),
            move |e, _| f(e),
        )
    }

    /// [`Dataset::flat_map`] on `spec.num_parallel` threads (in input order when
    /// `spec.deterministic`, the default), `f` receiving the element's RNG (keyed by seed,
    /// epoch, stage and element id: random outputs are the same at any parallelism).
    pub fn flat_map_with<F>(&self, spec: MapSpec, f: F) -> Dataset
    where
        F: Fn(Element, &mut ElementRng) -> Result<Vec<Element>> + Send + Sync + 'static,
    {
        self.flat_map_labelled(spec, std::any::type_name::<F>(), f)
    }

    fn flat_map_labelled<F>(&self, spec: MapSpec, label: &str, f: F) -> Dataset
    where
        F: Fn(Element, &mut ElementRng) -> Result<Vec<Element>> + Send + Sync + 'static,
    {
        // A chunk map of one element per call: its threads, order, ids and records.
        let chunks = MapChunksSpec {
            chunk_size: 1,
            num_parallel: spec.num_parallel,
            deterministic: spec.deterministic,
        };
        let f: ChunkFn = Arc::new(move |chunk: Vec<Element>, rngs: &mut [ElementRng]| {
            let mut out = Vec::new();
            for ((i, e), rng) in chunk.into_iter().enumerate().zip(rngs.iter_mut()) {
                out.extend(f(e, rng)?.into_iter().map(|o| (i, o)));
            }
            Ok(out)
        });
        Dataset::from_stage(
            MapChunksStage::new(chunks, f, label).with_display_name("flat_map"),
            vec![self.clone()],
        )
    }

    /// tf.data's `scan`: `f` gets a state (starting as `initial_state` each epoch) to
    /// change and each element in turn, and returns the output (`None` drops the element).
    /// The state is an [`Element`]; it runs on the consumer's thread, in order. A resumed
    /// run replays the input up to the checkpoint, so the state is the same as in the
    /// uninterrupted run; an epoch with `scan` cannot be resumed elastically on another
    /// number of hosts. Built-in ops (running count, cumulative sum, running mean) that
    /// pipeline files can name: [`Dataset::scan_op`].
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// let start = Element::new(ElementId::new(0, 0)).with("total", Tensor::scalar_i64(0));
    /// let d = Dataset::range(1, 5).scan(start, |state, mut e| {
    ///     let total = state.tensor("total").unwrap().as_i64().unwrap()[0]
    ///         + e.tensor("value").unwrap().as_i64().unwrap()[0];
    ///     state.insert("total", Tensor::scalar_i64(total));
    ///     e.insert("total", Tensor::scalar_i64(total));
    ///     Ok(Some(e))
    /// });
    /// let totals: Vec<i64> = d
    ///     .collect()?
    ///     .iter()
    ///     .map(|e| e.tensor("total").unwrap().as_i64().unwrap()[0])
    ///     .collect();
    /// assert_eq!(totals, [1, 3, 6, 10]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scan<F>(&self, initial_state: Element, f: F) -> Dataset
    where
        F: Fn(&mut Element, Element) -> Result<Option<Element>> + Send + Sync + 'static,
    {
        let label = std::any::type_name::<F>();
        Dataset::from_stage(
            crate::stages::scan::ScanStage::new(initial_state, Arc::new(f), label),
            vec![self.clone()],
        )
    }

    /// A built-in `scan` op (`count`, `cumsum`, `running_mean`; see
    /// [`ScanSpec`](crate::prelude::ScanSpec)): what a pipeline file's `kind = "scan"` runs.
    pub fn scan_op(&self, spec: crate::stages::scan::ScanSpec) -> Dataset {
        Dataset::from_stage(spec.stage(), vec![self.clone()])
    }

    /// Resamples towards a target class distribution (tf.data's `rejection_resample`;
    /// see [`RejectionResampleSpec`](crate::prelude::RejectionResampleSpec)).
    pub fn rejection_resample(
        &self,
        spec: crate::stages::rejection_resample::RejectionResampleSpec,
    ) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Numbers the elements from `start` in the `int64` feature `index` (tf.data's
    /// `enumerate`; see [`EnumerateSpec`](crate::stages::enumerate::EnumerateSpec)).
    pub fn enumerate(&self, start: i64) -> Dataset {
        Dataset::from_stage(
            crate::stages::enumerate::EnumerateSpec {
                start,
                ..Default::default()
            },
            vec![self.clone()],
        )
    }

    /// Shuffles through a buffer of `buffer_size` elements, reshuffling each epoch.
    pub fn shuffle(&self, buffer_size: usize) -> Dataset {
        self.shuffle_with(ShuffleSpec::new(buffer_size))
    }

    /// Shuffles as `spec` says.
    pub fn shuffle_with(&self, spec: ShuffleSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Repeats `count` times (`None`: forever).
    pub fn repeat(&self, count: Option<u64>) -> Dataset {
        Dataset::from_stage(RepeatSpec { count }, vec![self.clone()])
    }

    /// The first `count` elements.
    pub fn take(&self, count: u64) -> Dataset {
        Dataset::from_stage(TakeSpec { count }, vec![self.clone()])
    }

    /// All but the first `count` elements.
    pub fn skip(&self, count: u64) -> Dataset {
        Dataset::from_stage(SkipSpec { count }, vec![self.clone()])
    }

    /// Batches of `batch_size` (the last may be smaller).
    pub fn batch(&self, batch_size: usize) -> Dataset {
        self.batch_with(BatchSpec::new(batch_size))
    }

    /// Batches as `spec` says.
    pub fn batch_with(&self, spec: BatchSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Batches padded to a common shape.
    pub fn padded_batch(&self, spec: PaddedBatchSpec) -> Dataset {
        Dataset::from_stage(spec, vec![self.clone()])
    }

    /// Splits batches back into elements.
    pub fn unbatch(&self) -> Dataset {
        Dataset::from_stage(UnbatchSpec {}, vec![self.clone()])
    }

    /// Zips datasets (values merged by name; ends with the shortest).
    pub fn zip(datasets: Vec<Dataset>) -> Dataset {
        Dataset::from_stage(ZipSpec {}, datasets)
    }

    /// This dataset, then `other`.
    pub fn concatenate(&self, other: &Dataset) -> Dataset {
        Dataset::from_stage(ConcatenateSpec {}, vec![self.clone(), other.clone()])
    }

    /// Draws from `datasets` at random with `weights` (seeded by the pipeline's seed).
    pub fn sample_from(datasets: Vec<Dataset>, weights: Vec<f64>) -> Dataset {
        Dataset::from_stage(
            SampleFromSpec {
                weights,
                seed: None,
                stop_on_empty: false,
            },
            datasets,
        )
    }

    /// Each element from the dataset that `choices` names: tf.data's
    /// `choose_from_datasets(datasets, choice_dataset)`. Each element of `choices` holds
    /// the `int64` scalar `value` (as [`Dataset::range`] writes it), an index into
    /// `datasets`; the result ends with `choices`, or as soon as a chosen dataset is
    /// exhausted (see [`ChooseFromSpec`] to go on without it, or to read another feature).
    ///
    /// ```
    /// use sluice_core::prelude::*;
    ///
    /// # fn main() -> sluice_core::Result<()> {
    /// // Round robin over three datasets: choices 0, 1, 2, 0, 1, 2, ...
    /// let choices = Dataset::range(0, 3).repeat(Some(2));
    /// let datasets = vec![
    ///     Dataset::range(0, 10),
    ///     Dataset::range(100, 110),
    ///     Dataset::range(200, 210),
    /// ];
    /// let d = Dataset::choose_from(datasets, &choices);
    /// let values: Vec<i64> = d
    ///     .collect()?
    ///     .iter()
    ///     .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
    ///     .collect();
    /// assert_eq!(values, [0, 100, 200, 1, 101, 201]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn choose_from(datasets: Vec<Dataset>, choices: &Dataset) -> Dataset {
        Dataset::choose_from_with(ChooseFromSpec::default(), datasets, choices)
    }

    /// [`Dataset::choose_from`] with its options.
    pub fn choose_from_with(
        spec: ChooseFromSpec,
        datasets: Vec<Dataset>,
        choices: &Dataset,
    ) -> Dataset {
        let mut inputs = vec![choices.clone()];
        inputs.extend(datasets);
        Dataset::from_stage(spec, inputs)
    }

    /// Caches the first complete pass (see [`CacheSpec`]).
    pub fn cache(&self, spec: CacheSpec) -> Dataset {
        Dataset::from_stage(CacheStage::new(spec), vec![self.clone()])
    }

    /// Prefetches on a dedicated thread.
    pub fn prefetch(&self, buffer_size: BufferSize) -> Dataset {
        Dataset::from_stage(PrefetchSpec { buffer_size }, vec![self.clone()])
    }
}
