//! The `sql` source on SQLite files (made here) and on a PostgreSQL server (its URL in
//! `SLUICE_POSTGRES_URL`; `.ci/run` starts one): rows and column types, NULLs and their
//! defaults, partitions as the file list (every row once across partitions, shards and
//! interleave), pipeline files.

use std::collections::BTreeMap;
use std::path::Path;

use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::{Element, TensorData};

const ROWS: i64 = 50;

/// `items(id, price, name, data)`: price NULL every 7th row.
fn sqlite_db(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("shop.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, price REAL, name TEXT, data BLOB);",
    )
    .unwrap();
    for id in 0..ROWS {
        let price = (id % 7 != 3).then_some(id as f64 * 0.5);
        conn.execute(
            "INSERT INTO items VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![id, price, format!("item {id}"), vec![id as u8, 0xff]],
        )
        .unwrap();
    }
    path
}

fn i64_of(e: &Element, name: &str) -> i64 {
    match e.tensor(name).unwrap().data() {
        TensorData::I64(v) => v[0],
        other => panic!("{name}: {other:?}"),
    }
}

fn f64_of(e: &Element, name: &str) -> f64 {
    match e.tensor(name).unwrap().data() {
        TensorData::F64(v) => v[0],
        other => panic!("{name}: {other:?}"),
    }
}

fn bytes_of(e: &Element, name: &str) -> Vec<u8> {
    match e.tensor(name).unwrap().data() {
        TensorData::Bytes(v) => v[0].to_vec(),
        other => panic!("{name}: {other:?}"),
    }
}

fn defaults() -> BTreeMap<String, SqlValue> {
    BTreeMap::from([("price".to_string(), SqlValue::Float(-1.0))])
}

/// The checks every database passes, given a spec reading `items`.
fn check_database(base: SqlSpec) {
    // Every row, in order, typed from the columns.
    let spec = SqlSpec {
        query: "SELECT id, price, name, data FROM items ORDER BY id".into(),
        null_defaults: defaults(),
        ..base.clone()
    };
    let rows = Dataset::sql(spec.clone()).unwrap().collect().unwrap();
    assert_eq!(rows.len(), ROWS as usize);
    for (i, e) in rows.iter().enumerate() {
        let id = i as i64;
        assert_eq!(i64_of(e, "id"), id);
        let price = if id % 7 == 3 { -1.0 } else { id as f64 * 0.5 };
        assert_eq!(f64_of(e, "price"), price);
        assert_eq!(bytes_of(e, "name"), format!("item {id}").into_bytes());
        assert_eq!(bytes_of(e, "data"), vec![id as u8, 0xff]);
    }

    // A NULL without a default: an error naming the row and the column.
    let no_default = SqlSpec {
        null_defaults: BTreeMap::new(),
        ..spec.clone()
    };
    let err = Dataset::sql(no_default.clone())
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("row 3") && err.contains("\"price\"") && err.contains("NULL"),
        "{err}"
    );
    // Skipped under the skip policy: the other rows come.
    let kept = Dataset::sql(no_default)
        .unwrap()
        .with_options(Options {
            error_policy: ErrorPolicy::Skip,
            ..Options::default()
        })
        .collect()
        .unwrap();
    assert_eq!(kept.len(), (0..ROWS).filter(|i| i % 7 != 3).count());

    // Partitions: every row once, across partitions, shards and interleave.
    let partitioned = SqlSpec {
        query: "SELECT id, price, name FROM items".into(),
        partition_column: Some("id".into()),
        num_partitions: Some(4),
        ..spec.clone()
    };
    let ids = |d: Dataset| {
        let mut ids: Vec<i64> = d
            .collect()
            .unwrap()
            .iter()
            .map(|e| i64_of(e, "id"))
            .collect();
        ids.sort_unstable();
        ids
    };
    let all: Vec<i64> = (0..ROWS).collect();
    let dataset = Dataset::sql(partitioned.clone()).unwrap();
    assert_eq!(ids(dataset.clone()), all);
    let mut sharded = ids(dataset.shard(2, 0));
    sharded.extend(ids(dataset.shard(2, 1)));
    sharded.sort_unstable();
    assert_eq!(sharded, all);
    let interleaved = dataset.interleave(InterleaveSpec {
        cycle_length: 4,
        ..InterleaveSpec::default()
    });
    assert_eq!(ids(interleaved), all);
    // Explicit bounds inside the range: the first and last partitions take the rest.
    let bounded = SqlSpec {
        lower_bound: Some(10),
        upper_bound: Some(20),
        num_partitions: Some(3),
        ..partitioned.clone()
    };
    assert_eq!(ids(Dataset::sql(bounded).unwrap()), all);

    // A bad query names the database and the error.
    let bad = SqlSpec {
        query: "SELECT nope FROM items".into(),
        ..spec
    };
    let err = Dataset::sql(bad)
        .unwrap()
        .collect()
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn sqlite_rows_types_nulls_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_db(dir.path());
    check_database(SqlSpec {
        path: Some(path.clone()),
        ..SqlSpec::default()
    });

    // Columns without a declared type take their first value's type; another type later is
    // an error naming the row and column.
    let spec = SqlSpec {
        path: Some(path.clone()),
        query: "SELECT id * 2 AS twice, CASE WHEN id < 5 THEN id ELSE 'many' END AS v \
                FROM items ORDER BY id"
            .into(),
        ..SqlSpec::default()
    };
    let mut got = Vec::new();
    let mut error = None;
    for item in Dataset::sql(spec).unwrap().iter().unwrap() {
        match item {
            Ok(e) => got.push(e),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    assert_eq!(got.len(), 5);
    assert_eq!(i64_of(&got[4], "twice"), 8);
    let error = error.unwrap();
    assert!(
        error.contains("row 5") && error.contains("\"v\"") && error.contains("int64"),
        "{error}"
    );
}

#[test]
fn sqlite_from_a_pipeline_file_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    sqlite_db(dir.path());
    let text = format!(
        r#"
[source]
format = "sql"
dir = {:?}
path = "shop.db"
query = "SELECT id, price FROM items"
partition_column = "id"
num_partitions = 3
null_defaults = {{ price = 0 }}

[[stage]]
kind = "shard"
num_shards = 3
index = 1
"#,
        dir.path().display().to_string()
    );
    let file = PipelineFile::from_toml(&text).unwrap();
    let again = PipelineFile::from_toml(&toml::to_string(&file).unwrap()).unwrap();
    assert_eq!(file.source, again.source);
    let rows = file.build().unwrap().collect().unwrap();
    // Partition 1 of 3 of ids 0..49: [16, 33).
    let ids: Vec<i64> = rows.iter().map(|e| i64_of(e, "id")).collect();
    assert_eq!(ids, (16..33).collect::<Vec<_>>());
    assert!(rows.iter().any(|e| f64_of(e, "price") == 0.0));

    for (source, says) in [
        ("query = \"SELECT 1\"", "`path`"),
        (
            "path = \"x.db\"\nurl = \"postgres://h/db\"\nquery = \"SELECT 1\"",
            "not both",
        ),
        (
            "url = \"mysql://h/db\"\nquery = \"SELECT 1\"",
            "PostgreSQL URL",
        ),
        (
            "path = \"x.db\"\nquery = \"SELECT 1\"\nnum_partitions = 2",
            "partition_column",
        ),
        (
            "path = \"x.db\"\nquery = \"SELECT 1\"\nfiles = [\"a\"]",
            "not `files`",
        ),
    ] {
        let text = format!("[source]\nformat = \"sql\"\n{source}\n");
        let err = match PipelineFile::from_toml(&text) {
            Ok(f) => f.build().unwrap_err().to_string(),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(says), "{err} should say {says}");
    }
}

