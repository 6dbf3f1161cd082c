//! [`Run`]: the JSON `sluice run --json` prints, read back tolerantly.
//!
//! Every field but `stages` may be missing (older JSON has no `timeline`, no
//! `sluice_version`, no per-element percentiles): what is missing is `None`, zero or empty,
//! and the report says so where it matters. A field of the wrong type is an [`Error`]
//! naming it (`stages[2].busy_seconds: invalid type: ...`).

use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use sluice_core::observe::{Sample, TimelineData, TimelineEvent, TimelineStage};

use crate::error::Error;

/// One run of a pipeline: its totals, its stages' statistics, autotune's decisions and,
/// when recorded, its [timeline](TimelineData).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// What the report calls the run (the file name, or `run`).
    pub label: String,
    /// The pipeline's name (`[pipeline] name`), if it has one.
    pub pipeline: Option<String>,
    /// The pipeline file.
    pub file: String,
    /// Epochs run.
    pub epochs: u64,
    /// Elements the pipeline produced.
    pub elements: u64,
    /// Batches among them.
    pub batches: u64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Elements per second over the run.
    pub elements_per_s: f64,
    /// Elements skipped under the skip error policy.
    pub skipped: u64,
    /// Every record read, accounted for (`None` when not followed or not recorded).
    pub records: Option<Records>,
    /// The bottleneck stage's name, as the run named it.
    pub bottleneck: Option<String>,
    /// Per-stage statistics, in stage order.
    pub stages: Vec<Stage>,
    /// What autotune changed or tried.
    pub autotune: Vec<Decision>,
    /// Set when Ctrl-C stopped the run after this many elements.
    pub interrupted: Option<u64>,
    /// The Sluice that ran.
    pub sluice_version: Option<String>,
    /// The machine's CPUs.
    pub cpus: Option<u64>,
    /// When the run started, seconds since the Unix epoch.
    pub started_unix: Option<f64>,
    /// The statistics over time (`None` in JSON from before timelines).
    pub timeline: Option<TimelineData>,
}

/// The record account of a run: core's [`RecordAccount`](sluice_core::RecordAccount),
/// read back with every field defaulted when missing.
pub type Records = sluice_core::RecordAccount;

/// One stage's statistics over the run: core's [`StageStats`](sluice_core::StageStats),
/// read back with every field defaulted when missing (older JSON has no percentiles).
pub type Stage = sluice_core::StageStats;

/// What the report asks of a [`Stage`] beyond its statistics.
pub trait StageExt {
    /// The threads it works on: its workers, else its row threads, else one (its
    /// consumer's).
    fn thread_count(&self) -> u64;
    /// `name#index`, as autotune and errors name a stage.
    fn id(&self) -> String;
}

impl StageExt for Stage {
    fn thread_count(&self) -> u64 {
        self.threads().max(1)
    }

    fn id(&self) -> String {
        format!("{}#{}", self.name, self.index)
    }
}

/// One of autotune's decisions (`sluice_core::autotune::Decision`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Decision {
    /// Seconds since the run started.
    pub at_seconds: f64,
    /// The stage, `name#index`.
    pub stage: String,
    /// `num_parallel`, `reading_threads` or `buffer_size`.
    pub knob: String,
    /// The value before.
    pub from: u64,
    /// The value after.
    pub to: u64,
    /// Why.
    pub reason: String,
}

impl Run {
    /// Reads the JSON of `sluice run --json`. The run is labelled `run`; see
    /// [`Run::from_file`] and [`Run::with_label`].
    pub fn from_json(json: &str) -> Result<Run, Error> {
        let value: Value = serde_json::from_str(json).map_err(|e| Error::Syntax {
            file: None,
            line: e.line(),
            column: e.column(),
            // serde_json's message without its " at line L column C".
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_string(),
        })?;
        let Value::Object(obj) = value else {
            return Err(Error::NotARun {
                file: None,
                why: "the JSON is not an object".into(),
            });
        };
        let Some(Value::Array(stages)) = obj.get("stages") else {
            return Err(Error::NotARun {
                file: None,
                why: "it has no `stages` list".into(),
            });
        };
        let stages = stages
            .iter()
            .enumerate()
            .map(|(i, v)| parse(v, || format!("stages[{i}]")))
            .collect::<Result<Vec<Stage>, Error>>()?;
        let autotune: Vec<Value> = field(&obj, "autotune")?;
        let autotune = autotune
            .iter()
            .enumerate()
            .map(|(i, v)| parse(v, || format!("autotune[{i}]")))
            .collect::<Result<Vec<Decision>, Error>>()?;
        let timeline = match obj.get("timeline") {
            None | Some(Value::Null) => None,
            Some(Value::Object(t)) => Some(timeline(t)?),
            Some(_) => {
                return Err(Error::Field {
                    file: None,
                    field: "timeline".into(),
                    message: "expected an object".into(),
                });
            }
        };
        Ok(Run {
            label: "run".into(),
            pipeline: field(&obj, "pipeline")?,
            file: field(&obj, "file")?,
            epochs: field(&obj, "epochs")?,
            elements: field(&obj, "elements")?,
            batches: field(&obj, "batches")?,
            seconds: field(&obj, "seconds")?,
            elements_per_s: field(&obj, "elements_per_s")?,
            skipped: field(&obj, "skipped")?,
            records: field(&obj, "records")?,
            bottleneck: field(&obj, "bottleneck")?,
            stages,
            autotune,
            interrupted: field(&obj, "interrupted")?,
            sluice_version: field(&obj, "sluice_version")?,
            cpus: field(&obj, "cpus")?,
            started_unix: field(&obj, "started_unix")?,
            timeline,
        })
    }

