//! Pipelines over several inputs: `choose_from` against tf.data
//! (`tests/fixtures/transformations/choose.json`, written by `generate_choose.py` there with
//! TensorFlow 2.21), and pipeline files whose source combines named `[inputs.NAME]`
//! (`zip`, `concatenate`, `sample_from`, `choose_from`).

use std::path::Path;

use serde_json::Value as Json;
use sluice_core::pipeline_file::PipelineFile;
use sluice_core::prelude::*;
use sluice_core::{Error, ErrorKind};

fn values(d: &Dataset, feature: &str) -> Vec<i64> {
    d.collect()
        .unwrap()
        .iter()
        .map(|e| e.tensor(feature).unwrap().as_i64().unwrap()[0])
        .collect()
}

fn lines(d: &Dataset) -> Vec<String> {
    d.collect()
        .unwrap()
        .iter()
        .map(|e| {
            let t = e.tensor("line").unwrap();
            String::from_utf8(t.as_bytes_list().unwrap()[0].to_vec()).unwrap()
        })
        .collect()
}

#[test]
fn choose_from_matches_tf_data() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/transformations/choose.json"
    );
    let f: Json = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = f["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    for case in cases {
        let lengths: Vec<i64> = serde_json::from_value(case["lengths"].clone()).unwrap();
        let choices: Vec<i64> = serde_json::from_value(case["choices"].clone()).unwrap();
        let repeat = case["repeat"].as_u64().unwrap();
        let datasets = lengths
            .iter()
            .enumerate()
            .map(|(i, n)| Dataset::range(100 * i as i64, 100 * i as i64 + n))
            .collect();
        let choice = Dataset::from_elements(
            choices
                .iter()
                .enumerate()
                .map(|(i, c)| Element::scalar_i64(ElementId::new(0, i as u64), "value", *c))
                .collect(),
        )
        .repeat(Some(repeat));
        let spec = ChooseFromSpec {
            stop_on_empty: case["stop_on_empty_dataset"].as_bool().unwrap(),
            ..ChooseFromSpec::default()
        };
        let got = values(&Dataset::choose_from_with(spec, datasets, &choice), "value");
        let want: Vec<i64> = serde_json::from_value(case["values"].clone()).unwrap();
        assert_eq!(got, want, "{case}");
    }
    // A choice out of range: TensorFlow's InvalidArgumentError, here an error in the
    // stream after the elements before it.
    assert_eq!(f["out_of_range"]["error"], "InvalidArgumentError");
    let d = Dataset::choose_from(vec![Dataset::range(0, 3)], &Dataset::range(0, 2));
    let mut it = d.iter().unwrap();
    assert_eq!(
        it.next()
            .unwrap()
            .unwrap()
            .tensor("value")
            .unwrap()
            .as_i64(),
        Some(&[0][..])
    );
    let err = it.next().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("selector index out of range: 1 is not in [0, 1)"),
        "{msg}"
    );
    assert!(msg.contains("choice 1"), "{msg}");
}

#[test]
fn choose_from_names_a_missing_or_mistyped_choice() {
    let choice = Dataset::range(0, 2).map(|e| {
        let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
        Ok(e.with("pick", Tensor::scalar_f32(v as f32)))
    });
    let d = Dataset::choose_from_with(
        ChooseFromSpec {
            feature: "pick".to_string(),
            ..ChooseFromSpec::default()
        },
        vec![Dataset::range(0, 3)],
        &choice,
    );
    let err = d.collect().unwrap_err().to_string();
    assert!(
        err.contains("`pick` must be an integer scalar, found f32"),
        "{err}"
    );
    let d = Dataset::choose_from(
        vec![Dataset::range(0, 3)],
        &choice.map(|e| {
            let id = e.id();
            Ok(Element::new(id))
        }),
    );
    let err = d.collect().unwrap_err().to_string();
    assert!(err.contains("has no feature `value`"), "{err}");
}

#[test]
fn choose_from_resumes_from_a_checkpoint() {
    let choice = Dataset::range(0, 30).map(|e| {
        let v = e.tensor("value").unwrap().as_i64().unwrap()[0];
        Ok(e.with("value", Tensor::scalar_i64((v * 7 + v / 3) % 3)))
    });
    let make = || {
        Dataset::choose_from(
            vec![
                Dataset::range(0, 20),
                Dataset::range(100, 120).shuffle(5),
                Dataset::range(200, 220),
            ],
            &choice,
        )
        .with_options(Options {
            seed: Some(3),
            ..Options::default()
        })
    };
    // Each `iter` of one dataset is a new epoch (reshuffled): one dataset per run here.
    let all = values(&make(), "value");
    let d = make();
    assert_eq!(all.len(), 30);
    let mut it = d.iter().unwrap();
    let head: Vec<i64> = (0..11)
        .map(|_| {
            it.next()
                .unwrap()
                .unwrap()
                .tensor("value")
                .unwrap()
                .as_i64()
                .unwrap()[0]
        })
        .collect();
    let cp = it.checkpoint().unwrap();
    let rest: Vec<i64> = make()
        .resume(&cp)
        .unwrap()
        .map(|e| e.unwrap().tensor("value").unwrap().as_i64().unwrap()[0])
        .collect();
    assert_eq!([head, rest].concat(), all);
}

