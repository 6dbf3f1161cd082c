//! `sluice plugin check`: property checks of any plugin, native or WASM, against its own
//! declared contract. What a plugin author runs before shipping.
//!
//! Elements are generated from the plugin's declared inputs (names, dtypes, ranks; a
//! feature without a dtype gets `u8`, one without a rank gets rank 3; rank-3 features are
//! HWC images with 1 or 3 channels), in calls of 1 to 6 elements, by proptest with a fixed
//! seed; a failing case is shrunk to a minimal one and printed as Rust code. The checks:
//!
//! | check | passes when |
//! |---|---|
//! | `accepts_contract` | every call on contract-conforming elements succeeds |
//! | `deterministic` | the same elements and seeds give the same output bits, twice and on a fresh instance |
//! | `independent` | (not for `batch` plugins) an element's output is the same alone as among others |
//! | `output_contract` | outputs carry the declared output features (and a map gives one per input) |
//! | `time_limit` | no call takes longer than the limit |
//! | `malformed_input` | damaged batch buffers (truncated, wrong magic, seeds missing) get an error status, never a success, trap or crash |
//! | `agrees_with_other` | (with `--other`) the other build (native vs WASM) gives the same bits |
//!
//! A native plugin shares the checker's process, so a crash on malformed input would end
//! it: `sluice plugin check` runs that check in a child process for native plugins.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{
    Config as RunnerConfig, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use serde::Serialize;
use sluice_core::rng::{ElementRng, StreamKey};
use sluice_core::{Element, ElementId, Tensor, TensorData};
use sluice_plugins::testing::digest;
use sluice_plugins::{Backend, NativePlugin, PluginStage};
use sluice_sdk::wire::DType;
use sluice_sdk::{Feature, Kind, PluginInfo};

use crate::limits::WasmLimits;
use crate::plugin::{WasmOptions, WasmPlugin};

/// What to check and how hard.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The plugin's configuration (a JSON object).
    pub config: serde_json::Value,
    /// Generated cases per property.
    pub cases: u32,
    /// The seed of the generator (the same seed checks the same cases).
    pub seed: u64,
    /// Most time one call may take (also the WASM sandbox's limit).
    pub time_limit: Duration,
    /// WASM memory cap per instance.
    pub memory_bytes: u64,
    /// The other build of the same plugin, to compare bit for bit.
    pub other: Option<PathBuf>,
    /// Run the malformed-input check in this process.
    pub malformed: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            config: serde_json::json!({}),
            cases: 64,
            seed: 0,
            time_limit: Duration::from_secs(10),
            memory_bytes: crate::limits::DEFAULT_MEMORY_BYTES,
            other: None,
            malformed: true,
        }
    }
}

/// How one check ended.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Passed.
    Pass,
    /// Failed: why, and the minimal failing case as Rust code when there is one.
    Fail {
        /// What went wrong.
        message: String,
        /// The shrunk failing case, as Rust code to paste into a test.
        minimal_case: Option<String>,
    },
    /// Not applicable.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// One check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// The check's name (see the [module docs](self)).
    pub check: &'static str,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// All checks of one plugin.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The plugin file.
    pub plugin: String,
    /// Its metadata.
    pub info: PluginInfo,
    /// The results, in order.
    pub checks: Vec<CheckResult>,
}

impl Report {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|c| matches!(c.outcome, Outcome::Fail { .. }))
    }
}

/// Loads a plugin file as its extension says (WASM with `options`' limits, else native).
pub fn load(path: &Path, options: &CheckOptions) -> sluice_plugins::Result<Arc<dyn Backend>> {
    let wasm = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("wasm") || e.eq_ignore_ascii_case("wat"));
    if wasm {
        let limits = WasmLimits::default()
            .memory_bytes(options.memory_bytes)
            .time(options.time_limit);
        Ok(WasmPlugin::load_with(
            path,
            &WasmOptions {
                limits,
                cache_dir: None,
            },
        )?)
    } else {
        Ok(NativePlugin::load(path)?)
    }
}

