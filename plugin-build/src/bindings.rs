//! In-process WIT tooling: the C bindings of a world (wit-bindgen's C generator, for C and
//! Zig plugins) and a core module made a component (wit-component).

use std::path::{Path, PathBuf};

use crate::error::{Error, io};

/// The C bindings of one world, written to a directory.
#[derive(Debug, Clone)]
pub struct CBindings {
    /// The header the plugin includes (`map_transform.h`).
    pub header: PathBuf,
    /// The canonical ABI's glue, compiled with the plugin (`map_transform.c`).
    pub source: PathBuf,
    /// The object holding the world's type, linked with the plugin
    /// (`map_transform_component_type.o`).
    pub object: PathBuf,
}

/// Generates the C bindings of `world` of the WIT package in `wit_dir` into `out_dir`
/// (rewritten only when they change, so builds that compare times stay quiet).
pub fn c_bindings(wit_dir: &Path, world: &str, out_dir: &Path) -> Result<CBindings, Error> {
    let wit = |message: String| Error::Wit {
        dir: wit_dir.to_path_buf(),
        message,
    };
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_dir(wit_dir)
        .map_err(|e| wit(format!("{e:#}")))?;
    let world_id = resolve
        .select_world(&[package], Some(world))
        .map_err(|e| wit(format!("{e:#}")))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world_id, &mut files)
        .map_err(|e| wit(format!("generating the C bindings of `{world}`: {e:#}")))?;
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    for (name, bytes) in files.iter() {
        let path = out_dir.join(name);
        if std::fs::read(&path).ok().as_deref() != Some(bytes) {
            write_atomic(&path, bytes)?;
        }
    }
    let stem = world.replace('-', "_");
    let bindings = CBindings {
        header: out_dir.join(format!("{stem}.h")),
        source: out_dir.join(format!("{stem}.c")),
        object: out_dir.join(format!("{stem}_component_type.o")),
    };
    for file in [&bindings.header, &bindings.source, &bindings.object] {
        if !file.is_file() {
            return Err(wit(format!(
                "wit-bindgen's C generator wrote no {}",
                file.display()
            )));
        }
    }
    Ok(bindings)
}

/// Makes the core module `module` (with a world's type section, as wit-bindgen's
/// bindings link in) the component `out`, validated. A module that imports WASI
/// functions (its C library's `printf` or files) cannot be: plugins built from a core
/// module get no WASI, and the error says so.
pub fn componentize(module: &Path, out: &Path) -> Result<(), Error> {
    let failed = |message: String| Error::Component {
        module: module.to_path_buf(),
        message,
    };
    let bytes = std::fs::read(module).map_err(io(module))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&bytes)
        .and_then(|encoder| encoder.validate(true).encode())
        .map_err(|e| {
            let message = format!("{e:#}");
            if message.contains("wasi_snapshot_preview1") {
                failed(format!(
                    "{message}\n(the module calls WASI: a C or Zig plugin may use the C \
                     library's memory and string functions and math, but not stdio, files, \
                     clocks or the environment)"
                ))
            } else {
                failed(message)
            }
        })?;
    write_atomic(out, &component)
}

/// Writes `bytes` to `path` beside, then renames: a concurrent reader never sees half.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(io(path))
}
