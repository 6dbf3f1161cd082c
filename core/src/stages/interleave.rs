//! `interleave`: read several files at once, cycling through them in blocks.

use std::collections::VecDeque;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::autotune::KnobKind;
use crate::dataset::Dataset;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::executor::gate::Gate;
use crate::executor::prefetch::{Poll, PrefetchStream, Waited};
use crate::invalid::Invalid;
use crate::parallelism::{NumParallel, check_num_parallel};
use crate::params::Params;
use crate::plan::PlanNode;
use crate::registry::{AppendContext, Spec};
use crate::run::{BuildContext, Input};
use crate::sources::files::is_remote;
use crate::stage::{OpenFn, Stage};
use crate::stream::{BoxStream, ElementStream};

/// Records a reading thread hands over at a time.
const READ_CHUNK: usize = 16;

/// Reads `cycle_length` files at once, taking `block_length` records from each in turn
/// (`tf.data.Dataset.interleave(TFRecordDataset, ...)`). It reads the source's files, so in a
/// pipeline file it must come right after the source (or after `shard`), and only once; from
/// Rust, `Dataset::interleave_with` interleaves the sub-datasets of any dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct InterleaveSpec {
    /// Files open at once (≥ 1). Default 4.
    #[schemars(range(min = 1))]
    pub cycle_length: usize,
    /// Consecutive records taken from one file before moving to the next. Default 1.
    #[schemars(range(min = 1))]
    pub block_length: usize,
    /// `Sequential` (default) reads on the consumer's thread. A number `n` gives every open
    /// file a reading thread with a small buffer, at most `n` of them (and at most
    /// `cycle_length`) reading at once, so that the consumer's thread reads none. `auto` is
    /// autotuned between none (every file read on the consumer's thread) and the CPU budget
    /// (at most `cycle_length`) reading at once. It starts at the most, so that reading uses
    /// the cores the stages after it leave idle, except when its records go (through stages
    /// on the consumer's thread) to a stage computing on worker threads (a parallel `map`,
    /// `image_ops`): then it starts at none, leaving the CPUs to those workers, and adds a
    /// reader when one measurably helps (the
    /// [`ReadingThreadsStart`](crate::optimize::ReadingThreadsStart) rule). A reader is not
    /// tried while the process keeps 90% or more of its CPUs (the CPU budget, at most the
    /// machine's) busy: a reading thread adds a thread, not CPU, and helps only where the
    /// CPUs wait on storage.
    pub num_parallel: NumParallel,
    /// Keep tf.data's deterministic round-robin order (default). `false` takes from any file
    /// that has records ready when the next one in turn has none.
    pub deterministic: bool,
}

impl Default for InterleaveSpec {
    fn default() -> Self {
        InterleaveSpec {
            cycle_length: 4,
            block_length: 1,
            num_parallel: NumParallel::Sequential,
            deterministic: true,
        }
    }
}

impl InterleaveSpec {
    /// `cycle_length` files at once, blocks of 1, sequential.
    pub fn new(cycle_length: usize) -> Self {
        InterleaveSpec {
            cycle_length,
            ..Default::default()
        }
    }

    /// This spec with `block_length`.
    pub fn block_length(mut self, n: usize) -> Self {
        self.block_length = n;
        self
    }

    /// This spec with `num_parallel`.
    pub fn num_parallel(mut self, n: impl Into<NumParallel>) -> Self {
        self.num_parallel = n.into();
        self
    }

    /// This spec with `deterministic`.
    pub fn deterministic(mut self, d: bool) -> Self {
        self.deterministic = d;
        self
    }
}

impl Spec for InterleaveSpec {
    const KIND: &'static str = "interleave";
    const SUMMARY: &'static str =
        "read several files at once; only right after the source (or `shard`)";

    fn validate(&self) -> Result<(), Invalid> {
        InterleaveStage::of_files(*self).validate()
    }

    fn append(&self, input: &Dataset, _: &AppendContext<'_>) -> Result<Dataset> {
        Ok(input.interleave(*self))
    }
}

