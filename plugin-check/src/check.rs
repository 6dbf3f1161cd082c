//! Running the checks: [`check`] loads the plugin and runs each property over generated
//! cases; [`load`] picks the host by the file's extension.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{
    Config as RunnerConfig, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use sluice_core::{Element, Tensor, TensorData};
use sluice_plugins::host::{CallPath, Lent, LentCall};
use sluice_plugins::testing::digest;
use sluice_plugins::wasm::DEFAULT_MEMORY_BYTES;
use sluice_plugins::{Backend, NativePlugin, PluginStage, WasmLimits, WasmOptions, WasmPlugin};
use sluice_sdk::wire::DType;
use sluice_sdk::{Kind, PluginInfo};

use crate::cases::{Case, case, rngs, rust_code};
use crate::report::{CheckResult, Outcome, Report};

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
            memory_bytes: DEFAULT_MEMORY_BYTES,
            other: None,
            malformed: true,
        }
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
    add(
        "lent_agrees_with_wire",
        lent_agrees_with_wire(&backend, options, &info),
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

/// (ABI version 2) The lent path and the wire path give the same outputs (or both fail).
fn lent_agrees_with_wire(
    backend: &Arc<dyn Backend>,
    options: &CheckOptions,
    info: &PluginInfo,
) -> Outcome {
    if !backend.lends() {
        return Outcome::Skipped {
            reason: "no lent path (ABI version 1, or a WASM module)".into(),
        };
    }
    if matches!(info.kind, Kind::FlatMap | Kind::Batch) {
        return Outcome::Skipped {
            reason: "flat_map and batch plugins take the wire path".into(),
        };
    }
    let stages = PluginStage::with_path(Arc::clone(backend), &options.config, CallPath::Lent)
        .and_then(|lent| {
            PluginStage::with_path(Arc::clone(backend), &options.config, CallPath::Wire)
                .map(|wire| (lent, wire))
        });
    let (lent, wire) = match stages {
        Ok(pair) => pair,
        Err(e) => {
            return Outcome::Fail {
                message: e.to_string(),
                minimal_case: None,
            };
        }
    };
    property(info, options, |c| {
        match (call(&lent, &c.elements), call(&wire, &c.elements)) {
            (Ok((a, _)), Ok((b, _))) if outputs_digest(&a) != outputs_digest(&b) => Err(
                "the lent path (sluice_process_lent) and the wire path (sluice_process) gave \
             different outputs for the same elements and seeds"
                    .into(),
            ),
            (Ok(_), Err(e)) => Err(format!(
                "the lent path succeeded, the wire path failed: {e}"
            )),
            (Err(e), Ok(_)) => Err(format!(
                "the wire path succeeded, the lent path failed: {e}"
            )),
            _ => Ok(()),
        }
    })
}

/// A call's elements as the tensors to lend, by name.
type LentElements = Vec<Vec<(String, Tensor)>>;

/// Damaged lent calls (ABI version 2) sent straight to an instance: each must get an error
/// status (or be declined), never a success, trap or crash. `None` when the plugin has no
/// lent path.
fn malformed_lent(
    backend: &dyn Backend,
    config: &[u8],
    info: &PluginInfo,
    elements: &[Element],
) -> Option<Outcome> {
    if !backend.lends() || matches!(info.kind, Kind::FlatMap | Kind::Batch) {
        return None;
    }
    let tensors = |e: &Element| -> Vec<(String, Tensor)> {
        e.iter()
            .filter_map(|(n, v)| v.as_dense().map(|t| (n.to_string(), t.clone())))
            .collect()
    };
    let good: LentElements = elements.iter().map(tensors).collect();
    let seeds: Vec<u64> = (0..elements.len() as u64).collect();
    let mut damaged: Vec<(String, LentElements, Vec<u64>)> = vec![(
        "a lent call with one seed too few".into(),
        good.clone(),
        seeds[1..].to_vec(),
    )];
    if let Some(f) = info.inputs.first() {
        let without: LentElements = good
            .iter()
            .map(|e| e.iter().filter(|(n, _)| *n != f.name).cloned().collect())
            .collect();
        damaged.push((
            format!("a lent call without the declared input {:?}", f.name),
            without,
            seeds.clone(),
        ));
        if let Some(dtype) = f.dtype {
            let other = if dtype == DType::I64 {
                TensorData::F64(vec![0.5].into())
            } else {
                TensorData::I64(vec![7].into())
            };
            let retyped: LentElements = good
                .iter()
                .map(|e| {
                    e.iter()
                        .map(|(n, t)| {
                            if *n == f.name {
                                let t = Tensor::new(&[1], other.clone()).expect("one value");
                                (n.clone(), t)
                            } else {
                                (n.clone(), t.clone())
                            }
                        })
                        .collect()
                })
                .collect();
            damaged.push((
                format!(
                    "a lent call with the declared input {:?} of another dtype",
                    f.name
                ),
                retyped,
                seeds.clone(),
            ));
        }
    }
    for (what, elements, seeds) in damaged {
        let mut instance = match backend.instantiate(config) {
            Ok(i) => i,
            Err(e) => {
                return Some(Outcome::Fail {
                    message: e.to_string(),
                    minimal_case: None,
                });
            }
        };
        let inputs: Vec<Vec<(&str, &Tensor)>> = elements
            .iter()
            .map(|e| e.iter().map(|(n, t)| (n.as_str(), t)).collect())
            .collect();
        // Byte strings are never lent: nothing to damage on the lent path.
        let Some(mut call) = LentCall::new(info.kind, &inputs, &seeds) else {
            continue;
        };
        match instance.call_lent(&mut call) {
            Ok(Lent::Done) => {
                return Some(Outcome::Fail {
                    message: format!(
                        "{what} was accepted (status OK); it must be refused with an error status"
                    ),
                    minimal_case: None,
                });
            }
            Err(f) if f.status == "panic" => {
                return Some(Outcome::Fail {
                    message: format!(
                        "{what}: the plugin crashed ({}: {}) instead of returning an error status",
                        f.status, f.message
                    ),
                    minimal_case: None,
                });
            }
            Ok(Lent::Declined(_)) | Err(_) => {}
        }
    }
    None
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
    if let Some(failed) = malformed_lent(backend, &config, info, &elements) {
        return failed;
    }
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
