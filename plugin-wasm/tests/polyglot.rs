//! Plugins written in C from `sdk/ABI.md` alone (`examples/plugins/c-brightness`,
//! `examples/plugins/c-invert`), compiled to wasm32 with clang here, run in pipelines.

use std::path::PathBuf;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_guest_build as guests;
use sluice_plugin_host::PluginStage;
use sluice_plugin_host::testing::{digest, image_elements, run_stage};
use sluice_plugin_wasm::{WasmOptions, WasmPlugin};
use sluice_sdk::{DType, Kind};

/// Compiles the C plugin into `dir` with clang (which `.ci/run` installs).
fn compile(dir: &std::path::Path) -> PathBuf {
    compile_with(dir, &[])
}

fn compile_with(dir: &std::path::Path, defines: &[&str]) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-brightness/brightness.c");
    guests::c(&source, &dir.join("c_brightness.wasm"), defines).unwrap()
}

fn load(dir: &std::path::Path) -> std::sync::Arc<WasmPlugin> {
    WasmPlugin::load_with(
        compile(dir),
        &WasmOptions {
            cache_dir: Some(None),
            ..WasmOptions::default()
        },
    )
    .unwrap()
}

fn pixels(e: &Element) -> Vec<u8> {
    e.tensor("image").unwrap().as_u8().unwrap().to_vec()
}

#[test]
fn the_c_plugin_declares_itself_and_brightens_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load(dir.path());
    let info = plugin.info();
    assert_eq!(info.name, "c_brightness");
    assert_eq!(info.kind, Kind::Map);
    assert_eq!(info.inputs[0].name, "image");
    assert_eq!(info.inputs[0].dtype, Some(DType::U8));
    let stage = PluginStage::new(plugin, &json!({"delta": -40})).unwrap();
    let input = image_elements(13, [5, 4, 3], true);
    let out = run_stage(&stage, &input, 2, 4, 1).unwrap();
    assert_eq!(out.len(), input.len());
    for (got, want) in out.iter().zip(&input) {
        assert_eq!(got.id(), want.id(), "order and ids kept");
        assert_eq!(got.tensor("image").unwrap().shape(), &[5, 4, 3]);
        let expected: Vec<u8> = pixels(want).iter().map(|&x| x.saturating_sub(40)).collect();
        assert_eq!(pixels(got), expected);
        assert_eq!(
            got.tensor("label").unwrap().as_i64(),
            want.tensor("label").unwrap().as_i64(),
            "other features kept"
        );
    }
}

#[test]
fn its_randomness_comes_from_the_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let stage = PluginStage::new(load(dir.path()), &json!({"delta": 50, "p": 0.5})).unwrap();
    let input = image_elements(64, [3, 3, 3], true);
    let one = run_stage(&stage, &input, 0, 64, 9).unwrap();
    assert_eq!(
        digest(&one),
        digest(&run_stage(&stage, &input, 3, 5, 9).unwrap())
    );
    assert_ne!(
        digest(&one),
        digest(&run_stage(&stage, &input, 0, 64, 10).unwrap())
    );
    let brightened = one
        .iter()
        .zip(&input)
        .filter(|(a, b)| pixels(a) != pixels(b))
        .count();
    assert!(
        (16..48).contains(&brightened),
        "{brightened} of 64 with p = 0.5"
    );
}

#[test]
fn bad_configuration_and_input_are_refused_with_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load(dir.path());
    for (config, message) in [
        (
            json!({"delta": 300}),
            "delta must be an integer in [-255, 255]",
        ),
        (json!({"p": 2}), "p must be in [0, 1]"),
        (json!({"q": 1}), "unknown key \"q\""),
    ] {
        let err = PluginStage::new(plugin.clone(), &config)
            .unwrap_err()
            .to_string();
        assert!(err.contains("plugin c_brightness: init failed"), "{err}");
        assert!(err.contains(message), "{config}: {err}");
    }
    let stage = PluginStage::new(plugin, &json!({})).unwrap();
    let err = run_stage(&stage, &image_elements(2, [2, 2, 3], false), 0, 2, 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("feature \"image\" is f32, expected u8"),
        "{err}"
    );
}

// ---- c_invert (examples/plugins/c-invert) ------------------------------------------------