/// `interleave`: `cycle_length` sub-datasets read at once, `block_length` elements from
/// each in turn (tf.data's `interleave(map_func)`). Each element of the input opens one
/// sub-dataset through `open`.
///
/// Written as `Dataset::tfrecord(..).interleave(spec)` (or `[[stage]] kind =
/// "interleave"` right after a file source), it has no `open` of its own: the
/// [`FilesToInterleave`](crate::optimize::FilesToInterleave) rule gives it the file reader's
/// (each file's records, one sub-dataset per file) and puts it over the file list. Written
/// with [`Dataset::interleave_with`](crate::Dataset::interleave_with), it opens what the
/// function returns, over any dataset.
#[derive(Clone)]
pub(crate) struct InterleaveStage {
    /// How to interleave.
    pub spec: InterleaveSpec,
    /// Opens the sub-dataset of an input element; `None` until the optimizer gives it the
    /// file reader of its input.
    pub(crate) open: Option<OpenFn>,
    /// What `open` is, for `explain` and fingerprints: the reader's kind and parameters,
    /// or the function's label.
    pub(crate) reads: Params,
    /// With `num_parallel = auto`: start with every file read on the consumer's thread
    /// instead of the CPU budget's reading threads (set by the
    /// [`ReadingThreadsStart`](crate::optimize::ReadingThreadsStart) rule).
    pub(crate) start_on_consumer: bool,
}

impl std::fmt::Debug for InterleaveStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterleaveStage")
            .field("spec", &self.spec)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl InterleaveStage {
    /// An interleave of the files of the file source it follows (see the type's docs).
    pub(crate) fn of_files(spec: InterleaveSpec) -> Self {
        InterleaveStage {
            spec,
            open: None,
            reads: Params::new(),
            start_on_consumer: false,
        }
    }

    /// An interleave of the sub-datasets `open` makes of each input element; `label` names
    /// the function in fingerprints (change it to invalidate caches when the function
    /// changes).
    pub(crate) fn with_fn(spec: InterleaveSpec, open: OpenFn, label: impl Into<String>) -> Self {
        InterleaveStage {
            spec,
            open: Some(open),
            reads: Params::new().with("fn", label.into()),
            start_on_consumer: false,
        }
    }

    /// This interleave reading each file as `reader` (a stage whose
    /// [`Stage::file_reader`] is `open`) reads it.
    pub(crate) fn reading_files(&self, reader: &dyn Stage, open: OpenFn) -> Self {
        InterleaveStage {
            spec: self.spec,
            open: Some(open),
            reads: Params::new()
                .with("reader", reader.name())
                .with("reader_params", reader.params()),
            start_on_consumer: self.start_on_consumer,
        }
    }

    /// This interleave starting (with `num_parallel = auto`) with every file read on the
    /// consumer's thread.
    pub(crate) fn starting_on_consumer(&self) -> Self {
        InterleaveStage {
            start_on_consumer: true,
            ..self.clone()
        }
    }
}

