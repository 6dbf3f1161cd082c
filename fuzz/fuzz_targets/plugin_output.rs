//! The plugin ABI boundary, host side, without a guest runtime: what a plugin gives back
//! from a call, checked as every host checks it (`sdk/ABI.md` §4-§8, §11).
//!
//! A scripted backend (`Scripted`, a `sluice_plugin_host::Backend`) declares a fuzz-chosen
//! contract (kind; declared outputs by name, dtype and rank; declared inputs, sometimes
//! ones the elements lack) and its instances answer a [`PluginStage::call`] on 0-4 elements
//! as the fuzz input says. The first byte chooses what is fuzzed:
//!
//! - **wire** (`mode % 4` 0 or 1): the rest is the status and then the output batch buffer
//!   (§5) the plugin returns from `sluice_process`. The stage decodes it with
//!   `sluice_sdk::wire::decode_batch`, checks parents and the map rule, converts tensors
//!   with `to_core`, merges them into their parents and checks the declared outputs.
//! - **lent** (2): a native plugin of ABI version 2 (§11) scripted in Rust: each op asks the
//!   host's `sluice_alloc_output` for a buffer (fuzz-chosen element index, name bytes, dtype
//!   code, rank and dims, a null name or a misaligned dims pointer) and fills it, or sets a
//!   filter's `keep` flag to any byte; then the call returns a fuzz-chosen status (OK,
//!   DECLINED: the same call then goes through the wire with the script's buffer, errors).
//!   The `unsafe` here is only the plugin's side of the ABI done correctly (the host's
//!   function pointer called with valid pointers, writes inside the buffers the host gave).
//!   What a native plugin can do wrong with pointers the host cannot check (write past a
//!   buffer, keep a lent pointer, write to a read-only view, never return) is not fuzzed: a
//!   native plugin is code inside the host process, trusted as the host itself is (ABI.md
//!   §11.6); only the WASM host (`plugin_wasm`) sandboxes it.
//! - **metadata** (3): the rest as the metadata JSON (§4) through
//!   `metadata::read_info` and `read_info_of`.
//!
//! Invariants: no panic; every error is the plugin-host error naming the plugin (`Call`, or
//! `Contract` only when a declared input is missing; `Info` naming the file for metadata);
//! a call that fails with a status is reported with that status's name; what a call gives
//! back has its parents in range and in order (exactly one per input for a map, each input
//! at most once, unchanged, for a filter), meets the declared outputs, and is exactly the
//! parent merged with the decoded tensors; the decoded buffer re-encodes (SDK encoder) to a
//! buffer that decodes and re-encodes to itself; metadata that loads prints to JSON that
//! loads to the same metadata.
#![no_main]

use std::path::Path;
use std::sync::{Arc, Mutex};

use libfuzzer_sys::fuzz_target;
use sluice_core::rng::StreamKey;
use sluice_core::{Element, ElementId, Tensor, TensorData};
use sluice_plugin_host::lent::lent_status;
use sluice_plugin_host::{
    Backend, CallFailure, CallPath, Error, Instance, Lent, LentCall, PluginStage, metadata, wire,
};
use sluice_sdk::abi::status;
use sluice_sdk::wire::{DType, Encoder, Entry, decode_batch};
use sluice_sdk::{Feature, Kind, PluginInfo};

const NAME: &str = "fuzzed";
const NAMES: [&str; 4] = ["x", "image", "y", "label"];

/// Bytes of the fuzz input, read front to back (zeros once it runs out).
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn byte_if(&mut self, read: bool) -> u8 {
        if read { self.byte() } else { 0 }
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        let s = self.take(8);
        b[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(b)
    }
}

fn dtype_of(code: u8) -> Option<DType> {
    DType::from_code(code % 7)
}