/// The twelve exports of ABI.md §3.
const ABI_EXPORTS: [&str; 12] = [
    "sluice_abi_version",
    "sluice_info_ptr",
    "sluice_info_len",
    "sluice_alloc",
    "sluice_free",
    "sluice_init",
    "sluice_process",
    "sluice_output_ptr",
    "sluice_output_len",
    "sluice_error_ptr",
    "sluice_error_len",
    "sluice_destroy",
];

/// Compiles `examples/plugins/c-invert/invert.c` into `dir` with the README's command.
fn compile_invert(dir: &std::path::Path) -> PathBuf {
    let source = guests::workspace_dir().join("examples/plugins/c-invert/invert.c");
    guests::c(&source, &dir.join("c_invert.wasm"), &[]).unwrap()
}

fn load_invert(dir: &std::path::Path) -> std::sync::Arc<WasmPlugin> {
    WasmPlugin::load_with(
        compile_invert(dir),
        &WasmOptions {
            cache_dir: Some(None),
            ..WasmOptions::default()
        },
    )
    .unwrap()
}

/// Runs `stage` over `input` with `MapChunksSpec::new(chunk).num_parallel(threads)` and
/// pipeline seed `seed`.
fn run_invert(
    stage: &std::sync::Arc<PluginStage>,
    input: &[Element],
    chunk: usize,
    threads: usize,
    seed: u64,
) -> Result<Vec<Element>> {
    stage
        .apply(
            &Dataset::from_elements(input.to_vec()),
            MapChunksSpec::new(chunk).num_parallel(threads),
        )
        .with_options(Options::default().with_seed(seed))
        .collect()
}

/// `image_elements`, then u8 images of other ranks and sizes (the plugin takes any rank),
/// each with a `label`.
fn mixed_images() -> Vec<Element> {
    let mut elements = image_elements(13, [5, 4, 3], true);
    let shapes: [&[usize]; 5] = [&[7], &[], &[3, 2], &[0, 3], &[2, 3, 2, 2]];
    for (k, shape) in shapes.iter().enumerate() {
        let i = elements.len();
        let len: usize = shape.iter().product();
        let data: Vec<u8> = (0..len).map(|j| (j * 53 + k * 7 + 1) as u8).collect();
        elements.push(
            Element::new(ElementId::new(0, i as u64))
                .with(
                    "image",
                    Tensor::new(shape, TensorData::U8(data.into())).unwrap(),
                )
                .with(
                    "label",
                    Tensor::new(&[], TensorData::I64(vec![100 + i as i64].into())).unwrap(),
                ),
        );
    }
    elements
}

fn label(e: &Element) -> i64 {
    e.tensor("label").unwrap().as_i64().unwrap()[0]
}

#[test]
fn c_invert_builds_with_no_imports_and_declares_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = compile_invert(dir.path());
    let module = wasmtime::Module::from_file(&wasmtime::Engine::default(), &path).unwrap();
    let imports: Vec<String> = module
        .imports()
        .map(|i| format!("{}::{}", i.module(), i.name()))
        .collect();
    assert!(imports.is_empty(), "the C plugin imports {imports:?}");
    let mut exports: Vec<&str> = module.exports().map(|e| e.name()).collect();
    exports.sort_unstable();
    let mut want: Vec<&str> = ABI_EXPORTS.iter().copied().chain(["memory"]).collect();
    want.sort_unstable();
    assert_eq!(exports, want, "exactly the twelve functions and `memory`");

    let plugin = load_invert(dir.path());
    let info = plugin.info();
    assert_eq!(info.name, "c_invert");
    assert_eq!(info.version, "0.1.0");
    assert_eq!(info.kind, Kind::Map);
    assert_eq!(info.inputs.len(), 1);
    assert_eq!(info.inputs[0].name, "image");
    assert_eq!(info.inputs[0].dtype, Some(DType::U8));
    assert_eq!(info.inputs[0].rank, None, "any rank");
    assert_eq!(info.outputs.len(), 1);
    assert_eq!(info.outputs[0].name, "image");
}

