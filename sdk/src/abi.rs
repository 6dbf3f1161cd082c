//! The numbers of the C ABI: its version, status codes, dtype codes and wire-format tags,
//! and the structures of the lent path ([`lent`], version 2). `sdk/ABI.md` is the normative
//! description; these constants and layouts are the same values.

/// The ABI version this SDK implements, returned by `sluice_abi_version`: 2, the version-1
/// functions and `sluice_process_lent` (`sdk/ABI.md` §11). A host refuses a plugin whose
/// version it does not know.
pub const ABI_VERSION: u32 = 2;

/// The first ABI version: the twelve functions of the wire path. Hosts support every
/// version from this one to [`ABI_VERSION`].
pub const FIRST_ABI_VERSION: u32 = 1;

/// Magic bytes opening every batch buffer (`"SLB1"`).
pub const BATCH_MAGIC: [u8; 4] = *b"SLB1";

/// Marks an output element that is its parent input element, unchanged (no tensors
/// follow): what a filter returns for a kept element.
pub const PASS_THROUGH: u32 = u32::MAX;

/// Status codes returned by `sluice_init` (through the error buffer) and `sluice_process`.
pub mod status {
    /// Success.
    pub const OK: i32 = 0;
    /// The input is malformed or does not meet the plugin's declared input contract.
    pub const INVALID_INPUT: i32 = 1;
    /// The plugin's own code reported an error.
    pub const PLUGIN_ERROR: i32 = 2;
    /// The plugin panicked (native builds; on wasm32 a panic is a trap).
    pub const PANIC: i32 = 3;
    /// The configuration given to `sluice_init` is invalid.
    pub const INVALID_CONFIG: i32 = 4;
    /// The instance handle is unknown (never created, or destroyed).
    pub const UNKNOWN_INSTANCE: i32 = 5;
    /// (`sluice_process_lent` only, version 2) The plugin declines this lent call: the host
    /// makes the same call through `sluice_process` (the wire path) instead.
    pub const DECLINED: i32 = 6;

    /// A short name for a status code.
    pub fn name(code: i32) -> &'static str {
        match code {
            OK => "ok",
            INVALID_INPUT => "invalid input",
            PLUGIN_ERROR => "plugin error",
            PANIC => "panic",
            INVALID_CONFIG => "invalid configuration",
            UNKNOWN_INSTANCE => "unknown instance",
            DECLINED => "declined",
            _ => "unknown status",
        }
    }
}

/// The exported symbols, by name: the twelve of version 1 and the one version 2 adds.
pub mod symbols {
    /// `u32 sluice_abi_version(void)`.
    pub const ABI_VERSION: &str = "sluice_abi_version";
    /// `const u8* sluice_info_ptr(void)`.
    pub const INFO_PTR: &str = "sluice_info_ptr";
    /// `usize sluice_info_len(void)`.
    pub const INFO_LEN: &str = "sluice_info_len";
    /// `u8* sluice_alloc(usize len)`.
    pub const ALLOC: &str = "sluice_alloc";
    /// `void sluice_free(u8* ptr, usize len)`.
    pub const FREE: &str = "sluice_free";
    /// `u32 sluice_init(const u8* config, usize config_len)`.
    pub const INIT: &str = "sluice_init";
    /// `i32 sluice_process(u32 instance, const u8* input, usize input_len, const u64* seeds,
    /// usize n_seeds)`.
    pub const PROCESS: &str = "sluice_process";
    /// `const u8* sluice_output_ptr(u32 instance)`.
    pub const OUTPUT_PTR: &str = "sluice_output_ptr";
    /// `usize sluice_output_len(u32 instance)`.
    pub const OUTPUT_LEN: &str = "sluice_output_len";
    /// `const u8* sluice_error_ptr(u32 instance)`.
    pub const ERROR_PTR: &str = "sluice_error_ptr";
    /// `usize sluice_error_len(u32 instance)`.
    pub const ERROR_LEN: &str = "sluice_error_len";
    /// `void sluice_destroy(u32 instance)`.
    pub const DESTROY: &str = "sluice_destroy";

