//! The WASM plugin boundary: a hostile core-module guest (`sdk/ABI.md` §3-§9) whose every
//! answer is scripted by the fuzz input, loaded and run through `sluice-plugin-wasm`'s
//! public API as a user runs a plugin (`WasmPlugin::load_with`, then a `PluginStage`).
//!
//! The guest (WAT below) is compiled once per declared contract (five metadata variants:
//! map, map with declared `x`, filter, flat_map, batch; kept in a `static OnceLock`). Its
//! instances are made per input with the fuzz bytes as their configuration: `sluice_init`
//! copies them into the guest's memory as the script. Then every call of `sluice_alloc`,
//! `sluice_free`, `sluice_init`, `sluice_process`, `sluice_output_ptr`/`_len`,
//! `sluice_error_ptr`/`_len` and `sluice_destroy` takes the script's next op (a mode byte and
//! an `i32`) and answers: honestly (a bump allocator; the output is the input buffer,
//! echoed), with the raw value (pointers and lengths out of bounds, negative, huge,
//! unaligned; any status code or handle), a pointer into the script itself (an output
//! buffer or message of fuzz-chosen bytes), the honest value plus an offset (overlapping,
//! misaligned), a trap, an endless loop (the time limit), memory grown by a chosen amount,
//! memory grown to the limit then a trap, a stack overflow, or an out-of-bounds load.
//! Limits are small: 16 MiB of memory, 10 ms per call.
//!
//! Invariants: no panic or abort of the host; an instance that cannot be made fails with
//! `Error::Init` naming the plugin; every failed call is `Error::Call` naming the plugin,
//! with a status and a message saying what was wrong; what a call gives back has parents in
//! range and in order (one per input for a map, each input at most once for a filter); and
//! after each input a fresh instance of the same plugin (or of the plain map when the
//! contract is not a map's) with an empty script still works: the echo gives the elements
//! back unchanged.
//!
//! Not fuzzed here: the metadata a module gives at load (read once per load; its bytes are
//! read by the same bounds check, `Guest::read`, as the output, and the JSON is fuzzed by
//! `plugin_output`), and components (`sdk/WIT.md`, whose values wasmtime's canonical ABI
//! lifts and checks).
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sluice_core::rng::StreamKey;
use sluice_core::{Element, ElementId, Tensor, TensorData};
use sluice_plugin_host::{Backend, Error, Instance, PluginStage};
use sluice_plugin_wasm::{WasmLimits, WasmOptions, WasmPlugin};
use sluice_sdk::{Kind, PluginInfo};