/// One generated call: its elements.
#[derive(Debug, Clone)]
struct Case {
    elements: Vec<Element>,
}

fn dims(rank: u8) -> BoxedStrategy<Vec<usize>> {
    match rank {
        3 => (
            1usize..6,
            1usize..6,
            prop_oneof![Just(1usize), Just(3usize)],
        )
            .prop_map(|(h, w, c)| vec![h, w, c])
            .boxed(),
        r => prop::collection::vec(1usize..5, usize::from(r)).boxed(),
    }
}

fn data(dtype: DType, n: usize) -> BoxedStrategy<TensorData> {
    match dtype {
        DType::U8 => prop::collection::vec(any::<u8>(), n)
            .prop_map(|v| TensorData::U8(v.into()))
            .boxed(),
        DType::I32 => prop::collection::vec(any::<i32>(), n)
            .prop_map(|v| TensorData::I32(v.into()))
            .boxed(),
        DType::I64 => prop::collection::vec(any::<i64>(), n)
            .prop_map(|v| TensorData::I64(v.into()))
            .boxed(),
        DType::F32 => prop::collection::vec(-2.0f32..2.0, n)
            .prop_map(|v| TensorData::F32(v.into()))
            .boxed(),
        DType::F64 => prop::collection::vec(-2.0f64..2.0, n)
            .prop_map(|v| TensorData::F64(v.into()))
            .boxed(),
        DType::Bytes => prop::collection::vec(prop::collection::vec(any::<u8>(), 0..8), n)
            .prop_map(|v| {
                TensorData::Bytes(
                    v.into_iter()
                        .map(bytes::Bytes::from)
                        .collect::<Vec<_>>()
                        .into(),
                )
            })
            .boxed(),
    }
}

fn tensor(f: &Feature) -> BoxedStrategy<(String, Tensor)> {
    let dtype = f.dtype.unwrap_or(DType::U8);
    let name = f.name.clone();
    let rank = f.rank.unwrap_or(3);
    dims(rank)
        .prop_flat_map(move |shape| {
            let n = shape.iter().product();
            let name = name.clone();
            data(dtype, n).prop_map(move |d| {
                (
                    name.clone(),
                    Tensor::new(&shape, d).expect("the shape's number of values"),
                )
            })
        })
        .boxed()
}

fn element(inputs: &[Feature]) -> BoxedStrategy<Vec<(String, Tensor)>> {
    let parts: Vec<BoxedStrategy<(String, Tensor)>> = inputs.iter().map(tensor).collect();
    parts.boxed()
}

fn case(info: &PluginInfo) -> BoxedStrategy<Case> {
    let inputs = if info.inputs.is_empty() {
        vec![Feature::new("image").dtype(DType::U8).rank(3)]
    } else {
        info.inputs.clone()
    };
    prop::collection::vec(element(&inputs), 1..=6)
        .prop_map(|elements| Case {
            elements: elements
                .into_iter()
                .enumerate()
                .map(|(i, tensors)| {
                    let mut e = Element::new(ElementId::new(0, i as u64));
                    for (name, t) in tensors {
                        e.insert(&name, t);
                    }
                    e
                })
                .collect(),
        })
        .boxed()
}

fn rngs(elements: &[Element]) -> Vec<ElementRng> {
    let key = StreamKey {
        seed: 7,
        epoch: 0,
        stage: 0,
    };
    elements.iter().map(|e| key.element_rng(e.id())).collect()
}

