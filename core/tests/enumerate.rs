//! `enumerate`: numbers in order from `start`, kept across a checkpoint, written by
//! pipeline files; and an elastic resume is refused with the reason.

use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;

fn numbers(ds: &Dataset) -> Vec<(i64, i64)> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.tensor("value").unwrap().as_i64().unwrap()[0],
                e.tensor("index").unwrap().as_i64().unwrap()[0],
            )
        })
        .collect()
}

#[test]
fn elements_are_numbered_from_start_and_a_resume_goes_on_counting() {
    let ds = Dataset::range(10, 20)
        .filter(|e| Ok(e.tensor("value").unwrap().as_i64().unwrap()[0] % 3 != 0))
        .enumerate(5);
    let got = numbers(&ds);
    let want: Vec<(i64, i64)> = (10..20)
        .filter(|v| v % 3 != 0)
        .enumerate()
        .map(|(i, v)| (v, 5 + i as i64))
        .collect();
    assert_eq!(got, want);
    // Checkpointed after 3 elements, resumed: the numbers go on from 8.
    let mut it = ds.iter().unwrap();
    for _ in 0..3 {
        it.next().unwrap().unwrap();
    }
    let cp = it.checkpoint().unwrap();
    let rest: Vec<i64> = ds
        .resume(&cp)
        .unwrap()
        .map(|e| e.unwrap().tensor("index").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!(rest, (8..5 + want.len() as i64).collect::<Vec<_>>());
}

#[test]
fn pipeline_files_write_it_and_elastic_resume_says_why_not() {
    let spec =
        StageSpec::from_json(serde_json::json!({"kind": "enumerate", "output": "n"})).unwrap();
    let ds = spec.append_to(&Dataset::range(0, 3)).unwrap();
    let n: Vec<i64> = ds
        .collect()
        .unwrap()
        .iter()
        .map(|e| e.tensor("n").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!(n, [0, 1, 2]);
    let make = |hosts: u64, rank: u64| Dataset::range(0, 30).shard(hosts, rank).enumerate(0);
    let mut it = make(2, 0).iter().unwrap();
    it.next().unwrap().unwrap();
    let cp = it.checkpoint().unwrap();
    let why = cp.elastic.as_ref().unwrap().unavailable.clone().unwrap();
    assert!(why.contains("enumerate"), "{why}");
    let err = match make(3, 1).resume_elastic(&[cp.clone(), cp]) {
        Ok(_) => panic!("an elastic resume through enumerate"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("enumerate"), "{err}");
}