impl Stage for InterleaveStage {
    fn name(&self) -> &'static str {
        "interleave"
    }

    fn elastic(&self) -> std::result::Result<(), std::borrow::Cow<'static, str>> {
        Err(std::borrow::Cow::Borrowed(
            "an `interleave` of custom sub-datasets: which record its elements come from is unknown",
        ))
    }

    fn params(&self) -> Params {
        Params::of(&self.spec).merged(self.reads.clone())
    }

    fn validate(&self) -> Result<(), Invalid> {
        if self.spec.cycle_length == 0 {
            return Err(Invalid::at(
                "cycle_length",
                "interleave: `cycle_length` must be at least 1",
            ));
        }
        if self.spec.block_length == 0 {
            return Err(Invalid::at(
                "block_length",
                "interleave: `block_length` must be at least 1",
            ));
        }
        check_num_parallel("interleave", self.spec.num_parallel)
    }

    fn check_inputs(&self, inputs: &[Arc<PlanNode>]) -> Result<(), String> {
        if self.open.is_some() {
            return Ok(());
        }
        let input = inputs.first().map_or("nothing".to_string(), |i| {
            format!("`{}`", i.stage().display_name())
        });
        Err(format!(
            "interleave reads the files of a file source (such as Dataset::tfrecord, or a \
             pipeline file's [source]) and must come right after it (or after `shard`); its \
             input here is {input}. To interleave sub-datasets of any dataset, use \
             Dataset::interleave_with"
        ))
    }

    fn build(&self, inputs: &[Input], ctx: &BuildContext) -> Result<BoxStream> {
        let Some(open) = self.open.clone() else {
            return Err(Error::invalid(
                "interleave: no file reader to interleave (see check_inputs)",
            ));
        };
        let files = crate::stages::single_input(inputs, "interleave")?.open()?;
        // `in` counts the elements read from the sub-datasets (a file's records), not the
        // input elements that name them.
        ctx.metrics().set_counts_own_inputs();
        // Readers: `num_parallel` within the CPU budget, at most one per open file. Each open
        // file then has a thread of its own, and a gate lets that many of them read at once
        // (the consumer's thread reads none: it is the one thread every record crosses, and
        // the stages after the interleave run on it). With `auto`, autotune sets how many
        // read at once; at none, the files are read on the consumer's thread.
        let budget = ctx.options().cpu_budget.max(1);
        let (threads, knob) = match self.spec.num_parallel {
            NumParallel::Auto => {
                // Between none (every file read on the consumer's thread) and the CPU
                // budget (at most one per open file). It starts at the most, so that reading
                // takes the cores the inline stages after it leave idle (`parse`), unless
                // workers of a stage after it keep the CPUs busy (`start_on_consumer`): then
                // at none, as reading threads would take CPU from them (`augment`: -3 %), and
                // autotune adds threads when they measurably help (slow storage).
                let most = budget.min(self.spec.cycle_length);
                let start = if self.start_on_consumer { 0 } else { most };
                let knob = ctx.autotuned(KnobKind::ReadingThreads, start, (0, most));
                (most, Some(knob))
            }
            n => (n.workers(budget).min(self.spec.cycle_length), None),
        };
        let parallel = threads > 0;
        if parallel && knob.is_none() {
            ctx.metrics().set_workers(threads);
        }
        let gate = match &knob {
            Some(knob) => Gate::knob(Arc::clone(knob)),
            None => Gate::fixed(threads),
        };
        Ok(Box::new(InterleaveStream {
            files: Some(files),
            ahead: VecDeque::new(),
            slots: (0..self.spec.cycle_length).map(|_| None).collect(),
            cycle: 0,
            block: 0,
            parallel,
            gate,
            spec: self.spec,
            open,
            ctx: ctx.clone(),
        }))
    }

    fn order_deterministic(&self) -> bool {
        self.spec.deterministic || self.spec.num_parallel == NumParallel::Sequential
    }

    fn runs_inline(&self) -> bool {
        self.spec.num_parallel == NumParallel::Sequential
    }

    fn shards_by_input(&self) -> bool {
        // Keeping every n-th file of a file interleave keeps those files' records.
        self.open.is_some() && self.reads.get("reader").is_some()
    }
}

enum Slot {
    /// Read on the consumer's thread: first what a reading thread had read ahead (when
    /// autotune took the thread away), then the file.
    Inline(VecDeque<Result<Element>>, Option<BoxStream>),
    Threaded(PrefetchStream),
}

impl Slot {
    /// The file's next element. A file whose thread may not read (autotune closed `gate`:
    /// no reading threads) while its consumer waits for it is read on the consumer's
    /// thread from then on: waiting on would wait forever.
    fn next(&mut self, gate: &Gate) -> Option<Result<Element>> {
        loop {
            match self {
                Slot::Inline(ahead, s) => {
                    return match ahead.pop_front() {
                        Some(item) => Some(item),
                        None => s.as_mut()?.next(),
                    };
                }
                Slot::Threaded(s) => match s.next_unless(|| gate.limit() == 0) {
                    Waited::Item(item) => return item,
                    Waited::GaveUp => self.go_inline(),
                },
            }
        }
    }

    /// A threaded file's thread stopped; the file goes on on the consumer's thread, first
    /// with what the thread had read ahead.
    fn go_inline(&mut self) {
        let slot = std::mem::replace(self, Slot::Inline(VecDeque::new(), None));
        *self = match slot {
            Slot::Threaded(t) => {
                let (ahead, s) = t.into_inner();
                Slot::Inline(ahead, s)
            }
            inline => inline,
        };
    }
}

/// A file taken from the list before a slot needed it.
enum Ahead {
    /// An object-store file, opened as soon as it was taken: its first requests are in
    /// flight while the open files are read (tf.data's "future elements" of parallel
    /// interleave), so opening it later costs no round trip.
    Opened(Element, Result<BoxStream>),
    /// A local file, opened when a slot takes it.
    Later(Element),
}

struct InterleaveStream {
    files: Option<BoxStream>,
    /// Files taken ahead of the slots (only after an object-store file, at most
    /// `cycle_length`).
    ahead: VecDeque<Ahead>,
    slots: Vec<Option<Slot>>,
    cycle: usize,
    block: usize,
    parallel: bool,
    /// How many files' threads read at once; at none, files are read on the consumer's
    /// thread.
    gate: Arc<Gate>,
    spec: InterleaveSpec,
    open: OpenFn,
    ctx: BuildContext,
}

impl InterleaveStream {
    fn open_file(&self, file: &Element) -> Result<BoxStream> {
        (self.open)(file).and_then(|d| self.ctx.open_dataset(&d))
    }

