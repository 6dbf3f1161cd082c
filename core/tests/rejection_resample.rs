//! `rejection_resample`: TensorFlow's acceptance probabilities and online estimate (against
//! `tests/fixtures/transformations/resample.json`, written by `generate_resample.py` with
//! tf.data 2.21), the output's class histogram against the target, seeds, parallelism,
//! checkpoints, errors and pipeline files.

use rand::Rng;
use serde_json::Value;
use sluice_core::prelude::*;
use sluice_core::registry::StageSpec;
use sluice_core::{ErrorKind, rng::rng_from_seed};

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/transformations/resample.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Bit-exact equality, NaN included.
fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn acceptance_probabilities_are_tensorflows() {
    let fx = fixture();
    let cases = fx["acceptance"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let (initial, target) = (f32s(&case["initial"]), f32s(&case["target"]));
        let (accept, original) = acceptance_probs(&initial, &target);
        assert!(
            same(&accept, &f32s(&case["accept"])),
            "{initial:?} -> {target:?}: {accept:?} vs {}",
            case["accept"]
        );
        assert_eq!(
            original,
            case["prob_original"].as_f64().unwrap() as f32,
            "{initial:?} -> {target:?}"
        );
    }
}

#[test]
fn the_online_estimate_is_tensorflows_position_by_position() {
    let fx = fixture();
    let online = &fx["online"];
    let target = f32s(&online["target"]);
    let classes: Vec<usize> = online["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect();
    let positions = online["positions"].as_array().unwrap();
    assert_eq!(positions.len(), classes.len());
    let mut estimator = ClassEstimator::new(target.len());
    let mut checked = 0;
    for (b, batch) in classes.chunks(ClassEstimator::BATCH).enumerate() {
        let dist = estimator.update(batch);
        let (accept, original) = acceptance_probs(&dist, &target);
        for (j, want) in positions[b * ClassEstimator::BATCH..][..batch.len()]
            .iter()
            .enumerate()
        {
            let at = b * ClassEstimator::BATCH + j;
            assert!(same(&dist, &f32s(&want["dist"])), "position {at}: {dist:?}");
            assert!(
                same(&accept, &f32s(&want["accept"])),
                "position {at}: {accept:?}"
            );
            assert_eq!(original, want["prob_original"].as_f64().unwrap() as f32);
            checked += 1;
        }
    }
    assert_eq!(checked, 100);
}

/// `n` elements whose `label` follows `dist` (drawn with a fixed seed), with `value` their
/// position.
fn labelled(n: usize, dist: &[f64]) -> Dataset {
    let mut rng = rng_from_seed(11);
    let elements = (0..n)
        .map(|i| {
            let u: f64 = rng.random();
            let mut acc = 0.0;
            let label = dist
                .iter()
                .position(|p| {
                    acc += p;
                    u < acc
                })
                .unwrap_or(dist.len() - 1);
            Element::new(ElementId::new(0, i as u64))
                .with("value", Tensor::scalar_i64(i as i64))
                .with("label", Tensor::scalar_i64(label as i64))
        })
        .collect();
    Dataset::from_elements(elements)
}

fn seeded(ds: Dataset, seed: u64) -> Dataset {
    ds.with_options(Options::default().with_seed(seed))
}

fn values(ds: &Dataset) -> Vec<(i64, i64)> {
    ds.collect()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.tensor("value").unwrap().as_i64().unwrap()[0],
                e.tensor("label").unwrap().as_i64().unwrap()[0],
            )
        })
        .collect()
}

/// Checks the class histogram of `out` against `target` within 5 binomial standard
/// deviations, and that the outputs are distinct inputs in input order.
fn check_histogram(out: &[(i64, i64)], target: &[f64]) {
    let n = out.len() as f64;
    for (class, &t) in target.iter().enumerate() {
        let got = out.iter().filter(|(_, l)| *l == class as i64).count() as f64;
        let sigma = (n * t * (1.0 - t)).sqrt();
        assert!(
            (got - n * t).abs() <= 5.0 * sigma,
            "class {class}: {got} of {n}, expected {} ± {}",
            n * t,
            5.0 * sigma
        );
    }
    assert!(
        out.windows(2).all(|w| w[0].0 < w[1].0),
        "not in input order"
    );
}

#[test]
fn the_output_follows_the_target_with_a_known_or_estimated_input_distribution() {
    let initial = [0.5, 0.3, 0.2];
    let target = [0.2, 0.3, 0.5];
    let input = labelled(50_000, &initial);
    // Known: r = [0.4, 1, 2.5], so about 50000 / 2.5 = 20000 outputs.
    let known = seeded(
        input.rejection_resample(
            RejectionResampleSpec::new("label", target.to_vec()).initial_dist(initial.to_vec()),
        ),
        1,
    );
    let out = values(&known);
    assert!((18_000..22_000).contains(&out.len()), "{}", out.len());
    check_histogram(&out, &target);
    // Estimated online.
    let estimated = seeded(
        input.rejection_resample(RejectionResampleSpec::new("label", target.to_vec())),
        1,
    );
    let out = values(&estimated);
    assert!((18_000..22_000).contains(&out.len()), "{}", out.len());
    check_histogram(&out, &target);
    // A target with a class left out, weights not summing to 1 (normalized).
    let out = values(&seeded(
        input.rejection_resample(
            RejectionResampleSpec::new("label", vec![0.0, 1.0, 1.0]).initial_dist(initial.to_vec()),
        ),
        1,
    ));
    check_histogram(&out, &[0.0, 0.5, 0.5]);
}

