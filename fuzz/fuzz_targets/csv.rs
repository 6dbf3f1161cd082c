//! The CSV record parser, as the `csv` source reads a file: the fuzzed bytes are the file's
//! (decompressed) contents, read through `FileFormat::records` with a spec the first byte
//! picks (inferred types or explicit `record_defaults` with defaults and required columns,
//! header or not, quoting on or off, `,` `|` or tab delimiters, an `na_value`,
//! `select_cols`). Checks: no panic; every error carries a message and a byte offset
//! inside the file; offsets of records increase; every record has one feature per selected
//! column (or per column of the file, when all are read and types were inferred, the widest
//! row of the sample); the reader is fused (ends after the end).
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use sluice_core::prelude::{
    ColumnDefault, ColumnRef, CsvSpec, CsvType, CsvValue, FileFormat, OpenedFile,
};

fn spec(mode: u8) -> CsvSpec {
    let mut spec = CsvSpec {
        header: mode & 1 != 0,
        use_quote_delim: mode & 2 == 0,
        field_delim: [",", "|", "\t", ","][(mode >> 2) as usize % 4].to_string(),
        na_value: if mode & 16 != 0 { "NA" } else { "" }.to_string(),
        ..CsvSpec::default()
    };
    match (mode >> 5) % 4 {
        0 => {} // inferred
        1 => {
            spec.record_defaults = vec![
                ColumnDefault::with_default(CsvType::Int64, CsvValue::Int(-1)),
                ColumnDefault::required(CsvType::Float32),
                ColumnDefault::with_default(CsvType::String, CsvValue::Bytes("x".into())),
            ];
        }
        2 => {
            spec.record_defaults = vec![
                ColumnDefault::required(CsvType::Int32),
                ColumnDefault::with_default(CsvType::Float64, CsvValue::Float(0.5)),
            ];
            spec.select_cols = vec![ColumnRef::Index(0), ColumnRef::Index(2)];
        }
        _ => {
            spec.num_rows_for_inference = 3;
            spec.select_cols = vec![ColumnRef::Index(1)];
        }
    }
    spec
}

fuzz_target!(|data: &[u8]| {
    let [mode, contents @ ..] = data else { return };
    let spec = spec(*mode);
    if spec.validate().is_err() {
        return;
    }
    let file = OpenedFile {
        input: Box::new(Cursor::new(contents.to_vec())),
        path: "fuzz.csv".to_string(),
        size: Some(contents.len() as u64),
    };
    let mut reader = match spec.records(file) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let mut last = None;
    let mut width = None;
    let mut records = 0usize;
    while let Some(next) = reader.next_record() {
        match next {
            Ok(record) => {
                assert!(
                    record.offset <= contents.len() as u64,
                    "offset past the end"
                );
                if let Some(prev) = last {
                    assert!(
                        record.offset > prev,
                        "offsets increase: {prev} then {}",
                        record.offset
                    );
                }
                last = Some(record.offset);
                let w = record.features.len();
                assert_eq!(
                    *width.get_or_insert(w),
                    w,
                    "every record has the same columns"
                );
                if !spec.record_defaults.is_empty() && spec.select_cols.is_empty() {
                    assert_eq!(w, spec.record_defaults.len());
                }
                if !spec.select_cols.is_empty() {
                    assert_eq!(w, spec.select_cols.len());
                }
                records += 1;
            }
            Err(e) => {
                assert!(!e.message.is_empty());
                assert!(
                    e.offset <= contents.len() as u64,
                    "error offset past the end: {e:?}"
                );
                if !e.recoverable {
                    break;
                }
            }
        }
        assert!(records <= contents.len() + 1, "more records than bytes");
    }
});
