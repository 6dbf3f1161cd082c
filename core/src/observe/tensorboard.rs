//! [`TensorBoardWriter`]: a run's timeline as TensorBoard scalars, written as the run goes
//! (`tensorboard --logdir DIR` shows them, live).
//!
//! An event file is a TFRecord file of `Event` protos ([`sluice_proto::event`]); the
//! writer makes one per run in its directory, `events.out.tfevents.SECONDS.HOST.PID.sluice`,
//! and appends one event per [timeline sample](super::Sample), its step the milliseconds
//! since the run started. Tags:
//!
//! | Tag | Value |
//! |---|---|
//! | `pipeline/elements_per_s` | elements the pipeline produced per second since the sample before (batches, when it batches) |
//! | `pipeline/records_per_s` | records delivered per second, through the batch dimension (when the run follows its records) |
//! | `pipeline/buffered_mb` | MB the run's buffers hold |
//! | `pipeline/bottleneck_stage` | the number of the stage the pipeline waited on most since the sample before (-1: none) |
//! | `stage/NN_NAME/elements_per_s` | elements the stage handed out per second |
//! | `stage/NN_NAME/mb_per_s` | MB it handed out per second |
//! | `stage/NN_NAME/busy_fraction` | share of its threads' time spent working (0..1) |
//! | `stage/NN_NAME/waited_on_fraction` | share of the interval the pipeline waited on it (its caused wait / interval) |
//! | `stage/NN_NAME/buffer_fill` | its buffer's occupancy / capacity (stages with a buffer) |
//! | `autotune/STAGE/KNOB` | a value autotune set |

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;
use sluice_proto::event::{Event, Summary, SummaryValue};
use sluice_proto::tfrecord::{Compression, TfRecordWriter};

use super::{Sample, TimelineSink, TimelineStage};
use crate::error::{Error, Result};

/// Writes a [`Timeline`](super::Timeline)'s samples as TensorBoard scalars (see the
/// [module](self)); add it with [`Timeline::add_sink`](super::Timeline::add_sink).
pub struct TensorBoardWriter {
    path: PathBuf,
    writer: TfRecordWriter<BufWriter<File>>,
    /// Seconds since the Unix epoch when the run started.
    start: f64,
}

impl std::fmt::Debug for TensorBoardWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorBoardWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TensorBoardWriter {
    /// A new event file in `dir` (made if missing), its first event the file version.
    pub fn create(dir: &Path) -> Result<TensorBoardWriter> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| Error::Io { path, error }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        let path = dir.join(format!(
            "events.out.tfevents.{}.{host}.{}.sluice",
            now as u64,
            std::process::id()
        ));
        let file = File::create(&path).map_err(io(&path))?;
        let mut writer = TfRecordWriter::new(BufWriter::new(file), Compression::None)
            .map_err(|e| Error::internal(format!("{}: {e}", path.display())))?;
        let first = Event {
            wall_time: now,
            step: 0,
            file_version: Some("brain.Event:2".into()),
            summary: None,
        };
        writer
            .write_record(&first.encode_to_vec())
            .and_then(|()| writer.flush())
            .map_err(|e| Error::internal(format!("{}: {e}", path.display())))?;
        Ok(TensorBoardWriter {
            path,
            writer,
            start: now,
        })
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `NN_NAME`: a stage's part of a tag (the name's characters TensorBoard groups by kept).
fn stage_tag(index: usize, stages: &[TimelineStage]) -> String {
    let name = stages
        .iter()
        .find(|s| s.index == index)
        .map_or("stage", |s| s.name.as_str());
    format!("{index:02}_{}", tag_part(name))
}

/// `name` as part of a tag: the characters TensorBoard groups by (`/`, spaces, `#`, ...)
/// replaced by `_`.
fn tag_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The scalars of `sample` (rates against `previous`).
pub(crate) fn scalars(
    stages: &[TimelineStage],
    sample: &Sample,
    previous: Option<&Sample>,
) -> Vec<(String, f32)> {
    let mut out = Vec::new();
    let dt = previous.map_or(sample.t, |p| sample.t - p.t).max(1e-9);
    let elements_before = previous.map_or(0, |p| p.elements);
    out.push((
        "pipeline/elements_per_s".to_string(),
        (sample.elements.saturating_sub(elements_before) as f64 / dt) as f32,
    ));
    if let (Some(r), before) = (sample.records, previous.and_then(|p| p.records)) {
        out.push((
            "pipeline/records_per_s".to_string(),
            (r.saturating_sub(before.unwrap_or(0)) as f64 / dt) as f32,
        ));
    }
    out.push((
        "pipeline/buffered_mb".to_string(),
        (sample.buffered_bytes as f64 / 1e6) as f32,
    ));
    out.push((
        "pipeline/bottleneck_stage".to_string(),
        sample.bottleneck.map_or(-1.0, |b| b as f32),
    ));
    for s in &sample.stages {
        let p = previous.and_then(|p| p.stages.iter().find(|x| x.index == s.index));
        let d = |f: fn(&super::StageSample) -> f64| f(s) - p.map_or(0.0, f);
        let tag = stage_tag(s.index, stages);
        let threads = s.threads.max(1) as f64;
        out.push((
            format!("stage/{tag}/elements_per_s"),
            (d(|x| x.elements_out as f64) / dt) as f32,
        ));
        out.push((
            format!("stage/{tag}/mb_per_s"),
            (d(|x| x.bytes_out as f64) / 1e6 / dt) as f32,
        ));
        out.push((
            format!("stage/{tag}/busy_fraction"),
            (d(|x| x.busy_seconds) / (dt * threads)).clamp(0.0, 1.0) as f32,
        ));
        out.push((
            format!("stage/{tag}/waited_on_fraction"),
            (d(|x| x.caused_wait_seconds) / dt).clamp(0.0, 1.0) as f32,
        ));
        if s.buffer_capacity > 0 {
            out.push((
                format!("stage/{tag}/buffer_fill"),
                (s.buffer_len as f64 / s.buffer_capacity as f64) as f32,
            ));
        }
    }
    for k in &sample.knobs {
        out.push((
            format!("autotune/{}/{}", tag_part(&k.stage), k.knob),
            k.value as f32,
        ));
    }
    out
}

impl TimelineSink for TensorBoardWriter {
    fn sample(&mut self, stages: &[TimelineStage], sample: &Sample, previous: Option<&Sample>) {
        let event = Event {
            wall_time: self.start + sample.t,
            step: (sample.t * 1e3).round() as i64,
            file_version: None,
            summary: Some(Summary {
                value: scalars(stages, sample, previous)
                    .into_iter()
                    .map(|(tag, v)| SummaryValue {
                        tag,
                        simple_value: Some(v),
                    })
                    .collect(),
            }),
        };
        if let Err(e) = self.writer.write_record(&event.encode_to_vec()) {
            tracing::warn!(path = %self.path.display(), %e, "cannot write TensorBoard events");
        }
        // TensorBoard reads the file as it grows: every sample is visible at once.
        self.flush();
    }

    fn flush(&mut self) {
        if let Err(e) = self.writer.flush() {
            tracing::warn!(path = %self.path.display(), %e, "cannot write TensorBoard events");
        }
    }
}