#[test]
fn c_invert_allocates_aligned_reuses_freed_memory_and_reports_unknown_handles() {
    use wasmtime::{Engine, Instance, Module, Store};
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::default();
    let module = Module::from_file(&engine, compile_invert(dir.path())).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    let alloc = instance
        .get_typed_func::<u32, u32>(&mut store, "sluice_alloc")
        .unwrap();
    let free = instance
        .get_typed_func::<(u32, u32), ()>(&mut store, "sluice_free")
        .unwrap();
    let process = instance
        .get_typed_func::<(u32, u32, u32, u32, u32), i32>(&mut store, "sluice_process")
        .unwrap();
    let error_len = instance
        .get_typed_func::<u32, u32>(&mut store, "sluice_error_len")
        .unwrap();
    let destroy = instance
        .get_typed_func::<u32, ()>(&mut store, "sluice_destroy")
        .unwrap();
    let memory = instance.get_memory(&mut store, "memory").unwrap();

    let mut blocks: Vec<(u32, u32)> = Vec::new();
    for len in [0u32, 1, 3, 8, 9, 17, 100, 4096, 70_000, 5] {
        let ptr = alloc.call(&mut store, len).unwrap();
        assert!(
            ptr != 0 && ptr.is_multiple_of(8),
            "sluice_alloc({len}) = {ptr}"
        );
        for &(p, l) in &blocks {
            assert!(ptr >= p + l.max(1) || ptr + len.max(1) <= p, "overlap");
        }
        blocks.push((ptr, len));
    }
    assert_eq!(
        alloc.call(&mut store, u32::MAX).unwrap(),
        0,
        "out of memory is 0"
    );
    for &(p, l) in &blocks {
        free.call(&mut store, (p, l)).unwrap();
    }
    // Freed memory is reused: a thousand 1 MiB calls' worth of alloc/free does not grow it.
    let pages = memory.size(&store);
    for i in 0..1000u32 {
        let a = alloc.call(&mut store, 1 << 20).unwrap();
        let b = alloc.call(&mut store, 1000 + i).unwrap();
        assert!(a != 0 && b != 0);
        free.call(&mut store, (a, 1 << 20)).unwrap();
        free.call(&mut store, (b, 1000 + i)).unwrap();
    }
    assert!(
        memory.size(&store) <= pages + 17,
        "{pages} -> {} pages",
        memory.size(&store)
    );

    assert_eq!(process.call(&mut store, (42, 0, 0, 0, 0)).unwrap(), 5);
    assert!(error_len.call(&mut store, 42).unwrap() > 0);
    destroy.call(&mut store, 42).unwrap();
}

#[test]
fn c_invert_inverts_every_pixel_and_keeps_labels_shapes_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load_invert(dir.path());
    let input = mixed_images();
    for config in [json!({"p": 1.0}), json!({}), json!({"p": 1})] {
        let stage = PluginStage::new(plugin.clone(), &config).unwrap();
        let out = stage
            .apply(
                &Dataset::from_elements(input.clone()),
                MapChunksSpec::new(4).num_parallel(2),
            )
            .collect()
            .unwrap();
        assert_eq!(out.len(), input.len());
        for (got, want) in out.iter().zip(&input) {
            assert_eq!(got.id(), want.id(), "order and ids kept");
            assert_eq!(
                got.tensor("image").unwrap().shape(),
                want.tensor("image").unwrap().shape(),
                "{}",
                want.id()
            );
            let inverted: Vec<u8> = pixels(want).iter().map(|&x| 255 - x).collect();
            assert_eq!(pixels(got), inverted, "{config} {}", want.id());
            assert_eq!(label(got), label(want), "labels kept");
        }
    }
    // p = 0: nothing changes.
    let stage = PluginStage::new(plugin, &json!({"p": 0})).unwrap();
    assert_eq!(
        digest(&run_invert(&stage, &input, 4, 2, 1).unwrap()),
        digest(&input)
    );
}

