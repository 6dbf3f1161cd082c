//! NumPy, Parquet and Arrow IPC sources against what NumPy and pyarrow read: each file in
//! `tests/fixtures/columnar/` (written by its `generate.py`) is read, and every element must
//! equal what NumPy / pyarrow read from it, dtype, shape and value; where a file cannot be
//! read (a 0-d array, an unsupported dtype, arrays of different lengths) or holds nulls,
//! the error names the file and the cause.

use std::path::PathBuf;

use base64::Engine;
use serde_json::{Value as Json, json};
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::{Element, TensorData};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/columnar"
    ))
}

fn path(name: &str) -> String {
    fixtures().join(name).to_string_lossy().into_owned()
}

fn expected(name: &str) -> Json {
    let text = std::fs::read_to_string(fixtures().join(format!("{name}.expected.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A tensor as the fixtures write a cell.
fn cell(t: &Tensor) -> Json {
    let values: Vec<Json> = match t.data() {
        TensorData::U8(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::I32(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::I64(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::F32(v) => v.iter().map(|&x| json!(f64::from(x))).collect(),
        TensorData::F64(v) => v.iter().map(|x| json!(x)).collect(),
        TensorData::Bytes(v) => v
            .iter()
            .map(|b| json!({"b64": base64::engine::general_purpose::STANDARD.encode(b)}))
            .collect(),
    };
    json!({"dtype": t.dtype().to_string(), "shape": t.shape(), "values": values})
}

fn element_json(e: &Element) -> Vec<(String, Json)> {
    e.iter()
        .map(|(n, v)| (n.to_string(), cell(v.as_dense().unwrap())))
        .collect()
}

/// What a null cell reads as with `null_value = 0`.
fn filled(c: &Json) -> Json {
    if c["null"] != json!(true) {
        return c.clone();
    }
    let dtype = c["dtype"].as_str().unwrap();
    if c["list"] == json!(true) {
        return json!({"dtype": dtype, "shape": [0], "values": []});
    }
    let v = if dtype == "bytes" {
        json!({"b64": base64::engine::general_purpose::STANDARD.encode("0")})
    } else if dtype.starts_with('f') {
        json!(0.0)
    } else {
        json!(0)
    };
    json!({"dtype": dtype, "shape": [], "values": [v]})
}

fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Reads `dataset` and compares with the expected elements (in order, features in order);
/// `fill`: nulls read as with `null_value = 0`. Returns the error that ended it, if any.
fn check_rows(name: &str, dataset: &Dataset, want: &[Json], fill: bool) -> Option<String> {
    let mut i = 0;
    for item in dataset.iter().unwrap() {
        let e = match item {
            Ok(e) => e,
            Err(e) => return Some(e.to_string()),
        };
        let got = element_json(&e);
        let w = want[i].as_object().unwrap();
        // (The expected objects' keys are sorted: the order is checked where it matters.)
        let mut names: Vec<&String> = got.iter().map(|(n, _)| n).collect();
        names.sort();
        let want_names: Vec<&String> = w.keys().collect();
        assert_eq!(names, want_names, "{name}: element {i}: features");
        for (n, g) in &got {
            let c = if fill { filled(&w[n]) } else { w[n].clone() };
            assert!(same(g, &c), "{name}: element {i}: `{n}`: {g} vs {c}");
        }
        i += 1;
    }
    assert_eq!(i, want.len(), "{name}: elements read");
    None
}

#[test]
fn numpy_files_read_as_numpy_loads_them() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !(file.ends_with(".npy") || file.ends_with(".npz")) {
            continue;
        }
        let want = expected(&file);
        let dataset = Dataset::numpy([path(&file)], NumpySpec::default()).unwrap();
        match want.get("error") {
            Some(message) => {
                let err = dataset.collect().expect_err(&file).to_string();
                assert!(
                    err.contains(message.as_str().unwrap()) && err.contains(&file),
                    "{file}: {err}"
                );
            }
            None => {
                let err = check_rows(&file, &dataset, want["elements"].as_array().unwrap(), false);
                assert_eq!(err, None, "{file}");
            }
        }
        checked += 1;
    }
    assert!(checked >= 19, "{checked} NumPy fixtures");
}

#[test]
fn numpy_options_name_and_arrays() {
    let spec = NumpySpec {
        name: "x".into(),
        ..NumpySpec::default()
    };
    let rows = Dataset::numpy([path("c_f32.npy")], spec)
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(rows[0].tensor("x").unwrap().shape(), &[3]);
    let spec = NumpySpec {
        arrays: vec!["y".into(), "x".into()],
        ..NumpySpec::default()
    };
    let rows = Dataset::numpy([path("arrays.npz")], spec)
        .unwrap()
        .collect()
        .unwrap();
    let names: Vec<&str> = rows[0].iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["y", "x"]);
    let spec = NumpySpec {
        arrays: vec!["nope".into()],
        ..NumpySpec::default()
    };
    let err = Dataset::numpy([path("arrays.npz")], spec)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no array `nope`") && err.contains("`x`"),
        "{err}"
    );
}

fn table_files() -> Vec<(&'static str, bool)> {
    vec![
        ("table_snappy.parquet", true),
        ("table_zstd.parquet", true),
        ("table_gzip.parquet", true),
        ("table.arrow", false),
        ("table.stream.arrow", false),
        ("table_zstd.arrow", false),
    ]
}

fn columnar(
    file: &str,
    parquet: bool,
    columns: Vec<String>,
    null_value: Option<NullValue>,
) -> Dataset {
    if parquet {
        Dataset::parquet(
            [path(file)],
            ParquetSpec {
                columns,
                null_value,
                ..ParquetSpec::default()
            },
        )
        .unwrap()
    } else {
        Dataset::arrow(
            [path(file)],
            ArrowSpec {
                columns,
                null_value,
                ..ArrowSpec::default()
            },
        )
        .unwrap()
    }
}

#[test]
fn a_null_is_an_error_naming_file_row_and_column() {
    for (file, parquet) in table_files() {
        let want = expected(file);
        let want = want["elements"].as_array().unwrap();
        // Row 4's label is the first null.
        let err = check_rows(
            file,
            &columnar(file, parquet, vec![], None),
            &want[..4],
            false,
        )
        .unwrap_or_else(|| panic!("{file}: no error"));
        assert!(
            err.contains(file)
                && err.contains("row 4")
                && err.contains("`label`")
                && err.contains("null_value"),
            "{file}: {err}"
        );
    }
}

#[test]
fn null_value_fills_nulls_and_empties_null_lists() {
    for (file, parquet) in table_files() {
        let want = expected(file);
        let dataset = columnar(file, parquet, vec![], Some(NullValue::Int(0)));
        let err = check_rows(file, &dataset, want["elements"].as_array().unwrap(), true);
        assert_eq!(err, None, "{file}");
    }
}

#[test]
fn columns_are_projected_in_the_order_given() {
    for (file, parquet) in table_files() {
        let want = expected(file);
        let columns = ["image", "emb", "meta", "id"];
        let projected: Vec<Json> = want["elements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let mut m = serde_json::Map::new();
                for c in columns {
                    for (k, v) in e.as_object().unwrap() {
                        if k == c || k.starts_with(&format!("{c}.")) {
                            m.insert(k.clone(), v.clone());
                        }
                    }
                }
                Json::Object(m)
            })
            .collect();
        let dataset = columnar(
            file,
            parquet,
            columns.iter().map(|c| c.to_string()).collect(),
            None,
        );
        assert_eq!(
            check_rows(file, &dataset, &projected, false),
            None,
            "{file}"
        );
        let first = dataset.take(1).collect().unwrap();
        let names: Vec<&str> = first[0].iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["image", "emb", "meta.a", "meta.b", "id"], "{file}");
        let err = columnar(file, parquet, vec!["nope".into()], None)
            .collect()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no column `nope`") && err.contains("`id`"),
            "{file}: {err}"
        );
    }
}

