//! The numbers of the C ABI: its version, status codes, dtype codes and wire-format tags.
//! `sdk/ABI.md` is the normative description; these constants are the same values.

/// The ABI version this SDK implements, returned by `sluice_abi_version`. A host refuses
/// a plugin whose version it does not know.
pub const ABI_VERSION: u32 = 1;

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

    /// A short name for a status code.
    pub fn name(code: i32) -> &'static str {
        match code {
            OK => "ok",
            INVALID_INPUT => "invalid input",
            PLUGIN_ERROR => "plugin error",
            PANIC => "panic",
            INVALID_CONFIG => "invalid configuration",
            UNKNOWN_INSTANCE => "unknown instance",
            _ => "unknown status",
        }
    }
}

/// The exported symbols of ABI version 1, by name.
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

    /// Every symbol version 1 requires.
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
