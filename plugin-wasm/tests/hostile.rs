//! Hostile guests, written in WAT: each misbehaves on the call whose first element is 12
//! (loops forever, grows memory until refused, traps, returns an out-of-bounds pointer or a
//! huge length) and is contained as the documented error within its limit, while the same
//! pipeline goes on with its other calls. Modules with a wrong ABI version, no exports or
//! imports are refused at load.

use std::time::{Duration, Instant};

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::{Error, PluginStage};
use sluice_plugin_wasm::{WasmLimits, WasmOptions, WasmPlugin};

const INFO: &str = r#"{"abi_version":1,"name":"hostile","version":"0","kind":"map","inputs":[{"name":"value","dtype":"i64","rank":0}]}"#;

/// A module implementing the ABI that echoes its input (a valid map output) except on the
/// call whose first `value` is 12, where it runs `misbehave` (WAT instructions; the function
/// must then return an i32 status or never return).
fn module(abi_version: u32, misbehave: &str) -> String {
    let escaped = INFO.replace('"', "\\\"");
    format!(
        r#"(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 65536))
  (global $out_ptr (mut i32) (i32.const 0))
  (global $out_len (mut i32) (i32.const 0))
  (data (i32.const 1024) "{escaped}")
  (data (i32.const 4096) "hostile refuses")
  (func (export "sluice_abi_version") (result i32) (i32.const {abi_version}))
  (func (export "sluice_info_ptr") (result i32) (i32.const 1024))
  (func (export "sluice_info_len") (result i32) (i32.const {info_len}))
  (func (export "sluice_alloc") (param $len i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $ptr) (local.get $len)) (i32.const 7)) (i32.const -8)))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (local.get $end) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then (return (i32.const 0))))
        (br $grow)))
    (global.set $heap (local.get $end))
    (local.get $ptr))
  (func (export "sluice_free") (param i32 i32))
  (func (export "sluice_init") (param i32 i32) (result i32) (i32.const 1))
  (func (export "sluice_process") (param $inst i32) (param $in i32) (param $len i32) (param $seeds i32) (param $n i32) (result i32)
    (if (i32.and (i32.gt_u (local.get $n) (i32.const 0))
                 (i64.eq (i64.load (i32.add (local.get $in)
                           (i32.and (i32.add (i32.const 40) (i32.mul (local.get $n) (i32.const 4))) (i32.const -8))))
                         (i64.const 12)))
      (then {misbehave}))
    (global.set $out_ptr (local.get $in))
    (global.set $out_len (local.get $len))
    (i32.const 0))
  (func (export "sluice_output_ptr") (param i32) (result i32) (global.get $out_ptr))
  (func (export "sluice_output_len") (param i32) (result i32) (global.get $out_len))
  (func (export "sluice_error_ptr") (param i32) (result i32) (i32.const 4096))
  (func (export "sluice_error_len") (param i32) (result i32) (i32.const 15))
  (func (export "sluice_destroy") (param i32)))
"#,
        info_len = INFO.len(),
    )
}

fn write(dir: &std::path::Path, name: &str, wat: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.wat"));
    std::fs::write(&path, wat).unwrap();
    path
}

fn options() -> WasmOptions {
    WasmOptions {
        limits: WasmLimits::default()
            .memory_bytes(8 << 20)
            .time(Duration::from_millis(200)),
        cache_dir: Some(None),
    }
}

fn values(ds: &Dataset) -> (Vec<i64>, u64) {
    let mut it = ds.iter().unwrap();
    let v = it
        .by_ref()
        .map(|e| e.unwrap().tensor("value").unwrap().as_i64().unwrap()[0])
        .collect();
    (v, it.stats().skipped)
}

#[test]
fn a_well_behaved_echo_passes_everything_through() {
    let dir = tempfile::tempdir().unwrap();
    let plugin =
        WasmPlugin::load_with(write(dir.path(), "echo", &module(1, "")), &options()).unwrap();
    assert_eq!(plugin.info().name, "hostile");
    let stage = PluginStage::new(plugin, &json!({})).unwrap();
    let (got, skipped) = values(&stage.apply(&Dataset::range(0, 20), MapChunksSpec::new(4)));
    assert_eq!(got, (0..20).collect::<Vec<_>>());
    assert_eq!(skipped, 0);
}

