//! Pipeline-wide options: seed, CPU and RAM budgets, error policy.

use serde::{Deserialize, Serialize};

/// What a pipeline does with an element that fails in a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorPolicy {
    /// The error travels down the stream and ends the iteration (the default).
    #[default]
    Fail,
    /// The failing element is dropped where it failed, counted in that stage's `skipped`
    /// statistic, and the pipeline goes on. (A TFRecord file with a bad length checksum or a
    /// truncated record cannot be read past that point: the rest of that file is skipped and
    /// counted as one skip. A failure that drops several elements at once, a plugin call or
    /// `map_chunks` chunk or a batch that cannot be assembled, counts each of them.)
    Skip,
}

/// Options of a pipeline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// The seed of every random decision. `None`: a random seed is drawn when the dataset is
    /// first iterated ([`crate::Dataset::seed`] tells which), as tf.data does without a seed.
    pub seed: Option<u64>,
    /// The most worker threads any one stage may use, and the default for `num_parallel =
    /// auto`; the rows of a batch in `image_ops` run on this many threads of the run's own.
    /// Default: the number of CPUs.
    pub cpu_budget: usize,
    /// Memory the pipeline's buffers and caches may hold, in bytes. Default: half the
    /// machine's memory. Every buffer counts the bytes of the elements it holds in the
    /// run's [`ByteLedger`](crate::ByteLedger): a stage filling a buffer on a thread of its
    /// own (prefetch, a parallel stage's work in flight, an interleave's read-ahead) waits
    /// for room instead of growing past it (a buffer its consumer waits for may always take
    /// one element, so the pipeline always makes progress); a shuffle buffer, an in-memory
    /// cache, open groups or a batch being assembled that would exceed it alone, or a
    /// single element larger than all of it, fail with [`crate::Error::ResourceExhausted`]
    /// instead of exhausting the machine. (Written `ram_budget` in a pipeline file too,
    /// with a unit: `"4GiB"`.)
    #[serde(alias = "ram_budget_bytes")]
    pub ram_budget: u64,
    /// What a failing element does. Default: fail.
    pub error_policy: ErrorPolicy,
    /// Run an `image_ops` followed by a `batch` as one stage that decodes and augments the
    /// rows of each batch in parallel straight into the batch's buffer (tf.data's
    /// `map_and_batch_fusion`). The output is the same, bit for bit, including errors and
    /// skips; only the work is arranged differently (and stats count `image_ops`'s output
    /// in batches). Default: on.
    pub map_and_batch_fusion: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: None,
            cpu_budget: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            ram_budget: physical_memory() / 2,
            error_policy: ErrorPolicy::Fail,
            map_and_batch_fusion: true,
        }
    }
}

impl Options {
    /// These options with a fixed seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// These options with `cpu_budget`.
    pub fn with_cpu_budget(mut self, n: usize) -> Self {
        self.cpu_budget = n.max(1);
        self
    }

    /// These options with `ram_budget`.
    pub fn with_ram_budget(mut self, bytes: u64) -> Self {
        self.ram_budget = bytes;
        self
    }

    /// These options with `error_policy`.
    pub fn with_error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.error_policy = policy;
        self
    }

    /// These options with `map_and_batch_fusion` on or off.
    pub fn with_map_and_batch_fusion(mut self, on: bool) -> Self {
        self.map_and_batch_fusion = on;
        self
    }
}

/// Physical memory in bytes (Linux: `/proc/meminfo`; elsewhere 8 GiB is assumed).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(8 << 30)
}
