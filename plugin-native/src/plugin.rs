//! Native plugins: C-ABI shared libraries (`.so`, `.dylib`, `.dll`) loaded with libloading.
//!
//! The library is opened once and never unloaded while anything uses it: every instance
//! and every stage holds the library by `Arc`, and it is closed only when the last of them
//! is dropped. Unloading a plugin that is in use is not supported.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use libloading::Library;
use sluice_plugin_host::lent::lent_status;
use sluice_plugin_host::{
    Backend, CallFailure, Error, Instance, Lent, LentCall, Result, abi, metadata,
};
use sluice_sdk::PluginInfo;
use sluice_sdk::abi::lent::{ElementView, Outputs};
use sluice_sdk::abi::{status, symbols};

type AbiVersionFn = unsafe extern "C" fn() -> u32;
type InfoPtrFn = unsafe extern "C" fn() -> *const u8;
type LenFn = unsafe extern "C" fn() -> usize;
type InitFn = unsafe extern "C" fn(*const u8, usize) -> u32;
type ProcessFn = unsafe extern "C" fn(u32, *const u8, usize, *const u64, usize) -> i32;
type BufPtrFn = unsafe extern "C" fn(u32) -> *const u8;
type BufLenFn = unsafe extern "C" fn(u32) -> usize;
type DestroyFn = unsafe extern "C" fn(u32);
type ProcessLentFn =
    unsafe extern "C" fn(u32, *const ElementView, usize, *const u64, usize, *const Outputs) -> i32;

/// The entry points, resolved: version 1's, and `sluice_process_lent` for a plugin of
/// version 2 or later.
#[derive(Clone, Copy)]
struct Api {
    init: InitFn,
    process: ProcessFn,
    process_lent: Option<ProcessLentFn>,
    output_ptr: BufPtrFn,
    output_len: BufLenFn,
    error_ptr: BufPtrFn,
    error_len: BufLenFn,
    destroy: DestroyFn,
}

/// The library and its entry points. The function pointers are only called while `_lib`
/// (kept alive by every holder of this struct) is loaded.
struct Loaded {
    api: Api,
    _lib: Library,
}

/// A native plugin library.
pub struct NativePlugin {
    path: PathBuf,
    info: PluginInfo,
    abi_version: u32,
    loaded: Arc<Loaded>,
}

impl std::fmt::Debug for NativePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativePlugin")
            .field("path", &self.path)
            .field("abi_version", &self.abi_version)
            .field("info", &self.info)
            .finish()
    }
}

/// Resolves `name` in `lib` as a `T` (a function pointer type).
///
/// # Safety
/// `T` must be the symbol's real type, as `sdk/ABI.md` declares it.
unsafe fn symbol<T: Copy>(lib: &Library, path: &Path, name: &str) -> Result<T> {
    // SAFETY: the caller guarantees `T` is the symbol's type; the copied function pointer
    // is only used while the library stays loaded (see `Loaded`).
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| abi::missing_symbol(path, name))
}