/// The guest; `METADATA` is replaced by each variant's JSON.
const GUEST: &str = r#"
(module
  (memory (export "memory") 2)
  ;; 4096..12288: the script (the configuration); 16384..: the heap.
  (global $heap (mut i32) (i32.const 16384))
  (global $cur (mut i32) (i32.const 0))
  (global $slen (mut i32) (i32.const 0))
  (global $m (mut i32) (i32.const 0))
  (global $v (mut i32) (i32.const 0))
  (global $out_ptr (mut i32) (i32.const 0))
  (global $out_len (mut i32) (i32.const 0))
  (data (i32.const 16) "scripted failure")
  (data (i32.const 64) "METADATA")

  ;; The next op: mode in $m, value in $v (mode 0, honest, once the script is used up).
  (func $next
    (if (i32.le_u (i32.add (global.get $cur) (i32.const 5)) (global.get $slen))
      (then
        (global.set $m (i32.load8_u (i32.add (i32.const 4096) (global.get $cur))))
        (global.set $v (i32.load (i32.add (i32.const 4097) (global.get $cur))))
        (global.set $cur (i32.add (global.get $cur) (i32.const 5))))
      (else (global.set $m (i32.const 0)))))

  (func $recurse (param i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))

  ;; The answer of a scripted function whose honest answer is $honest.
  (func $act (param $honest i32) (result i32)
    (call $next)
    (block $b9 (block $b8 (block $b7 (block $b6 (block $b5
    (block $b4 (block $b3 (block $b2 (block $b1 (block $b0
      (br_table $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7 $b8 $b9
        (i32.rem_u (global.get $m) (i32.const 10))))
      (return (local.get $honest)))
      (return (global.get $v)))
      (return (i32.add (i32.const 4096) (global.get $v))))
      unreachable)
      (loop $spin (br $spin))
      unreachable)
      (drop (memory.grow (i32.and (global.get $v) (i32.const 255))))
      (return (local.get $honest)))
      (return (i32.add (local.get $honest) (global.get $v))))
      (loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
      unreachable)
      (return (call $recurse (i32.const 0))))
    (i32.load (i32.const -16)))

  ;; A bump allocator, 8-byte aligned; 0 when memory cannot grow.
  (func $bump (param $len i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (local.set $end (i32.add (local.get $p) (local.get $len)))
    (if (i32.lt_u (local.get $end) (local.get $p)) (then (return (i32.const 0))))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow (i32.sub
                (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16))
                (memory.size)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))

  (func (export "sluice_abi_version") (result i32) (i32.const 1))
  (func (export "sluice_info_ptr") (result i32) (i32.const 64))
  (func (export "sluice_info_len") (result i32) (i32.const METALEN))
  (func (export "sluice_alloc") (param i32) (result i32)
    (call $act (call $bump (local.get 0))))
  (func (export "sluice_free") (param i32 i32)
    (drop (call $act (i32.const 0))))
  (func (export "sluice_init") (param $p i32) (param $l i32) (result i32)
    (local $n i32)
    (local.set $n (select (local.get $l) (i32.const 8192)
      (i32.lt_u (local.get $l) (i32.const 8192))))
    (memory.copy (i32.const 4096) (local.get $p) (local.get $n))
    (global.set $slen (local.get $n))
    (global.set $cur (i32.const 0))
    (call $act (i32.const 1)))
  (func (export "sluice_process")
    (param $h i32) (param $in i32) (param $len i32) (param $s i32) (param $n i32) (result i32)
    (global.set $out_ptr (local.get $in))
    (global.set $out_len (local.get $len))
    (call $act (i32.const 0)))
  (func (export "sluice_output_ptr") (param i32) (result i32)
    (call $act (global.get $out_ptr)))
  (func (export "sluice_output_len") (param i32) (result i32)
    (call $act (global.get $out_len)))
  (func (export "sluice_error_ptr") (param i32) (result i32)
    (call $act (i32.const 16)))
  (func (export "sluice_error_len") (param i32) (result i32)
    (call $act (i32.const 16)))
  (func (export "sluice_destroy") (param i32)
    (drop (call $act (i32.const 0)))))
"#;

const NAME: &str = "scripted";

const VARIANTS: [&str; 5] = [
    r#"{"abi_version":1,"name":"scripted","version":"0.1.0","kind":"map"}"#,
    r#"{"abi_version":1,"name":"scripted","version":"0.1.0","kind":"map","inputs":[{"name":"x","dtype":"i64","rank":0}],"outputs":[{"name":"x","dtype":"i64","rank":0}]}"#,
    r#"{"abi_version":1,"name":"scripted","version":"0.1.0","kind":"filter"}"#,
    r#"{"abi_version":1,"name":"scripted","version":"0.1.0","kind":"flat_map"}"#,
    r#"{"abi_version":1,"name":"scripted","version":"0.1.0","kind":"batch"}"#,
];

/// The scripted plugins (10 ms per call: spinning guests stay cheap), and the two map
/// plugins again with a generous time limit for the check that a fresh instance works (a
/// short limit can expire on a loaded machine during an honest call).
fn plugins() -> &'static (Vec<Arc<WasmPlugin>>, Vec<Arc<WasmPlugin>>) {
    static PLUGINS: OnceLock<(Vec<Arc<WasmPlugin>>, Vec<Arc<WasmPlugin>>)> = OnceLock::new();
    PLUGINS.get_or_init(|| (load(10, &VARIANTS), load(5000, &VARIANTS[..2])))
}