#[test]
fn c_invert_with_p_one_half_is_seeded_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let stage = PluginStage::new(load_invert(dir.path()), &json!({"p": 0.5})).unwrap();
    let input = image_elements(200, [3, 3, 2], true);
    let one = run_invert(&stage, &input, 4, 1, 7).unwrap();
    assert_eq!(
        digest(&one),
        digest(&run_invert(&stage, &input, 4, 1, 7).unwrap()),
        "two runs"
    );
    for (chunk, threads) in [(4, 3), (1, 3), (64, 2), (7, 1)] {
        assert_eq!(
            digest(&one),
            digest(&run_invert(&stage, &input, chunk, threads, 7).unwrap()),
            "chunk {chunk}, num_parallel {threads}"
        );
    }
    assert_ne!(
        digest(&one),
        digest(&run_invert(&stage, &input, 4, 1, 8).unwrap()),
        "another pipeline seed draws differently"
    );
    let mut inverted = 0;
    for (got, want) in one.iter().zip(&input) {
        assert_eq!(got.id(), want.id());
        assert_eq!(label(got), label(want));
        let flipped: Vec<u8> = pixels(want).iter().map(|&x| 255 - x).collect();
        if pixels(got) == flipped {
            inverted += 1;
        } else {
            assert_eq!(pixels(got), pixels(want), "all or nothing: {}", want.id());
        }
    }
    assert!(
        (70..=130).contains(&inverted),
        "{inverted} of 200 inverted with p = 0.5"
    );
}

#[test]
fn c_invert_refuses_bad_configuration_and_f32_images_with_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load_invert(dir.path());
    for (config, message) in [
        (json!({"p": 2}), "p must be in [0, 1]"),
        (json!({"p": -0.25}), "p must be in [0, 1]"),
        (json!({"p": 1.0000001}), "p must be in [0, 1]"),
        (json!({"p": "half"}), "p must be a number in [0, 1]"),
        (json!({"q": 1}), "unknown key \"q\""),
        (json!({"p": 0.5, "delta": 3}), "unknown key \"delta\""),
    ] {
        let err = PluginStage::new(plugin.clone(), &config)
            .unwrap_err()
            .to_string();
        assert!(err.contains("c_invert"), "{config}: {err}");
        assert!(err.contains(message), "{config}: {err}");
    }
    // The host checks the declared contract (dtype u8) before calling the plugin.
    let stage = PluginStage::new(plugin, &json!({"p": 1.0})).unwrap();
    let err = run_invert(&stage, &image_elements(3, [2, 2, 3], false), 4, 2, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("c_invert"), "{err}");
    assert!(
        err.contains("feature \"image\" is f32, expected u8"),
        "{err}"
    );
}

/// One tensor, encoded by hand from ABI.md §5 at offset `at` of the buffer (padding is
/// counted from the buffer's start).
fn tensor_bytes(at: usize, name: &str, dtype: u8, dims: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend((name.len() as u32).to_le_bytes());
    b.extend(name.as_bytes());
    b.extend([dtype, dims.len() as u8, 0, 0]);
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(dims.iter().product::<u64>().to_le_bytes());
    while !(at + b.len()).is_multiple_of(8) {
        b.push(0);
    }
    b.extend(payload);
    b
}

/// A batch of elements, each a list of `(name, dtype, dims, payload)` tensors.
type HandTensor<'a> = (&'a str, u8, &'a [u64], &'a [u8]);

