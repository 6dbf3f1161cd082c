//! Observing runs (issue 27): the trace is valid Chrome trace event JSON (checked by a
//! strict validator of the format's rules), spans nest, every stage appears; the timeline
//! spans epochs; autotune's decisions and skips are events; TensorBoard event files read
//! back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use prost::Message;
use serde_json::Value;
use sluice_core::observe::{
    Observe, TensorBoardWriter, Timeline, TimelineConfig, TraceConfig, Tracer,
};
use sluice_core::prelude::*;
use sluice_core::proto::event::Event;
use sluice_core::proto::tfrecord::{ReaderOptions, TfRecordReader};

/// Spins for `d` (a stage with measurable work).
fn work(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A pipeline of four stages: range -> map (2 threads) -> batch 16 -> prefetch 4.
fn pipeline(n: i64) -> Dataset {
    Dataset::range(0, n)
        .map_with(
            MapSpec {
                num_parallel: NumParallel::Fixed(2),
                ..MapSpec::default()
            },
            |e, _| {
                work(Duration::from_micros(20));
                Ok(e)
            },
        )
        .batch(16)
        .prefetch(BufferSize::Fixed(4))
}

/// The rules of the trace event format (the JSON Object Format of Google's "Trace Event
/// Format" document) that Perfetto and chrome://tracing rely on, checked strictly; plus
/// per track: timestamps in file order never go back, and complete events nest (a span
/// starting inside another ends inside it). Returns the events and how many spans were
/// nested in another.
fn validate(trace: &Value) -> (Vec<Value>, usize) {
    let obj = trace.as_object().expect("the trace is a JSON object");
    assert!(
        matches!(
            obj.get("displayTimeUnit").and_then(Value::as_str),
            Some("ms" | "ns")
        ),
        "displayTimeUnit"
    );
    let events = obj["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    let mut named_threads = BTreeSet::new();
    let mut used_threads = BTreeSet::new();
    // Per (pid, tid): the last timestamp and the stack of open spans' ends.
    let mut last_ts: HashMap<(u64, u64), f64> = HashMap::new();
    let mut open: HashMap<(u64, u64), Vec<f64>> = HashMap::new();
    let mut nested = 0;
    const EPS: f64 = 1e-3; // µs: the format's timestamps are µs with ns precision
    for (i, e) in events.iter().enumerate() {
        let at = |what: &str| format!("event {i} ({e}): {what}");
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("{}", at("ph")));
        let pid = e["pid"].as_u64().unwrap_or_else(|| panic!("{}", at("pid")));
        let tid = e["tid"].as_u64().unwrap_or_else(|| panic!("{}", at("tid")));
        let name = e["name"]
            .as_str()
            .unwrap_or_else(|| panic!("{}", at("name")));
        assert!(!name.is_empty(), "{}", at("empty name"));
        if ph == "M" {
            assert!(
                ["process_name", "thread_name", "thread_sort_index"].contains(&name),
                "{}",
                at("metadata name")
            );
            assert!(e["args"].is_object(), "{}", at("metadata args"));
            if name == "thread_name" {
                assert!(e["args"]["name"].is_string(), "{}", at("thread name"));
                named_threads.insert((pid, tid));
            }
            continue;
        }
        let ts = e["ts"].as_f64().unwrap_or_else(|| panic!("{}", at("ts")));
        assert!(ts >= 0.0, "{}", at("ts < 0"));
        let track = (pid, tid);
        used_threads.insert(track);
        let last = last_ts.entry(track).or_insert(0.0);
        assert!(
            ts + EPS >= *last,
            "{}",
            at("timestamps go back on the track")
        );
        *last = ts;
        match ph {
            "X" => {
                let dur = e["dur"].as_f64().unwrap_or_else(|| panic!("{}", at("dur")));
                assert!(dur >= 0.0, "{}", at("dur < 0"));
                assert!(e["cat"].is_string(), "{}", at("cat"));
                assert!(e["args"].is_object(), "{}", at("args"));
                let stack = open.entry(track).or_default();
                while stack.last().is_some_and(|end| *end <= ts + EPS) {
                    stack.pop();
                }
                if let Some(end) = stack.last() {
                    nested += 1;
                    assert!(
                        ts + dur <= end + EPS,
                        "{}",
                        at(&format!("span overlaps its enclosing span (ends {end})"))
                    );
                }
                stack.push(ts + dur);
            }
            "i" => {
                assert!(
                    matches!(e["s"].as_str(), Some("g" | "p" | "t")),
                    "{}",
                    at("instant scope")
                );
            }
            "C" => {
                let args = e["args"]
                    .as_object()
                    .unwrap_or_else(|| panic!("{}", at("args")));
                assert!(!args.is_empty(), "{}", at("a counter without values"));
                assert!(
                    args.values().all(Value::is_number),
                    "{}",
                    at("counter values")
                );
            }
            other => panic!("{}", at(&format!("unexpected phase {other}"))),
        }
    }
    let unnamed: Vec<_> = used_threads.difference(&named_threads).collect();
    assert!(
        unnamed.is_empty(),
        "tracks without a thread_name: {unnamed:?}"
    );
    (events.clone(), nested)
}

#[test]
#[should_panic(expected = "span overlaps its enclosing span")]
fn the_validator_refuses_spans_that_overlap_without_nesting() {
    let e = |ts: f64, dur: f64| {
        serde_json::json!({"ph": "X", "cat": "stage", "name": "s", "pid": 1, "tid": 1,
                           "ts": ts, "dur": dur, "args": {}})
    };
    validate(
        &serde_json::json!({"displayTimeUnit": "ms", "traceEvents": [
            {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}},
            e(0.0, 10.0), e(5.0, 10.0)
        ]}),
    );
}

