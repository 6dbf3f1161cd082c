//! Regression tests for what the fuzz campaign found (`fuzz/`, RELIABILITY.md "Fuzzing"),
//! one per finding, named for it, on the finding's input (`fuzz/regressions/<target>/`).

use std::io::Cursor;

use sluice_core::prelude::{ArrowSpec, FileFormat, OpenedFile, ParquetSpec};

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

/// The error of reading the Parquet file `bytes` (as an object-store file, whole), on a
/// thread given at most `limit` to finish: a reader busy for hours is a failure here, not a
/// hung test.
fn parquet_error(bytes: Vec<u8>, limit: std::time::Duration) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let size = bytes.len() as u64;
        let file = OpenedFile {
            input: Box::new(Cursor::new(bytes)),
            path: "file:///finding.parquet".to_string(),
            size: Some(size),
        };
        let message = match ParquetSpec::default().records(file) {
            Err(e) => e.to_string(),
            Ok(mut reader) => loop {
                match reader.next_record() {
                    Some(Err(e)) if !e.recoverable => break e.message,
                    Some(_) => {}
                    None => break "no error".to_string(),
                }
            },
        };
        let _ = tx.send(message);
    });
    rx.recv_timeout(limit)
        .expect("reading the file ends (a list of booleans is skipped a byte per element)")
}

/// `parquet-thrift-bool-list`: a 13 KB Parquet file (a mutated fixture) kept the reader
/// busy (10 s under the fuzzer, 0.3 s in a release build): parquet 60's Thrift decoder
/// skipped each boolean of a list it did not know as a field's boolean, which takes no byte,
/// so a list claiming 2^31 of them cost 2^31 steps and nothing of the input. Fixed in
/// `vendor/parquet` (a boolean in a list is a byte). The finding's input reads to its error;
/// a footer with a thousand such lists (hours before the fix) does too.
#[test]
fn parquet_thrift_bool_list_is_skipped_a_byte_per_element() {
    let input = include_bytes!("../../fuzz/regressions/columnar/parquet-thrift-bool-list");
    let message = parquet_error(input[1..].to_vec(), std::time::Duration::from_secs(60));
    assert!(message.contains("Parquet"), "{message}");

    // A valid file whose footer (a Thrift struct ending with its stop byte) gains, before
    // the stop, a thousand fields it does not know, each a list claiming 2^31 - 1 booleans.
    let valid = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/columnar/dense.parquet"
    ))
    .unwrap();
    let n = valid.len();
    assert_eq!(&valid[n - 4..], b"PAR1");
    let footer_len = u32::from_le_bytes(valid[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer = &valid[n - 8 - footer_len..n - 8];
    assert_eq!(
        footer.last(),
        Some(&0),
        "the footer ends with its stop byte"
    );
    let mut extended = footer[..footer.len() - 1].to_vec();
    for id in 0..1000_u16 {
        // Field header, long form: type list (9), then the id as a zigzag varint.
        extended.push(0x09);
        let mut zigzag = u32::from((200 + id) * 2);
        while zigzag >= 0x80 {
            extended.push((zigzag as u8) | 0x80);
            zigzag >>= 7;
        }
        extended.push(zigzag as u8);
        // List header: size in a varint (0xF_), element type boolean (1); 2^31 - 1.
        extended.extend_from_slice(&[0xF1, 0xFF, 0xFF, 0xFF, 0xFF, 0x07]);
    }
    extended.push(0);
    let mut file = valid[..n - 8 - footer_len].to_vec();
    file.extend_from_slice(&extended);
    file.extend_from_slice(&(extended.len() as u32).to_le_bytes());
    file.extend_from_slice(b"PAR1");
    let message = parquet_error(file, std::time::Duration::from_secs(60));
    assert!(message.contains("Parquet"), "{message}");
}

/// `parquet-row-count-overflow`: a Parquet file whose row groups' row counts (the file's
/// word) sum past `usize`: parquet 60 sums them unchecked when it builds its reader (a
/// panic where overflow checks are on, a wrong count where they are not), outside the
/// reading of batches that was already guarded. The counts are checked first, and a panic
/// while a file is opened is the file's error too.
#[test]
fn parquet_row_count_overflow_is_an_error() {
    let input = include_bytes!("../../fuzz/regressions/columnar/parquet-row-count-overflow");
    let message = parquet_error(input[1..].to_vec(), std::time::Duration::from_secs(60));
    assert!(
        message.contains("not a readable Parquet file: row group"),
        "{message}"
    );
}
