//! The `read_and_batch_fusion` rule: a CSV reader and the `batch` after it read as one
//! stage must give the elements of the two stages apart, element for element (ids,
//! provenance, values), with the same errors, skips, checkpoints and elastic resumes.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use sluice_core::prelude::*;
use sluice_core::{Checkpoint, Element, ErrorPolicy};

/// CSV files of `rows[i]` rows (`id,x,name`), bad rows where `bad` says (row index in the
/// file), a quoted field with `""` every 7th row.
fn write_csv(dir: &Path, rows: &[usize], bad: &[(usize, usize)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    for (f, &n) in rows.iter().enumerate() {
        let mut text = String::from("id,x,name\n");
        for r in 0..n {
            if bad.contains(&(f, r)) && r % 2 == 1 {
                // A row the tokenizer refuses (reading goes on after it).
                text.push_str(&format!("{f}{r:04},1\"5,bad\n"));
            } else if bad.contains(&(f, r)) {
                text.push_str(&format!("{f}{r:04},not-a-number,bad\n"));
            } else if r % 7 == 3 {
                text.push_str(&format!("{f}{r:04},{}.5,\"say \"\"hi\"\", {r}\"\n", r));
            } else if r % 11 == 5 {
                // Missing values take the defaults.
                text.push_str(&format!("{f}{r:04},,\n"));
            } else {
                text.push_str(&format!("{f}{r:04},{}.25,n{r}\n", r * 3));
            }
        }
        std::fs::write(dir.join(format!("part-{f:02}.csv")), text).unwrap();
    }
    format!("{}/part-*.csv", dir.display())
}

struct Data {
    /// Files of uneven sizes (one empty), no bad rows.
    clean: String,
    /// The same with bad rows.
    bad: String,
    /// Twelve files (enough to shard by file over 2, 3 or 4 hosts).
    many: String,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir: PathBuf = tempfile::tempdir().unwrap().keep();
        let rows = [37, 0, 5, 64, 23, 1, 50];
        Data {
            clean: write_csv(&dir.join("clean"), &rows, &[]),
            bad: {
                let files = write_csv(&dir.join("bad"), &rows, &[(0, 4), (3, 0), (3, 63), (6, 21)]);
                // A file ending inside a quoted field: nothing after it can be read.
                let last = dir.join("bad").join("part-05.csv");
                let mut text = std::fs::read_to_string(&last).unwrap();
                text.push_str("50001,2.5,\"never closed\n");
                std::fs::write(last, text).unwrap();
                files
            },
            many: write_csv(
                &dir.join("many"),
                &[9, 0, 14, 3, 11, 7, 12, 5, 8, 10, 6, 13],
                &[],
            ),
        }
    })
}

fn spec() -> CsvSpec {
    CsvSpec {
        header: true,
        record_defaults: vec![
            ColumnDefault::required(CsvType::Int64),
            ColumnDefault::with_default(CsvType::Float32, CsvValue::Float(-1.0)),
            ColumnDefault::with_default(CsvType::String, CsvValue::Bytes("?".into())),
        ],
        ..CsvSpec::default()
    }
}

fn pipeline(files: &str, batch: BatchSpec, policy: ErrorPolicy, fused: bool) -> Dataset {
    Dataset::csv([files], spec())
        .unwrap()
        .batch_with(batch)
        .with_options(
            Options::default()
                .with_error_policy(policy)
                .with_map_and_batch_fusion(fused),
        )
}

