//! Several hosts simulated by several `sluice run` processes on this machine, each with its
//! rank in a `shard` stage: together they read every record of the data once, for
//! file-level sharding (enough files), record-level sharding (too few), with and without
//! shuffling, and for a global shuffle, whose shards read one global order together. And
//! elastic resume: N hosts stopped part way (a checkpoint each), M hosts given all N
//! checkpoints finish the epoch, every record once.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use assert_cmd::cargo::cargo_bin;

/// `sluice gen` data: `shards` files, 24 distinct images.
fn data(dir: &Path, shards: u32) {
    let out = Command::new(cargo_bin("sluice"))
        .args([
            "gen",
            "--out",
            dir.to_str().unwrap(),
            "--images",
            "24",
            "--size",
            "16",
        ])
        .args(["--shards", &shards.to_string(), "--seed", "3"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pipeline file for `rank` of `hosts` (no `shard` stage when `hosts` is 0).
fn pipeline(dir: &Path, reading: &str, hosts: u64, rank: u64) -> std::path::PathBuf {
    let source = match reading {
        "global_shuffle" => format!(
            "[source]\nfiles = [\"train.tfrecord-*\"]\nglobal_shuffle = true\nindex_dir = \"{}\"\n",
            dir.join("indexes").display()
        ),
        _ => "[source]\nfiles = [\"train.tfrecord-*\"]\n".to_string(),
    };
    let shard = if hosts > 0 {
        format!("\n[[stage]]\nkind = \"shard\"\nnum_shards = {hosts}\nindex = {rank}\n")
    } else {
        String::new()
    };
    let after = match reading {
        "interleave" => "\n[[stage]]\nkind = \"interleave\"\ncycle_length = 2\n",
        "shuffle" => "\n[[stage]]\nkind = \"shuffle\"\nbuffer_size = 5\n",
        _ => "",
    };
    let text = format!("{source}\n[options]\nseed = 4\n{shard}{after}");
    let path = dir.join(format!("{reading}-{hosts}-{rank}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the hosts at once; each one's element digests, in order.
fn run_hosts(dir: &Path, data_dir: &Path, reading: &str, hosts: u64) -> Vec<Vec<String>> {
    run_hosts_with(
        dir,
        data_dir,
        reading,
        hosts,
        "all",
        |_| Vec::new(),
        Some(0),
    )
}

/// Runs the hosts at once, each with `args(rank)` added, expecting exit status 0 or
/// `status` (a host stopped early); each one's element digests, in order (`tag` names the
/// files).
fn run_hosts_with(
    dir: &Path,
    data_dir: &Path,
    reading: &str,
    hosts: u64,
    tag: &str,
    args: impl Fn(u64) -> Vec<String>,
    status: Option<i32>,
) -> Vec<Vec<String>> {
    let children: Vec<_> = (0..hosts.max(1))
        .map(|rank| {
            let digests = dir.join(format!("digests-{reading}-{hosts}-{rank}-{tag}.txt"));
            let child = Command::new(cargo_bin("sluice"))
                .arg("run")
                .arg(pipeline(dir, reading, hosts, rank))
                .arg("--data")
                .arg(data_dir)
                .arg("--digests")
                .arg(&digests)
                .args(args(rank))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (child, digests)
        })
        .collect();
    children
        .into_iter()
        .map(|(child, digests)| {
            let out = child.wait_with_output().unwrap();
            let code = out.status.code();
            assert!(
                code == Some(0) || code == status,
                "exit status {code:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::read_to_string(digests)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        })
        .collect()
}

fn counts(digests: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for d in digests {
        *out.entry(d).or_default() += 1;
    }
    out
}

#[test]
fn hosts_together_read_every_record_once() {
    // 6 files: file level over 2 and 3 hosts, record level over 4.
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    data(&data_dir, 6);
    for reading in ["in_order", "interleave", "shuffle", "global_shuffle"] {
        let whole = run_hosts(dir.path(), &data_dir, reading, 0).remove(0);
        assert_eq!(whole.len(), 24);
        let all = counts(whole.clone());
        assert!(all.values().all(|&n| n == 1), "distinct records");
        for hosts in [2u64, 3, 4] {
            let parts = run_hosts(dir.path(), &data_dir, reading, hosts);
            let together = counts(parts.iter().flatten().cloned());
            assert_eq!(together, all, "{reading} over {hosts} hosts");
            if reading == "global_shuffle" {
                // One global order: host i reads its positions i, i + hosts, ...
                for (i, part) in parts.iter().enumerate() {
                    let mine: Vec<String> = whole
                        .iter()
                        .skip(i)
                        .step_by(hosts as usize)
                        .cloned()
                        .collect();
                    assert_eq!(part, &mine, "host {i} of {hosts}");
                }
            }
        }
    }
}

#[test]
fn hosts_resume_on_another_number_of_hosts_reading_every_record_once() {
    // 6 files, 24 records. N hosts each stop after a few records with a checkpoint; M hosts
    // given every one of the N checkpoints finish the epoch. 0 hosts: one host whose
    // pipeline file has no `shard` stage.
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    data(&data_dir, 6);
    for reading in ["interleave", "shuffle", "global_shuffle"] {
        let all = counts(run_hosts(dir.path(), &data_dir, reading, 0).remove(0));
        for (n, m) in [(2u64, 3u64), (3, 2), (4, 1), (0, 4), (3, 3)] {
            let ckpt = |rank: u64| dir.path().join(format!("{reading}-{n}-{m}-{rank}.ckpt"));
            let before = run_hosts_with(
                dir.path(),
                &data_dir,
                reading,
                n,
                &format!("before-{m}"),
                |rank| {
                    vec![
                        "--checkpoint".into(),
                        ckpt(rank).display().to_string(),
                        "--stop-after".into(),
                        (2 + 2 * rank).to_string(),
                    ]
                },
                Some(130),
            );
            let every: Vec<String> = (0..n.max(1))
                .map(|r| ckpt(r).display().to_string())
                .collect();
            let after = run_hosts_with(
                dir.path(),
                &data_dir,
                reading,
                m,
                &format!("after-{n}"),
                |_| {
                    let mut args = vec!["--resume".to_string()];
                    args.extend(every.iter().cloned());
                    args
                },
                Some(0),
            );
            let together = counts(before.iter().chain(&after).flatten().cloned());
            assert_eq!(together, all, "{reading}: {n} hosts, then {m}");
        }
    }
}

#[test]
fn a_missing_checkpoint_is_refused_naming_what_has_no_owner() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    data(&data_dir, 6);
    let ckpt = |rank: u64| dir.path().join(format!("h{rank}.ckpt"));
    run_hosts_with(
        dir.path(),
        &data_dir,
        "shuffle",
        3,
        "before",
        |rank| {
            vec![
                "--checkpoint".into(),
                ckpt(rank).display().to_string(),
                "--stop-after".into(),
                "3".into(),
            ]
        },
        Some(130),
    );
    let out = Command::new(cargo_bin("sluice"))
        .arg("run")
        .arg(pipeline(dir.path(), "shuffle", 2, 0))
        .arg("--data")
        .arg(&data_dir)
        .arg("--resume")
        .arg(ckpt(0))
        .arg(ckpt(1))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no checkpoint holds file"), "{err}");
}