/// The case as Rust code an author can paste into a test.
fn rust_code(case: &Case) -> String {
    let mut s = String::from("let elements = vec![\n");
    for e in &case.elements {
        s.push_str(&format!(
            "    Element::new(ElementId::new({}, {}))",
            e.id().source,
            e.id().index
        ));
        let mut names: Vec<&str> = e.iter().map(|(n, _)| n).collect();
        names.sort_unstable();
        for name in names {
            let t = e.tensor(name).expect("dense");
            let values = match t.data() {
                TensorData::U8(v) => format!("TensorData::U8(vec!{:?}.into())", v.as_ref()),
                TensorData::I32(v) => format!("TensorData::I32(vec!{:?}.into())", &v[..]),
                TensorData::I64(v) => format!("TensorData::I64(vec!{:?}.into())", &v[..]),
                TensorData::F32(v) => format!("TensorData::F32(vec!{:?}.into())", &v[..]),
                TensorData::F64(v) => format!("TensorData::F64(vec!{:?}.into())", &v[..]),
                TensorData::Bytes(v) => format!(
                    "TensorData::Bytes(vec![{}].into())",
                    v.iter()
                        .map(|b| format!("Bytes::from_static(&{:?})", b.as_ref()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            s.push_str(&format!(
                "\n        .with({name:?}, Tensor::new(&{:?}, {values})?)",
                t.shape()
            ));
        }
        s.push_str(",\n");
    }
    s.push_str("];\n// seeds: each element's RNG of StreamKey { seed: 7, epoch: 0, stage: 0 }\n");
    s
}

/// Runs a property over generated cases; a failure is shrunk and reported with the minimal
/// case.
fn property(
    info: &PluginInfo,
    options: &CheckOptions,
    test: impl Fn(&Case) -> Result<(), String>,
) -> Outcome {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&options.seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig {
            cases: options.cases,
            failure_persistence: None,
            max_shrink_iters: 4096,
            ..RunnerConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    match runner.run(&case(info), |c| test(&c).map_err(TestCaseError::fail)) {
        Ok(()) => Outcome::Pass,
        Err(TestError::Fail(reason, minimal)) => Outcome::Fail {
            message: reason.to_string(),
            minimal_case: Some(rust_code(&minimal)),
        },
        Err(TestError::Abort(reason)) => Outcome::Fail {
            message: format!("aborted: {reason}"),
            minimal_case: None,
        },
    }
}

fn call(
    stage: &PluginStage,
    elements: &[Element],
) -> Result<(Vec<(usize, Element)>, Duration), String> {
    let mut r = rngs(elements);
    let t = Instant::now();
    let out = stage
        .call(elements.to_vec(), &mut r)
        .map_err(|e| e.to_string())?;
    Ok((out, t.elapsed()))
}

/// An error saying the plugin's output broke its declared contract (found by the host, or
/// by the SDK inside the plugin).
fn broke_output_contract(e: &str) -> bool {
    e.contains("broken output") || e.contains("broke its output contract")
}

fn outputs_digest(out: &[(usize, Element)]) -> Vec<String> {
    let elements: Vec<Element> = out.iter().map(|(_, e)| e.clone()).collect();
    digest(&elements)
        .into_iter()
        .zip(out)
        .map(|(d, (p, _))| format!("parent {p}: {d}"))
        .collect()
}

/// Runs every check on the plugin at `path`.
pub fn check(path: &Path, options: &CheckOptions) -> sluice_plugins::Result<Report> {
    let backend = load(path, options)?;
    let info = backend.info().clone();
    let stage = PluginStage::new(Arc::clone(&backend), &options.config)?;
    let mut checks = Vec::new();
    let mut add =
        |check: &'static str, outcome: Outcome| checks.push(CheckResult { check, outcome });

    add(
        "accepts_contract",
        property(&info, options, |c| match call(&stage, &c.elements) {
            // Reported by `output_contract`.
            Err(e) if broke_output_contract(&e) => Ok(()),
            other => other.map(|_| ()),
        }),
    );
    add(
        "deterministic",
        property(&info, options, |c| {
            let (a, _) = call(&stage, &c.elements)?;
            let (b, _) = call(&stage, &c.elements)?;
            let fresh = PluginStage::new(Arc::clone(&backend), &options.config)
                .map_err(|e| e.to_string())?;
            let (f, _) = call(&fresh, &c.elements)?;
            let (a, b, f) = (outputs_digest(&a), outputs_digest(&b), outputs_digest(&f));
            if a != b {
                return Err(
                    "two calls on the same elements and seeds gave different outputs".into(),
                );
            }
            if a != f {
                return Err(
                    "a fresh instance gave a different output for the same elements and seeds"
                        .into(),
                );
            }
            Ok(())
        }),
    );
    if info.kind == Kind::Batch {
        add(
            "independent",
            Outcome::Skipped {
                reason: "a batch plugin's outputs may depend on their neighbours".into(),
            },
        );
    } else {
        add(
            "independent",
            property(&info, options, |c| {
                let (together, _) = call(&stage, &c.elements)?;
                for (i, e) in c.elements.iter().enumerate() {
                    let (alone, _) = call(&stage, std::slice::from_ref(e))?;
                    let mine: Vec<(usize, Element)> =
                        together.iter().filter(|(p, _)| *p == i).cloned().collect();
                    let alone: Vec<(usize, Element)> =
                        alone.into_iter().map(|(_, e)| (i, e)).collect();
                    if outputs_digest(&mine) != outputs_digest(&alone) {
                        return Err(format!(
                            "element {i}'s output differs when it is called alone (it depends on its neighbours)"
                        ));
                    }
                }
                Ok(())
            }),
        );
    }
    add(
        "output_contract",
        property(&info, options, |c| match call(&stage, &c.elements) {
            Err(e) if broke_output_contract(&e) => Err(e),
            _ => Ok(()),
        }),
    );
    add(
        "time_limit",
        property(&info, options, |c| match call(&stage, &c.elements) {
            Ok((_, took)) if took > options.time_limit => Err(format!(
                "a call took {took:?}, over the limit of {:?}",
                options.time_limit
            )),
            Err(e) if e.contains("timeout") || e.contains("memory limit") => Err(e),
            _ => Ok(()),
        }),
    );
    if options.malformed {
        add("malformed_input", malformed(&*backend, options, &info));
    } else {
        add(
            "malformed_input",
            Outcome::Skipped {
                reason: "run in a child process".into(),
            },
        );
    }
    match &options.other {
        None => add(
            "agrees_with_other",
            Outcome::Skipped {
                reason: "no --other build given".into(),
            },
        ),
        Some(other) => {
            let outcome = match load(other, options).and_then(|b| {
                if b.info().name != info.name || b.info().version != info.version {
                    return Err(sluice_plugins::Error::Info {
                        path: other.clone(),
                        message: format!(
                            "--other is {} {}, not {} {}",
                            b.info().name,
                            b.info().version,
                            info.name,
                            info.version
                        ),
                    });
                }
                PluginStage::new(b, &options.config)
            }) {
                Err(e) => Outcome::Fail {
                    message: e.to_string(),
                    minimal_case: None,
                },
                Ok(other_stage) => property(&info, options, |c| {
                    let (a, _) = call(&stage, &c.elements)?;
                    let (b, _) = call(&other_stage, &c.elements)?;
                    if outputs_digest(&a) != outputs_digest(&b) {
                        return Err(format!(
                            "{} and {} disagree on these elements",
                            path.display(),
                            other.display()
                        ));
                    }
                    Ok(())
                }),
            };
            add("agrees_with_other", outcome);
        }
    }
    Ok(Report {
        plugin: path.display().to_string(),
        info,
        checks,
    })
}

/// Damaged batch buffers sent straight to an instance: each must get an error status.
fn malformed(backend: &dyn Backend, options: &CheckOptions, info: &PluginInfo) -> Outcome {
    let config = options.config.to_string().into_bytes();
    // A valid buffer to damage: one generated element.
    let mut runner = TestRunner::deterministic();
    let Ok(tree) = case(info).new_tree(&mut runner) else {
        return Outcome::Skipped {
            reason: "no input could be generated".into(),
        };
    };
    let elements = tree.current().elements;
    let mut encoder =
        sluice_sdk::wire::Encoder::new(&(0..elements.len() as u32).collect::<Vec<_>>());
    for e in &elements {
        let tensors: Vec<(&str, &Tensor)> = e
            .iter()
            .filter_map(|(n, v)| v.as_dense().map(|t| (n, t)))
            .collect();
        encoder.element(tensors.len() as u32);
        for (name, t) in tensors {
            let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
            match t.data() {
                TensorData::U8(v) => encoder.numeric(name, DType::U8, &shape, v),
                TensorData::I32(v) => encoder.numeric(
                    name,
                    DType::I32,
                    &shape,
                    &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
                ),
                TensorData::I64(v) => encoder.numeric(
                    name,
                    DType::I64,
                    &shape,
                    &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
                ),
                TensorData::F32(v) => encoder.numeric(
                    name,
                    DType::F32,
                    &shape,
                    &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
                ),
                TensorData::F64(v) => encoder.numeric(
                    name,
                    DType::F64,
                    &shape,
                    &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
                ),
                TensorData::Bytes(v) => encoder.bytes(name, &shape, v.iter().map(|b| b.as_ref())),
            }
        }
    }
    let good = encoder.finish();
    let seeds: Vec<u64> = (0..elements.len() as u64).collect();
    let mut damaged: Vec<(String, Vec<u8>, Vec<u64>)> = vec![
        ("an empty buffer".into(), Vec::new(), seeds.clone()),
        (
            "a wrong magic".into(),
            [b"XXXX".as_slice(), &good[4..]].concat(),
            seeds.clone(),
        ),
        ("one seed too few".into(), good.clone(), seeds[1..].to_vec()),
        (
            "trailing bytes".into(),
            [good.as_slice(), &[0u8; 3]].concat(),
            seeds.clone(),
        ),
    ];
    for cut in [5, 9, good.len() / 2, good.len() - 1] {
        if cut < good.len() {
            damaged.push((
                format!("the buffer cut at byte {cut} of {}", good.len()),
                good[..cut].to_vec(),
                seeds.clone(),
            ));
        }
    }
    for (what, buf, seeds) in damaged {
        let mut instance = match backend.instantiate(&config) {
            Ok(i) => i,
            Err(e) => {
                return Outcome::Fail {
                    message: e.to_string(),
                    minimal_case: None,
                };
            }
        };
        match instance.call(&buf, &seeds, &mut |_| {}) {
            Ok(()) => {
                return Outcome::Fail {
                    message: format!(
                        "{what} was accepted (status OK); it must be refused with an error status"
                    ),
                    minimal_case: None,
                };
            }
            Err(f) if f.status == "trap" || f.status == "panic" => {
                return Outcome::Fail {
                    message: format!(
                        "{what}: the plugin crashed ({}: {}) instead of returning an error status",
                        f.status, f.message
                    ),
                    minimal_case: None,
                };
            }
            Err(_) => {}
        }
    }
    Outcome::Pass
}

/// The report as text: one line per check, then the totals.
pub fn render(report: &Report) -> String {
    let mut s = format!(
        "sluice plugin check: {} ({} {}, {:?}) from {}\n",
        report.info.name, report.info.name, report.info.version, report.info.kind, report.plugin
    );
    let (mut pass, mut fail, mut skip) = (0, 0, 0);
    for c in &report.checks {
        match &c.outcome {
            Outcome::Pass => {
                pass += 1;
                s.push_str(&format!("  pass     {}\n", c.check));
            }
            Outcome::Skipped { reason } => {
                skip += 1;
                s.push_str(&format!("  skipped  {} ({reason})\n", c.check));
            }
            Outcome::Fail {
                message,
                minimal_case,
            } => {
                fail += 1;
                s.push_str(&format!("  FAIL     {}: {message}\n", c.check));
                if let Some(code) = minimal_case {
                    s.push_str("           minimal failing case:\n");
                    for line in code.lines() {
                        s.push_str(&format!("           {line}\n"));
                    }
                }
            }
        }
    }
    s.push_str(&format!(
        "totals: pass {pass}, FAIL {fail}, skipped {skip}\n"
    ));
    s
}
