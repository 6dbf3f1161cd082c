//! The ABI checks every host makes when it loads a plugin (`sdk/ABI.md`), in one place: the
//! version the plugin reports (read before anything else) and the symbols it must export.
//! How a host finds a symbol or calls `sluice_abi_version` is its own business; what it
//! accepts, and the errors it gives, are decided here.

use std::path::Path;

use sluice_sdk::abi::symbols;
pub use sluice_sdk::abi::{ABI_VERSION, FIRST_ABI_VERSION};

use crate::error::{Error, Result};

/// The error for `symbol`, which ABI `version` requires and the plugin file lacks.
pub fn missing_symbol_of(path: &Path, symbol: &str, version: u32) -> Error {
    Error::MissingSymbol {
        path: path.to_path_buf(),
        symbol: symbol.to_string(),
        version,
    }
}

/// The error for `symbol`, which every ABI version requires and the plugin file lacks.
pub fn missing_symbol(path: &Path, symbol: &str) -> Error {
    missing_symbol_of(path, symbol, FIRST_ABI_VERSION)
}

/// Checks the version `found` that the plugin's `sluice_abi_version` returned: hosts support
/// every version from [`FIRST_ABI_VERSION`] to [`ABI_VERSION`] ([`Error::AbiVersion`]
/// otherwise). A host calls the functions a later version adds only for a plugin reporting
/// that version.
pub fn check_version(path: &Path, found: u32) -> Result<()> {
    if (FIRST_ABI_VERSION..=ABI_VERSION).contains(&found) {
        return Ok(());
    }
    Err(Error::AbiVersion {
        path: path.to_path_buf(),
        found,
        supported: ABI_VERSION,
    })
}

/// Checks that the plugin exports every symbol of version 1 (what every version requires),
/// in the order the ABI lists them; `has` says whether it exports one. The first missing
/// one is the error ([`Error::MissingSymbol`]).
pub fn check_symbols(path: &Path, mut has: impl FnMut(&str) -> bool) -> Result<()> {
    match symbols::REQUIRED.iter().find(|name| !has(name)) {
        Some(name) => Err(missing_symbol(path, name)),
        None => Ok(()),
    }
}

/// [`check_symbols`] for a plugin of ABI `version`: version 2 also requires
/// `sluice_process_lent` (for hosts with the lent path; WASM hosts check version 1's).
pub fn check_symbols_for(
    path: &Path,
    version: u32,
    mut has: impl FnMut(&str) -> bool,
) -> Result<()> {
    check_symbols(path, &mut has)?;
    if version >= 2
        && let Some(name) = symbols::ADDED_IN_V2.iter().find(|name| !has(name))
    {
        return Err(missing_symbol_of(path, name, 2));
    }
    Ok(())
}
