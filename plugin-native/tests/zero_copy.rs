//! Copies per image across the native ABI, counted: the `probe` test plugin reports where
//! its kernel read each image and where it wrote the result, a [`Spy`] sees the batch
//! buffers of the wire path and the lent views and buffers of the lent path, and the test
//! follows each image from the pipeline's tensor to the plugin's kernel and back.
//!
//! A copy is a move of an image's values from one buffer to another. Along the way in
//! (pipeline tensor → [wire input buffer] → what the kernel read) and the way out (what the
//! kernel wrote → [wire output buffer] → the output tensor), every step between two
//! different buffers is one copy; a buffer that is found again at the next step (the same
//! address, alive at both ends) was not copied.
//!
//! | path | in | out | copies per image |
//! |---|---|---|---|
//! | wire (version 1, or `CallPath::Wire`) | host encodes, SDK decodes | SDK encodes, host decodes | 4 |
//! | lent, plugin implements `map_lent` | the kernel reads the pipeline's buffer | the kernel writes the host's buffer, which becomes the tensor | 0 |
//! | lent, plugin implements only `map` (the SDK's default) | SDK copies into an owned element | SDK copies the result into the host's buffer | 2 |

use std::sync::Arc;

use serde_json::json;
use sluice_core::prelude::*;
use sluice_plugin_host::testing::{Seen, Spy, image_elements, run_stage};
use sluice_plugin_host::{CallPath, PluginStage};
use sluice_plugin_native::NativePlugin;

/// The bytes of a tensor's values and their address.
fn values(t: &Tensor) -> (&[u8], usize) {
    match t.data() {
        TensorData::U8(v) => (v.as_ref(), v.as_ptr() as usize),
        TensorData::F32(v) => (bytemuck::cast_slice(v), v.as_ptr() as usize),
        other => panic!("{other:?}"),
    }
}

fn scalar(e: &Element, name: &str) -> usize {
    e.tensor(name).unwrap().as_i64().unwrap()[0] as usize
}

/// Where `needle` starts in the spied buffer `(address, bytes)`, as an address.
fn find(buffer: &Option<(usize, Vec<u8>)>, needle: &[u8]) -> Option<usize> {
    let (address, bytes) = buffer.as_ref()?;
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| address + at)
}

/// The number of steps between different buffers along `chain`.
fn steps(chain: &[usize]) -> usize {
    chain.windows(2).filter(|w| w[0] != w[1]).count()
}

/// Copies of each element's image in one call, on the way in and out.
fn copies(input: &[Element], output: &[Element], seen: &Seen) -> Vec<(usize, usize)> {
    input
        .iter()
        .zip(output)
        .map(|(i, o)| {
            let (in_bytes, pipeline_in) = values(i.tensor("image").unwrap());
            let (out_bytes, pipeline_out) = values(o.tensor("image").unwrap());
            let mut way_in = vec![pipeline_in];
            way_in.extend(find(&seen.wire_in, in_bytes));
            way_in.push(scalar(o, "seen_in"));
            let mut way_out = vec![scalar(o, "wrote_out")];
            way_out.extend(find(&seen.wire_out, out_bytes));
            way_out.push(pipeline_out);
            (steps(&way_in), steps(&way_out))
        })
        .collect()
}

fn probe() -> Arc<Spy> {
    let path = sluice_plugin_host::testing::cdylib_beside_exe("sluice_test_plugin_probe").unwrap();
    Spy::new(NativePlugin::load(path).unwrap())
}

#[test]
fn copies_per_image_wire_4_lent_0_sdk_default_2() {
    let spy = probe();
    for u8_images in [false, true] {
        // Distinct images, so each is found by its bytes in the batch buffers.
        let input = image_elements(6, [4, 5, 3], u8_images);
        for (path, config, want) in [
            (CallPath::Wire, json!({}), (2, 2)),
            (CallPath::Lent, json!({"lent": true}), (0, 0)),
            (CallPath::Lent, json!({"lent": false}), (1, 1)),
        ] {
            let stage = PluginStage::with_path(spy.clone(), &config, path).unwrap();
            let _ = spy.take();
            let output = run_stage(&stage, &input, 0, 6, 3).unwrap();
            let seen = spy.take();
            assert_eq!(seen.len(), 1, "one call");
            let seen = &seen[0];
            assert_eq!(seen.wire_in.is_some(), path == CallPath::Wire);
            let counted = copies(&input, &output, seen);
            assert_eq!(
                counted,
                vec![want; 6],
                "{path:?} {config} u8 {u8_images}: (in, out) copies per image"
            );
            let total = want.0 + want.1;
            eprintln!("{path:?} {config} u8 {u8_images}: {total} copies per image");
            // The values are right on every path.
            for (i, o) in input.iter().zip(&output) {
                let (a, b) = (i.tensor("image").unwrap(), o.tensor("image").unwrap());
                match (a.data(), b.data()) {
                    (TensorData::U8(a), TensorData::U8(b)) => {
                        assert!(a.iter().zip(b.iter()).all(|(x, y)| x.wrapping_add(1) == *y))
                    }
                    (TensorData::F32(a), TensorData::F32(b)) => {
                        assert!(a.iter().zip(b.iter()).all(|(x, y)| x + 1.0 == *y))
                    }
                    other => panic!("{other:?}"),
                }
            }
            if path == CallPath::Lent {
                // What the host lent is the pipeline's memory, and each output tensor is a
                // buffer the host handed out.
                for (n, (i, o)) in input.iter().zip(&output).enumerate() {
                    assert_eq!(seen.lent[n][0].1, values(i.tensor("image").unwrap()).1);
                    let image = values(o.tensor("image").unwrap()).1;
                    assert!(
                        seen.allocated
                            .iter()
                            .any(|(e, name, a)| *e as usize == n && name == "image" && *a == image),
                        "element {n}: {:?}",
                        seen.allocated
                    );
                }
            }
        }
    }
}