/// The declared contract and the elements of the call.
fn contract(c: &mut Cursor) -> (PluginInfo, bool, Vec<Element>) {
    let a = c.byte();
    let kind = [Kind::Map, Kind::Filter, Kind::FlatMap, Kind::Batch][usize::from(a & 3)];
    let n = usize::from((a >> 2) % 5);
    let with_bytes = a & 0x20 != 0;
    let mut info = PluginInfo::new(NAME, "0.0.0", kind);
    let b = c.byte();
    for i in 0..usize::from(b % 3) {
        let spec = c.byte();
        let mut f = Feature::new(NAMES[usize::from(spec & 3)]);
        if let Some(d) = dtype_of(spec >> 2) {
            f = f.dtype(d);
        }
        if spec & 0x80 != 0 {
            f = f.rank((spec >> 5) & 3);
        }
        let _ = i;
        info = info.output(f);
    }
    // Declared inputs: `x` (every element has it), and sometimes one none has.
    let mut missing = false;
    if b & 0x10 != 0 {
        info = info.input(Feature::new("x").dtype(DType::I64).rank(0));
        if with_bytes {
            info = info.input(Feature::new("label"));
        }
    }
    if b & 0x20 != 0 {
        info = info.input(Feature::new("absent"));
        missing = n > 0;
    }
    let elements = (0..n as u64)
        .map(|i| {
            let mut e = Element::new(ElementId::new(0, i));
            e.insert("x", Tensor::scalar_i64(i as i64));
            let image =
                Tensor::new(&[2, 2, 1], TensorData::U8(vec![i as u8; 4].into())).expect("4 values");
            e.insert("image", image);
            if with_bytes {
                e.insert(
                    "label",
                    Tensor::scalar_bytes(bytes::Bytes::from_static(b"cat")),
                );
            }
            e
        })
        .collect();
    (info, missing, elements)
}

/// One lent-path op, as the script says.
enum Op {
    Alloc {
        element: u32,
        name: Vec<u8>,
        null_name: bool,
        dtype: u8,
        dims: Vec<u64>,
        misaligned: bool,
        fill: u8,
    },
    Keep(usize, u8),
}

/// What a scripted instance does: the lent ops, then the status (and message), then the
/// wire output buffer.
#[derive(Clone)]
struct Script {
    ops: Arc<Vec<Op>>,
    lent_status: i32,
    wire_status: i32,
    output: Arc<Vec<u8>>,
}

fn status_of(b: u8) -> i32 {
    // Mostly OK; otherwise a status code of §8 or one no version defines.
    match b {
        0..=159 => status::OK,
        160..=250 => i32::from(b - 160) % 8,
        251 => -1,
        252 => i32::MAX,
        253 => i32::MIN,
        _ => 0x100,
    }
}

fn script(c: &mut Cursor, lent: bool) -> Script {
    let mut ops = Vec::new();
    if lent {
        for _ in 0..c.byte() % 6 {
            let op = c.byte();
            if op & 1 == 0 {
                let element = match c.byte() {
                    b @ 0..=250 => u32::from(b % 6),
                    b => u32::MAX - u32::from(b - 251),
                };
                let name_byte = c.byte();
                let name = match name_byte % 8 {
                    0..=3 => NAMES[usize::from(name_byte % 4)].as_bytes().to_vec(),
                    4 => vec![0xff, 0xfe],
                    5 => Vec::new(),
                    _ => c.take(usize::from(name_byte >> 3)).to_vec(),
                };
                let dtype = c.byte();
                let rank = c.byte() % 5;
                let dims = (0..rank)
                    .map(|_| match c.byte() {
                        b @ 0..=239 => u64::from(b % 5),
                        240 => u64::MAX,
                        241 => 1 << 32,
                        242 => (1 << 62) + 1,
                        b => c.u64() ^ u64::from(b),
                    })
                    .collect();
                ops.push(Op::Alloc {
                    element,
                    name,
                    null_name: op & 0x10 != 0 && op & 0x20 != 0,
                    dtype: if op & 0x40 != 0 { dtype } else { dtype % 7 },
                    dims,
                    misaligned: op & 0x80 != 0 && op & 0x08 != 0,
                    fill: c.byte(),
                });
            } else {
                ops.push(Op::Keep(usize::from(op >> 1) % 5, c.byte()));
            }
        }
    }
    let lent_status = match (lent, c.byte_if(lent)) {
        (false, _) => status::OK,
        (true, 0..=179) => status::OK,
        (true, 180..=219) => status::DECLINED,
        (true, b) => status_of(b),
    };
    let wire_status = status_of(c.byte());
    Script {
        ops: Arc::new(ops),
        lent_status,
        wire_status,
        output: Arc::new(c.0.to_vec()),
    }
}

struct Scripted {
    info: PluginInfo,
    lends: bool,
    script: Script,
    /// What the instances saw and did, for the checks.
    log: Arc<Mutex<Log>>,
}

