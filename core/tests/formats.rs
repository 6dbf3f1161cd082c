//! CSV, text lines and fixed-length records against TensorFlow: each file in
//! `tests/fixtures/formats/` is read with the options TensorFlow was given
//! (`generate.py`), and every element must equal what TensorFlow read, value by value; where
//! TensorFlow raised an error, Sluice raises one at the same element, naming the file.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::prelude::*;
use sluice_core::{Checkpoint, Element, TensorData};

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

/// The same sources from pipeline files: `format` and the format's keys in `[source]`,
/// with `interleave`, `shard` and `batch` after them.
#[test]
fn pipeline_files_read_every_format() {
    let dir = fixtures();
    let file = |source: &str, stages: &str| {
        let text = format!(
            "[source]\ndir = {:?}\n{source}\n{stages}",
            dir.to_str().unwrap()
        );
        sluice_core::pipeline_file::PipelineFile::from_toml(&text).unwrap()
    };
    let csv = file(
        r#"files = "numbers.csv.gz"
format = "csv"
compression_type = "GZIP"
record_defaults = [0, { type = "float64", default = 0.0 }, ""]
column_names = ["i", "quarter", "name"]"#,
        "[[stage]]\nkind = \"shard\"\nnum_shards = 2\nindex = 1\n[[stage]]\nkind = \"batch\"\nbatch_size = 5\n",
    );
    let batches = csv.build().unwrap().collect().unwrap();
    assert_eq!(batches.len(), 5);
    let first = &batches[0];
    let TensorData::I32(i) = first.tensor("i").unwrap().data() else {
        panic!("{first:?}")
    };
    assert_eq!(&i[..], &[1, 3, 5, 7, 9]);
    let TensorData::F64(q) = first.tensor("quarter").unwrap().data() else {
        panic!("{first:?}")
    };
    assert_eq!(q[1], 0.75);
    // The spec survives a round trip through TOML.
    let again =
        sluice_core::pipeline_file::PipelineFile::from_toml(&toml::to_string(&csv).unwrap())
            .unwrap();
    assert_eq!(again, csv);

    let lines = file(
        "files = [\"lines.txt\", \"newlines.txt\"]\nformat = \"text_lines\"",
        "[[stage]]\nkind = \"interleave\"\ncycle_length = 2\n",
    );
    assert_eq!(lines.build().unwrap().collect().unwrap().len(), 10);

    let fixed = file(
        "files = \"records.bin\"\nformat = \"fixed_length\"\nrecord_bytes = 7\nheader_bytes = 5\nfooter_bytes = 3",
        "",
    );
    let records = fixed.build().unwrap().collect().unwrap();
    assert_eq!(records.len(), 9);
    assert_eq!(
        records[1]
            .tensor("record")
            .unwrap()
            .as_bytes_list()
            .unwrap()[0]
            .as_ref(),
        &[7, 8, 9, 10, 11, 12, 13]
    );

    // A key of another format, an unknown format, a bad value: errors naming them.
    for (source, needle) in [
        (
            "files = \"records.bin\"\nformat = \"fixed_length\"\nrecord_bytes = 7\nheader = true",
            "unknown field `header`",
        ),
        (
            "files = \"x.csv\"\nformat = \"cvs\"",
            "unknown format \"cvs\"",
        ),
        (
            "files = \"x.csv\"\nformat = \"csv\"\nfield_delim = \"ab\"",
            "`field_delim` must be one byte",
        ),
        (
            "files = \"x.csv\"\nformat = \"csv\"\nrecord_defaults = [{ type = \"int32\", default = \"x\" }]",
            "is not a int32",
        ),
        (
            "files = \"x.bin\"\nformat = \"fixed_length\"",
            "missing field `record_bytes`",
        ),
    ] {
        let text = format!("[source]\n{source}\n");
        let err = sluice_core::pipeline_file::PipelineFile::from_toml(&text)
            .and_then(|f| f.validate().map(|_| f))
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{source}: {err}");
    }
}

/// Files of numbered lines for the checkpoint tests: `files` files of `lines` lines each.
fn numbered(dir: &std::path::Path, files: usize, lines: usize) -> Vec<String> {
    (0..files)
        .map(|f| {
            let path = dir.join(format!("part-{f}.txt"));
            let text: String = (0..lines).map(|l| format!("{f}-{l}\n")).collect();
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect()
}

fn line(e: &Element) -> String {
    String::from_utf8(e.tensor("line").unwrap().as_bytes_list().unwrap()[0].to_vec()).unwrap()
}

/// A checkpoint of a text-line pipeline (interleave, shuffle) resumes where it stopped, in
/// a fresh dataset.
#[test]
fn a_text_line_pipeline_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let files = numbered(dir.path(), 5, 40);
    let build = || {
        Dataset::text_lines(&files, TextLinesSpec::default())
            .unwrap()
            .interleave(InterleaveSpec::new(3))
            .shuffle(16)
            .with_options(Options {
                seed: Some(3),
                ..Options::default()
            })
    };
    let all: Vec<String> = build().collect().unwrap().iter().map(line).collect();
    assert_eq!(all.len(), 200);
    let mut it = build().iter().unwrap();
    let head: Vec<String> = it.by_ref().take(77).map(|e| line(&e.unwrap())).collect();
    let checkpoint = Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
    drop(it);
    let tail: Vec<String> = build()
        .resume(&checkpoint)
        .unwrap()
        .map(|e| line(&e.unwrap()))
        .collect();
    assert_eq!(head, all[..77]);
    assert_eq!(tail, all[77..]);
}

/// Two hosts reading CSV files stop part way; three hosts resume from their checkpoints:
/// every row of the epoch is read exactly once.
#[test]
fn csv_rows_are_read_exactly_once_across_an_elastic_resume() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<String> = (0..3)
        .map(|f| {
            let path = dir.path().join(format!("rows-{f}.csv"));
            let text: String = (0..50).map(|r| format!("{f},{r}\n")).collect();
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect();
    let spec = CsvSpec::new(vec![int(CsvType::Int64, 0), int(CsvType::Int64, 0)]);
    let host = |hosts: u64, rank: u64| {
        Dataset::csv(&files, spec.clone())
            .unwrap()
            .shard(hosts, rank)
            .interleave(InterleaveSpec::new(2))
            .shuffle(8)
            .with_options(Options {
                seed: Some(9),
                ..Options::default()
            })
    };
    let key = |e: &Element| {
        let v = |n: &str| e.tensor(n).unwrap().as_i64().unwrap()[0];
        (v("col0"), v("col1"))
    };
    let mut seen = Vec::new();
    let mut checkpoints = Vec::new();
    for rank in 0..2 {
        let mut it = host(2, rank).iter().unwrap();
        seen.extend(
            it.by_ref()
                .take(20 + 13 * rank as usize)
                .map(|e| key(&e.unwrap())),
        );
        checkpoints.push(it.checkpoint().unwrap());
    }
    for rank in 0..3 {
        let it = host(3, rank).resume_elastic(&checkpoints).unwrap();
        seen.extend(it.map(|e| key(&e.unwrap())));
    }
    seen.sort_unstable();
    let all: Vec<(i64, i64)> = (0..3).flat_map(|f| (0..50).map(move |r| (f, r))).collect();
    assert_eq!(seen, all);
}
