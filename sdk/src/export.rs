//! What [`export_plugin!`](crate::export_plugin) expands to: the C ABI's entry points for one
//! [`Plugin`] type. Plugin authors do not use this module directly.
//!
//! With [`crate::lent`], the SDK's `unsafe` code: turning the host's pointers into slices,
//! and the allocator entry points. Each block says why it is sound.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::abi::lent::{ElementView, Outputs};
use crate::abi::{ABI_VERSION, status};
use crate::error::Error;
use crate::lent::{Sink, elements_from_c};
use crate::plugin::{Config, Plugin, PluginInfo, process_into, process_lent};

/// One live instance: the plugin and the buffers of its last call.
struct Instance<P> {
    plugin: P,
    output: Vec<u8>,
    error: Vec<u8>,
}

thread_local! {
    /// Why the last `sluice_init` on this thread failed (`sluice_error_ptr(0)`).
    static INIT_ERROR: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

type Slot<P> = Option<Arc<Mutex<Instance<P>>>>;

/// The exported state of one plugin type: its metadata and its instances.
pub struct Exports<P: Plugin> {
    info: OnceLock<(PluginInfo, Vec<u8>)>,
    instances: Mutex<Vec<Slot<P>>>,
}

impl<P: Plugin> Default for Exports<P> {
    fn default() -> Self {
        Exports::new()
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_string())
}

/// A byte slice from the host, empty when `len` is 0 (whatever `ptr` is).
///
/// # Safety
/// When `len > 0`, `ptr` must be valid for reads of `len` bytes for `'a`.
unsafe fn host_bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: the caller guarantees `ptr` is valid for `len` bytes (ABI.md: the host's
        // buffers stay valid and unchanged for the duration of the call).
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl<P: Plugin> Exports<P> {
    /// No instances yet.
    pub const fn new() -> Self {
        Exports {
            info: OnceLock::new(),
            instances: Mutex::new(Vec::new()),
        }
    }

    fn info(&self) -> &(PluginInfo, Vec<u8>) {
        self.info.get_or_init(|| {
            let info = P::info();
            let json = info.to_json().into_bytes();
            (info, json)
        })
    }

    /// `sluice_abi_version`.
    pub fn abi_version(&self) -> u32 {
        ABI_VERSION
    }

    /// `sluice_info_ptr`: the metadata JSON, valid for the life of the module.
    pub fn info_ptr(&self) -> *const u8 {
        self.info().1.as_ptr()
    }

    /// `sluice_info_len`.
    pub fn info_len(&self) -> usize {
        self.info().1.len()
    }

    /// `sluice_init`: a new instance's handle (1 or more), or 0 with the reason at
    /// `sluice_error_ptr(0)`.
    ///
    /// # Safety
    /// `config` must be valid for reads of `config_len` bytes during the call.
    pub unsafe fn init(&self, config: *const u8, config_len: usize) -> u32 {
        // SAFETY: this function's caller guarantees `config` is valid for `config_len` bytes
        // during the call (`# Safety`), and `bytes` does not outlive the call.
        let bytes = unsafe { host_bytes(config, config_len) };
        let made = catch_unwind(AssertUnwindSafe(|| {
            let config = Config::from_bytes(bytes)?;
            P::new(&config)
        }));
        let fail = |text: String| {
            INIT_ERROR.with(|e| *e.borrow_mut() = text.into_bytes());
            0
        };
        match made {
            Ok(Ok(plugin)) => {
                let mut slots = self
                    .instances
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let instance = Arc::new(Mutex::new(Instance {
                    plugin,
                    output: Vec::new(),
                    error: Vec::new(),
                }));
                let index = match slots.iter().position(Option::is_none) {
                    Some(i) => {
                        slots[i] = Some(instance);
                        i
                    }
                    None => {
                        slots.push(Some(instance));
                        slots.len() - 1
                    }
                };
                match u32::try_from(index + 1) {
                    Ok(handle) => handle,
                    Err(_) => fail("too many instances".to_string()),
                }
            }
            Ok(Err(e)) => fail(e.to_string()),
            Err(panic) => fail(format!("panicked in init: {}", panic_text(panic.as_ref()))),
        }
    }

    fn instance(&self, handle: u32) -> Option<Arc<Mutex<Instance<P>>>> {
        let slots = self
            .instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slots
            .get((handle as usize).checked_sub(1)?)
            .and_then(|s| s.as_ref().map(Arc::clone))
    }

    /// `sluice_process`: runs one call; the output (on [`status::OK`]) or the error message
    /// (otherwise) is then at `sluice_output_ptr` / `sluice_error_ptr` of the instance.
    ///
    /// # Safety
    /// `input` must be valid for reads of `input_len` bytes and `seeds` (8-byte aligned) for
    /// `n_seeds` values during the call.
    pub unsafe fn process(
        &self,
        handle: u32,
        input: *const u8,
        input_len: usize,
        seeds: *const u64,
        n_seeds: usize,
    ) -> i32 {
        let Some(instance) = self.instance(handle) else {
            return status::UNKNOWN_INSTANCE;
        };
        let mut guard = instance.lock().unwrap_or_else(PoisonError::into_inner);
        let instance = &mut *guard;
        // SAFETY: this function's caller guarantees `input` is valid for `input_len` bytes
        // during the call (`# Safety`), and `input` does not outlive the call.
        let input = unsafe { host_bytes(input, input_len) };
        let seeds: &[u64] = if n_seeds == 0 || seeds.is_null() {
            &[]
        } else if !(seeds as usize).is_multiple_of(std::mem::align_of::<u64>()) {
            instance.error = b"seeds pointer is not 8-byte aligned".to_vec();
            return status::INVALID_INPUT;
        } else {
            // SAFETY: the caller guarantees `seeds` is valid for `n_seeds` u64 reads; it is
            // non-null and aligned (checked above).
            unsafe { std::slice::from_raw_parts(seeds, n_seeds) }
        };
        let info = &self.info().0;
        let plugin = &mut instance.plugin;
        let output = &mut instance.output;
        match catch_unwind(AssertUnwindSafe(|| {
            process_into(plugin, info, input, seeds, output)
        })) {
            Ok(Ok(())) => {
                instance.error.clear();
                status::OK
            }
            Ok(Err(e)) => {
                instance.output.clear();
                instance.error = e.to_string().into_bytes();
                e.status()
            }
            Err(panic) => {
                instance.output.clear();
                instance.error = format!("panicked: {}", panic_text(panic.as_ref())).into_bytes();
                status::PANIC
            }
        }
    }

    /// `sluice_process_lent` (ABI version 2): runs one call on tensors the host lends in
    /// place, the outputs written into the host's buffers (`sdk/ABI.md` §11); on failure the
    /// message is at `sluice_error_ptr`. The instance's output buffer is emptied.
    ///
    /// # Safety
    /// The pointers must be as ABI.md §11 describes: `elements` valid for `n_elements`
    /// element views (their tensors, names, dims and values readable and unchanged),
    /// `seeds` (8-byte aligned) for `n_seeds` values, and `outputs` a valid
    /// `sluice_outputs` whose allocator follows §11.4, all during the call.
    pub unsafe fn process_lent(
        &self,
        handle: u32,
        elements: *const ElementView,
        n_elements: usize,
        seeds: *const u64,
        n_seeds: usize,
        outputs: *const Outputs,
    ) -> i32 {
        let Some(instance) = self.instance(handle) else {
            return status::UNKNOWN_INSTANCE;
        };
        let mut guard = instance.lock().unwrap_or_else(PoisonError::into_inner);
        let instance = &mut *guard;
        instance.output.clear();
        let info = &self.info().0;
        // SAFETY: this function's caller guarantees the pointers (`# Safety`).
        let result = unsafe {
            process_lent_raw(
                &mut instance.plugin,
                info,
                elements,
                n_elements,
                seeds,
                n_seeds,
                outputs,
            )
        };
        match result {
            Ok(()) => {
                instance.error.clear();
                status::OK
            }
            Err((code, message)) => {
                instance.error = message.into_bytes();
                code
            }
        }
    }

    fn with_buffer<T>(&self, handle: u32, f: impl Fn(&Instance<P>) -> T, none: T) -> T {
        match self.instance(handle) {
            Some(i) => f(&i.lock().unwrap_or_else(PoisonError::into_inner)),
            None => none,
        }
    }

    /// `sluice_output_ptr`: valid until the instance's next call or its destruction.
    pub fn output_ptr(&self, handle: u32) -> *const u8 {
        self.with_buffer(handle, |i| i.output.as_ptr(), std::ptr::null())
    }

    /// `sluice_output_len`.
    pub fn output_len(&self, handle: u32) -> usize {
        self.with_buffer(handle, |i| i.output.len(), 0)
    }

    /// `sluice_error_ptr`: the instance's last error message (UTF-8); handle 0: the last
    /// failed `sluice_init` on this thread.
    pub fn error_ptr(&self, handle: u32) -> *const u8 {
        if handle == 0 {
            return INIT_ERROR.with(|e| e.borrow().as_ptr());
        }
        self.with_buffer(handle, |i| i.error.as_ptr(), std::ptr::null())
    }

    /// `sluice_error_len`.
    pub fn error_len(&self, handle: u32) -> usize {
        if handle == 0 {
            return INIT_ERROR.with(|e| e.borrow().len());
        }
        self.with_buffer(handle, |i| i.error.len(), 0)
    }

    /// `sluice_destroy`: drops the instance (unknown handles are ignored).
    pub fn destroy(&self, handle: u32) {
        let removed = {
            let mut slots = self
                .instances
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            (handle as usize)
                .checked_sub(1)
                .and_then(|i| slots.get_mut(i))
                .and_then(Option::take)
        };
        // Dropped outside the table's lock; a panicking Drop must not unwind into the host.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(removed)));
    }
}

/// One `sluice_process_lent` call on `plugin` (what [`Exports::process_lent`] runs on an
/// instance, and what an in-process host runs directly): the host's pointers checked and
/// read as ABI.md §11 says, then the lent path ([`crate::Plugin::map_lent`] or
/// [`crate::Plugin::filter_lent`]) with panics caught. `Err` is a status code and its
/// message.
///
/// # Safety
/// As [`Exports::process_lent`].
pub unsafe fn process_lent_raw<P: Plugin>(
    plugin: &mut P,
    info: &PluginInfo,
    elements: *const ElementView,
    n_elements: usize,
    seeds: *const u64,
    n_seeds: usize,
    outputs: *const Outputs,
) -> Result<(), (i32, String)> {
    let fail = |e: Error| (e.status(), e.to_string());
    let invalid = |m: &str| fail(Error::invalid_input(m));
    let seeds: &[u64] = if n_seeds == 0 {
        &[]
    } else if seeds.is_null() {
        return Err(invalid("seeds pointer is null"));
    } else if !(seeds as usize).is_multiple_of(std::mem::align_of::<u64>()) {
        return Err(invalid("seeds pointer is not 8-byte aligned"));
    } else {
        // SAFETY: the caller guarantees `seeds` is valid for `n_seeds` u64 reads during the
        // call; it is non-null and aligned (checked above).
        unsafe { std::slice::from_raw_parts(seeds, n_seeds) }
    };
    if outputs.is_null() || !(outputs as usize).is_multiple_of(std::mem::align_of::<Outputs>()) {
        return Err(invalid("the outputs pointer is null or misaligned"));
    }
    // SAFETY: non-null and aligned (checked above); the caller guarantees it points to a
    // valid `sluice_outputs` for the call.
    let outputs: &Outputs = unsafe { &*outputs };
    let keep: &mut [u8] = if n_elements == 0 {
        &mut []
    } else if outputs.keep.is_null() {
        return Err(invalid("the keep flags pointer is null"));
    } else {
        // SAFETY: ABI.md §11.3: `keep` is `n_elements` bytes the host lends the plugin,
        // writable and used by nothing else during the call (non-null: checked above).
        unsafe { std::slice::from_raw_parts_mut(outputs.keep, n_elements) }
    };
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller guarantees the element views (`# Safety`); the views made
        // here do not outlive this call.
        let elements = unsafe { elements_from_c(elements, n_elements) }?;
        process_lent(plugin, info, &elements, seeds, Sink::Host(outputs), keep)
    })) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(fail(e)),
        Err(panic) => Err((
            status::PANIC,
            format!("panicked: {}", panic_text(panic.as_ref())),
        )),
    }
}

