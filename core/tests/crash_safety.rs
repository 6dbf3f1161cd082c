//! Files Sluice writes are whole under their final name or ignored: a disk cache cut short
//! is rebuilt, a killed writer's temporaries are cleaned up, a truncated checkpoint is a
//! clear error (issue 26, "Crash safety"; the kill tests are in cli/tests/crash_safety.rs).

use std::path::Path;

use sluice_core::prelude::*;
use sluice_core::{Checkpoint, Error};

fn values(ds: &Dataset) -> Vec<i64> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| e.tensor("value").unwrap().as_i64().unwrap()[0])
        .collect()
}

fn cached(dir: &Path) -> Dataset {
    Dataset::range(0, 30)
        .with_options(Options::default().with_seed(5))
        .cache(CacheSpec::Directory(dir.to_path_buf()))
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn cache_file(dir: &Path) -> std::path::PathBuf {
    let name = files(dir)
        .into_iter()
        .find(|n| n.ends_with(".tfrecord"))
        .expect("a cache file");
    dir.join(name)
}

#[test]
fn a_cache_file_cut_short_is_ignored_and_built_again() {
    let dir = tempfile::tempdir().unwrap();
    let want: Vec<i64> = (0..30).collect();
    assert_eq!(values(&cached(dir.path())), want);
    let path = cache_file(dir.path());
    let whole = std::fs::read(&path).unwrap();
    // Every cut (the end marker lost, or records too) is taken for no cache: the pass
    // reads the source again and writes the cache whole again.
    for cut in [1, 5, 30, whole.len() / 2, whole.len() - 1] {
        std::fs::write(&path, &whole[..whole.len() - cut]).unwrap();
        assert_eq!(values(&cached(dir.path())), want, "cut {cut}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            whole,
            "rebuilt after cut {cut}"
        );
    }
    // A complete cache is read as it is (the source is not read again: a changed file
    // would show).
    assert_eq!(values(&cached(dir.path())), want);
}

#[test]
fn a_killed_writers_temporary_cache_file_is_removed_by_the_next_writer() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(values(&cached(dir.path())), (0..30).collect::<Vec<_>>());
    let path = cache_file(dir.path());
    std::fs::remove_file(&path).unwrap();
    let stale = path.with_extension("tmp-4194305");
    std::fs::write(&stale, b"half a cache").unwrap();
    assert_eq!(values(&cached(dir.path())), (0..30).collect::<Vec<_>>());
    assert!(!stale.exists(), "{:?}", files(dir.path()));
    assert!(path.is_file());
}

#[test]
fn a_truncated_checkpoint_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let ds = Dataset::range(0, 10)
        .with_options(Options::default().with_seed(1))
        .shuffle(4);
    let mut it = ds.iter().unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let path = dir.path().join("ckpt.json");
    it.checkpoint().unwrap().save(&path).unwrap();
    // Saved whole, with no temporary left beside it.
    assert_eq!(files(dir.path()), vec!["ckpt.json".to_string()]);
    let whole = std::fs::read(&path).unwrap();
    for cut in [1, whole.len() / 3, whole.len() - 2] {
        std::fs::write(&path, &whole[..cut]).unwrap();
        let err = Checkpoint::load(&path).expect_err("a truncated checkpoint");
        assert!(matches!(err, Error::Checkpoint(_)), "{err:?}");
        assert!(err.to_string().contains("ckpt.json"), "{err}");
    }
    std::fs::write(&path, &whole).unwrap();
    let resumed: Vec<i64> = ds
        .resume(&Checkpoint::load(&path).unwrap())
        .unwrap()
        .map(|e| e.unwrap().tensor("value").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!(resumed.len(), 7);
}