/// Files `a.txt` (a0..a{n}) and `b.txt` (b0..b{m}) in a new directory.
fn two_files(n: usize, m: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, prefix: &str, k: usize| {
        let text: String = (0..k).map(|i| format!("{prefix}{i}\n")).collect();
        std::fs::write(dir.path().join(name), text).unwrap();
    };
    write("a.txt", "a", n);
    write("b.txt", "b", m);
    std::fs::write(dir.path().join("pick.csv"), "pick\n0\n1\n1\n0\n5\n").unwrap();
    dir
}

const INPUTS: &str = r#"
[inputs.a.source]
format = "text_lines"
files = "a.txt"

[inputs.b.source]
format = "text_lines"
files = "b.txt"
"#;

fn load(text: &str, dir: &Path) -> PipelineFile {
    PipelineFile::from_toml(text).unwrap().with_data_dir(dir)
}

#[test]
fn choose_from_in_a_pipeline_file() {
    let dir = two_files(3, 10);
    let text = format!(
        "{INPUTS}\n[source]\nformat = \"choose_from\"\ninputs = [\"a\", \"b\"]\n\
         choices = [0, 1, 1]\nrepeat_choices = \"forever\"\n"
    );
    let p = load(&text, dir.path());
    // tf.data's default: the source ends when a chosen input is exhausted.
    assert_eq!(
        lines(&p.build().unwrap()),
        ["a0", "b0", "b1", "a1", "b2", "b3", "a2", "b4", "b5"]
    );
    let text = text.replace(
        "\"forever\"\n",
        "\"forever\"\nstop_on_empty_dataset = false\n",
    );
    let p = load(&text, dir.path());
    assert_eq!(
        lines(&p.build().unwrap()),
        [
            "a0", "b0", "b1", "a1", "b2", "b3", "a2", "b4", "b5", "b6", "b7", "b8", "b9"
        ]
    );
    // The choices as another input's feature: an index out of range fails there.
    let text = format!(
        "{INPUTS}\n[inputs.pick.source]\nformat = \"csv\"\nfiles = \"pick.csv\"\nheader = true\n\
         record_defaults = [0]\n\n[source]\nformat = \"choose_from\"\ninputs = [\"a\", \"b\"]\n\
         choice_input = \"pick\"\nchoice_feature = \"pick\"\n"
    );
    let p = load(&text, dir.path());
    let mut it = p.build().unwrap().iter().unwrap();
    let mut got = Vec::new();
    let err = loop {
        match it.next().unwrap() {
            Ok(e) => got.push(
                String::from_utf8(e.tensor("line").unwrap().as_bytes_list().unwrap()[0].to_vec())
                    .unwrap(),
            ),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got, ["a0", "b0", "b1", "a1"]);
    assert!(err.contains("5 is not in [0, 2)"), "{err}");
}

#[test]
fn zip_concatenate_and_sample_from_in_a_pipeline_file() {
    let dir = two_files(4, 6);
    // zip: the inputs' features must not clash, so b's lines are renamed by its reader.
    let zip = format!(
        "{}\n[source]\nformat = \"zip\"\ninputs = [\"a\", \"b\"]\n",
        INPUTS.replace("files = \"b.txt\"", "files = \"b.txt\"\nname = \"other\"")
    );
    let got = load(&zip, dir.path()).build().unwrap().collect().unwrap();
    assert_eq!(got.len(), 4);
    let text = |e: &Element, f: &str| {
        String::from_utf8(e.tensor(f).unwrap().as_bytes_list().unwrap()[0].to_vec()).unwrap()
    };
    assert_eq!(
        (text(&got[3], "line"), text(&got[3], "other")),
        ("a3".into(), "b3".into())
    );

    let concat = format!(
        "{INPUTS}\n[source]\nformat = \"concatenate\"\ninputs = [\"b\", \"a\"]\n\n\
         [[stage]]\nkind = \"take\"\ncount = 8\n"
    );
    assert_eq!(
        lines(&load(&concat, dir.path()).build().unwrap()),
        ["b0", "b1", "b2", "b3", "b4", "b5", "a0", "a1"]
    );

    // sample_from: the same draws as the Rust API's, every line once.
    let sample = format!(
        "{INPUTS}\n[source]\nformat = \"sample_from\"\ninputs = [\"a\", \"b\"]\n\
         weights = [0.3, 0.7]\n\n[options]\nseed = 11\n"
    );
    let got = lines(&load(&sample, dir.path()).build().unwrap());
    let a = Dataset::text_lines(
        [dir.path().join("a.txt").display().to_string()],
        TextLinesSpec::default(),
    )
    .unwrap();
    let b = Dataset::text_lines(
        [dir.path().join("b.txt").display().to_string()],
        TextLinesSpec::default(),
    )
    .unwrap();
    let want = lines(
        &Dataset::sample_from(vec![a, b], vec![0.3, 0.7]).with_options(Options {
            seed: Some(11),
            ..Options::default()
        }),
    );
    assert_eq!(got, want);
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3", "b4", "b5"]
    );
    // Written back, read again: the same pipeline.
    let p = load(&sample, dir.path());
    let again = PipelineFile::from_toml(&toml::to_string(&p).unwrap()).unwrap();
    assert_eq!(again, p);
}