#[test]
fn an_input_at_the_target_passes_whole_and_a_target_equal_to_it_changes_nothing() {
    let input = labelled(1000, &[0.5, 0.5]);
    let all = values(&input);
    let out = values(&seeded(
        input.rejection_resample(
            RejectionResampleSpec::new("label", vec![0.5, 0.5]).initial_dist(vec![0.5, 0.5]),
        ),
        3,
    ));
    assert_eq!(out, all);
}

#[test]
fn a_seed_fixes_the_output_at_any_parallelism_and_another_seed_changes_it() {
    let input = labelled(5000, &[0.8, 0.2]);
    let make = |seed: u64, threads: usize| {
        let ds = input
            .map_with(MapSpec::parallel(threads), |e, _| Ok(e))
            .rejection_resample(RejectionResampleSpec::new("label", vec![0.5, 0.5]));
        seeded(ds, seed)
    };
    let a = values(&make(7, 1));
    assert_eq!(a, values(&make(7, 1)));
    assert_eq!(a, values(&make(7, 4)));
    assert_ne!(a, values(&make(8, 1)));
    // The stage's own seed wins over the pipeline's.
    let own = |pipeline_seed: u64| {
        values(&seeded(
            input.rejection_resample(RejectionResampleSpec::new("label", vec![0.5, 0.5]).seed(99)),
            pipeline_seed,
        ))
    };
    assert_eq!(own(1), own(2));
}

#[test]
fn a_checkpoint_resumes_the_uninterrupted_output() {
    let input = labelled(3000, &[0.6, 0.3, 0.1]);
    // A fresh dataset each time: a dataset's epoch counts its iterations, and keys the
    // random stream.
    let make = || {
        seeded(
            input.rejection_resample(RejectionResampleSpec::new("label", vec![0.3, 0.3, 0.4])),
            5,
        )
    };
    let all = values(&make());
    assert!(all.len() > 500, "{}", all.len());
    for stop in [0, 1, 37, 500] {
        let ds = make();
        let mut it = ds.iter().unwrap();
        for _ in 0..stop {
            it.next().unwrap().unwrap();
        }
        let cp = it.checkpoint().unwrap();
        drop(it);
        let cp = sluice_core::Checkpoint::from_json(&cp.to_json()).unwrap();
        let rest: Vec<(i64, i64)> = make()
            .resume(&cp)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.tensor("value").unwrap().as_i64().unwrap()[0],
                    e.tensor("label").unwrap().as_i64().unwrap()[0],
                )
            })
            .collect();
        assert_eq!(rest, all[stop..], "resumed after {stop}");
    }
}

#[test]
fn bad_classes_are_errors_naming_the_feature_and_element() {
    let bad = |label: Tensor| {
        let e = Element::new(ElementId::new(0, 0)).with("label", label);
        let ds = Dataset::from_elements(vec![e])
            .rejection_resample(RejectionResampleSpec::new("label", vec![0.5, 0.5]));
        ds.collect().unwrap_err()
    };
    let err = bad(Tensor::scalar_i64(2));
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert_eq!(err.feature(), Some("label"));
    let msg = err.to_string();
    assert!(
        msg.contains("outside [0, 2)") && msg.contains("rejection_resample#1: element 0:0"),
        "{msg}"
    );
    let err = bad(Tensor::scalar_i64(-1)).to_string();
    assert!(err.contains("class -1"), "{err}");
    let err = bad(Tensor::scalar_f32(1.0)).to_string();
    assert!(err.contains("is float, expected int64"), "{err}");
    let err = bad(Tensor::vector(TensorData::I64(vec![0, 1].into()))).to_string();
    assert!(err.contains("expected a scalar"), "{err}");
    let e = Element::new(ElementId::new(0, 0)).with("other", Tensor::scalar_i64(0));
    let err = Dataset::from_elements(vec![e])
        .rejection_resample(RejectionResampleSpec::new("label", vec![1.0]))
        .collect()
        .unwrap_err();
    assert!(err.to_string().contains("no feature `label`"), "{err}");
    // Under the skip policy a bad element is skipped and the rest go on.
    let elements = (0..6)
        .map(|i| {
            Element::new(ElementId::new(0, i))
                .with("label", Tensor::scalar_i64(if i == 2 { 9 } else { 0 }))
        })
        .collect();
    let ds = Dataset::from_elements(elements)
        .rejection_resample(RejectionResampleSpec::new("label", vec![1.0, 0.0]))
        .with_options(Options::default().with_error_policy(ErrorPolicy::Skip));
    assert_eq!(ds.collect().unwrap().len(), 5);
}