#[test]
#[should_panic(expected = "timestamps go back")]
fn the_validator_refuses_time_going_back_on_a_track() {
    validate(
        &serde_json::json!({"displayTimeUnit": "ms", "traceEvents": [
            {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "t"}},
            {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 5.0, "args": {"v": 1}},
            {"ph": "C", "name": "c", "pid": 1, "tid": 1, "ts": 4.0, "args": {"v": 1}}
        ]}),
    );
}

#[test]
fn autotune_decisions_are_instants_in_the_trace() {
    let ds = Dataset::range(0, 200_000)
        .map_with(
            MapSpec {
                num_parallel: NumParallel::Auto,
                ..MapSpec::default()
            },
            |e, _| {
                work(Duration::from_micros(5));
                Ok(e)
            },
        )
        .batch(64)
        .prefetch(BufferSize::Auto);
    let tracer = Tracer::new(TraceConfig::default());
    ds.observe(Observe::new().trace(tracer.clone()));
    let mut it = ds.iter().unwrap();
    assert_eq!(it.by_ref().count(), 3125);
    let decisions = it.stats().autotune;
    drop(it);
    let (events, _) = validate(&trace_of(&tracer));
    let instants: Vec<&Value> = events.iter().filter(|e| e["cat"] == "autotune").collect();
    assert!(!decisions.is_empty(), "autotune decided nothing in the run");
    assert_eq!(instants.len(), decisions.len());
    assert_eq!(instants[0]["args"]["stage"], decisions[0].stage.as_str());
    assert_eq!(instants[0]["args"]["to"], decisions[0].to);
}

fn trace_of(tracer: &Tracer) -> Value {
    let mut out = Vec::new();
    tracer.write(&mut out).unwrap();
    serde_json::from_slice(&out).expect("the trace is JSON")
}

