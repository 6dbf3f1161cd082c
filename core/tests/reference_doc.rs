//! `docs/pipeline-format.md`'s stage reference is generated from the stage registry: this
//! test fails when the two differ, and `SLUICE_BLESS=1` rewrites the block.

use std::path::PathBuf;

const BEGIN: &str = "<!-- BEGIN GENERATED: stage reference.";
const END: &str = "<!-- END GENERATED: stage reference -->";

#[test]
fn the_stage_reference_in_the_docs_is_generated_from_the_registry() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/pipeline-format.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let begin = doc.find(BEGIN).expect("the BEGIN GENERATED marker");
    let body_start = begin + doc[begin..].find("-->\n").expect("the marker's end") + 4;
    let end = doc.find(END).expect("the END GENERATED marker");
    let generated = sluice_core::registry::reference_markdown();
    let wanted = format!("\n{generated}\n");
    if doc[body_start..end] == wanted {
        return;
    }
    if std::env::var_os("SLUICE_BLESS").is_some() {
        let updated = format!("{}{wanted}{}", &doc[..body_start], &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "docs/pipeline-format.md's stage reference is out of date: run \
         `SLUICE_BLESS=1 cargo test -p sluice-core --test integration reference_doc` and commit the result"
    );
}
