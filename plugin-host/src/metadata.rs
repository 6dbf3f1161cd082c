//! A plugin's metadata: the JSON its `sluice_info_ptr` and `sluice_info_len` point at (the
//! SDK's [`PluginInfo`]), read the same way by every host.

use std::path::Path;

use sluice_sdk::PluginInfo;

use crate::abi::{ABI_VERSION, FIRST_ABI_VERSION};
use crate::error::{Error, Result};

fn parse(path: &Path, json: &[u8]) -> Result<PluginInfo> {
    serde_json::from_slice(json).map_err(|e| Error::Info {
        path: path.to_path_buf(),
        message: format!("metadata is not the SDK's JSON: {e}"),
    })
}

/// The metadata in `json`, read from the plugin file at `path` whose `sluice_abi_version`
/// said `reported` (already checked by [`crate::abi::check_version`]). `file` names what
/// the file is in messages (`library`, `module`). [`Error::Info`] when the bytes are not the
/// SDK's JSON, or when they declare another ABI version than the file reported.
pub fn read_info_of(path: &Path, json: &[u8], file: &str, reported: u32) -> Result<PluginInfo> {
    let info = parse(path, json)?;
    if info.abi_version != reported {
        return Err(Error::Info {
            path: path.to_path_buf(),
            message: format!(
                "metadata says ABI version {}, the {file} says {reported}",
                info.abi_version
            ),
        });
    }
    Ok(info)
}

/// The metadata in `json`, read from the plugin file at `path`, for a host that does not
/// pass on the version the file reported: [`read_info_of`]'s checks, except that the
/// metadata's version need only be one hosts support ([`FIRST_ABI_VERSION`] to
/// [`ABI_VERSION`]); prefer [`read_info_of`].
pub fn read_info(path: &Path, json: &[u8], file: &str) -> Result<PluginInfo> {
    let info = parse(path, json)?;
    if !(FIRST_ABI_VERSION..=ABI_VERSION).contains(&info.abi_version) {
        return Err(Error::Info {
            path: path.to_path_buf(),
            message: format!(
                "metadata says ABI version {}, which the {file} cannot have (versions \
                 {FIRST_ABI_VERSION} to {ABI_VERSION})",
                info.abi_version
            ),
        });
    }
    Ok(info)
}