    /// The next file of the list and its stream: from the files taken ahead, else from
    /// the list. `None` when the list is exhausted.
    fn take_file(&mut self) -> Option<Result<(Element, Result<BoxStream>)>> {
        if let Some(ahead) = self.ahead.pop_front() {
            return Some(Ok(match ahead {
                Ahead::Opened(file, opened) => (file, opened),
                Ahead::Later(file) => {
                    let opened = self.open_file(&file);
                    (file, opened)
                }
            }));
        }
        let file = match self.files.as_mut()?.next() {
            None => {
                self.files = None;
                return None;
            }
            Some(Err(e)) => return Some(Err(e)),
            Some(Ok(f)) => f,
        };
        let opened = self.open_file(&file);
        Some(Ok((file, opened)))
    }

    /// After an object-store file was opened: takes more files from the list and opens the
    /// object-store ones now (stopping at the first local one), while what they will fetch
    /// ahead stays within [`AHEAD_BYTES`] (a file counts for its size, when its listing
    /// gave it, at most the bytes its reader keeps in flight), at least `2 × cycle_length`
    /// files and at most `8 × cycle_length`.
    fn open_ahead(&mut self) {
        let in_flight = |file: &Element| {
            let read = sluice_storage::ReadOptions::default();
            let most = read.block_size * read.max_in_flight as u64;
            crate::sources::files::filename_of(file)
                .ok()
                .and_then(|p| sluice_storage::listed_size(&p))
                .map_or(most, |size| size.min(most))
        };
        loop {
            let bytes: u64 = self
                .ahead
                .iter()
                .map(|a| match a {
                    Ahead::Opened(file, _) => in_flight(file),
                    Ahead::Later(_) => 0,
                })
                .sum();
            let n = self.ahead.len();
            let room = n < 2 * self.spec.cycle_length
                || (bytes < AHEAD_BYTES && n < 8 * self.spec.cycle_length);
            if !room || matches!(self.ahead.back(), Some(Ahead::Later(_))) {
                return;
            }
            let Some(files) = self.files.as_mut() else {
                return;
            };
            match files.next() {
                Some(Ok(file)) => {
                    let ahead = if is_remote(&file) {
                        let opened = self.open_file(&file);
                        Ahead::Opened(file, opened)
                    } else {
                        Ahead::Later(file)
                    };
                    self.ahead.push_back(ahead);
                }
                // An error or the end: left for `take_file` to meet.
                _ => return,
            }
        }
    }

    /// Opens the next file into `slot`. Returns false when the file list is exhausted.
    fn open_next(&mut self, slot: usize) -> Result<bool> {
        loop {
            let Some(taken) = self.take_file() else {
                return Ok(false);
            };
            let (file, opened) = taken?;
            match opened {
                Ok(s) => {
                    self.slots[slot] = Some(if self.threaded_now() {
                        self.threaded(s)
                    } else {
                        Slot::Inline(VecDeque::new(), Some(s))
                    });
                    if is_remote(&file) {
                        self.open_ahead();
                    }
                    return Ok(true);
                }
                Err(e) => {
                    if let Some(e) = self.ctx.on_error(self.ctx.element_error(&file, e)) {
                        return Err(e);
                    }
                }
            }
        }
    }

    /// Whether files are read on threads of their own now (autotune may say none).
    fn threaded_now(&self) -> bool {
        self.parallel && self.gate.limit() > 0
    }

    /// A file read on its own thread.
    fn threaded(&self, s: BoxStream) -> Slot {
        // Records cross to the consumer in chunks (a few hundred KiB of typical records),
        // two chunks buffered per open file.
        let chunk = self.spec.block_length.max(READ_CHUNK);
        Slot::Threaded(PrefetchStream::start(
            s,
            2 * chunk,
            chunk,
            true,
            None,
            Some(Arc::clone(&self.gate)),
            &self.ctx,
        ))
    }

    fn advance(&mut self) {
        self.cycle = (self.cycle + 1) % self.slots.len();
        self.block = 0;
    }

    /// Non-deterministic mode: a ready element from any slot, without blocking.
    fn any_ready(&mut self) -> Option<Option<Result<Element>>> {
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.cycle + k) % n;
            if let Some(Slot::Threaded(s)) = self.slots[i].as_mut() {
                match s.try_next() {
                    Poll::Pending => {}
                    Poll::Ready(Some(item)) => {
                        self.cycle = i;
                        self.block += 1;
                        if self.block >= self.spec.block_length {
                            self.advance();
                        }
                        return Some(Some(item));
                    }
                    Poll::Ready(None) => {
                        self.slots[i] = None;
                        return Some(None);
                    }
                }
            }
        }
        None
    }
}

