//! Checkpoints: where an iteration is, in a few numbers, to resume it exactly.
//!
//! A pipeline's output is a function of its definition, its seed and its epoch (every
//! random decision is keyed by seed, epoch, stage and element id, and deterministic stages
//! keep their order at any thread count). So a position in a run is fully described by
//! the pipeline's fingerprint, the seed, the epoch and how many elements were yielded: a
//! [`Checkpoint`] holds exactly that, a few dozen bytes whatever the buffer sizes.
//!
//! [`Dataset::resume`](crate::Dataset::resume) rebuilds the pipeline for that seed and
//! epoch and fast-forwards it to the position. Buffers are not stored but re-derived: each
//! stage skips its first outputs as cheaply as it can ([`Stage::build_from`](crate::Stage::build_from)): 1:1 maps
//! (`map`, `parse_example`, `image_ops`) pass the skip to their input without running
//! their work, `batch` and `padded_batch` skip `n × batch_size` inputs, `prefetch`, `take`,
//! `skip`, `repeat`, `zip` and `concatenate` do the arithmetic, `range` and in-memory
//! sources jump, and a global shuffle starts reading at its position in the permutation
//! (after indexing, which it finds done). Other stages (`shuffle`, `filter`, `interleave`,
//! `tfrecord`, `unbatch`, `cache`, `sample_from`, plugin stages) replay their input: a
//! `shuffle` refills its buffer from the re-read records, which costs reading, not
//! decoding, when the shuffle sits before the expensive maps, as usual. Under the skip
//! error policy every stage replays (a skipped failure changes the counts).
//!
//! ```
//! use sluice_core::prelude::*;
//! use sluice_core::Checkpoint;
//!
//! # fn main() -> sluice_core::Result<()> {
//! let pipeline = || {
//!     Dataset::range(0, 100)
//!         .shuffle(10)
//!         .batch(4)
//!         .with_options(Options::default().with_seed(7))
//! };
//! // What an uninterrupted first epoch gives.
//! let all: Vec<Element> = pipeline().collect()?;
//!
//! let dataset = pipeline();
//!
//! // Stop after 5 batches and save where we are.
//! let mut it = dataset.iter()?;
//! let first: Vec<Element> = it.by_ref().take(5).collect::<Result<_>>()?;
//! let json = it.checkpoint()?.to_json();
//! drop(it);
//!
//! // Later (another process): resume; the rest is exactly what was left.
//! let resumed = pipeline().resume(&Checkpoint::from_json(&json)?)?;
//! let rest: Vec<Element> = resumed.collect::<Result<_>>()?;
//! assert_eq!(first.len() + rest.len(), all.len());
//! assert_eq!(rest[0].tensor("value"), all[5].tensor("value"));
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::element::{Element, Value};
use crate::error::{Error, Result};
use crate::tensor::TensorData;

/// The checkpoint format's version; a checkpoint of another version is refused, except
/// version 2 (a version 3 checkpoint without its elastic part). Version 2: fingerprints hash
/// each stage's structured parameters (version 1 hashed `Debug` text). Version 3: the
/// elastic part ([`ElasticCheckpoint`]).
pub const CHECKPOINT_VERSION: u32 = 3;

/// The oldest version still read.
const OLDEST_VERSION: u32 = 2;

/// Where an iteration of a pipeline is (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// [`CHECKPOINT_VERSION`] when written.
    pub version: u32,
    /// The pipeline's [`resume fingerprint`](crate::Dataset::resume_fingerprint): its
    /// stages and parameters, without thread counts and buffer sizes.
    pub fingerprint: String,
    /// The seed of every random decision.
    pub seed: u64,
    /// The epoch (the dataset's iteration count when it was started).
    pub epoch: u64,
    /// Elements the iterator had yielded in this epoch.
    pub position: u64,
    /// What resuming on another number of hosts needs ([`crate::elastic`]); absent in
    /// version 2 checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic: Option<ElasticCheckpoint>,
}