#[test]
fn pipeline_files_write_it_and_bad_parameters_name_their_key() {
    let spec = StageSpec::from_json(serde_json::json!({
        "kind": "rejection_resample", "class": "label",
        "target_dist": [0.5, 0.5], "initial_dist": [0.9, 0.1], "seed": 3
    }))
    .unwrap();
    spec.validate().unwrap();
    let input = labelled(4000, &[0.9, 0.1]);
    let out = values(&spec.append_to(&input).unwrap());
    let rust = values(
        &input.rejection_resample(
            RejectionResampleSpec::new("label", vec![0.5, 0.5])
                .initial_dist(vec![0.9, 0.1])
                .seed(3),
        ),
    );
    assert_eq!(out, rust);
    check_histogram(&out, &[0.5, 0.5]);
    let problem = |json: Value| {
        StageSpec::from_json(json)
            .unwrap()
            .validate()
            .unwrap_err()
            .to_string()
    };
    let err = problem(
        serde_json::json!({"kind": "rejection_resample", "class": "label",
        "target_dist": []}),
    );
    assert!(err.starts_with("target_dist: "), "{err}");
    let err = problem(
        serde_json::json!({"kind": "rejection_resample", "class": "label",
        "target_dist": [0.5, -0.5]}),
    );
    assert!(err.starts_with("target_dist[1]: "), "{err}");
    let err = problem(
        serde_json::json!({"kind": "rejection_resample", "class": "label",
        "target_dist": [0.5, 0.5], "initial_dist": [1.0]}),
    );
    assert!(
        err.contains("`initial_dist` has 1 classes, `target_dist` 2"),
        "{err}"
    );
    let err = problem(
        serde_json::json!({"kind": "rejection_resample", "class": "label",
        "target_dist": [0.0, 0.0]}),
    );
    assert!(err.contains("sums to 0"), "{err}");
    assert!(
        StageSpec::from_json(
            serde_json::json!({"kind": "rejection_resample", "class": "label",
            "target_dist": [1.0], "bogus": 1})
        )
        .is_err()
    );
}

#[test]
fn elastic_checkpoints_follow_its_records() {
    let ds = labelled(200, &[0.5, 0.5])
        .shard(2, 0)
        .rejection_resample(RejectionResampleSpec::new("label", vec![0.2, 0.8]));
    let mut it = ds.iter().unwrap();
    it.next().unwrap().unwrap();
    let cp = it.checkpoint().unwrap();
    let elastic = cp.elastic.expect("an elastic part");
    assert_eq!(elastic.unavailable, None);
}

#[test]
fn a_pipeline_file_resamples_int32_classes_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("label,reward\n");
    for i in 0..400 {
        csv += &format!("{},{}\n", i32::from(i % 5 == 0), i % 7);
    }
    std::fs::write(dir.path().join("data.csv"), csv).unwrap();
    let file = |stages: &str| {
        format!(
            "[source]\ndir = \"{}\"\nfiles = [\"data.csv\"]\nformat = \"csv\"\nheader = true\n\
             record_defaults = [0, 0.0]\n\n[options]\nseed = 3\n\n{stages}",
            dir.path().display()
        )
    };
    let toml = file(
        r#"
[[stage]]
kind = "rejection_resample"
class = "label"
target_dist = [0.5, 0.5]
initial_dist = [0.8, 0.2]

[[stage]]
kind = "scan"
op = "count"
"#,
    );
    let rows = sluice_core::pipeline_file::PipelineFile::from_toml(&toml)
        .unwrap()
        .build()
        .unwrap()
        .collect()
        .unwrap();
    let labels: Vec<(i64, i64)> = rows
        .iter()
        .map(|e| match e.tensor("label").unwrap().data() {
            TensorData::I32(v) => (i64::from(v[0]), 0),
            other => panic!("{other:?}"),
        })
        .collect();
    check_histogram(
        &labels
            .iter()
            .enumerate()
            .map(|(i, (l, _))| (i as i64, *l))
            .collect::<Vec<_>>(),
        &[0.5, 0.5],
    );
    let counts: Vec<i64> = rows
        .iter()
        .map(|e| e.tensor("count").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!(counts, (1..=rows.len() as i64).collect::<Vec<_>>());
    // A bad weight is refused with its place in the file.
    let bad = file(
        "[[stage]]\nkind = \"rejection_resample\"\nclass = \"label\"\ntarget_dist = [0.5, -1]\n",
    );
    let err = sluice_core::pipeline_file::PipelineFile::from_toml(&bad)
        .and_then(|f| f.build())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    // Line 14, column 21: the `-1`.
    assert!(
        err.starts_with("<string>:14:21: ") && err.contains("`target_dist[1]` is -1"),
        "{err}"
    );
}
