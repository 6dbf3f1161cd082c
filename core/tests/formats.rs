//! CSV, text lines and fixed-length records against TensorFlow: each file in
//! `tests/fixtures/formats/` is read with the options TensorFlow was given
//! (`generate.py`), and every element must equal what TensorFlow read, value by value; where
//! TensorFlow raised an error, Sluice raises one at the same element, naming the file.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::prelude::*;
use sluice_core::{Element, TensorData};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/formats"
    ))
}

fn expected(name: &str) -> Json {
    let text = std::fs::read_to_string(fixtures().join(format!("{name}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A tensor's scalar value as the fixtures write it.
fn json_of(t: &Tensor) -> Json {
    match t.data() {
        TensorData::I32(v) => json!(v[0]),
        TensorData::I64(v) => json!(v[0]),
        TensorData::F32(v) => json!(f64::from(v[0])),
        TensorData::F64(v) => json!(v[0]),
        TensorData::Bytes(v) => {
            json!({"b64": base64::engine::general_purpose::STANDARD.encode(&v[0])})
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// The element's values in order (TensorFlow's tuples are positional).
fn values(e: &Element) -> Vec<Json> {
    e.iter()
        .map(|(_, v)| json_of(v.as_dense().unwrap()))
        .collect()
}

/// Reads `dataset` to its end or first error and compares with `name.expected.json`.
fn check(name: &str, dataset: Dataset) {
    let want = expected(name);
    let want_elements: Vec<Vec<Json>> = want["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_object().unwrap().values().cloned().collect())
        .collect();
    let mut got = Vec::new();
    let mut error = None;
    for item in dataset.iter().unwrap() {
        match item {
            Ok(e) => got.push(values(&e)),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    assert_eq!(
        got.len(),
        want_elements.len(),
        "{name}: elements read\n{error:?}"
    );
    for (i, (g, w)) in got.iter().zip(&want_elements).enumerate() {
        assert_eq!(g.len(), w.len(), "{name}: element {i}: {g:?} vs {w:?}");
        for (a, b) in g.iter().zip(w) {
            let same = match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) if x.is_nan() && y.is_nan() => true,
                (Some(x), Some(y)) => x == y,
                _ => a == b,
            };
            assert!(same, "{name}: element {i}: {g:?} vs TensorFlow's {w:?}");
        }
    }
    match (&want.get("error"), &error) {
        (Some(tf), Some(ours)) => {
            assert!(
                ours.contains(
                    name.trim_end_matches(".select_cols.csv")
                        .trim_end_matches(".required.csv")
                        .trim_end_matches(".quoted.csv")
                ),
                "{name}: the error names the file: {ours}\n(TensorFlow: {tf})"
            );
            eprintln!("{name}: TensorFlow: {}\n  Sluice: {ours}", tf["message"]);
        }
        (None, None) => {}
        (Some(tf), None) => panic!("{name}: TensorFlow raised {tf}, Sluice read on"),
        (None, Some(ours)) => panic!("{name}: Sluice raised {ours}"),
    }
}

fn path(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

fn int(t: CsvType, v: i64) -> ColumnDefault {
    ColumnDefault::with_default(t, CsvValue::Int(v))
}

fn float(t: CsvType, v: f64) -> ColumnDefault {
    ColumnDefault::with_default(t, CsvValue::Float(v))
}

fn string(v: &str) -> ColumnDefault {
    ColumnDefault::with_default(
        CsvType::String,
        CsvValue::Bytes(v.as_bytes().to_vec().into()),
    )
}

fn csv(file: &str, spec: CsvSpec) -> Dataset {
    Dataset::csv([path(file)], spec).unwrap()
}

#[test]
fn csv_matches_tensorflow() {
    let basic = CsvSpec {
        header: true,
        na_value: "NA".into(),
        record_defaults: vec![
            int(CsvType::Int64, -1),
            float(CsvType::Float32, 0.0),
            string("?"),
            int(CsvType::Int32, 0),
        ],
        ..CsvSpec::default()
    };
    check("basic.csv", csv("basic.csv", basic.clone()));
    check(
        "basic.select_cols.csv",
        csv(
            "basic.csv",
            CsvSpec {
                record_defaults: vec![int(CsvType::Int64, -1), string("?")],
                select_cols: vec![ColumnRef::Index(0), ColumnRef::Index(2)],
                ..basic.clone()
            },
        ),
    );
    check(
        "basic.required.csv",
        csv(
            "basic.csv",
            CsvSpec {
                record_defaults: [
                    CsvType::Int64,
                    CsvType::Float32,
                    CsvType::String,
                    CsvType::Int32,
                ]
                .map(ColumnDefault::required)
                .to_vec(),
                ..basic
            },
        ),
    );
    let ints = || vec![int(CsvType::Int64, 0); 3];
    check("ragged.csv", csv("ragged.csv", CsvSpec::new(ints())));
    check(
        "badtype.csv",
        csv(
            "badtype.csv",
            CsvSpec::new(vec![int(CsvType::Int64, 0), float(CsvType::Float32, 0.0)]),
        ),
    );
    let strings = vec![string(""); 3];
    check(
        "piped.csv",
        csv(
            "piped.csv",
            CsvSpec {
                field_delim: "|".into(),
                use_quote_delim: false,
                ..CsvSpec::new(strings.clone())
            },
        ),
    );
    check(
        "piped.quoted.csv",
        csv(
            "piped.csv",
            CsvSpec {
                field_delim: "|".into(),
                ..CsvSpec::new(strings)
            },
        ),
    );
    for (file, compression) in [
        ("numbers.csv.gz", Compression::Gzip),
        ("numbers.csv.zlib", Compression::Zlib),
    ] {
        check(
            file,
            csv(
                file,
                CsvSpec {
                    compression_type: compression,
                    ..CsvSpec::new(vec![
                        int(CsvType::Int32, 0),
                        float(CsvType::Float64, 0.0),
                        string(""),
                    ])
                },
            ),
        );
    }
}

#[test]
fn csv_types_are_inferred_as_make_csv_dataset_infers_them() {
    let spec = CsvSpec {
        header: true,
        ..CsvSpec::default()
    };
    let rows = csv("inferred.csv", spec).collect().unwrap();
    let dtypes: serde_json::Map<String, Json> = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("inferred.csv.dtypes.json")).unwrap(),
    )
    .unwrap();
    let want = expected("inferred.csv");
    assert_eq!(rows.len(), want["elements"].as_array().unwrap().len());
    for (row, w) in rows.iter().zip(want["elements"].as_array().unwrap()) {
        for (name, value) in w.as_object().unwrap() {
            let t = row
                .tensor(name)
                .unwrap_or_else(|| panic!("no {name} in {row:?}"));
            let dtype = match t.dtype() {
                DType::I32 => "int32",
                DType::I64 => "int64",
                DType::F32 => "float32",
                DType::F64 => "float64",
                DType::Bytes => "string",
                other => panic!("{other:?}"),
            };
            assert_eq!(dtype, dtypes[name], "{name}");
            assert_eq!(&json_of(t), value, "{name}");
        }
    }
}

#[test]
fn text_lines_match_tensorflow() {
    for (file, compression) in [
        ("lines.txt", Compression::None),
        ("lines.txt.gz", Compression::Gzip),
        ("empty.txt", Compression::None),
        ("newlines.txt", Compression::None),
    ] {
        let spec = TextLinesSpec {
            compression_type: compression,
            ..TextLinesSpec::default()
        };
        check(file, Dataset::text_lines([path(file)], spec).unwrap());
    }
    // With `utf8`, the line that is not UTF-8 is an error naming its line.
    let spec = TextLinesSpec {
        utf8: true,
        ..TextLinesSpec::default()
    };
    let err = Dataset::text_lines([path("lines.txt")], spec)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("lines.txt") && err.contains("line 6 is not UTF-8"),
        "{err}"
    );
}

#[test]
fn fixed_length_records_match_tensorflow() {
    for (file, compression) in [
        ("records.bin", Compression::None),
        ("records.bin.zlib", Compression::Zlib),
        ("records.bin.gz", Compression::Gzip),
        ("truncated.bin", Compression::None),
        ("truncated.bin.gz", Compression::Gzip),
    ] {
        let spec = FixedLengthSpec {
            header_bytes: 5,
            footer_bytes: 3,
            compression_type: compression,
            ..FixedLengthSpec::new(7)
        };
        check(
            file,
            Dataset::fixed_length_records([path(file)], spec).unwrap(),
        );
    }
}
