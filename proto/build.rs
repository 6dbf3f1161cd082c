//! Compiles TensorFlow's `feature.proto` and `example.proto` with prost, using protox as the
//! protobuf compiler (no system `protoc` needed), and generates the canonical protobuf JSON
//! mapping with pbjson.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "protos/tensorflow/core/example/feature.proto",
        "protos/tensorflow/core/example/example.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["protos"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let descriptor_path = out.join("tensorflow_descriptor.bin");
    std::fs::write(
        &descriptor_path,
        prost::Message::encode_to_vec(&descriptors),
    )?;

    let mut config = prost_build::Config::new();
    config
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        // Byte fields as `bytes::Bytes`, so records sliced from a file are not copied.
        .bytes(["."])
        // Ordered maps, so printed JSON is deterministic.
        .btree_map(["."])
        // `prost::Name`, so errors can name the message type.
        .enable_type_names()
        .compile_protos(&files, &["protos"])?;

    let set = std::fs::read(&descriptor_path)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .btree_map(["."])
        // pbjson prints non-finite repeated floats as `null`; `FloatList`'s serde impls are
        // in `src/example.rs`, printing them as protobuf's JSON mapping (and Python) do.
        .exclude([".tensorflow.FloatList"])
        .build(&[".tensorflow"])?;
    Ok(())
}