#[test]
fn inputs_have_their_own_stages_and_nest() {
    let dir = two_files(5, 5);
    let text = format!(
        "{INPUTS}\n[[inputs.a.stage]]\nkind = \"take\"\ncount = 2\n\n\
         [inputs.ab.source]\nformat = \"concatenate\"\ninputs = [\"a\", \"b\"]\n\
         [[inputs.ab.stage]]\nkind = \"skip\"\ncount = 1\n\n\
         [source]\nformat = \"choose_from\"\ninputs = [\"ab\", \"b\"]\nchoices = [1, 0]\n\
         repeat_choices = 2\n"
    );
    // ab = a0 a1 b0 b1 b2 b3 b4, less its first: a1 b0 ...; b is read on its own too.
    assert_eq!(
        lines(&load(&text, dir.path()).build().unwrap()),
        ["b0", "a1", "b1", "b0"]
    );
}

fn error(text: &str) -> String {
    match PipelineFile::from_toml(text) {
        Err(Error::PipelineFile {
            location, message, ..
        }) => format!("{}:{}: {message}", location.unwrap().0, location.unwrap().1),
        other => panic!("not a pipeline file error: {other:?}"),
    }
}

#[test]
fn mistakes_in_inputs_name_their_line() {
    let base = "[inputs.en.source]\nfiles = 'en'\n[inputs.de.source]\nfiles = 'de'\n";
    let e = error(&format!(
        "{base}[source]\nformat = 'zip'\ninputs = ['en', 'dee']\n"
    ));
    assert!(
        e.ends_with("no input named `dee`; did you mean `de`?"),
        "{e}"
    );
    assert!(e.starts_with("7:"), "{e}");
    let e = error(&format!(
        "{base}[source]\nformat = 'zip'\ninputs = ['en']\n"
    ));
    assert!(e.contains("input `de` is not read"), "{e}");
    assert!(e.starts_with("3:"), "{e}");
    let e = error(
        "[inputs.x.source]\nformat = 'concatenate'\ninputs = ['y', 'x']\n\
         [inputs.y.source]\nfiles = 'y'\n[source]\nformat = 'zip'\ninputs = ['x']\n",
    );
    assert!(
        e.contains("input `x` reads itself (through `x` -> `x`)"),
        "{e}"
    );
    let e = error(&format!(
        "{base}[source]\nformat = 'choose_from'\ninputs = ['en', 'de']\nchoices = [0, 2]\n"
    ));
    assert!(
        e.ends_with("8:15: choice 2 is not an index into `inputs` (0 to 1)"),
        "{e}"
    );
    let e = error(&format!(
        "{base}[source]\nformat = 'choose_from'\ninputs = ['en', 'de']\n"
    ));
    assert!(e.contains("one of the two"), "{e}");
    let e = error(&format!(
        "{base}[source]\nformat = 'sample_from'\ninputs = ['en', 'de']\nweights = [1.0]\n"
    ));
    assert!(e.contains("2 inputs but 1 weights"), "{e}");
    let e = error(&format!(
        "{base}[source]\nformat = 'zip'\nfiles = 'x'\ninputs = ['en', 'de']\n"
    ));
    assert!(
        e.contains("reads the pipelines named in `inputs`, not `files`"),
        "{e}"
    );
    let e = error(&format!(
        "{base}[source]\nformat = 'zip'\ninputs = ['en', 'de']\n[[stage]]\nkind = 'interleave'\n"
    ));
    assert!(
        e.contains("put `interleave` in the inputs that read files"),
        "{e}"
    );
    let e = error(&format!(
        "{base}[[inputs.de.stage]]\nkind = 'batch'\nbatch_sise = 3\n\
         [source]\nformat = 'zip'\ninputs = ['en', 'de']\n"
    ));
    assert!(
        e.starts_with("7:1: inputs.de: stage 1 (batch): unknown field `batch_sise`"),
        "{e}"
    );
    let e = error(
        "[inputs.en]\nsource = { files = 'x' }\noptions = {}\n[source]\nformat = 'zip'\ninputs = ['en']\n",
    );
    assert!(e.contains("inputs.en: unknown key `options`"), "{e}");
    let e = error("[inputs.en.source]\nfile = 'x'\n[source]\nformat = 'zip'\ninputs = ['en']\n");
    assert!(
        e.contains("inputs.en.[source]: unknown field `file`"),
        "{e}"
    );
}