#[test]
fn a_trace_is_valid_nests_and_shows_every_stage_on_named_threads() {
    let ds = pipeline(4000);
    let tracer = Tracer::new(TraceConfig::default());
    ds.observe(Observe::new().trace(tracer.clone()));
    for _ in 0..2 {
        assert_eq!(ds.iter().unwrap().count(), 250);
    }
    let trace = trace_of(&tracer);
    let (events, nested) = validate(&trace);
    // Stages called on one thread nest (batch's span holds map's `next` on prefetch's
    // thread).
    assert!(nested > 0);
    // A span of every stage.
    let spans: BTreeMap<&str, usize> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "stage")
        .fold(BTreeMap::new(), |mut m, e| {
            *m.entry(e["name"].as_str().unwrap()).or_default() += 1;
            m
        });
    for stage in ["range", "map", "batch", "prefetch"] {
        assert!(
            spans.get(stage).is_some_and(|n| *n > 0),
            "{stage}: {spans:?}"
        );
    }
    // The map's spans are on its worker threads, and they are named.
    let names: HashMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let map_threads: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "map")
        .map(|e| names[&e["tid"].as_u64().unwrap()].as_str())
        .collect();
    assert!(map_threads.len() >= 2, "{map_threads:?}");
    assert!(
        map_threads.iter().all(|n| n.starts_with("sluice-")),
        "{map_threads:?}"
    );
    // The prefetch buffer and the bytes buffered as counters; both epochs as instants.
    let counters: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(counters.contains("buffer #3 prefetch"), "{counters:?}");
    assert!(counters.contains("bytes in buffers"), "{counters:?}");
    let epochs = events.iter().filter(|e| e["cat"] == "epoch").count();
    assert_eq!(epochs, 2);
    // The sampling is stated, with every stage's spans and elements over both epochs.
    let other = &trace["otherData"];
    assert!(other["sampling"].as_str().unwrap().contains("one in 16"));
    assert_eq!(other["stages"]["0"]["elements"], 8000);
    assert_eq!(other["stages"]["2"]["name"], "batch");
    assert_eq!(other["truncated"], false);
}

#[test]
fn a_full_trace_stops_recording_and_says_so() {
    let ds = pipeline(2000);
    let tracer = Tracer::new(TraceConfig {
        max_events: 100,
        ..TraceConfig::default()
    });
    ds.observe(Observe::new().trace(tracer.clone()));
    assert_eq!(ds.iter().unwrap().count(), 125);
    let trace = trace_of(&tracer);
    let (events, _) = validate(&trace);
    let recorded = events.iter().filter(|e| e["ph"] != "M").count();
    assert_eq!(recorded, 100);
    assert_eq!(trace["otherData"]["truncated"], true);
    assert!(trace["otherData"]["dropped_events"].as_u64().unwrap() > 0);
}

#[test]
fn skipped_elements_are_instants_in_the_trace_and_events_in_the_timeline() {
    let ds = Dataset::range(0, 100)
        .map(|e| {
            let v = e.tensor("value").and_then(|t| t.as_i64()).unwrap()[0];
            if v % 25 == 0 {
                Err(sluice_core::Error::User(format!("bad {v}").into()))
            } else {
                Ok(e)
            }
        })
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    let (tracer, timeline) = (
        Tracer::new(TraceConfig::default()),
        Timeline::new(TimelineConfig::default()),
    );
    ds.observe(
        Observe::new()
            .trace(tracer.clone())
            .timeline(timeline.clone()),
    );
    assert_eq!(ds.iter().unwrap().count(), 96);
    let (events, _) = validate(&trace_of(&tracer));
    let skips: Vec<&Value> = events.iter().filter(|e| e["cat"] == "skip").collect();
    assert_eq!(skips.len(), 4);
    assert!(
        skips[0]["args"]["error"]
            .as_str()
            .unwrap()
            .contains("bad 0")
    );
    let data = timeline.data();
    assert_eq!(data.events.iter().filter(|e| e.kind == "skip").count(), 4);
}

#[test]
fn a_timeline_samples_every_epoch_with_cumulative_counts() {
    let ds = pipeline(3000);
    let timeline = Timeline::new(TimelineConfig {
        interval: Duration::from_millis(5),
        ..TimelineConfig::default()
    });
    ds.observe(Observe::new().timeline(timeline.clone()));
    for _ in 0..2 {
        assert_eq!(ds.iter().unwrap().count(), 188);
    }
    let data = timeline.data();
    let names: Vec<&str> = data.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["range", "map", "batch", "prefetch"]);
    let epochs: BTreeSet<u64> = data.samples.iter().map(|s| s.epoch).collect();
    assert_eq!(epochs, BTreeSet::from([0, 1]));
    // Counts only grow, over both epochs.
    assert!(data.samples.windows(2).all(|w| w[0].t <= w[1].t
        && w[0].elements <= w[1].elements
        && w[0].stages[0].elements_out <= w[1].stages[0].elements_out));
    let last = data.samples.last().unwrap();
    assert_eq!(last.elements, 376);
    // Records through the batch dimension, both epochs.
    assert_eq!(last.records, Some(6000));
    assert_eq!(last.stages[0].elements_out, 6000);
    assert!(last.stages[1].busy_seconds > 0.0);
    assert_eq!(data.events.iter().filter(|e| e.kind == "epoch").count(), 2);
    // The interval's bottleneck is a stage of the pipeline, in some samples at least.
    assert!(data.samples.iter().any(|s| s.bottleneck.is_some()));
}