/// `sluice_alloc`: `len` bytes, 8-byte aligned, for the host to write an input into (WASM
/// hosts need it; native hosts may pass their own memory). Null when out of memory.
pub fn alloc(len: usize) -> *mut u8 {
    let words = len.div_ceil(8).max(1);
    let mut v: Vec<u64> = Vec::new();
    if v.try_reserve_exact(words).is_err() {
        return std::ptr::null_mut();
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    v.as_mut_ptr().cast::<u8>()
}

/// `sluice_free`: frees what [`alloc`] returned for the same `len`.
///
/// # Safety
/// `ptr` must come from [`alloc`]`(len)` and not have been freed.
pub unsafe fn free(ptr: *mut u8, len: usize) {
    if ptr.is_null() {
        return;
    }
    let words = len.div_ceil(8).max(1);
    // SAFETY: `ptr` was made by `alloc(len)` as a `Vec<u64>` of capacity exactly `words`
    // (`try_reserve_exact` on an empty vector) and length 0, which is what is rebuilt here.
    drop(unsafe { Vec::from_raw_parts(ptr.cast::<u64>(), 0, words) });
}

/// Exports the C ABI (`sdk/ABI.md`, version 2) for a [`Plugin`] type: `sluice_abi_version`,
/// `sluice_info_ptr` / `_len`, `sluice_alloc`, `sluice_free`, `sluice_init`,
/// `sluice_process`, `sluice_process_lent`, `sluice_output_ptr` / `_len`,
/// `sluice_error_ptr` / `_len` and `sluice_destroy`. Use it once per cdylib; the crate then builds as a native plugin
/// (`crate-type = ["cdylib"]`) and for `wasm32-unknown-unknown` unchanged.
///
/// The exported functions carry `#[allow(unsafe_code)]` (exported symbols are `unsafe` in
/// Rust 2024), so a plugin crate may `#![deny(unsafe_code)]` (not `forbid`). The symbols are
/// global: a binary can link at most one plugin crate as a Rust library (tests comparing a
/// plugin with its loaded build use one test binary per plugin crate).
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        static __SLUICE_EXPORTS: $crate::export::Exports<$plugin> = $crate::export::Exports::new();

        /// The ABI version (`sluice_abi_version`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_abi_version() -> u32 {
            __SLUICE_EXPORTS.abi_version()
        }

        /// The metadata JSON (`sluice_info_ptr`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_info_ptr() -> *const u8 {
            __SLUICE_EXPORTS.info_ptr()
        }

        /// The metadata JSON's length (`sluice_info_len`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_info_len() -> usize {
            __SLUICE_EXPORTS.info_len()
        }

        /// Allocates `len` bytes, 8-byte aligned (`sluice_alloc`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_alloc(len: usize) -> *mut u8 {
            $crate::export::alloc(len)
        }

        /// Frees what `sluice_alloc(len)` returned (`sluice_free`).
        ///
        /// # Safety
        /// `ptr` must come from `sluice_alloc(len)` and not have been freed.
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_free(ptr: *mut u8, len: usize) {
            // SAFETY: the host passes back a pointer from `sluice_alloc(len)` (ABI.md).
            unsafe { $crate::export::free(ptr, len) }
        }

        /// Creates an instance from JSON configuration bytes (`sluice_init`).
        ///
        /// # Safety
        /// `config` must be valid for reads of `config_len` bytes.
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_init(config: *const u8, config_len: usize) -> u32 {
            // SAFETY: the host's configuration buffer is valid for the call (ABI.md).
            unsafe { __SLUICE_EXPORTS.init(config, config_len) }
        }

        /// Runs one call on a batch (`sluice_process`).
        ///
        /// # Safety
        /// `input` must be valid for `input_len` bytes and `seeds` for `n_seeds` values.
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_process(
            instance: u32,
            input: *const u8,
            input_len: usize,
            seeds: *const u64,
            n_seeds: usize,
        ) -> i32 {
            // SAFETY: the host's input and seed buffers are valid for the call (ABI.md).
            unsafe { __SLUICE_EXPORTS.process(instance, input, input_len, seeds, n_seeds) }
        }

        /// Runs one call on lent tensors, outputs into host buffers (`sluice_process_lent`,
        /// ABI version 2).
        ///
        /// # Safety
        /// The pointers must be as `sdk/ABI.md` §11 describes, valid during the call.
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn sluice_process_lent(
            instance: u32,
            elements: *const $crate::abi::lent::ElementView,
            n_elements: usize,
            seeds: *const u64,
            n_seeds: usize,
            outputs: *const $crate::abi::lent::Outputs,
        ) -> i32 {
            // SAFETY: the host's views, seeds and outputs are valid for the call (ABI.md §11).
            unsafe {
                __SLUICE_EXPORTS
                    .process_lent(instance, elements, n_elements, seeds, n_seeds, outputs)
            }
        }

        /// The last call's output (`sluice_output_ptr`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_output_ptr(instance: u32) -> *const u8 {
            __SLUICE_EXPORTS.output_ptr(instance)
        }

        /// The last call's output length (`sluice_output_len`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_output_len(instance: u32) -> usize {
            __SLUICE_EXPORTS.output_len(instance)
        }

        /// The last error message (`sluice_error_ptr`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_error_ptr(instance: u32) -> *const u8 {
            __SLUICE_EXPORTS.error_ptr(instance)
        }

        /// The last error message's length (`sluice_error_len`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_error_len(instance: u32) -> usize {
            __SLUICE_EXPORTS.error_len(instance)
        }

        /// Destroys an instance (`sluice_destroy`).
        #[allow(unsafe_code)]
        #[unsafe(no_mangle)]
        pub extern "C" fn sluice_destroy(instance: u32) {
            __SLUICE_EXPORTS.destroy(instance)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Kind, PluginInfo};
    use crate::wire::{Data, Element, Tensor, decode_batch, encode_batch};
    use crate::{Error, Rng};

    struct Boom {
        limit: i64,
    }

    impl Plugin for Boom {
        fn info() -> PluginInfo {
            PluginInfo::new("boom", "0.1", Kind::Map)
        }
        fn new(config: &Config) -> crate::Result<Self> {
            config.only(&["limit"])?;
            Ok(Boom {
                limit: config.get_or("limit", 10)?,
            })
        }
        fn map(&mut self, e: Element, _: &mut Rng) -> crate::Result<Element> {
            let Data::I64(v) = &e.get("x").unwrap().data else {
                return Err(Error::plugin("x must be i64"));
            };
            if v[0] > self.limit * 2 {
                panic!("way over the limit");
            }
            if v[0] > self.limit {
                return Err(Error::plugin(format!("{} is over the limit", v[0])));
            }
            Ok(e)
        }
    }

    fn x(v: i64) -> Vec<u8> {
        encode_batch(&[Element {
            tensors: vec![Tensor::new("x", vec![], Data::I64(vec![v])).unwrap()],
        }])
    }

    fn text(ptr: *const u8, len: usize) -> String {
        // SAFETY: the callers pass a buffer of the exports with its length (metadata or an
        // error message), valid until the next call on its instance; it is copied at once.
        String::from_utf8(unsafe { host_bytes(ptr, len) }.to_vec()).unwrap()
    }

    #[test]
    fn the_exported_entry_points_follow_the_abi() {
        static E: Exports<Boom> = Exports::new();
        let info: PluginInfo = serde_json::from_str(&text(E.info_ptr(), E.info_len())).unwrap();
        assert_eq!(info.name, "boom");
        let bad = br#"{"limt": 1}"#;
        // SAFETY: `bad` is a live byte string of `bad.len()` bytes.
        assert_eq!(unsafe { E.init(bad.as_ptr(), bad.len()) }, 0);
        assert!(text(E.error_ptr(0), E.error_len(0)).contains("unknown key \"limt\""));
        let good = br#"{"limit": 5}"#;
        // SAFETY: `good` is a live byte string of `good.len()` bytes.
        let h = unsafe { E.init(good.as_ptr(), good.len()) };
        assert!(h >= 1);
        let seeds = [1u64];
        for (v, want) in [
            (3, status::OK),
            (7, status::PLUGIN_ERROR),
            (11, status::PANIC),
        ] {
            let input = x(v);
            // SAFETY: `input` (its length given) and `seeds` (one aligned `u64`) are live.
            let code = unsafe { E.process(h, input.as_ptr(), input.len(), seeds.as_ptr(), 1) };
            assert_eq!(code, want, "value {v}");
            if code == status::OK {
                let out = decode_batch(&{
                    // SAFETY: `h`'s output buffer, with its length, is valid until `h`'s next
                    // call; it is copied at once.
                    unsafe { host_bytes(E.output_ptr(h), E.output_len(h)) }.to_vec()
                })
                .unwrap();
                assert_eq!(out.len(), 1);
            } else {
                let msg = text(E.error_ptr(h), E.error_len(h));
                assert!(msg.contains("over the limit"), "{msg}");
            }
        }
        // A damaged input is an error status, not a crash.
        let junk = [1u8, 2, 3];
        // SAFETY: `junk` (its length given) and `seeds` (one aligned `u64`) are live.
        let code = unsafe { E.process(h, junk.as_ptr(), junk.len(), seeds.as_ptr(), 1) };
        assert_eq!(code, status::INVALID_INPUT);
        E.destroy(h);
        let input = x(1);
        // SAFETY: `input` (its length given) and `seeds` (one aligned `u64`) are live.
        let code = unsafe { E.process(h, input.as_ptr(), input.len(), seeds.as_ptr(), 1) };
        assert_eq!(code, status::UNKNOWN_INSTANCE);
    }

    /// A host allocator for the tests: each buffer a fresh `Vec<u64>` kept in `ctx`.
    unsafe extern "C" fn test_alloc(
        ctx: *mut std::ffi::c_void,
        _element: u32,
        _name: *const u8,
        _name_len: usize,
        dtype: u8,
        rank: u8,
        dims: *const u64,
    ) -> *mut u8 {
        // SAFETY: the tests pass a `RefCell<Vec<Vec<u64>>>` as `ctx`, alive for the call.
        let buffers = unsafe { &*ctx.cast::<std::cell::RefCell<Vec<Vec<u64>>>>() };
        // SAFETY: the SDK passes `rank` dims, valid during the call.
        let dims = unsafe { host_bytes(dims.cast(), 8 * usize::from(rank)) };
        let count: u64 = dims
            .chunks_exact(8)
            .map(|d| u64::from_le_bytes(d.try_into().unwrap()))
            .product();
        let size = crate::DType::from_code(dtype)
            .and_then(crate::DType::size)
            .unwrap() as u64;
        let mut buf = vec![0u64; (count * size).div_ceil(8).max(1) as usize];
        let ptr = buf.as_mut_ptr().cast::<u8>();
        buffers.borrow_mut().push(buf);
        ptr
    }

    #[test]
    fn the_lent_entry_point_follows_the_abi() {
        use crate::abi::lent::{ElementView, Outputs, TensorView};
        static E: Exports<Boom> = Exports::new();
        let good = br#"{"limit": 5}"#;
        // SAFETY: `good` is a live byte string of `good.len()` bytes.
        let h = unsafe { E.init(good.as_ptr(), good.len()) };
        let buffers = std::cell::RefCell::new(Vec::<Vec<u64>>::new());
        let mut keep = [crate::abi::lent::KEEP_UNSET; 1];
        let outputs = Outputs {
            ctx: std::ptr::from_ref(&buffers).cast_mut().cast(),
            alloc: test_alloc,
            keep: keep.as_mut_ptr(),
        };
        let call = |handle: u32, v: i64, seeds: &[u64]| {
            let value = [v];
            let tensors = [TensorView {
                name: b"x".as_ptr(),
                name_len: 1,
                dims: std::ptr::null(),
                data: value.as_ptr().cast(),
                count: 1,
                dtype: 3,
                rank: 0,
                reserved: [0; 6],
            }];
            let elements = [ElementView {
                tensors: tensors.as_ptr(),
                n_tensors: 1,
            }];
            // SAFETY: every pointer is to a live local of the stated length, and `outputs`'
            // allocator follows ABI.md §11.4.
            unsafe {
                E.process_lent(
                    handle,
                    elements.as_ptr(),
                    1,
                    seeds.as_ptr(),
                    seeds.len(),
                    &outputs,
                )
            }
        };
        // `Boom` implements `map` only: the default lent path copies the changed tensors
        // (none here: it returns its input) into host buffers.
        assert_eq!(call(h, 3, &[1]), status::OK);
        assert_eq!(E.output_len(h), 0);
        assert!(
            buffers.borrow().is_empty(),
            "an unchanged element writes nothing"
        );
        for (v, want, says) in [
            (7, status::PLUGIN_ERROR, "7 is over the limit"),
            (11, status::PANIC, "panicked: way over the limit"),
        ] {
            assert_eq!(call(h, v, &[1]), want);
            let msg = text(E.error_ptr(h), E.error_len(h));
            assert!(msg.contains(says), "{msg}");
        }
        assert_eq!(call(h, 3, &[]), status::INVALID_INPUT);
        assert!(text(E.error_ptr(h), E.error_len(h)).contains("1 elements but 0 seeds"));
        // SAFETY: a null `outputs` is refused before anything is read.
        let code = unsafe {
            E.process_lent(
                h,
                std::ptr::null(),
                0,
                std::ptr::null(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(code, status::INVALID_INPUT);
        E.destroy(h);
        assert_eq!(call(h, 3, &[1]), status::UNKNOWN_INSTANCE);
    }

    #[test]
    fn alloc_and_free_round_trip() {
        for len in [0, 1, 7, 8, 9, 1000] {
            let p = alloc(len);
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0);
            // SAFETY: `p` is valid for `len` bytes (just allocated).
            unsafe {
                std::ptr::write_bytes(p, 0xab, len);
                free(p, len);
            }
        }
    }
}