#[test]
fn dense_parquet_reads_every_row_group() {
    let want = expected("dense.parquet");
    let dataset = columnar("dense.parquet", true, vec![], None);
    let want = want["elements"].as_array().unwrap();
    assert_eq!(want.len(), 10);
    assert_eq!(check_rows("dense.parquet", &dataset, want, false), None);
    // Element ids count rows across row groups; the offset is the row's index.
    let rows = dataset.collect().unwrap();
    assert_eq!(rows[9].id().index, 9);
    assert_eq!(rows[9].provenance().unwrap().offset, 9);
}

#[test]
fn hugging_face_datasets_arrow_stream_loads_as_it_is() {
    let name = "hf_dataset/data-00000-of-00001.arrow";
    let want = expected(name);
    let columns: Vec<String> = want["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let dataset = Dataset::arrow(
        [path("hf_dataset/data-*.arrow")],
        ArrowSpec {
            columns,
            null_value: Some(NullValue::Text(String::new())),
            ..ArrowSpec::default()
        },
    )
    .unwrap();
    let elements: Vec<Json> = want["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            // image.path is null in every row: null_value "" makes it an empty string.
            e["image.path"] = json!({"dtype": "bytes", "shape": [], "values": [{"b64": ""}]});
            e
        })
        .collect();
    assert_eq!(check_rows(name, &dataset, &elements, false), None);
}

