//! The ABI checks every host makes when it loads a plugin (`sdk/ABI.md`), in one place: the
//! version the plugin reports (read before anything else) and the symbols it must export.
//! How a host finds a symbol or calls `sluice_abi_version` is its own business; what it
//! accepts, and the errors it gives, are decided here.

use std::path::Path;

pub use sluice_sdk::abi::ABI_VERSION;
use sluice_sdk::abi::symbols;

use crate::error::{Error, Result};

/// The error for `symbol`, which the ABI requires and the plugin file lacks.
pub fn missing_symbol(path: &Path, symbol: &str) -> Error {
    Error::MissingSymbol {
        path: path.to_path_buf(),
        symbol: symbol.to_string(),
        version: ABI_VERSION,
    }
}

/// Checks the version `found` that the plugin's `sluice_abi_version` returned: this host
/// supports [`ABI_VERSION`] only ([`Error::AbiVersion`] otherwise).
pub fn check_version(path: &Path, found: u32) -> Result<()> {
    if found == ABI_VERSION {
        return Ok(());
    }
    Err(Error::AbiVersion {
        path: path.to_path_buf(),
        found,
        supported: ABI_VERSION,
    })
}

/// Checks that the plugin exports every symbol the ABI requires, in the order the ABI lists
/// them; `has` says whether it exports one. The first missing one is the error
/// ([`Error::MissingSymbol`]).
pub fn check_symbols(path: &Path, mut has: impl FnMut(&str) -> bool) -> Result<()> {
    match symbols::REQUIRED.iter().find(|name| !has(name)) {
        Some(name) => Err(missing_symbol(path, name)),
        None => Ok(()),
    }
}
