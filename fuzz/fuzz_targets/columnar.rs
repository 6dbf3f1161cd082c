//! Parquet and Arrow IPC files through the columnar reader the `parquet` and `arrow`
//! sources use (`FileFormat::records` on the file's bytes, read as an object-store file is:
//! whole, from memory). The first byte picks the format (Parquet, or Arrow IPC file or
//! stream, detected by the reader), whether nulls are an error or a value (`null_value`),
//! and whether only the first column is read. Checks: no panic on any bytes (the parquet
//! and arrow crates' decoders, footer and metadata included, and our conversion of record
//! batches to rows: lists, structs, strings, every numeric type); errors carry a message;
//! record offsets (row indices) count up from 0 without gaps.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use sluice_core::prelude::{ArrowSpec, FileFormat, NullValue, OpenedFile, ParquetSpec};

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys's panic hook aborts before any unwinding: the reader catches the
    // panics of the arrow and parquet crates on malformed files (and makes them errors),
    // so a hook that only prints is put back. A panic elsewhere still reaches
    // libfuzzer-sys, which aborts: a finding.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| std::panic::set_hook(Box::new(|info| eprintln!("{info}"))));
    let [mode, contents @ ..] = data else { return };
    let null_value = (mode & 2 != 0).then_some(NullValue::Int(-1));
    let columns = if mode & 4 != 0 {
        vec!["a".to_string()]
    } else {
        Vec::new()
    };
    let (format, path): (Box<dyn FileFormat>, &str) = if mode & 1 == 0 {
        (
            Box::new(ParquetSpec {
                columns,
                null_value,
                ..Default::default()
            }),
            "file:///fuzz.parquet",
        )
    } else {
        (
            Box::new(ArrowSpec {
                columns,
                null_value,
                ..Default::default()
            }),
            "file:///fuzz.arrow",
        )
    };
    let file = OpenedFile {
        input: Box::new(Cursor::new(contents.to_vec())),
        path: path.to_string(),
        size: Some(contents.len() as u64),
    };
    let mut reader = match format.records(file) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let mut rows = 0u64;
    // A valid file can hold many rows in few bytes (runs, dictionaries): stop early.
    while let Some(next) = reader.next_record() {
        match next {
            Ok(record) => {
                assert_eq!(record.offset, rows, "rows counted from 0");
                rows += 1;
                if rows > 100_000 {
                    break;
                }
            }
            Err(e) => {
                assert!(!e.message.is_empty());
                if !e.recoverable {
                    break;
                }
                rows += 1;
            }
        }
    }
});
