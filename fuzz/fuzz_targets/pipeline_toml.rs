//! The TOML pipeline file: arbitrary text through `PipelineFile::from_toml` (which parses,
//! deserializes every table through the stage registry and checks every value) and
//! `validate`. Checks: no panic; every error is `Error::PipelineFile` with a line and
//! column inside the text; a file that loads validates. (Printing a pipeline back as TOML
//! is not a feature: stages without parameters serialize as a unit, which TOML lacks; the
//! JSON form Python sends is checked by the Python tests.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::Error;
use sluice_core::pipeline_file::PipelineFile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match PipelineFile::from_toml(text) {
        Ok(file) => {
            file.validate().expect("a loaded pipeline validates");
            let _ = file.output_is_batched();
            let _ = file.has_plugins();
        }
        Err(Error::PipelineFile {
            location, message, ..
        }) => {
            assert!(!message.is_empty());
            let (line, column) = location.unwrap_or_else(|| panic!("no line/column: {message}"));
            let lines = text.split('\n').count();
            assert!(
                line >= 1 && line <= lines,
                "line {line} of {lines}: {message}"
            );
            assert!(column >= 1, "column {column}: {message}");
        }
        Err(other) => panic!("not a pipeline-file error: {other:?}"),
    }
});
