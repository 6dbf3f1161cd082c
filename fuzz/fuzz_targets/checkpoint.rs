//! Checkpoint decoding: arbitrary text through `Checkpoint::from_json` (what `load` and a
//! resume read), and the elastic part's compact progress (deflated, base64) through the
//! decoder a resume uses (`sluice_core::fuzzing::progress_round_trip`). The first byte
//! chooses which: the whole checkpoint, or the text as progress. Checks: no panic (the
//! progress decoder caps what it inflates); errors are `Error::Checkpoint`; a checkpoint
//! that loads prints to JSON that loads to the same checkpoint, and its progress, when it
//! has one, decodes or fails the same way; decoded progress re-encodes to a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_core::{Checkpoint, Error};

fn progress(text: &str) {
    if let Ok(again) = sluice_core::fuzzing::progress_round_trip(text) {
        let third = sluice_core::fuzzing::progress_round_trip(&again)
            .unwrap_or_else(|e| panic!("re-encoded progress does not decode: {e}"));
        assert_eq!(third, again, "re-encoding is a fixed point");
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, rest @ ..] = data else { return };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if mode & 1 == 1 {
        progress(text);
        return;
    }
    match Checkpoint::from_json(text) {
        Ok(cp) => {
            let json = cp.to_json();
            let back = Checkpoint::from_json(&json)
                .unwrap_or_else(|e| panic!("own JSON must load: {e}: {json}"));
            assert_eq!(back, cp);
            assert_eq!(back.to_json(), json);
            if let Some(p) = cp.elastic.as_ref().and_then(|e| e.progress.as_deref()) {
                progress(p);
            }
            let _ = cp.next_epoch();
        }
        Err(e) => assert!(matches!(e, Error::Checkpoint(_)), "{e:?}"),
    }
});