/// Bytes at `ptr`, copied (empty for a null pointer or zero length).
///
/// # Safety
/// When non-null, `ptr` must be valid for `len` bytes.
unsafe fn copy_bytes(ptr: *const u8, len: usize) -> Vec<u8> {
    if ptr.is_null() || len == 0 {
        return Vec::new();
    }
    // SAFETY: `ptr` is non-null (checked above) and the caller guarantees it is valid for
    // `len` bytes; the bytes are copied before returning, so no borrow outlives the call.
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

impl NativePlugin {
    /// Loads the library at `path`, checks its ABI version (read before anything else),
    /// resolves every symbol its version requires and reads its metadata. A library of
    /// version 2 also gets the lent path (`sluice_process_lent`); one of version 1 is called
    /// through the wire only, as before.
    pub fn load(path: impl AsRef<Path>) -> Result<Arc<NativePlugin>> {
        let path = path.as_ref().to_path_buf();
        // SAFETY: loading a library runs its initialisers. Plugins are code the user chose
        // to run, built against the SDK (which has none); this is the trust the user gives.
        let lib = unsafe { Library::new(&path) }.map_err(|e| Error::Load {
            path: path.clone(),
            message: e.to_string(),
        })?;
        // SAFETY: each type below is the symbol's type as ABI.md declares it.
        let version: AbiVersionFn = unsafe { symbol(&lib, &path, symbols::ABI_VERSION)? };
        // SAFETY: `version` is `sluice_abi_version`, resolved above with its ABI.md type
        // (`extern "C" fn() -> u32`); the library is loaded for the whole call.
        let abi_version = unsafe { version() };
        abi::check_version(&path, abi_version)?;
        // SAFETY: the `*const ()` lookups only check that each required symbol exists: the
        // pointers are neither dereferenced nor called.
        abi::check_symbols_for(&path, abi_version, |name| unsafe {
            lib.get::<*const ()>(name.as_bytes()).is_ok()
        })?;
        // SAFETY: `symbol`'s contract: each function pointer type below is the symbol's type
        // as sdk/ABI.md declares it (`sluice_process_lent`: §11, looked up only for a
        // library that reports version 2 or later, as §2 requires).
        let (info_ptr, info_len, api) = unsafe {
            let info_ptr: InfoPtrFn = symbol(&lib, &path, symbols::INFO_PTR)?;
            let info_len: LenFn = symbol(&lib, &path, symbols::INFO_LEN)?;
            let process_lent = if abi_version >= 2 {
                Some(symbol(&lib, &path, symbols::PROCESS_LENT)?)
            } else {
                None
            };
            let api = Api {
                init: symbol(&lib, &path, symbols::INIT)?,
                process: symbol(&lib, &path, symbols::PROCESS)?,
                process_lent,
                output_ptr: symbol(&lib, &path, symbols::OUTPUT_PTR)?,
                output_len: symbol(&lib, &path, symbols::OUTPUT_LEN)?,
                error_ptr: symbol(&lib, &path, symbols::ERROR_PTR)?,
                error_len: symbol(&lib, &path, symbols::ERROR_LEN)?,
                destroy: symbol(&lib, &path, symbols::DESTROY)?,
            };
            (info_ptr, info_len, api)
        };
        // SAFETY: the metadata is `info_len` bytes at `info_ptr`, valid while loaded.
        let json = unsafe { copy_bytes(info_ptr(), info_len()) };
        let info = metadata::read_info_of(&path, &json, "library", abi_version)?;
        Ok(Arc::new(NativePlugin {
            path,
            info,
            abi_version,
            loaded: Arc::new(Loaded { api, _lib: lib }),
        }))
    }

    /// The ABI version the library reported (1, or 2 with the lent path).
    pub fn abi_version(&self) -> u32 {
        self.abi_version
    }

    /// The plugin's metadata.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The library's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Backend for NativePlugin {
    fn info(&self) -> &PluginInfo {
        &self.info
    }

    fn source(&self) -> String {
        self.path.display().to_string()
    }

    fn instantiate(&self, config: &[u8]) -> Result<Box<dyn Instance>> {
        let api = self.loaded.api;
        // SAFETY: `config` is valid for its length during the call.
        let handle = unsafe { (api.init)(config.as_ptr(), config.len()) };
        if handle == 0 {
            // SAFETY: the error buffer of handle 0 is valid until the next init on this
            // thread; it is copied at once.
            let message = unsafe { copy_bytes((api.error_ptr)(0), (api.error_len)(0)) };
            return Err(Error::Init {
                plugin: self.info.name.clone(),
                message: sluice_plugin_host::plugin_message(&message),
            });
        }
        Ok(Box::new(NativeInstance {
            handle,
            loaded: Arc::clone(&self.loaded),
        }))
    }

    fn lends(&self) -> bool {
        self.loaded.api.process_lent.is_some()
    }
}

/// One instance of a native plugin.
struct NativeInstance {
    handle: u32,
    loaded: Arc<Loaded>,
}

impl Instance for NativeInstance {
    fn call(
        &mut self,
        input: &[u8],
        seeds: &[u64],
        output: &mut dyn FnMut(&[u8]),
    ) -> std::result::Result<(), CallFailure> {
        let api = self.loaded.api;
        // SAFETY: `input` and `seeds` (a `[u64]`, so aligned) are valid for their lengths
        // during the call; the instance is used by one thread at a time (`&mut self`).
        let code = unsafe {
            (api.process)(
                self.handle,
                input.as_ptr(),
                input.len(),
                seeds.as_ptr(),
                seeds.len(),
            )
        };
        if code == status::OK {
            // SAFETY: the output buffer is valid until this instance's next call, which
            // cannot happen before `output` returns.
            let (ptr, len) =
                unsafe { ((api.output_ptr)(self.handle), (api.output_len)(self.handle)) };
            if ptr.is_null() && len > 0 {
                return Err(CallFailure {
                    status: "broken output".to_string(),
                    message: "the plugin returned a null output pointer".to_string(),
                    discard: true,
                });
            }
            let bytes: &[u8] = if len == 0 {
                &[]
            } else {
                // SAFETY: `ptr` is non-null (checked above) and, by the ABI, valid for `len`
                // bytes until this instance's next call, which cannot happen while `bytes`
                // lives (it is dropped when `output` returns, and `self` is borrowed mutably).
                unsafe { std::slice::from_raw_parts(ptr, len) }
            };
            output(bytes);
            Ok(())
        } else {
            Err(CallFailure::from_status(code, self.message()))
        }
    }

    fn call_lent(&mut self, call: &mut LentCall<'_>) -> std::result::Result<Lent, CallFailure> {
        let Some(process_lent) = self.loaded.api.process_lent else {
            return Ok(Lent::Declined(
                "a version-1 library has no lent path".to_string(),
            ));
        };
        let seeds = call.seeds();
        // SAFETY: `process_lent` is `sluice_process_lent` of this still-loaded library (a
        // version-2 one), called with its ABI.md §11 type and arguments: `call` made the
        // element views (pointing into itself and into tensors it borrows), the seeds (a
        // `[u64]`, so aligned) and the outputs (this host's allocator and keep flags), all
        // valid while `call` is borrowed, for the whole call; the instance is used by one
        // thread at a time (`&mut self`).
        let code = unsafe {
            process_lent(
                self.handle,
                call.elements_ptr(),
                call.n_elements(),
                seeds.as_ptr(),
                seeds.len(),
                call.outputs_ptr(),
            )
        };
        lent_status(code, || self.message())
    }
}

impl NativeInstance {
    /// The instance's error message (after a failed call), copied.
    fn message(&self) -> String {
        let api = self.loaded.api;
        // SAFETY: the error buffer is valid until the instance's next call; it is copied at
        // once.
        let message =
            unsafe { copy_bytes((api.error_ptr)(self.handle), (api.error_len)(self.handle)) };
        sluice_plugin_host::plugin_message(&message)
    }
}

impl Drop for NativeInstance {
    fn drop(&mut self) {
        // SAFETY: the handle came from `sluice_init` of this library, which is still loaded
        // (`self.loaded`), and is destroyed once.
        unsafe { (self.loaded.api.destroy)(self.handle) }
    }
}