impl ElementStream for InterleaveStream {
    fn next(&mut self) -> Option<Result<Element>> {
        loop {
            if self.files.is_none()
                && self.ahead.is_empty()
                && self.slots.iter().all(Option::is_none)
            {
                return None;
            }
            if self.parallel && !self.spec.deterministic {
                match self.any_ready() {
                    Some(Some(item)) => return Some(item),
                    Some(None) => continue,
                    None => {}
                }
            }
            let i = self.cycle;
            if self.slots[i].is_none() {
                match self.open_next(i) {
                    Ok(true) => {}
                    Ok(false) => {
                        self.advance();
                        continue;
                    }
                    Err(e) => return Some(Err(e)),
                }
            }
            // Autotune went from no readers to some, or back: this file gets a thread now,
            // or gives its thread up (keeping what it had read ahead).
            let wanted = self.threaded_now();
            match self.slots[i].take() {
                Some(Slot::Inline(ahead, Some(s))) if wanted && ahead.is_empty() => {
                    self.slots[i] = Some(self.threaded(s));
                }
                Some(mut slot @ Slot::Threaded(_)) if !wanted => {
                    slot.go_inline();
                    self.slots[i] = Some(slot);
                }
                other => self.slots[i] = other,
            }
            let slot = self.slots[i].as_mut().expect("open slot");
            // In parallel mode the stage is not timed as inline: time the files it reads on
            // the consumer's thread here.
            let timed = self.parallel && matches!(slot, Slot::Inline(..));
            let t = timed.then(std::time::Instant::now);
            let item = slot.next(&self.gate);
            if let Some(t) = t {
                self.ctx.metrics().add_busy(t.elapsed());
            }
            match item {
                Some(item) => {
                    self.block += 1;
                    if self.block >= self.spec.block_length {
                        self.advance();
                    }
                    return Some(item);
                }
                None => {
                    self.slots[i] = None;
                    self.advance();
                }
            }
        }
    }
}

/// The bytes object-store files opened ahead may fetch before they are read: enough to
/// hide 100 ms of latency at about 640 MB/s.
const AHEAD_BYTES: u64 = 64 << 20;

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::autotune::{Autotuner, Learned};
    use crate::element::ElementId;
    use crate::executor::shutdown::Shutdown;
    use crate::metrics::StageMetrics;
    use crate::stream::IterStream;
    use crate::tensor::Tensor;

    /// A file's thread waits for a permit of a gate autotune closed (no reading threads)
    /// while the consumer waits for that thread's next records: the consumer reads the
    /// file itself instead of waiting forever (`cache2` runs from Python hung so, twice
    /// in ~200: autotune lowered `reading_threads` to 0 between the consumer's choice of
    /// the threaded file and its wait).
    #[test]
    fn a_file_whose_thread_the_gate_holds_is_read_by_its_consumer() {
        let (_trigger, shutdown) = Shutdown::new();
        let metrics = Arc::new(StageMetrics::default());
        let tuner = Arc::new(Autotuner::detached(Learned::new(), 1 << 30));
        // No reading threads: the file's thread never gets a permit.
        let knob = tuner.knob(
            1,
            "interleave#1".into(),
            KnobKind::ReadingThreads,
            0,
            (0, 2),
            &metrics,
        );
        assert_eq!(knob.get(), 0);
        let ctx = BuildContext::for_test(1, "interleave", tuner, metrics, shutdown);
        let file: BoxStream = Box::new(IterStream((0..100u64).map(|i| {
            Ok(Element::new(ElementId::new(0, i)).with("value", Tensor::scalar_i64(i as i64)))
        })));
        let gate = Gate::knob(knob);
        let mut slot = Slot::Threaded(PrefetchStream::start(
            file,
            8,
            4,
            true,
            None,
            Some(Arc::clone(&gate)),
            &ctx,
        ));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut values = Vec::new();
            while let Some(e) = slot.next(&gate) {
                let e = e.expect("no error");
                values.push(e.tensor("value").and_then(|t| t.as_i64()).expect("value")[0]);
            }
            let _ = tx.send((values, matches!(slot, Slot::Inline(..))));
        });
        let (values, inline) = rx.recv_timeout(Duration::from_secs(20)).expect("not stuck");
        assert_eq!(values, (0..100).collect::<Vec<i64>>());
        assert!(inline, "read on the consumer's thread");
    }
}
