//! A plugin's metadata: the JSON its `sluice_info_ptr` and `sluice_info_len` point at (the
//! SDK's [`PluginInfo`]), read the same way by every host.

use std::path::Path;

use sluice_sdk::PluginInfo;

use crate::abi::ABI_VERSION;
use crate::error::{Error, Result};

/// The metadata in `json`, read from the plugin file at `path` whose `sluice_abi_version`
/// already said [`ABI_VERSION`] (see [`crate::abi::check_version`]). `file` names what the
/// file is in messages (`library`, `module`). [`Error::Info`] when the bytes are not the
/// SDK's JSON, or when they declare another ABI version than the file reported.
pub fn read_info(path: &Path, json: &[u8], file: &str) -> Result<PluginInfo> {
    let info: PluginInfo = serde_json::from_slice(json).map_err(|e| Error::Info {
        path: path.to_path_buf(),
        message: format!("metadata is not the SDK's JSON: {e}"),
    })?;
    if info.abi_version != ABI_VERSION {
        return Err(Error::Info {
            path: path.to_path_buf(),
            message: format!(
                "metadata says ABI version {}, the {file} says {ABI_VERSION}",
                info.abi_version
            ),
        });
    }
    Ok(info)
}