fn load(time_ms: u64, variants: &[&str]) -> Vec<Arc<WasmPlugin>> {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "sluice-fuzz-plugin-wasm-{}-{time_ms}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let options = WasmOptions {
        limits: WasmLimits::default()
            .memory_bytes(16 << 20)
            .time(Duration::from_millis(time_ms)),
        cache_dir: Some(None),
    };
    let plugins = variants
        .iter()
        .enumerate()
        .map(|(i, json)| {
            let wat = GUEST
                .replace("METALEN", &json.len().to_string())
                .replace("METADATA", &json.replace('"', "\\22"));
            let path = dir.join(format!("scripted{i}.wat"));
            std::fs::write(&path, wat).expect("write the guest");
            WasmPlugin::load_with(&path, &options)
                .unwrap_or_else(|e| panic!("the guest loads: {e}"))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    plugins
}

/// A WASM plugin whose instances get the script as their configuration, whatever the stage
/// passes (a stage's configuration is JSON; the script is any bytes).
struct Scripted {
    plugin: Arc<WasmPlugin>,
    script: Vec<u8>,
}

impl Backend for Scripted {
    fn info(&self) -> &PluginInfo {
        self.plugin.info()
    }
    fn source(&self) -> String {
        Backend::source(&*self.plugin)
    }
    fn instantiate(&self, _config: &[u8]) -> sluice_plugin_host::Result<Box<dyn Instance>> {
        self.plugin.instantiate(&self.script)
    }
}

fn elements(n: usize) -> Vec<Element> {
    (0..n as u64)
        .map(|i| {
            let mut e = Element::new(ElementId::new(0, i));
            e.insert("x", Tensor::scalar_i64(i as i64 * 3));
            let image =
                Tensor::new(&[2, 2, 1], TensorData::U8(vec![i as u8; 4].into())).expect("4 values");
            e.insert("image", image);
            e
        })
        .collect()
}

fn call(
    stage: &PluginStage,
    elements: &[Element],
) -> sluice_plugin_host::Result<Vec<(usize, Element)>> {
    let mut rngs: Vec<_> = elements
        .iter()
        .map(|e| {
            StreamKey {
                seed: 1,
                epoch: 0,
                stage: 0,
            }
            .element_rng(e.id())
        })
        .collect();
    stage.call(elements.to_vec(), &mut rngs)
}

fn check(kind: Kind, n: usize, result: sluice_plugin_host::Result<Vec<(usize, Element)>>) {
    match result {
        Ok(out) => {
            assert!(out.iter().all(|(p, _)| *p < n), "a parent out of range");
            assert!(
                out.windows(2).all(|w| w[0].0 <= w[1].0),
                "parents out of order"
            );
            match kind {
                Kind::Map => {
                    assert_eq!(out.len(), n);
                    assert!(out.iter().enumerate().all(|(i, (p, _))| i == *p));
                }
                Kind::Filter => {
                    assert!(
                        out.windows(2).all(|w| w[0].0 < w[1].0),
                        "an input kept twice"
                    );
                }
                _ => {}
            }
        }
        Err(Error::Call {
            plugin,
            status,
            message,
            ..
        }) => {
            assert_eq!(plugin, NAME);
            assert!(
                !status.is_empty() && !message.trim().is_empty(),
                "status {status:?}, message {message:?}"
            );
        }
        Err(Error::Init { plugin, message }) => {
            assert_eq!(plugin, NAME);
            assert!(!message.is_empty());
        }
        Err(e) => panic!("not a call or init error: {e:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let (plugins, honest) = plugins();
    let [variant, n, script @ ..] = data else {
        return;
    };
    let variant = usize::from(*variant) % plugins.len();
    let n = usize::from(*n % 5);
    let plugin = Arc::clone(&plugins[variant]);
    let kind = plugin.info().kind;
    let elements = elements(n);
    let backend = Arc::new(Scripted {
        plugin: Arc::clone(&plugin),
        script: script.to_vec(),
    });
    match PluginStage::new(backend, &serde_json::Value::Null) {
        Ok(stage) => {
            // Twice: the second call takes the instance back from the pool, or a new one
            // when the first was discarded.
            check(kind, n, call(&stage, &elements));
            check(kind, n, call(&stage, &elements));
        }
        Err(e) => check(kind, n, Err(e)),
    }
    // The next instance still works.
    let honest = Arc::clone(&honest[if variant < 2 { variant } else { 0 }]);
    let stage = PluginStage::new(honest, &serde_json::Value::Null)
        .unwrap_or_else(|e| panic!("a fresh instance after the script: {e}"));
    let out = call(&stage, &elements).unwrap_or_else(|e| panic!("a fresh instance's call: {e}"));
    assert_eq!(out.len(), n);
    for ((p, e), want) in out.iter().zip(&elements) {
        assert_eq!(e.id(), want.id());
        assert_eq!(e.tensor("x"), want.tensor("x"), "element {p}");
        assert_eq!(e.tensor("image"), want.tensor("image"), "element {p}");
    }
});
