//! Pipeline files with `plugin` stages, loaded by [`sluice_plugins::Loader`]: the example
//! `gaussian_noise` plugin (built as a cdylib by cargo next to this test, since it is a
//! dev-dependency) runs on small TFRecord shards of float images, changes them, and does
//! so reproducibly from the pipeline's seed at any parallelism. Bad plugin stages fail
//! before anything runs, naming the stage, the file and (for a bad config) the plugin.

use std::path::{Path, PathBuf};

use sluice_core::Error as CoreError;
use sluice_core::pipeline_file::{PipelineFile, PluginStageSpec};
use sluice_core::proto::TfMessage;
use sluice_core::proto::example::{Example, Feature, Features, FloatList, Int64List, feature};
use sluice_core::proto::tfrecord::{Compression, TfRecordWriter};
use sluice_core::{Element, Tensor};
use sluice_plugins::Loader;

const RECORDS: usize = 24;
const SHAPE: [usize; 3] = [4, 5, 3];

/// The directory holding the example plugin's cdylib (this test binary's directory).
fn plugin_dir() -> PathBuf {
    std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The plugin's file name on this platform (`libsluice_example_noise.so` on Linux).
fn noise_file() -> String {
    format!(
        "{}sluice_example_noise{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    )
}

/// Two shards of Examples with `image` (4x5x3 floats in [0, 1]) and `label`.
fn data() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for s in 0..2 {
        let path = dir.path().join(format!("train.tfrecord-{s:05}-of-00002"));
        let mut w = TfRecordWriter::create(&path, Compression::None).unwrap();
        for k in 0..RECORDS / 2 {
            let i = s * RECORDS / 2 + k;
            let pixels: Vec<f32> = (0..SHAPE.iter().product::<usize>())
                .map(|j| ((i * 31 + j * 7) % 256) as f32 / 255.0)
                .collect();
            let mut features = Features::default();
            features.feature.insert(
                "image".into(),
                Feature {
                    kind: Some(feature::Kind::FloatList(FloatList { value: pixels })),
                },
            );
            features.feature.insert(
                "label".into(),
                Feature {
                    kind: Some(feature::Kind::Int64List(Int64List {
                        value: vec![i as i64],
                    })),
                },
            );
            let ex = Example {
                features: Some(features),
            };
            w.write_record(&ex.to_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    dir
}

/// A pipeline over `data`: parse, then `plugin` (a `[[stage]]` body, or none), seed `seed`.
/// The plugin path is the one a release build gives; the test looks it up in
/// [`plugin_dir`] with `with_plugin_dir`, as `sluice run --plugin-dir` does.
fn pipeline(data: &Path, plugin: Option<&str>, seed: u64) -> PipelineFile {
    let mut text = format!(
        "[source]\nfiles = [\"train.tfrecord-*\"]\n\n[options]\nseed = {seed}\n\n\
         [[stage]]\nkind = \"parse_example\"\n\
         features.image = {{ dtype = \"float\", shape = [4, 5, 3] }}\n\
         features.label = {{ dtype = \"int64\" }}\n"
    );
    if let Some(body) = plugin {
        text.push_str(&format!(
            "\n[[stage]]\nkind = \"plugin\"\npath = \"target/release/{}\"\n{body}",
            noise_file()
        ));
    }
    PipelineFile::from_toml(&text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .with_data_dir(data)
        .with_plugin_dir(plugin_dir())
}

fn run(p: &PipelineFile) -> Vec<Element> {
    p.build_with(&Loader::default()).unwrap().collect().unwrap()
}

fn image(e: &Element) -> Vec<u32> {
    let t: &Tensor = e.tensor("image").unwrap();
    assert_eq!(t.shape(), SHAPE);
    t.as_f32().unwrap().iter().map(|x| x.to_bits()).collect()
}

#[test]
fn the_noise_plugin_changes_the_images_reproducibly_from_the_seed() {
    let data = data();
    let config = "config = { sigma = 0.1 }\n";
    let plain = run(&pipeline(data.path(), None, 7));
    let noisy = run(&pipeline(data.path(), Some(config), 7));
    assert_eq!(plain.len(), RECORDS);
    assert_eq!(noisy.len(), RECORDS);
    for (a, b) in plain.iter().zip(&noisy) {
        // Same element, same label, different pixels.
        assert_eq!(a.id(), b.id());
        assert_eq!(a.tensor("label"), b.tensor("label"));
        assert_ne!(image(a), image(b), "element {} unchanged", a.id());
    }

    // The same seed gives the same bits, sequential or on threads in chunks of any size.
    let again = run(&pipeline(data.path(), Some(config), 7));
    assert_eq!(again, noisy);
    let threaded = run(&pipeline(
        data.path(),
        Some(&format!(
            "{config}num_parallel = 3\nchunk_size = 5\ndeterministic = true\n"
        )),
        7,
    ));
    assert_eq!(threaded, noisy);
    // Another seed, other noise.
    let other = run(&pipeline(data.path(), Some(config), 8));
    assert_eq!(other.len(), RECORDS);
    assert_ne!(image(&other[0]), image(&noisy[0]));
}

#[test]
fn stats_name_the_plugin() {
    let data = data();
    let dataset = pipeline(data.path(), Some("num_parallel = 2\n"), 1)
        .build_with(&Loader::default())
        .unwrap();
    assert_eq!(dataset.collect().unwrap().len(), RECORDS);
    let stats = dataset.stats().unwrap();
    let names: Vec<&str> = stats.stages.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"plugin:gaussian_noise"), "{names:?}");
    // The config is part of the cache fingerprint.
    let a = pipeline(data.path(), Some("config = { sigma = 0.1 }\n"), 1);
    let b = pipeline(data.path(), Some("config = { sigma = 0.2 }\n"), 1);
    assert_ne!(
        a.build_with(&Loader::default()).unwrap().fingerprint(),
        b.build_with(&Loader::default()).unwrap().fingerprint()
    );
}

/// The error of building a pipeline whose plugin stage is `body`, its file at `path`
/// (default: the example plugin).
fn build_error(data: &Path, body: &str, path: Option<&str>) -> CoreError {
    let mut p = pipeline(data, Some(body), 1);
    if let (Some(path), Some(s)) = (path, p.stages[1].get_mut::<PluginStageSpec>()) {
        s.path = PathBuf::from(path);
    }
    p.build_with(&Loader::default()).unwrap_err()
}

#[test]
fn bad_plugin_stages_fail_before_anything_runs() {
    let data = data();
    // A config the plugin refuses: its own message, naming the plugin and the key.
    let e = build_error(data.path(), "config = { sigma = 0.1, sigmaa = 2 }\n", None);
    let text = e.to_string();
    assert!(
        matches!(e, CoreError::PluginStage { stage: 2, .. }),
        "{text}"
    );
    assert!(text.starts_with("stage 2 (plugin "), "{text}");
    assert!(
        text.contains(
            "plugin gaussian_noise: init failed: invalid configuration: unknown key \"sigmaa\""
        ),
        "{text}"
    );
    let e = build_error(data.path(), "config = { sigma = -1.0 }\n", None);
    assert!(
        e.to_string()
            .contains("gaussian_noise: init failed: invalid configuration: sigma must be finite and >= 0, got -1"),
        "{e}"
    );

    // A missing file, a missing WASM module (the WASM host's error), an unknown extension.
    let e = build_error(data.path(), "", Some("no/such/libplugin.so"));
    let text = e.to_string();
    assert!(text.contains("no/such/libplugin.so"), "{text}");
    assert!(text.contains("no such file"), "{text}");
    let e = build_error(data.path(), "", Some("plugins/noise.wasm"));
    assert!(matches!(e, CoreError::PluginStage { stage: 2, .. }), "{e}");
    assert!(
        e.to_string()
            .contains("plugins/noise.wasm: cannot load the plugin: "),
        "{e}"
    );
    let e = build_error(data.path(), "", Some("plugins/noise.txt"));
    assert!(
        e.to_string()
            .contains("not a plugin file: the extension .txt (expected .so"),
        "{e}"
    );
    let e = build_error(data.path(), "", Some("plugins/noise"));
    assert!(e.to_string().contains("no extension"), "{e}");

    // Limits are for WASM plugins: a native plugin cannot be limited, and says so.
    let e = build_error(data.path(), "limits = { memory = \"64MiB\" }\n", None);
    assert!(
        e.to_string()
            .contains("`limits` apply to WASM plugins only"),
        "{e}"
    );

    // A WASM plugin's limits are the WASM host's options: checked (before the module is
    // read) with the same messages as ever, as the stage's error.
    for (body, message) in [
        (
            "limits = { mem = \"1MiB\" }\n",
            "`limits`: unknown field `mem`, expected one of `memory`, `time_ms`; did you mean \
             `memory`?",
        ),
        (
            "limits = { memory = \"1KiB\" }\n",
            "`limits.memory` must be at least 64KiB (one WASM page), got 1024 bytes",
        ),
        (
            "[stage.limits]\ntime_ms = 0\n",
            "`limits.time_ms` must be at least 1",
        ),
    ] {
        let e = build_error(data.path(), body, Some("plugins/noise.wasm"));
        assert!(matches!(e, CoreError::PluginStage { stage: 2, .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("stage 2 (plugin plugins/noise.wasm): plugins/noise.wasm: {message}")
        );
    }
}

#[test]
fn a_component_plugin_runs_in_a_pipeline_file_as_its_native_build_does() {
    // The `gaussian_noise` component (the map-transform world), under the name a user would
    // give it, in a plugin directory; the loader tells it from a core module by its header.
    let component = sluice_guest_build::build_component(
        &sluice_guest_build::workspace_dir(),
        "sluice-example-noise-component",
    )
    .unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&component, plugins.path().join("noise.wasm")).unwrap();
    let data = data();
    let with = |path: &str, body: &str| {
        let text = format!(
            "[source]\nfiles = [\"train.tfrecord-*\"]\n\n[options]\nseed = 3\n\n\
             [[stage]]\nkind = \"parse_example\"\n\
             features.image = {{ dtype = \"float\", shape = [4, 5, 3] }}\n\
             features.label = {{ dtype = \"int64\" }}\n\n\
             [[stage]]\nkind = \"plugin\"\npath = \"{path}\"\nconfig = {{ sigma = 0.2 }}\n{body}"
        );
        PipelineFile::from_toml(&text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"))
            .with_data_dir(data.path())
    };
    let native = run(&with(&noise_file(), "").with_plugin_dir(plugin_dir()));
    let sandboxed = run(&with(
        "noise.wasm",
        "num_parallel = 2\nchunk_size = 5\nlimits = { memory = \"64MiB\", time_ms = 5000 }\n",
    )
    .with_plugin_dir(plugins.path()));
    assert_eq!(sandboxed.len(), RECORDS);
    assert_eq!(
        sandboxed, native,
        "the component gives the native build's bits"
    );
    let plain = run(&pipeline(data.path(), None, 3));
    assert_ne!(image(&plain[0]), image(&sandboxed[0]), "the images changed");
    // A bad config is refused in the plugin's words before anything runs.
    let bad = PipelineFile::from_toml(
        "[source]\nfiles = [\"train.tfrecord-*\"]\n\n\
         [[stage]]\nkind = \"plugin\"\npath = \"noise.wasm\"\nconfig = { sigma = -1 }\n",
    )
    .unwrap()
    .with_data_dir(data.path())
    .with_plugin_dir(plugins.path());
    let err = bad
        .build_with(&Loader::default())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "plugin gaussian_noise: init failed: invalid configuration: sigma must be finite"
        ),
        "{err}"
    );
}

/// A pipeline with `repeat` is checkpointed at a position (no elastic progress); resuming
/// it skips the elements before the position at the source and through the `map` plugin
/// (one output per input, of that input alone) instead of running the plugin on each and
/// dropping the results: the resumed run's plugin stage sees only the elements left, and
/// they are exactly the uninterrupted run's.
#[test]
fn a_map_plugin_stage_resumes_without_running_the_plugin_on_the_elements_before() {
    let data = data();
    let repeated = |seed| {
        let mut text = format!(
            "[source]\nfiles = [\"train.tfrecord-*\"]\n\n[options]\nseed = {seed}\n\n\
             [[stage]]\nkind = \"parse_example\"\n\
             features.image = {{ dtype = \"float\", shape = [4, 5, 3] }}\n\
             features.label = {{ dtype = \"int64\" }}\n\n\
             [[stage]]\nkind = \"repeat\"\ncount = 3\n"
        );
        text.push_str(&format!(
            "\n[[stage]]\nkind = \"plugin\"\npath = \"target/release/{}\"\nchunk_size = 4\n\
             config = {{ sigma = 0.1 }}\n",
            noise_file()
        ));
        PipelineFile::from_toml(&text)
            .unwrap()
            .with_data_dir(data.path())
            .with_plugin_dir(plugin_dir())
            .build_with(&Loader::default())
            .unwrap()
    };
    let whole: Vec<Vec<u32>> = repeated(3).collect().unwrap().iter().map(image).collect();
    assert_eq!(whole.len(), 3 * RECORDS);
    let ds = repeated(3);
    let mut it = ds.iter().unwrap();
    let first: Vec<Vec<u32>> = it.by_ref().take(50).map(|e| image(&e.unwrap())).collect();
    let checkpoint = it.checkpoint().unwrap();
    drop(it);
    let resumed_ds = repeated(3);
    let mut resumed = resumed_ds.resume(&checkpoint).unwrap();
    let rest: Vec<Vec<u32>> = resumed.by_ref().map(|e| image(&e.unwrap())).collect();
    assert!([first, rest].concat() == whole, "the resumed run differs");
    let stats = resumed.stats();
    let plugin = stats
        .stages
        .iter()
        .find(|s| s.name.starts_with("plugin:"))
        .expect("the plugin stage's stats");
    assert_eq!(plugin.elements_in, (3 * RECORDS - 50) as u64, "{plugin:?}");
}

/// A traced run shows every plugin call as a span of category `plugin`, named for the
/// plugin and its host, inside the span of its stage's chunk on the same worker thread.
#[test]
fn plugin_calls_are_spans_in_a_trace() {
    use sluice_core::observe::{Observe, TraceConfig, Tracer};
    let data = data();
    let p = pipeline(
        data.path(),
        Some("config = { sigma = 0.1 }\nnum_parallel = 2\nchunk_size = 4\n"),
        7,
    );
    let ds = p.build_with(&Loader::default()).unwrap();
    let tracer = Tracer::new(TraceConfig::default());
    ds.observe(Observe::new().trace(tracer.clone()));
    assert_eq!(ds.iter().unwrap().count(), RECORDS);
    let mut json = Vec::new();
    tracer.write(&mut json).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let calls: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "plugin")
        .collect();
    // 24 records in chunks of 4 (a reader's chunk may be cut short at a file's end).
    assert!(calls.len() >= RECORDS / 4, "{} calls", calls.len());
    assert!(
        calls
            .iter()
            .all(|c| c["name"] == "call gaussian_noise (native)"),
        "{calls:?}"
    );
    // A call and a span of the plugin's stage on the same thread nest: the call lies
    // inside the chunk's span (stage spans are sampled, calls are not: some calls have no
    // recorded chunk around them, none crosses one's edge).
    let span = |e: &serde_json::Value| {
        let ts = e["ts"].as_f64().unwrap();
        (ts, ts + e["dur"].as_f64().unwrap())
    };
    let mut inside = 0;
    for c in &calls {
        let (ts, end) = span(c);
        for s in events.iter().filter(|s| {
            s["cat"] == "stage" && s["name"] == "plugin:gaussian_noise" && s["tid"] == c["tid"]
        }) {
            let (s0, s1) = span(s);
            let overlaps = s0 < end && ts < s1;
            if overlaps {
                assert!(s0 <= ts + 1e-3 && end <= s1 + 1e-3, "{c} crosses {s}");
                inside += 1;
            }
        }
    }
    assert!(inside > 0, "no call inside its stage's span");
}