fn batch_bytes(elements: &[Vec<HandTensor<'_>>]) -> Vec<u8> {
    let mut b = b"SLB1".to_vec();
    b.extend((elements.len() as u32).to_le_bytes());
    for i in 0..elements.len() as u32 {
        b.extend(i.to_le_bytes());
    }
    for tensors in elements {
        b.extend((tensors.len() as u32).to_le_bytes());
        for (name, dtype, dims, payload) in tensors {
            let t = tensor_bytes(b.len(), name, *dtype, dims, payload);
            b.extend(t);
        }
    }
    b
}

#[test]
fn c_invert_speaks_the_documented_wire_format_and_refuses_malformed_batches() {
    use sluice_plugin_host::Backend;
    let dir = tempfile::tempdir().unwrap();
    let plugin = load_invert(dir.path());
    let mut instance = plugin.instantiate(br#"{"p": 1}"#).unwrap();
    let call = |instance: &mut Box<dyn sluice_plugin_host::Instance>, input: &[u8], n: usize| {
        let mut out = None;
        let seeds: Vec<u64> = (0..n as u64).collect();
        instance
            .call(input, &seeds, &mut |o| out = Some(o.to_vec()))
            .map(|()| out.unwrap())
    };

    // The example of ABI.md §5, byte for byte: a scalar i64 "x" = 7.
    let example = batch_bytes(&[vec![("x", 3, &[], &7u64.to_le_bytes())]]);
    assert_eq!(example.len(), 48);
    assert_eq!(&example[33..40], &[0; 7], "padding from offset 33 to 40");
    let err = call(&mut instance, &example, 1).unwrap_err();
    assert_eq!(err.status, "invalid input");
    assert!(err.message.contains("no feature \"image\""), "{err:?}");

    // A valid batch (with an extra feature the plugin ignores): the output is a map batch
    // holding only `image`, inverted, exactly as a hand encoding of it.
    let a: Vec<u8> = (0..12).collect();
    let b = [9u8, 250, 0];
    let input = batch_bytes(&[
        vec![
            ("other", 2, &[2], &[1, 0, 0, 0, 2, 0, 0, 0]),
            ("image", 1, &[2, 3, 2], &a),
        ],
        vec![("image", 1, &[3], &b)],
        vec![("image", 1, &[], &[200])],
    ]);
    let inv = |v: &[u8]| v.iter().map(|x| 255 - x).collect::<Vec<u8>>();
    let want = batch_bytes(&[
        vec![("image", 1, &[2, 3, 2], &inv(&a))],
        vec![("image", 1, &[3], &inv(&b))],
        vec![("image", 1, &[], &[55])],
    ]);
    assert_eq!(call(&mut instance, &input, 3).unwrap(), want);
    assert_eq!(
        call(&mut instance, b"SLB1\0\0\0\0", 0).unwrap(),
        b"SLB1\0\0\0\0",
        "an empty batch"
    );

    // Malformed buffers: an error status and a message, never a trap, and the instance
    // keeps working.
    let mut bad: Vec<(String, Vec<u8>, usize, &str)> = vec![
        (
            "wrong magic".into(),
            [b"SLB2", &input[4..]].concat(),
            3,
            "bad magic",
        ),
        (
            "a trailing byte".into(),
            [&input[..], &[0]].concat(),
            3,
            "trailing bytes",
        ),
        ("too few seeds".into(), input.clone(), 2, "seeds"),
        ("too many seeds".into(), input.clone(), 4, "seeds"),
        (
            "a huge element count".into(),
            [b"SLB1", &u32::MAX.to_le_bytes()[..]].concat(),
            0,
            "",
        ),
    ];
    let mut wrong_parent = input.clone();
    wrong_parent[12] = 2;
    bad.push(("a wrong parent".into(), wrong_parent, 3, "parent"));
    // Element 0's `image`: its dtype byte follows the name.
    let image_header = input.windows(5).position(|w| w == b"image").unwrap() + 5;
    assert_eq!(
        image_header, 73,
        "20 header, 4 count, 36 \"other\", 4 + 5 name"
    );
    let mut dtype = input.clone();
    dtype[image_header] = 9;
    bad.push(("an unknown dtype".into(), dtype, 3, "unknown dtype"));
    let mut count = input.clone();
    count[image_header + 4 + 24] = 13; // the count after dims [2, 3, 2]
    bad.push(("a count that disagrees".into(), count, 3, "count"));
    let mut name_len = input.clone();
    name_len[image_header - 9..image_header - 5].copy_from_slice(&u32::MAX.to_le_bytes());
    bad.push(("a name past the end".into(), name_len, 3, "past the end"));
    let mut unchanged = input.clone();
    unchanged[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    bad.push(("0xFFFFFFFF in an input".into(), unchanged, 3, "0xFFFFFFFF"));
    for cut in 0..input.len() {
        bad.push((format!("cut at {cut}"), input[..cut].to_vec(), 3, ""));
    }
    for (what, buffer, n, message) in &bad {
        let err = call(&mut instance, buffer, *n).unwrap_err();
        assert_eq!(err.status, "invalid input", "{what}: {err:?}");
        assert!(!err.discard, "{what}");
        assert!(err.message.contains(message), "{what}: {err:?}");
    }
    assert_eq!(call(&mut instance, &input, 3).unwrap(), want, "still works");
}
