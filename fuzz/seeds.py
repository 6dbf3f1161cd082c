#!/usr/bin/env python3
"""Seeds the fuzz corpora from the repository's fixtures (run from anywhere; python3, no
packages needed; with TensorFlow importable it also adds JPEG/PNG variants TF encodes).

Writes fuzz/corpus/<target>/seed-* (each seed named for its source) and the pipeline
dictionary fuzz/dict/pipeline_toml.dict (TOML keys and every stage kind of the generated
stage reference in docs/pipeline-format.md). Existing corpus files are kept: the committed
corpora grow across campaigns; minimize with `cargo fuzz cmin <target>` after seeding.
"""

import base64
import hashlib
import json
import re
import struct
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
CORPUS = ROOT / "fuzz" / "corpus"


def put(target, data, name=None):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    name = name or hashlib.sha1(data).hexdigest()[:16]
    (d / f"seed-{name}").write_bytes(data)


def tfrecords(path):
    """The records of an uncompressed TFRecord file (framing only, CRCs not checked)."""
    data, out, i = path.read_bytes(), [], 0
    while i + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, i)
        if i + 12 + n + 4 > len(data):
            break
        out.append(data[i + 12 : i + 12 + n])
        i += 16 + n
    return out


def progress(raw):
    """An elastic checkpoint's progress text: `raw` deflated (no header), base64."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    return base64.b64encode(z.compress(raw) + z.flush()).decode()


def main():
    tfr = FIX / "tfrecord"
    # TFRecord streams, as they are (every compression) and uncompressed only.
    for f in sorted(tfr.iterdir()):
        if "tfrecord" in f.name and f.stat().st_size <= 64 * 1024:
            put("tfrecord_reader", f.read_bytes(), f.name)
            if not f.name.endswith((".gz", ".zlib")):
                put("tfrecord_compressed", f.read_bytes(), f.name)

    # Examples and SequenceExamples: fixture records and the parse fixtures' records.
    parse = json.loads((FIX / "parse" / "parse.json").read_text())
    for f in ["examples.tfrecord", "sequence_examples.tfrecord"]:
        for i, r in enumerate(tfrecords(tfr / f)[:8]):
            put("example_decoder", r, f"{f}-{i}")
    for kind, target in [
        ("parse_example", "parse_example"),
        ("parse_sequence_example", "parse_sequence_example"),
    ]:
        for i, case in enumerate(parse[kind]):
            records = [base64.b64decode(r) for r in case["records"]]
            for j, r in enumerate(records):
                put("example_decoder", r, f"{kind}-{case['name']}-{j}")
                # [spec index, 1 record] + the record.
                put(target, bytes([i, 0]) + r, f"{case['name']}-{j}")
            if len(records) >= 2:
                # Two records cut at the first one's length.
                a, b = records[0], records[1]
                cut = (len(a) * 255 + len(a + b) - 1) // max(len(a + b), 1)
                put(target, bytes([i, 1, min(cut, 255)]) + a + b, f"{case['name']}-pair")

    # Pipeline files: the examples, and the TOML blocks of the docs (fragments get a source).
    for f in sorted((ROOT / "examples" / "pipelines").glob("*.toml")):
        put("pipeline_toml", f.read_text(), f.stem)
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", md.read_text(), re.S)):
            if "[source]" not in block:
                block = '[source]\nfiles = ["data/*.tfrecord"]\n\n' + block
            put("pipeline_toml", block, f"{md.stem}-{i}")
    reference = (ROOT / "docs" / "pipeline-format.md").read_text()
    kinds = sorted(set(re.findall(r"^### `(\w+)`", reference, re.M)))
    keys = sorted(set(re.findall(r"^\| `(\w+)` \|", reference, re.M)))
    words = ["[source]", "[options]", "[[stage]]", "[inputs.", "kind = ", "format = ",
             "files = ", "true", "false", "\"auto\"", "inf", "nan", "-", "= {", "[", "]",
             "'''", '"""', "\\u", "1e400", "18446744073709551616"]
    with open(ROOT / "fuzz" / "dict" / "pipeline_toml.dict", "w") as out:
        out.write("# Pipeline-file tokens: fuzz/seeds.py writes this from the stage reference.\n")
        for w in words:
            out.write(json.dumps(w) + "\n")
        for k in kinds:
            out.write(json.dumps(f'"{k}"') + "\n")
        for k in keys:
            out.write(json.dumps(k) + "\n")

    # Images: the fixture images, with the 5-byte header (mode, window fractions).
    images = [p for p in FIX.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png")]
    for tf_file in sorted(tfr.glob("images.tfrecord-*"))[:1]:
        for i, r in enumerate(tfrecords(tf_file)[:3]):
            start, end = r.find(b"\xff\xd8\xff"), r.rfind(b"\xff\xd9")
            if 0 <= start < end:
                put("image_decode", bytes([0, 40, 40, 120, 120]) + r[start : end + 2], f"tfrecord-jpeg-{i}")
    for p in sorted(images):
        put("image_decode", bytes([3, 0, 0, 255, 255]) + p.read_bytes(), p.name)
        put("image_decode", bytes([0x81, 128, 64, 20, 200]) + p.read_bytes(), p.name + "-mirror")
    try:
        import numpy as np
        import tensorflow as tf

        rng = np.random.default_rng(0)
        img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
        grey = img[:, :, :1]
        variants = {
            "progressive.jpg": tf.io.encode_jpeg(img, progressive=True),
            "grey.jpg": tf.io.encode_jpeg(grey),
            "subsampled-420.jpg": tf.io.encode_jpeg(img, chroma_downsampling=True, quality=50),
            "full-444.jpg": tf.io.encode_jpeg(img, chroma_downsampling=False, quality=95),
            "rgba.png": tf.io.encode_png(np.concatenate([img, img[:, :, :1]], axis=2)),
            "grey16.png": tf.io.encode_png(grey.astype(np.uint16) * 257),
            "grey.png": tf.io.encode_png(grey),
        }
        for name, t in variants.items():
            put("image_decode", bytes([0, 10, 20, 100, 90]) + t.numpy(), name)
    except ImportError:
        pass

    # Checkpoints: a version 2 and a version 3 one (with elastic progress from the tests).
    cp2 = {"version": 2, "fingerprint": "ab12", "seed": 42, "epoch": 0, "position": 17}
    put("checkpoint", b"\x00" + json.dumps(cp2).encode(), "v2")
    cp3 = dict(cp2, version=3, elastic={
        "fingerprint": "cd34", "layout": [2], "generation": 1, "hosts": 2, "host": 0,
        "progress": progress(bytes([1, 1, 0, 2, 3, 3]) + b"sig" + bytes([1, 0, 5, 1, 7, 0])),
    })
    put("checkpoint", b"\x00" + json.dumps(cp3).encode(), "v3-elastic")
    cp3u = dict(cp3, elastic=dict(cp3["elastic"], progress=None, unavailable="a take stage"))
    del cp3u["elastic"]["progress"]
    put("checkpoint", b"\x00" + json.dumps(cp3u).encode(), "v3-unavailable")
    put("checkpoint", b"\x01" + progress(bytes([1, 0, 0])).encode(), "progress-empty")
    put("checkpoint", b"\x01" + cp3["elastic"]["progress"].encode(), "progress")

    # CSV: the format fixtures (uncompressed), with a few spec choices.
    for f in sorted((FIX / "formats").glob("*.csv")) + [FIX / "tutorials" / "petfinder-mini.csv"]:
        text = f.read_bytes()[:4096]
        for mode in [0, 1, 0x20, 0x41, 0x64, 0x12]:
            put("csv", bytes([mode]) + text, f"{f.name}-{mode:02x}")

    # Parquet and Arrow IPC: the columnar fixtures.
    for f in sorted((FIX / "columnar").rglob("*")):
        if f.suffix == ".parquet":
            put("columnar", b"\x00" + f.read_bytes(), f.name)
            put("columnar", b"\x02" + f.read_bytes(), f.name + "-nulls")
        elif f.suffix == ".arrow" and f.stat().st_size < 64 * 1024:
            put("columnar", b"\x01" + f.read_bytes(), f.name)

    # TFDS metadata: each version's files and a few split specs.
    for v in sorted((FIX / "tfds" / "DATA_DIR" / "toy").iterdir()):
        info = (v / "dataset_info.json").read_bytes()
        features = (v / "features.json").read_bytes()
        for split in ["train", "train[:50%]+test[-2:]", "test[1shard:]", "all", "train[10:20]"]:
            put("tfds_metadata", info + b"\x00" + features + b"\x00" + split.encode(), f"{v.name}-{split}")


def plugin_seeds():
    """Seeds of the plugin ABI targets (`plugin_output`, `plugin_wasm`): output batch buffers
    as the SDK's encoder writes them (ABI.md section 5), lent-path scripts, metadata, and
    scripts of the WASM guest (see the targets' doc comments for the layouts)."""

    def tensor(name, dtype, dims, values, at):
        # `at`: the tensor's offset in the buffer (numeric payloads are 8-byte aligned).
        b = struct.pack("<I", len(name)) + name.encode() + struct.pack("<BBH", dtype, len(dims), 0)
        b += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<Q", len(values))
        if dtype == 6:
            return b + b"".join(struct.pack("<Q", len(v)) + v for v in values)
        b += bytes(-(at + len(b)) % 8)
        fmt = {1: "B", 2: "i", 3: "q", 4: "f", 5: "d"}[dtype]
        return b + b"".join(struct.pack("<" + fmt, v) for v in values)

    def batch(parents, elements):
        # elements: None (pass-through) or a list of (name, dtype, dims, values).
        b = b"SLB1" + struct.pack("<I", len(parents)) + b"".join(struct.pack("<I", p) for p in parents)
        for e in elements:
            if e is None:
                b += struct.pack("<I", 0xFFFFFFFF)
                continue
            b += struct.pack("<I", len(e))
            for t in e:
                b += tensor(*t, len(b))
        return b

    x = lambda v: ("x", 3, [], [v])
    image = lambda v: ("image", 1, [2, 2, 1], [v] * 4)
    out = {
        "map-pass": (0x08, b"\x00", batch([0, 1], [None, None])),
        "map-x": (0x08, b"\x01\x98", batch([0, 1], [[x(5)], [x(6)]])),
        "map-image-f32": (0x08, b"\x00", batch([0, 1], [[("image", 4, [2, 2, 1], [0.5] * 4)], []])),
        "filter": (0x0D, b"\x00", batch([0, 2], [None, None])),
        "flat-map": (0x0A, b"\x00", batch([0, 0, 1], [[x(1)], [image(2)], None])),
        "batch-bytes": (0x33, b"\x10", batch([0, 1], [[("label", 6, [2], [b"a", b"bc"])], [x(3)]])),
    }
    for name, (a, b, buf) in out.items():
        put("plugin_output", bytes([0, a]) + b + b"\x00" + buf, "wire-" + name)
    put("plugin_output", bytes([0, 0x08, 0, 162]) + b"message", "wire-plugin-error")
    # Lent: a map writing `x` (i64 scalar) and `image` (u8 2x2x1); a filter's keep flags.
    ops = bytes([2, 0, 0, 0, 3, 0, 7, 0, 1, 1, 1, 3, 2, 2, 1, 9])
    put("plugin_output", bytes([2, 0x08, 0]) + ops + b"\x00\x00", "lent-map")
    put("plugin_output", bytes([2, 0x09, 0, 2, 1, 1, 3, 0, 0, 0]), "lent-filter")
    put("plugin_output", bytes([2, 0x08, 0, 0, 200, 0]) + batch([0, 1], [None, None]), "lent-declined")
    for name, meta in {
        "map": {"abi_version": 1, "name": "m", "version": "1", "kind": "map"},
        "full": {"abi_version": 2, "name": "n", "version": "0.1.0", "kind": "filter", "description": "d",
                 "inputs": [{"name": "image", "dtype": "f32", "rank": 3}], "outputs": [{"name": "image"}]},
    }.items():
        put("plugin_output", b"\x03" + json.dumps(meta).encode(), "metadata-" + name)

    # The WASM guest: [variant, n] + ops of 5 bytes (mode, i32), then free bytes.
    op = lambda mode, v=0: struct.pack("<Bi", mode, v)
    honest = op(0)
    echo = batch([0, 1], [[x(42)], None])
    script = honest * 3 + op(2, 32) + op(1, len(echo))
    script += bytes(32 - len(script)) + echo
    seeds = {
        "honest": bytes([0, 2]),
        "output-in-script": bytes([0, 2]) + script,
        "plugin-error": bytes([0, 2]) + honest * 2 + op(1, 2),
        "init-trap": bytes([0, 1]) + op(3),
        "process-timeout": bytes([2, 2]) + honest * 2 + op(4),
        "alloc-memory-limit": bytes([3, 2]) + honest + op(7),
        "output-out-of-bounds": bytes([4, 2]) + honest * 3 + op(1, 0x7FFFFFF0),
        "x-map": bytes([1, 3]),
    }
    for name, data in seeds.items():
        put("plugin_wasm", data, name)


if __name__ == "__main__":
    main()