#[test]
fn stats_give_each_stage_its_time_per_element_percentiles() {
    let ds = pipeline(2000);
    let mut it = ds.iter().unwrap();
    assert_eq!(it.by_ref().count(), 125);
    let stats = it.stats();
    let map = stats.stages.iter().find(|s| s.name == "map").unwrap();
    let (p50, p99) = (
        map.element_p50_seconds.unwrap(),
        map.element_p99_seconds.unwrap(),
    );
    // 20 µs of spinning per element (to within the histogram's 12 %, and the scheduler).
    assert!(p50 >= 17e-6, "{p50}");
    assert!(p99 >= p50);
    let batch = stats.stages.iter().find(|s| s.name == "batch").unwrap();
    assert!(batch.element_p50_seconds.is_some());
    // prefetch's thread works for its input: no time of its own.
    let prefetch = stats.stages.iter().find(|s| s.name == "prefetch").unwrap();
    assert_eq!(prefetch.element_p50_seconds, None);
    let report = stats.report();
    assert!(
        report.contains(" p50 ") && report.contains(" p99 "),
        "{report}"
    );
    assert!(report.contains("µs"), "{report}");
}

#[test]
fn tensorboard_event_files_hold_the_timeline_as_scalars() {
    let dir = tempfile::tempdir().unwrap();
    let ds = pipeline(3000);
    let timeline = Timeline::new(TimelineConfig {
        interval: Duration::from_millis(5),
        ..TimelineConfig::default()
    });
    let writer = TensorBoardWriter::create(dir.path()).unwrap();
    let path = writer.path().to_path_buf();
    timeline.add_sink(Box::new(writer));
    ds.observe(Observe::new().timeline(timeline.clone()));
    assert_eq!(ds.iter().unwrap().count(), 188);
    assert!(
        path.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("events.out.tfevents.")
    );
    let bytes = std::fs::read(&path).unwrap();
    let events: Vec<Event> = TfRecordReader::new(&bytes[..], "events", ReaderOptions::default())
        .map(|r| Event::decode(&r.unwrap().data[..]).unwrap())
        .collect();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    // One event per sample, steps in milliseconds that never go back.
    assert_eq!(events.len() - 1, timeline.data().samples.len());
    assert!(events.windows(2).all(|w| w[0].step <= w[1].step));
    let tags: BTreeSet<String> = events[1..]
        .iter()
        .flat_map(|e| {
            e.summary
                .as_ref()
                .unwrap()
                .value
                .iter()
                .map(|v| v.tag.clone())
        })
        .collect();
    for tag in [
        "pipeline/elements_per_s",
        "pipeline/bottleneck_stage",
        "pipeline/buffered_mb",
        "stage/01_map/elements_per_s",
        "stage/01_map/busy_fraction",
        "stage/03_prefetch/buffer_fill",
    ] {
        assert!(tags.contains(tag), "{tag}: {tags:?}");
    }
    // The elements/s of all samples together give the elements produced: each sample's
    // rate is over the time since the one before (the first's since the run started, step 0).
    let mut since = 0;
    let produced: f64 = events[1..]
        .iter()
        .map(|e| {
            let rate = e.summary.as_ref().unwrap().value[0].simple_value.unwrap() as f64;
            let elapsed = (e.step - since) as f64 / 1e3;
            since = e.step;
            rate * elapsed
        })
        .sum();
    assert!((produced - 188.0).abs() < 188.0 * 0.1, "{produced}");
}
