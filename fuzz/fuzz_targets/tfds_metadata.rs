//! TFDS metadata: a prepared version directory's `dataset_info.json` and `features.json`
//! (and a class-label file), read by `TfdsInfo::read` as the `tfds` source reads them, then
//! a split specification (TFDS's slicing syntax: `train[10%:-5]+test[1shard:]`) resolved to
//! record ranges and shard files. The fuzzed bytes are the three texts and the split,
//! separated by NUL bytes (`info \0 features \0 split`). The files are written to a
//! directory of this process (in memory-backed `/dev/shm` when there is one). Checks: no
//! panic (counts and slice bounds from the files are untrusted: sums, negatives and
//! percentages must not overflow); errors carry a message; resolved ranges lie inside their
//! split (`from <= to <= num_examples`); each file instruction's range lies inside its shard.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_core::tfds::TfdsInfo;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("sluice-fuzz-tfds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let (Some(info), Some(features)) = (parts.next(), parts.next()) else {
        return;
    };
    let split = String::from_utf8_lossy(parts.next().unwrap_or(b"train"));
    let dir = dir();
    std::fs::write(dir.join("dataset_info.json"), info).unwrap();
    std::fs::write(dir.join("features.json"), features).unwrap();
    std::fs::write(dir.join("label.labels.txt"), "a\nb\nc\n").unwrap();
    let info = match TfdsInfo::read(dir) {
        Ok(info) => info,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let _ = info.feature_map();
    for s in &info.splits {
        let _ = info.shard_paths(s);
    }
    match info.absolute_instructions(&split) {
        Ok(ranges) => {
            for (name, from, to) in ranges {
                let n = info
                    .split(&name)
                    .expect("a resolved split exists")
                    .num_examples();
                assert!(
                    from <= to && to <= n,
                    "{split:?}: {name}[{from}:{to}] of {n}"
                );
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match info.file_instructions(&split) {
        Ok(files) => {
            for f in files {
                assert!(f.skip < f.examples_in_shard);
                if let Some(take) = f.take {
                    assert!(take > 0 && f.skip + take <= f.examples_in_shard);
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