#[test]
fn each_misbehaviour_is_contained_as_its_error_and_the_pipeline_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "loop",
            "(loop $forever (br $forever))",
            "timeout",
            "time limit of 200ms",
        ),
        (
            "grow",
            "(block $refused (loop $more (br_if $refused (i32.eq (memory.grow (i32.const 16)) (i32.const -1))) (br $more))) unreachable",
            "memory limit",
            "limit of 8388608 bytes",
        ),
        ("trap", "unreachable", "trap", "unreachable"),
        (
            "oob",
            "(global.set $out_ptr (i32.const 2147418112)) (global.set $out_len (i32.const 100)) (return (i32.const 0))",
            "broken output",
            "outside the plugin's memory",
        ),
        (
            "huge",
            "(global.set $out_ptr (local.get $in)) (global.set $out_len (i32.const 2147483647)) (return (i32.const 0))",
            "broken output",
            "outside the plugin's memory",
        ),
        (
            "error",
            "(return (i32.const 2))",
            "plugin error",
            "hostile refuses",
        ),
    ];
    for (name, misbehave, status, detail) in cases {
        let path = write(dir.path(), name, &module(1, misbehave));
        let plugin = WasmPlugin::load_with(&path, &options()).unwrap();
        let stage = PluginStage::new(plugin, &json!({})).unwrap();
        // Fail policy: the run ends with the typed error.
        let started = Instant::now();
        let err = stage
            .apply(&Dataset::range(0, 20), MapChunksSpec::new(4))
            .collect()
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name} was not stopped in time"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("plugin hostile: {status} on elements [")),
            "{name}: {text}"
        );
        assert!(text.contains(detail), "{name}: {text}");
        // Skip policy, sequential and parallel: the bad call's four elements are skipped and
        // counted, everything else comes through (a trapped instance is replaced).
        for threads in [NumParallel::Sequential, NumParallel::Fixed(2)] {
            let ds = stage
                .apply(
                    &Dataset::range(0, 20),
                    MapChunksSpec::new(4).num_parallel(threads),
                )
                .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
            let (got, skipped) = values(&ds);
            let want: Vec<i64> = (0..20).filter(|v| !(12..16).contains(v)).collect();
            assert_eq!(got, want, "{name}");
            assert_eq!(skipped, 4, "{name}");
        }
    }
}

#[test]
fn wrong_versions_empty_modules_and_imports_are_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let v7 = write(dir.path(), "v7", &module(7, ""));
    let err = WasmPlugin::load_with(&v7, &options()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::AbiVersion {
                found: 7,
                supported: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("v7.wat"), "{err}");

    let empty = write(dir.path(), "empty", "(module)");
    let err = WasmPlugin::load_with(&empty, &options())
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing symbol `sluice_abi_version`"), "{err}");

    let wasi = write(
        dir.path(),
        "wasi",
        r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32))))"#,
    );
    let err = WasmPlugin::load_with(&wasi, &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("imports `wasi_snapshot_preview1::fd_write`"),
        "{err}"
    );
    assert!(err.contains("no WASI"), "{err}");

    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm\x01\0\0\0garbage").unwrap();
    let err = WasmPlugin::load_with(&garbage, &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("garbage.wasm: cannot load the plugin"),
        "{err}"
    );

    let big = write(
        dir.path(),
        "big",
        &module(1, "").replace(
            "(memory (export \"memory\") 2)",
            "(memory (export \"memory\") 1000)",
        ),
    );
    let err = WasmPlugin::load_with(&big, &options())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot instantiate"),
        "a module whose initial memory is over the limit: {err}"
    );
}

/// Fuzz finding `plugin_wasm` empty-error-message (fuzz/regressions/plugin_wasm/): a guest
/// that fails a call (or its init) with an empty error buffer gave an error ending in
/// "...: " that said nothing; the host now names the missing message.
#[test]
fn an_empty_error_message_is_named_not_left_blank() {
    let dir = tempfile::tempdir().unwrap();
    let silent = module(1, "(return (i32.const 2))").replace(
        "(func (export \"sluice_error_len\") (param i32) (result i32) (i32.const 15))",
        "(func (export \"sluice_error_len\") (param i32) (result i32) (i32.const 0))",
    );
    assert!(silent.contains("(i32.const 0))\n  (func (export \"sluice_destroy\")"));
    let plugin = WasmPlugin::load_with(write(dir.path(), "silent", &silent), &options()).unwrap();
    let stage = PluginStage::new(plugin.clone(), &json!({})).unwrap();
    let text = stage
        .apply(&Dataset::range(0, 20), MapChunksSpec::new(4))
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("plugin hostile: plugin error on elements [")
            && text.ends_with(sluice_plugin_host::NO_MESSAGE),
        "{text}"
    );
    // An init refused without a message.
    let refusing = silent.replace(
        "(func (export \"sluice_init\") (param i32 i32) (result i32) (i32.const 1))",
        "(func (export \"sluice_init\") (param i32 i32) (result i32) (i32.const 0))",
    );
    let plugin =
        WasmPlugin::load_with(write(dir.path(), "refusing", &refusing), &options()).unwrap();
    match PluginStage::new(plugin, &json!({})) {
        Err(Error::Init { plugin, message }) => {
            assert_eq!(plugin, "hostile");
            assert_eq!(message, sluice_plugin_host::NO_MESSAGE);
        }
        other => panic!("expected an init error: {other:?}"),
    }
}