#[test]
fn pipeline_files_name_the_formats() {
    let dir = fixtures();
    let toml = format!(
        r#"
        [source]
        files = ["table_*.parquet"]
        dir = "{dir}"
        format = "parquet"
        columns = ["id", "tokens"]
        null_value = -1

        [[stage]]
        kind = "take"
        count = 12
        "#,
        dir = dir.display()
    );
    let rows = PipelineFile::from_toml(&toml)
        .unwrap()
        .build()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(rows.len(), 12);
    // table_gzip.parquet first (sorted), row 8's tokens list is null: an empty list.
    assert_eq!(rows[8].tensor("tokens").unwrap().shape(), &[0]);
    let toml = format!(
        r#"
        [source]
        files = ["arrays.npz"]
        dir = "{dir}"
        format = "numpy"
        arrays = ["y"]
        "#,
        dir = dir.display()
    );
    let rows = PipelineFile::from_toml(&toml)
        .unwrap()
        .build()
        .unwrap()
        .collect()
        .unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[3].tensor("y").unwrap().as_i64().unwrap(), &[3]);
    let toml = format!(
        r#"
        [source]
        files = ["table.stream.arrow"]
        dir = "{dir}"
        format = "arrow"
        columns = "id"
        "#,
        dir = dir.display()
    );
    let err = PipelineFile::from_toml(&toml).unwrap_err().to_string();
    assert!(err.contains("expected a sequence"), "{err}");
}

#[test]
fn interleave_and_shard_work_over_columnar_files() {
    let files = FilesSpec {
        patterns: vec![path("dense.parquet"), path("table_zstd.parquet")],
        shuffle: false,
        storage: StorageSpec::default(),
    };
    let read = Dataset::files_with(files).unwrap().read_files(ParquetSpec {
        null_value: Some(NullValue::Float(0.5)),
        ..ParquetSpec::default()
    });
    let a = read.shard(2, 0).collect().unwrap();
    let b = read.shard(2, 1).collect().unwrap();
    assert_eq!(a.len() + b.len(), 20);
    let rows = read
        .interleave(InterleaveSpec::default())
        .collect()
        .unwrap();
    assert_eq!(rows.len(), 20);
}

/// Compressed Arrow IPC files and streams whose buffers compress as far as their codec can
/// (a column of zeros: zstd's RLE blocks, LZ4's longest matches) read whole: the check of
/// each buffer's claimed uncompressed length against what its bytes can give (the fix of
/// fuzz finding `columnar-alloc-size-too-big`) accepts every real file.
#[test]
fn arrow_ipc_buffers_compressed_as_far_as_the_codec_goes_read_whole() {
    use arrow_array::{Int64Array, RecordBatch};
    use arrow_ipc::CompressionType;
    use arrow_ipc::writer::{FileWriter, IpcWriteOptions, StreamWriter};
    use std::sync::Arc;

    let rows = 300_000_i64;
    let zeros = Int64Array::from(vec![0; rows as usize]);
    let ids = Int64Array::from_iter_values(0..rows);
    let batch = RecordBatch::try_from_iter([
        ("zeros", Arc::new(zeros) as arrow_array::ArrayRef),
        ("id", Arc::new(ids) as arrow_array::ArrayRef),
    ])
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    for codec in [CompressionType::LZ4_FRAME, CompressionType::ZSTD] {
        let options = IpcWriteOptions::default()
            .try_with_compression(Some(codec))
            .unwrap();
        let file = dir.path().join(format!("{codec:?}.arrow"));
        let stream = dir.path().join(format!("{codec:?}.stream.arrow"));
        let mut w = FileWriter::try_new_with_options(
            std::fs::File::create(&file).unwrap(),
            &batch.schema(),
            options.clone(),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        let mut w = StreamWriter::try_new_with_options(
            std::fs::File::create(&stream).unwrap(),
            &batch.schema(),
            options,
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        for path in [&file, &stream] {
            let size = std::fs::metadata(path).unwrap().len();
            assert!(
                size < 16 * rows as u64,
                "{codec:?} compresses ({size} bytes)"
            );
            let dataset =
                Dataset::arrow([path.to_string_lossy().into_owned()], ArrowSpec::default())
                    .unwrap();
            let rows_read = dataset.collect().unwrap();
            assert_eq!(rows_read.len() as i64, 2 * rows, "{}", path.display());
            for (i, e) in rows_read.iter().enumerate().step_by(99_991) {
                assert_eq!(e.tensor("zeros").unwrap().as_i64().unwrap(), &[0]);
                let id = e.tensor("id").unwrap().as_i64().unwrap()[0];
                assert_eq!(id, i as i64 % rows, "{}", path.display());
            }
        }
    }
}
