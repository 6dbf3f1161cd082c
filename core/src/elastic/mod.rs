//! Elastic resume: a checkpoint taken by `N` hosts resumed on `M`, every record of the epoch
//! that was not delivered read exactly once, none twice.
//!
//! A [`Checkpoint`](crate::Checkpoint) says where one host is in its stream (a position,
//! which resumes that host exactly). To resume on another number of hosts, each checkpoint
//! also says **which records the host is done with**: delivered (yielded by the pipeline) or
//! dropped (by a filter, a batch remainder, the error policy). Together, the checkpoints of
//! every host of a run say what is left of the epoch; each new host takes its share of it.
//!
//! # How records are counted
//!
//! Records are counted where they enter the pipeline, at its **unit points** (see
//! the `space` module): a record-level `shard` (positions of the stream it shards), a global shuffle
//! (positions of its permutation), a file reader (records of files, by file and index),
//! or another source (positions of its output). Each point's records form a **space**,
//! split into **lanes** (records `residue + j × modulus` of one file or of the stream) that
//! each host reads in order. Each element carries the [`Units`] (records) it was made of;
//! every stage above the unit points passes them on (a batch holds its rows' records) and
//! reports the ones it drops ([`Stage::elastic`](crate::Stage::elastic) says a stage does).
//!
//! A host's progress is, per lane, a frontier and the **holes** below it (records still in a
//! shuffle buffer or a prefetch queue): the checkpoint grows with the records in flight, not
//! with the records read, and is deflated (idle or finished lanes cost a few bits each).
//!
//! # Resuming
//!
//! [`Dataset::resume_elastic`](crate::Dataset::resume_elastic) takes the checkpoints of every
//! host of the run (of one epoch), checks that their lanes cover every space once, and deals
//! what is left to this host by its place in the new layout (the `shard` stage's
//! `num_shards` and `index`). The pipeline runs with the shape of the run that
//! started the epoch (its `shard`s as they were), each unit point reading only this host's
//! lanes and skipping their done records; everything above (shuffle, filter, interleave,
//! batch, mixing of sources) runs as usual on what is left. A host resumed this way
//! checkpoints the same way, so a job can change its number of hosts again.
//!
//! The hosts of a new layout agree without talking: each computes the same dealing from the
//! same checkpoints. Given the checkpoints of a run with as many hosts as the new one, at the
//! epoch's start of elasticity (generation 0), each host resumes its own checkpoint exactly
//! (the same elements as an uninterrupted run).
//!
//! # What is refused
//!
//! A pipeline with, above its unit points, a stage that changes what an epoch holds per
//! host (`take`, `skip`, `repeat`: iterate epochs instead), caches per host (`cache`), or
//! whose outputs cannot be traced to records (an `interleave` of custom sub-datasets, a
//! stage of your own that does not implement [`Stage::elastic`](crate::Stage::elastic)),
//! still checkpoints for exact resume; its checkpoints say why they cannot resume
//! elastically, and [`Dataset::resume_elastic`](crate::Dataset::resume_elastic) fails with
//! that reason.

pub(crate) mod deal;
pub(crate) mod encoding;
pub(crate) mod lane;
pub(crate) mod progress;
pub(crate) mod run;
pub(crate) mod space;
pub(crate) mod unit;

pub use unit::{Unit, Units};