#[derive(Default)]
struct Log {
    /// Lent calls made.
    lent_calls: usize,
    /// A lent alloc was refused (null) in the last lent call.
    refused: bool,
    /// Wire calls made.
    wire_calls: usize,
    /// Buffers the host handed out: (element, name, dtype, dims, fill).
    allocated: Vec<(u32, String, DType, Vec<u64>, u8)>,
}

impl Backend for Scripted {
    fn info(&self) -> &PluginInfo {
        &self.info
    }
    fn source(&self) -> String {
        "fuzz script".to_string()
    }
    fn instantiate(&self, _config: &[u8]) -> sluice_plugin_host::Result<Box<dyn Instance>> {
        Ok(Box::new(ScriptedInstance {
            script: self.script.clone(),
            log: Arc::clone(&self.log),
        }))
    }
    fn lends(&self) -> bool {
        self.lends
    }
}

struct ScriptedInstance {
    script: Script,
    log: Arc<Mutex<Log>>,
}

impl Instance for ScriptedInstance {
    fn call(
        &mut self,
        _input: &[u8],
        _seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> Result<(), CallFailure> {
        self.log.lock().unwrap().wire_calls += 1;
        if self.script.wire_status != status::OK {
            return Err(CallFailure::from_status(
                self.script.wire_status,
                "scripted failure".to_string(),
            ));
        }
        output(&self.script.output);
        Ok(())
    }

    fn call_lent(&mut self, call: &mut LentCall<'_>) -> Result<Lent, CallFailure> {
        let outputs = call.outputs_ptr();
        let n = call.n_elements();
        let mut log = self.log.lock().unwrap();
        log.lent_calls += 1;
        log.refused = false;
        log.allocated.clear();
        for op in self.script.ops.iter() {
            match op {
                Op::Alloc {
                    element,
                    name,
                    null_name,
                    dtype,
                    dims,
                    misaligned,
                    fill,
                } => {
                    // A real, huge buffer: the host would allocate it (a native plugin
                    // may use as much memory as the process has); not fuzzed.
                    let values = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
                    if values.is_some_and(|v| v > 1 << 21) {
                        continue;
                    }
                    // Dims at an 8-byte-aligned address, or one byte off it.
                    let mut words = vec![0u64; dims.len() + 1];
                    let raw: &mut [u8] = bytemuck_bytes(&mut words);
                    let at = usize::from(*misaligned && !dims.is_empty());
                    for (i, d) in dims.iter().enumerate() {
                        raw[at + 8 * i..at + 8 * i + 8].copy_from_slice(&d.to_le_bytes());
                    }
                    let dims_ptr = raw[at..].as_ptr().cast::<u64>();
                    let name_ptr = if *null_name {
                        std::ptr::null()
                    } else {
                        name.as_ptr()
                    };
                    // SAFETY: `outputs` is the host's `sluice_outputs` for this call, alive
                    // while `call` is; the name (or null, which the host refuses unread)
                    // and dims (`rank` u64s, possibly misaligned, which the host refuses
                    // unread) are valid for the call.
                    let ptr = unsafe {
                        ((*outputs).alloc)(
                            (*outputs).ctx,
                            *element,
                            name_ptr,
                            name.len(),
                            *dtype,
                            dims.len() as u8,
                            dims_ptr,
                        )
                    };
                    if ptr.is_null() {
                        log.refused = true;
                        continue;
                    }
                    // The host gave a buffer: it must be one it can give.
                    let d = DType::from_code(*dtype)
                        .expect("the host gave a buffer for an unknown dtype");
                    let size = d.size().expect("the host gave a buffer for byte strings");
                    assert!(
                        !(*null_name && !name.is_empty()) && !(*misaligned && !dims.is_empty())
                    );
                    assert!(
                        (*element as usize) < n,
                        "a buffer for element {element} of {n}"
                    );
                    let name = std::str::from_utf8(name).expect("a buffer for a non-UTF-8 name");
                    let count = dims
                        .iter()
                        .try_fold(1u64, |a, &d| a.checked_mul(d))
                        .and_then(|c| usize::try_from(c).ok())
                        .and_then(|c| c.checked_mul(size))
                        .expect("a buffer for a shape that overflows");
                    assert_eq!(ptr as usize % size, 0, "a misaligned buffer");
                    // SAFETY: the host's allocator gave `count` values of `size` bytes,
                    // writable until the call returns (§11.4).
                    unsafe { std::ptr::write_bytes(ptr, *fill, count) };
                    log.allocated
                        .push((*element, name.to_string(), d, dims.clone(), *fill));
                }
                Op::Keep(i, v) => {
                    if *i < n {
                        // SAFETY: `keep` is `n_elements` bytes the host lends (§11.3).
                        unsafe { *(*outputs).keep.add(*i) = *v };
                    }
                }
            }
        }
        lent_status(self.script.lent_status, || {
            "scripted lent failure".to_string()
        })
    }
}

fn bytemuck_bytes(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u64s are plain bytes; the length is the words' size.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
}

/// An element's features as wire bytes (to compare elements bit for bit, NaNs included).
fn bits(e: &Element) -> Vec<u8> {
    let mut features: Vec<(&str, &Tensor)> = e
        .iter()
        .map(|(n, v)| match v {
            sluice_core::Value::Dense(t) => (n, t),
            sluice_core::Value::Ragged(_) => panic!("no ragged features here"),
        })
        .collect();
    features.sort_by(|a, b| a.0.cmp(b.0));
    wire::encode_selected(&[features], Vec::new())
}

fn meets(info: &PluginInfo, e: &Element) {
    for f in &info.outputs {
        let t = e
            .tensor(&f.name)
            .unwrap_or_else(|| panic!("output lacks declared {:?}", f.name));
        if let Some(d) = f.dtype {
            assert_eq!(
                DType::from_code(match t.dtype() {
                    sluice_core::DType::U8 => 1,
                    sluice_core::DType::I32 => 2,
                    sluice_core::DType::I64 => 3,
                    sluice_core::DType::F32 => 4,
                    sluice_core::DType::F64 => 5,
                    sluice_core::DType::Bytes => 6,
                }),
                Some(d),
                "declared dtype of {:?}",
                f.name
            );
        }
        if let Some(r) = f.rank {
            assert_eq!(t.rank(), usize::from(r), "declared rank of {:?}", f.name);
        }
    }
}

/// The decoded entries encoded again with the SDK's encoder.
fn reencode(entries: &[Entry]) -> Vec<u8> {
    let parents: Vec<u32> = entries.iter().map(|e| e.parent).collect();
    let mut enc = Encoder::new(&parents);
    for e in entries {
        match &e.element {
            None => enc.pass_through(),
            Some(el) => {
                enc.element(el.tensors.len() as u32);
                for t in &el.tensors {
                    enc.tensor(t);
                }
            }
        }
    }
    enc.finish()
}

fn metadata_case(json: &[u8]) {
    let path = Path::new("fuzz.wasm");
    let check = |r: sluice_plugin_host::Result<PluginInfo>, reported: Option<u32>| match r {
        Ok(info) => {
            match reported {
                Some(v) => assert_eq!(info.abi_version, v),
                None => assert!((1..=2).contains(&info.abi_version)),
            }
            let again = metadata::read_info(path, info.to_json().as_bytes(), "module")
                .unwrap_or_else(|e| panic!("own JSON must load: {e}"));
            assert_eq!(again, info);
        }
        Err(Error::Info { path: p, message }) => {
            assert_eq!(p, path);
            assert!(!message.is_empty());
        }
        Err(e) => panic!("not an Info error: {e:?}"),
    };
    check(metadata::read_info(path, json, "module"), None);
    let reported = 1 + u32::from(json.first().copied().unwrap_or(0) & 1);
    check(
        metadata::read_info_of(path, json, "library", reported),
        Some(reported),
    );
}

fuzz_target!(|data: &[u8]| {
    let mut c = Cursor(data);
    let mode = c.byte() % 4;
    if mode == 3 {
        metadata_case(c.0);
        return;
    }
    let lent = mode == 2;
    let (info, missing, elements) = contract(&mut c);
    let script = script(&mut c, lent);
    let log = Arc::new(Mutex::new(Log::default()));
    let backend = Arc::new(Scripted {
        info: info.clone(),
        lends: lent,
        script: script.clone(),
        log: Arc::clone(&log),
    });
    let path = if lent { CallPath::Lent } else { CallPath::Wire };
    let stage = PluginStage::with_path(backend, &serde_json::Value::Null, path)
        .expect("a scripted instance");
    let n = elements.len();
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
    let result = stage.call(elements.clone(), &mut rngs);
    let log = log.lock().unwrap();
    let went_lent = log.lent_calls > 0;
    let went_wire = log.wire_calls > 0;
    let out = match result {
        Err(Error::Contract { plugin, .. }) => {
            assert_eq!(plugin, NAME);
            assert!(missing, "a contract error without a missing input");
            assert!(
                !went_lent && !went_wire,
                "called despite a broken input contract"
            );
            return;
        }
        Err(Error::Call {
            plugin,
            status: st,
            message,
            ..
        }) => {
            assert_eq!(plugin, NAME);
            assert!(!missing);
            assert!(!message.is_empty());
            let failed = if went_wire {
                script.wire_status
            } else {
                script.lent_status
            };
            if failed != status::OK && !(went_lent && !went_wire && failed == status::DECLINED) {
                assert_eq!(st, status::name(failed), "{message}");
            } else {
                assert_eq!(st, "broken output", "{message}");
            }
            return;
        }
        Err(e) => panic!("not a call or contract error: {e:?}"),
        Ok(out) => out,
    };
    assert!(!missing, "a call went through without a declared input");
    // Parents in range and in order.
    assert!(
        out.windows(2).all(|w| w[0].0 <= w[1].0),
        "parents out of order"
    );
    assert!(out.iter().all(|(p, _)| *p < n), "a parent out of range");
    if info.kind == Kind::Map {
        assert_eq!(out.len(), n, "a map gives one output per input");
        assert!(out.iter().enumerate().all(|(i, (p, _))| *p == i));
    }
    if info.kind == Kind::Filter {
        assert!(
            out.windows(2).all(|w| w[0].0 < w[1].0),
            "a filter kept an input twice"
        );
        for (p, e) in &out {
            assert_eq!(bits(e), bits(&elements[*p]), "a filter changed element {p}");
        }
    }
    for (_, e) in &out {
        meets(&info, e);
    }
    if went_wire {
        // What the stage gave is what the buffer says, merged into the parents.
        let entries = decode_batch(&script.output).expect("the stage took it");
        assert_eq!(entries.len(), out.len());
        for (entry, (p, e)) in entries.iter().zip(&out) {
            assert_eq!(entry.parent as usize, *p);
            let mut want = elements[*p].clone();
            if let Some(el) = &entry.element {
                for t in &el.tensors {
                    want.insert(
                        &t.name,
                        wire::to_core(t.clone()).expect("the stage took it"),
                    );
                }
            }
            assert_eq!(bits(e), bits(&want), "output {p} is not its buffer");
        }
        let again = reencode(&entries);
        let back = decode_batch(&again)
            .unwrap_or_else(|e| panic!("re-encoded buffer does not decode: {e}"));
        assert_eq!(back.len(), entries.len());
        assert_eq!(reencode(&back), again, "re-encoding is a fixed point");
    } else if went_lent {
        assert!(!log.refused, "OK after a refused buffer");
        if info.kind == Kind::Map {
            for (p, e) in &out {
                let mut want = elements[*p].clone();
                for (el, name, d, dims, fill) in &log.allocated {
                    if *el as usize == *p {
                        let shape: Vec<usize> = dims.iter().map(|&x| x as usize).collect();
                        let count: usize = shape.iter().product();
                        let data = match d {
                            DType::U8 => TensorData::U8(vec![*fill; count].into()),
                            DType::I32 => {
                                TensorData::I32(vec![i32::from_ne_bytes([*fill; 4]); count].into())
                            }
                            DType::I64 => {
                                TensorData::I64(vec![i64::from_ne_bytes([*fill; 8]); count].into())
                            }
                            DType::F32 => {
                                TensorData::F32(vec![f32::from_ne_bytes([*fill; 4]); count].into())
                            }
                            DType::F64 => {
                                TensorData::F64(vec![f64::from_ne_bytes([*fill; 8]); count].into())
                            }
                            DType::Bytes => unreachable!(),
                        };
                        want.insert(name, Tensor::new(&shape, data).unwrap());
                    }
                }
                assert_eq!(
                    bits(e),
                    bits(&want),
                    "lent output {p} is not what was written"
                );
            }
        }
    } else {
        assert_eq!(n, 0, "no call for a non-empty chunk");
    }
});
