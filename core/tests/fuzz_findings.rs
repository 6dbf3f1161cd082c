//! Regression tests for what the fuzz campaign found (`fuzz/`, RELIABILITY.md "Fuzzing"),
//! one per finding, named for it, on the finding's input (`fuzz/regressions/<target>/`).

use std::io::Cursor;

use sluice_core::prelude::{ArrowSpec, FileFormat, OpenedFile};

/// The last error of reading the Arrow IPC fuzz input `input` (its first byte chose the
/// format; the rest is the file) as an object-store file, which must be a fatal one.
fn last_arrow_error(input: &[u8]) -> sluice_core::prelude::RecordError {
    let file = OpenedFile {
        input: Box::new(Cursor::new(input[1..].to_vec())),
        path: "file:///finding.arrow".to_string(),
        size: Some(input.len() as u64 - 1),
    };
    let spec = ArrowSpec::default();
    let mut reader = spec.records(file).expect("the file's schema reads");
    let mut errors = Vec::new();
    while let Some(next) = reader.next_record() {
        if let Err(e) = next {
            let fatal = !e.recoverable;
            errors.push(e);
            if fatal {
                break;
            }
        }
    }
    let last = errors.pop().expect("the malformed batch is an error");
    assert!(!last.recoverable, "{}", last.message);
    last
}

/// `columnar-ipc-buffer-offset`: an Arrow IPC stream whose record batch message gives a
/// buffer an offset far past the message body made arrow-ipc panic (slicing before
/// checking). Reading it is now a typed, non-recoverable record error naming the row and
/// the buffer.
#[test]
fn columnar_ipc_buffer_offset_is_an_error_not_a_panic() {
    let last = last_arrow_error(include_bytes!(
        "../../fuzz/regressions/columnar/ipc-buffer-offset"
    ));
    assert!(
        last.message.contains("cannot read the rows from row 3")
            && last.message.contains("is not inside the message's body"),
        "{}",
        last.message
    );
}

/// `columnar-alloc-size-too-big`: an Arrow IPC file whose zstd-compressed buffer claims an
/// uncompressed length of 0x6060606060606060 bytes made arrow-ipc allocate that much before
/// decompressing (an allocation failure aborts the process). The claim is now checked
/// against what the buffer's compressed bytes can expand to, before arrow-ipc sees it.
#[test]
fn columnar_alloc_size_too_big_is_an_error_not_an_abort() {
    let last = last_arrow_error(include_bytes!(
        "../../fuzz/regressions/columnar/alloc-size-too-big"
    ));
    assert!(
        last.message.contains("cannot read the rows from row 0")
            && last.message.contains(&format!(
                "claims {} bytes uncompressed",
                0x6060606060606060_i64
            )),
        "{}",
        last.message
    );
}

/// `toml-source-key-no-line`: a misspelt key of an `image_folder` `[source]`
/// (`valitation_split`) was an error without a line and column (the format's keys are read
/// through a conversion that loses toml's span). It now points at the key.
#[test]
fn toml_source_key_no_line_points_at_the_key() {
    let text = include_str!("../../fuzz/regressions/pipeline_toml/source-key-no-line.toml");
    match sluice_core::pipeline_file::PipelineFile::from_toml(text) {
        Err(sluice_core::Error::PipelineFile {
            location, message, ..
        }) => {
            assert_eq!(location, Some((6, 1)), "{message}");
            assert!(
                message.contains("did you mean `validation_split`?"),
                "{message}"
            );
        }
        other => panic!("expected a pipeline-file error, got {other:?}"),
    }
}