/// Every element, and the error that ended the run (as text), if one did.
fn read(ds: &Dataset) -> (Vec<Element>, Option<String>) {
    let mut out = Vec::new();
    for item in ds.iter().unwrap() {
        match item {
            Ok(e) => out.push(e),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

fn is_fused(ds: &Dataset) -> bool {
    ds.explain().unwrap().contains("read_and_batch_fusion")
}

#[test]
fn fused_batches_equal_the_unfused_ones() {
    let d = data();
    for files in [&d.clean, &d.bad] {
        for policy in [ErrorPolicy::Fail, ErrorPolicy::Skip] {
            for size in [1, 4, 16, 64, 1000] {
                for drop in [false, true] {
                    let b = BatchSpec::new(size).drop_remainder(drop);
                    let fused = pipeline(files, b, policy, true);
                    let unfused = pipeline(files, b, policy, false);
                    assert!(is_fused(&fused), "{}", fused.explain().unwrap());
                    assert!(!is_fused(&unfused));
                    let (a, ea) = read(&fused);
                    let (b2, eb) = read(&unfused);
                    let what = format!("{files} {policy:?} batch {size} drop {drop}");
                    assert_eq!(a.len(), b2.len(), "{what}: batches");
                    for (i, (x, y)) in a.iter().zip(&b2).enumerate() {
                        assert_eq!(x, y, "{what}: batch {i}");
                    }
                    assert_eq!(ea, eb, "{what}: the error");
                    if files == &d.bad && policy == ErrorPolicy::Fail {
                        let e = ea.expect("a bad row fails the run");
                        assert!(e.contains("part-00.csv") && e.contains("line 6"), "{e}");
                        assert!(e.contains("`x`"), "{e}");
                    }
                    if policy == ErrorPolicy::Skip {
                        let rows: usize = a.iter().map(|e| e.tensor("id").unwrap().len()).sum();
                        let total = 37 + 5 + 64 + 23 + 1 + 50;
                        // The bad files: 5 bad rows, one of them a row more than `total`.
                        let (extra, bad) = if files == &d.bad { (1, 5) } else { (0, 0) };
                        if !drop {
                            assert_eq!(rows, total + extra - bad, "{what}: rows");
                        }
                        // The skips are counted in the reader's stats, fused or not.
                        let skipped = |ds: &Dataset| {
                            ds.stats()
                                .unwrap()
                                .stages
                                .iter()
                                .map(|s| s.skipped)
                                .sum::<u64>()
                        };
                        assert_eq!(skipped(&fused), skipped(&unfused), "{what}: skips");
                        assert_eq!(skipped(&fused), bad as u64, "{what}: skips");
                    }
                }
            }
        }
    }
}

#[test]
fn a_batch_spanning_files_has_its_first_rows_id_and_every_rows_values() {
    let ds = pipeline(&data().clean, BatchSpec::new(40), ErrorPolicy::Fail, true);
    let (batches, err) = read(&ds);
    assert!(err.is_none());
    // The first batch: 37 rows of part-00 and the first 3 of part-02 (part-01 is empty).
    let first = &batches[0];
    assert_eq!(first.id().source, 0);
    assert_eq!(first.id().index, 0);
    let ids = first.tensor("id").unwrap().as_i64().unwrap().to_vec();
    assert_eq!(ids.len(), 40);
    assert_eq!(ids[36], 36);
    assert_eq!(&ids[37..], &[20000, 20001, 20002]);
    let names = first.tensor("name").unwrap();
    assert_eq!(&names.as_bytes_list().unwrap()[3][..], b"say \"hi\", 3");
    assert_eq!(&names.as_bytes_list().unwrap()[5][..], b"?");
    assert_eq!(first.tensor("x").unwrap().as_f32().unwrap()[5], -1.0);
    let second = &batches[1];
    assert_eq!((second.id().source, second.id().index), (2, 3));
}

#[test]
fn checkpoints_resume_the_fused_run_where_it_stopped() {
    let d = data();
    for size in [7, 32] {
        let make = || pipeline(&d.clean, BatchSpec::new(size), ErrorPolicy::Fail, true);
        let (all, _) = read(&make());
        for cut in [0, 1, 3, all.len() - 1] {
            let mut it = make().iter().unwrap();
            for _ in 0..cut {
                it.next().unwrap().unwrap();
            }
            let cp: Checkpoint = it.checkpoint().unwrap();
            let rest: Vec<Element> = make().resume(&cp).unwrap().map(|e| e.unwrap()).collect();
            assert_eq!(rest, all[cut..], "batch {size}, cut at {cut}");
        }
    }
}

#[test]
fn elastic_resume_reads_every_row_once_on_another_number_of_hosts() {
    let d = data();
    let make = |hosts: u64, rank: u64| {
        Dataset::csv([&d.many], spec())
            .unwrap()
            .shard(hosts, rank)
            .batch(6)
            .with_options(Options::default().with_seed(3))
    };
    let ids = |e: &Element| e.tensor("id").unwrap().as_i64().unwrap().to_vec();
    let mut whole: Vec<i64> = make(1, 0)
        .iter()
        .unwrap()
        .flat_map(|e| ids(&e.unwrap()))
        .collect();
    whole.sort();
    assert!(is_fused(&make(3, 1)), "{}", make(3, 1).explain().unwrap());
    for (n, m, steps) in [(3, 2, [1, 4, 2]), (2, 3, [5, 0, 0]), (4, 1, [2, 1, 3])] {
        let mut got = Vec::new();
        let mut cps = Vec::new();
        for rank in 0..n {
            let mut it = make(n, rank).iter().unwrap();
            for item in it.by_ref().take(steps[rank as usize % 3]) {
                got.extend(ids(&item.unwrap()));
            }
            cps.push(it.checkpoint().unwrap());
        }
        for rank in 0..m {
            for item in make(m, rank).resume_elastic(&cps).unwrap() {
                got.extend(ids(&item.unwrap()));
            }
        }
        got.sort();
        assert_eq!(got, whole, "{n} hosts, then {m}");
    }
}

fn columnar_fixture(file: &str) -> String {
    format!(
        "{}/../tests/fixtures/columnar/{file}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Parquet and Arrow IPC (the fixtures written by pyarrow: scalar, list and struct
/// columns, nulls), with and without `null_value`: fused batches equal the unfused ones,
/// dense where every row has one shape, ragged where lists differ in length.
#[test]
fn parquet_and_arrow_fused_batches_equal_the_unfused_ones() {
    let files = [
        ("table_snappy.parquet", true),
        ("table_gzip.parquet", true),
        ("dense.parquet", true),
        ("table.arrow", false),
        ("table.stream.arrow", false),
    ];
    let mut ragged = 0;
    for (file, parquet) in files {
        for null_value in [None, Some(NullValue::Int(0))] {
            for policy in [ErrorPolicy::Fail, ErrorPolicy::Skip] {
                for size in [1, 2, 3, 5, 64] {
                    for drop in [false, true] {
                        let make = |fused: bool| {
                            let path = columnar_fixture(file);
                            let ds = if parquet {
                                Dataset::parquet(
                                    [&path, &path],
                                    ParquetSpec {
                                        null_value: null_value.clone(),
                                        ..ParquetSpec::default()
                                    },
                                )
                            } else {
                                Dataset::arrow(
                                    [&path, &path],
                                    ArrowSpec {
                                        null_value: null_value.clone(),
                                        ..ArrowSpec::default()
                                    },
                                )
                            };
                            ds.unwrap()
                                .batch_with(BatchSpec::new(size).drop_remainder(drop))
                                .with_options(
                                    Options::default()
                                        .with_error_policy(policy)
                                        .with_map_and_batch_fusion(fused),
                                )
                        };
                        let what = format!("{file} {null_value:?} {policy:?} {size} {drop}");
                        assert!(is_fused(&make(true)), "{what}");
                        let (a, ea) = read(&make(true));
                        let (b, eb) = read(&make(false));
                        assert_eq!(a.len(), b.len(), "{what}: batches");
                        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                            assert_eq!(x, y, "{what}: batch {i}");
                        }
                        assert_eq!(ea, eb, "{what}: the error");
                        ragged += a
                            .iter()
                            .flat_map(|e| e.iter())
                            .filter(|(_, v)| matches!(v, sluice_core::Value::Ragged(_)))
                            .count();
                    }
                }
            }
        }
    }
    assert!(ragged > 0, "some batches have ragged list columns");
}

/// Text lines (`\r\n`, no final newline, a line that is not UTF-8 with `utf8`): fused
/// batches equal the unfused ones, errors and skips included.
#[test]
fn text_lines_fused_batches_equal_the_unfused_ones() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.txt"),
        b"one\r\ntwo\n\nthree\xff\nfour\nfive",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.txt"), b"six\nseven\n").unwrap();
    std::fs::write(dir.path().join("c.txt"), b"").unwrap();
    let files = format!("{}/*.txt", dir.path().display());
    for utf8 in [false, true] {
        for policy in [ErrorPolicy::Fail, ErrorPolicy::Skip] {
            for size in [1, 2, 3, 4, 100] {
                let make = |fused: bool| {
                    Dataset::text_lines(
                        [&files],
                        TextLinesSpec {
                            utf8,
                            ..TextLinesSpec::default()
                        },
                    )
                    .unwrap()
                    .batch(size)
                    .with_options(
                        Options::default()
                            .with_error_policy(policy)
                            .with_map_and_batch_fusion(fused),
                    )
                };
                let what = format!("utf8 {utf8} {policy:?} {size}");
                assert!(is_fused(&make(true)), "{what}");
                let (a, ea) = read(&make(true));
                let (b, eb) = read(&make(false));
                assert_eq!(a, b, "{what}");
                assert_eq!(ea, eb, "{what}");
            }
        }
    }
}