    /// Reads the file `path` (the JSON of `sluice run --json`), labelled with its file
    /// name; errors name the file.
    pub fn from_file(path: &Path) -> Result<Run, Error> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            file: name.clone(),
            source,
        })?;
        let label = path
            .file_name()
            .map_or_else(|| name.clone(), |n| n.to_string_lossy().into_owned());
        Run::from_json(&text)
            .map(|r| r.with_label(label))
            .map_err(|e| e.in_file(&name))
    }

    /// This run, called `label` in the report.
    pub fn with_label(mut self, label: impl Into<String>) -> Run {
        self.label = label.into();
        self
    }

    /// The stage the run named its bottleneck, else the one that caused the most waiting.
    pub fn bottleneck_stage(&self) -> Option<&Stage> {
        let by_name = self.bottleneck.as_deref().and_then(|name| {
            self.stages
                .iter()
                .filter(|s| s.name == name)
                .max_by(|a, b| a.caused_wait_seconds.total_cmp(&b.caused_wait_seconds))
        });
        by_name.or_else(|| {
            self.stages
                .iter()
                .filter(|s| s.caused_wait_seconds > 0.0)
                .max_by(|a, b| a.caused_wait_seconds.total_cmp(&b.caused_wait_seconds))
        })
    }

    /// The samples of the timeline (empty without one).
    pub fn samples(&self) -> &[Sample] {
        self.timeline.as_ref().map_or(&[], |t| &t.samples)
    }

    /// The name of stage number `index`.
    pub fn stage_name(&self, index: usize) -> String {
        self.stages
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.name.clone())
            .or_else(|| {
                self.timeline.as_ref().and_then(|t| {
                    t.stages
                        .iter()
                        .find(|s| s.index == index)
                        .map(|s| s.name.clone())
                })
            })
            .unwrap_or_else(|| format!("stage {index}"))
    }
}

/// `obj[key]` as a `T`; missing or `null` is `T::default()`.
fn field<T: DeserializeOwned + Default>(obj: &Map<String, Value>, key: &str) -> Result<T, Error> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => parse(v, || key.to_string()),
    }
}

fn parse<T: DeserializeOwned>(v: &Value, name: impl Fn() -> String) -> Result<T, Error> {
    T::deserialize(v).map_err(|e| Error::Field {
        file: None,
        field: name(),
        message: e.to_string(),
    })
}

fn timeline(t: &Map<String, Value>) -> Result<TimelineData, Error> {
    let list = |key: &str| -> Result<Vec<Value>, Error> {
        field::<Vec<Value>>(t, key).map_err(|e| e.prefixed("timeline"))
    };
    let each = |key: &str| -> Result<Vec<(String, Value)>, Error> {
        Ok(list(key)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| (format!("timeline.{key}[{i}]"), v))
            .collect())
    };
    let stages = each("stages")?
        .iter()
        .map(|(n, v)| parse::<TimelineStage>(v, || n.clone()))
        .collect::<Result<_, _>>()?;
    let samples = each("samples")?
        .iter()
        .map(|(n, v)| parse::<Sample>(v, || n.clone()))
        .collect::<Result<_, _>>()?;
    let events = each("events")?
        .iter()
        .map(|(n, v)| parse::<TimelineEvent>(v, || n.clone()))
        .collect::<Result<_, _>>()?;
    Ok(TimelineData {
        interval_seconds: field(t, "interval_seconds").map_err(|e| e.prefixed("timeline"))?,
        stages,
        samples,
        events,
        events_dropped: field(t, "events_dropped").map_err(|e| e.prefixed("timeline"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_json_without_timeline_or_versions_reads() {
        let run = Run::from_json(
            r#"{"elements": 10, "seconds": 2.0, "stages": [{"index": 0, "name": "range"}]}"#,
        )
        .unwrap();
        assert_eq!(run.elements, 10);
        assert_eq!(run.stages[0].name, "range");
        assert!(run.timeline.is_none() && run.sluice_version.is_none());
        assert_eq!(run.stages[0].element_p50_seconds, None);
    }

    #[test]
    fn errors_name_the_field() {
        let e = Run::from_json(r#"{"stages": [{"index": 0}, {"busy_seconds": "x"}]}"#).unwrap_err();
        assert!(e.to_string().contains("stages[1]"), "{e}");
        let e = Run::from_json(r#"{"stages": [], "timeline": {"samples": [{"t": 1}]}}"#)
            .unwrap_err()
            .in_file("a.json");
        let msg = e.to_string();
        assert!(
            msg.contains("a.json") && msg.contains("timeline.samples[0]"),
            "{msg}"
        );
        let e = Run::from_json(r#"{"elements": 3}"#).unwrap_err();
        assert!(e.to_string().contains("stages"), "{e}");
        let e = Run::from_json("{\n  \"stages\": [,]}").unwrap_err();
        assert!(matches!(e, Error::Syntax { line: 2, .. }), "{e}");
    }
}