    /// (version 2) `i32 sluice_process_lent(u32 instance, const sluice_element_view*
    /// elements, usize n_elements, const u64* seeds, usize n_seeds, const sluice_outputs*
    /// outputs)`.
    pub const PROCESS_LENT: &str = "sluice_process_lent";

    /// The symbols version 2 adds to [`REQUIRED`].
    pub const ADDED_IN_V2: [&str; 1] = [PROCESS_LENT];

    /// Every symbol version 1 requires (and every later version too).
    pub const REQUIRED: [&str; 12] = [
        ABI_VERSION,
        INFO_PTR,
        INFO_LEN,
        ALLOC,
        FREE,
        INIT,
        PROCESS,
        OUTPUT_PTR,
        OUTPUT_LEN,
        ERROR_PTR,
        ERROR_LEN,
        DESTROY,
    ];
}

/// The structures of the lent path (`sluice_process_lent`, ABI version 2, `sdk/ABI.md` §11),
/// laid out as C lays them out (`#[repr(C)]`). Native libraries only: WASM hosts use the
/// wire path.
///
/// The host lends each element's tensors in place ([`TensorView`]: read-only, valid during
/// the call) and gives an allocator ([`Outputs`]) whose buffers the plugin writes its output
/// tensors into; the host then keeps those buffers as the output tensors' memory, so values
/// cross the boundary without being copied.
pub mod lent {
    use std::ffi::c_void;

    /// One tensor lent by the host (`sluice_tensor_view`): 48 bytes on 64-bit platforms.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct TensorView {
        /// The feature name, UTF-8, `name_len` bytes (not NUL-terminated).
        pub name: *const u8,
        /// Its length in bytes.
        pub name_len: usize,
        /// `rank` dimensions (null when `rank` is 0).
        pub dims: *const u64,
        /// The values: `count` values of `dtype`, row-major, packed, little-endian, aligned
        /// to the dtype's size. Read-only. Unspecified (possibly null) when `count` is 0.
        pub data: *const u8,
        /// The number of values: the product of the dims (1 for rank 0).
        pub count: u64,
        /// The dtype code (1 `u8`, 2 `i32`, 3 `i64`, 4 `f32`, 5 `f64`; never 6: byte strings
        /// take the wire path).
        pub dtype: u8,
        /// The number of dims.
        pub rank: u8,
        /// Zero.
        pub reserved: [u8; 6],
    }

    /// One element's lent tensors (`sluice_element_view`): 16 bytes on 64-bit platforms.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct ElementView {
        /// `n_tensors` tensors (unspecified, possibly null, when `n_tensors` is 0).
        pub tensors: *const TensorView,
        /// Their number.
        pub n_tensors: usize,
    }

    /// The host's output allocator (`sluice_alloc_output`): a buffer for output tensor
    /// `name` (`name_len` bytes of UTF-8) of input element `element`, of dtype code `dtype`
    /// (1 to 5) and `rank` dims at `dims`; null when refused (see `sdk/ABI.md` §11.4).
    pub type AllocOutputFn = unsafe extern "C" fn(
        ctx: *mut c_void,
        element: u32,
        name: *const u8,
        name_len: usize,
        dtype: u8,
        rank: u8,
        dims: *const u64,
    ) -> *mut u8;

    /// Where a lent call's outputs go (`sluice_outputs`): 24 bytes on 64-bit platforms.
    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub struct Outputs {
        /// The host's context, passed back to `alloc` unchanged.
        pub ctx: *mut c_void,
        /// The host's allocator for output tensors (`map` plugins).
        pub alloc: AllocOutputFn,
        /// `n_elements` bytes: a `filter` plugin sets `keep[i]` to 1 (keep element `i`) or
        /// 0 (drop it). The host fills them with [`KEEP_UNSET`] first.
        pub keep: *mut u8,
    }

    /// What `keep[i]` holds before the plugin decides (neither 0 nor 1).
    pub const KEEP_UNSET: u8 = 0xFF;
}