/// The part of a [`Checkpoint`] an elastic resume reads: which run of the epoch it comes
/// from, and what this host had done, in a few kilobytes at most (see [`crate::elastic`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElasticCheckpoint {
    /// The pipeline's resume fingerprint without its `shard` stages (the same on every
    /// host, whatever the number of hosts).
    pub fingerprint: String,
    /// `num_shards` of each `shard` stage (outputs first) in the run that started the
    /// epoch: a resume gives the pipeline that run's shape.
    pub layout: Vec<u64>,
    /// 0 for the run that started the epoch; each elastic resume adds 1.
    pub generation: u64,
    /// The number of hosts of the run that took this checkpoint.
    pub hosts: u64,
    /// This host's rank among them.
    pub host: u64,
    /// What this host is done with: its lanes, deflated and base64-encoded. Absent at the
    /// start of an epoch (nothing done) or when records cannot be followed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Why records could not be followed in this pipeline or run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl Checkpoint {
    /// The checkpoint as one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a checkpoint serializes")
    }

    /// Reads a checkpoint from JSON (of this version).
    pub fn from_json(text: &str) -> Result<Checkpoint> {
        let cp: Checkpoint = serde_json::from_str(text)
            .map_err(|e| Error::Checkpoint(format!("not a Sluice checkpoint: {e}")))?;
        cp.check_version()?;
        Ok(cp)
    }

    /// Refuses a version this Sluice does not read.
    pub(crate) fn check_version(&self) -> Result<()> {
        if !(OLDEST_VERSION..=CHECKPOINT_VERSION).contains(&self.version) {
            return Err(Error::Checkpoint(format!(
                "version {} (this Sluice reads versions {OLDEST_VERSION} to {CHECKPOINT_VERSION})",
                self.version
            )));
        }
        Ok(())
    }

    /// A checkpoint at the start of the epoch after this one's (what a run writes when an
    /// epoch ends): position 0, nothing done.
    pub fn next_epoch(&self) -> Checkpoint {
        Checkpoint {
            epoch: self.epoch + 1,
            position: 0,
            elastic: self.elastic.as_ref().map(|e| ElasticCheckpoint {
                generation: 0,
                progress: None,
                unavailable: None,
                ..e.clone()
            }),
            ..self.clone()
        }
    }

    /// Writes the checkpoint to `path` atomically and durably (a hidden temporary file beside
    /// it, synced, renamed, the directory synced): a crash leaves the previous checkpoint or
    /// this one, whole.
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |error| Error::Io {
            path: path.to_path_buf(),
            error,
        };
        sluice_storage::write_durably(path, (self.to_json() + "\n").as_bytes()).map_err(io)
    }

    /// Reads a checkpoint written by [`Checkpoint::save`].
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            error,
        })?;
        Checkpoint::from_json(&text)
            .map_err(|e| Error::Checkpoint(format!("{}: {e}", path.display())))
    }
}

/// A SHA-256 of an element (lower-case hex): its id and every value's name, dtype, shape
/// and bytes, names sorted. Two runs gave the same elements exactly when their digests
/// match (what `sluice run --digests` writes, one line per element, to compare runs and
/// resumed runs).
pub fn element_digest(e: &Element) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(e.id().to_string().as_bytes());
    let mut names: Vec<&str> = e.iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    for name in names {
        h.update(name.as_bytes());
        h.update([0]);
        match e.get(name) {
            Some(Value::Dense(t)) => {
                h.update(format!("{:?}{:?}", t.data().dtype(), t.shape()).as_bytes());
                match t.data() {
                    TensorData::U8(v) => h.update(v),
                    TensorData::I32(v) => v.iter().for_each(|x| h.update(x.to_le_bytes())),
                    TensorData::I64(v) => v.iter().for_each(|x| h.update(x.to_le_bytes())),
                    TensorData::F32(v) => v.iter().for_each(|x| h.update(x.to_le_bytes())),
                    TensorData::F64(v) => v.iter().for_each(|x| h.update(x.to_le_bytes())),
                    TensorData::Bytes(v) => v.iter().for_each(|b| {
                        h.update((b.len() as u64).to_le_bytes());
                        h.update(b);
                    }),
                }
            }
            other => h.update(format!("{other:?}").as_bytes()),
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_and_other_versions_are_refused() {
        let cp = Checkpoint {
            version: CHECKPOINT_VERSION,
            fingerprint: "abc".into(),
            seed: u64::MAX,
            epoch: 3,
            position: 12345,
            elastic: None,
        };
        assert_eq!(Checkpoint::from_json(&cp.to_json()).unwrap(), cp);
        let old = Checkpoint { version: 0, ..cp };
        let err = Checkpoint::from_json(&old.to_json())
            .unwrap_err()
            .to_string();
        assert!(err.contains("version 0"), "{err}");
        assert!(Checkpoint::from_json("{}").is_err());
    }

    #[test]
    fn save_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.ckpt");
        let cp = Checkpoint {
            version: CHECKPOINT_VERSION,
            fingerprint: "f".into(),
            seed: 1,
            epoch: 0,
            position: 9,
            elastic: None,
        };
        cp.save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap(), cp);
        std::fs::write(&path, "garbage").unwrap();
        let err = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(err.contains("run.ckpt"), "{err}");
    }
}