/// The PostgreSQL server's URL: `SLUICE_POSTGRES_URL`, which `.ci/run` sets after starting
/// a server. Without it the test fails under CI (where it must be there) and, elsewhere,
/// says how to provide one and passes without checking PostgreSQL.
fn postgres_url() -> Option<String> {
    match std::env::var("SLUICE_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "SLUICE_POSTGRES_URL is not set: .ci/run starts a PostgreSQL server on 127.0.0.1 \
             and exports its URL (.ci/postgres.sh); the sql tests need it"
        ),
        _ => {
            eprintln!(
                "SLUICE_POSTGRES_URL is not set: PostgreSQL not checked here (run \
                 `eval \"$(.ci/postgres.sh)\"` to start a throwaway server)"
            );
            None
        }
    }
}

#[test]
fn postgres_rows_types_nulls_and_partitions() {
    let Some(url) = postgres_url() else { return };
    let mut client = postgres::Client::connect(&url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to SLUICE_POSTGRES_URL: {e}"));
    let schema = format!("sluice_test_{}", std::process::id());
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
             CREATE TABLE {schema}.items (id int8 PRIMARY KEY, price float8, name text, \
             data bytea);"
        ))
        .unwrap();
    for id in 0..ROWS {
        let price = (id % 7 != 3).then_some(id as f64 * 0.5);
        client
            .execute(
                &format!("INSERT INTO {schema}.items VALUES ($1, $2, $3, $4)"),
                &[&id, &price, &format!("item {id}"), &vec![id as u8, 0xffu8]],
            )
            .unwrap();
    }
    let with_schema = format!(
        "{url}{}options=-csearch_path%3D{schema}",
        if url.contains('?') { "&" } else { "?" }
    );
    check_database(SqlSpec {
        url: Some(with_schema.clone()),
        ..SqlSpec::default()
    });
    // A type sql does not read is refused by name.
    let err = Dataset::sql(SqlSpec {
        url: Some(with_schema),
        query: "SELECT now() AS t".into(),
        ..SqlSpec::default()
    })
    .unwrap()
    .collect()
    .unwrap_err()
    .to_string();
    assert!(err.contains("\"t\"") && err.contains("timestamp"), "{err}");
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

/// A checkpoint of a partitioned, ordered query resumes where it stopped.
#[test]
fn a_partitioned_query_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_db(dir.path());
    let build = || {
        Dataset::sql(SqlSpec {
            path: Some(path.clone()),
            query: "SELECT id FROM items ORDER BY id".into(),
            partition_column: Some("id".into()),
            num_partitions: Some(3),
            ..SqlSpec::default()
        })
        .unwrap()
        .interleave(InterleaveSpec::new(2))
    };
    let all: Vec<i64> = build()
        .collect()
        .unwrap()
        .iter()
        .map(|e| i64_of(e, "id"))
        .collect();
    assert_eq!(all.len(), ROWS as usize);
    let mut it = build().iter().unwrap();
    let head: Vec<i64> = it
        .by_ref()
        .take(21)
        .map(|e| i64_of(&e.unwrap(), "id"))
        .collect();
    let checkpoint =
        sluice_core::Checkpoint::from_json(&it.checkpoint().unwrap().to_json()).unwrap();
    drop(it);
    let tail: Vec<i64> = build()
        .resume(&checkpoint)
        .unwrap()
        .map(|e| i64_of(&e.unwrap(), "id"))
        .collect();
    assert_eq!(head, all[..21]);
    assert_eq!(tail, all[21..]);
}
