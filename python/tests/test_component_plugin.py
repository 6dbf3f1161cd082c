"""A WASM plugin built as a component (sdk/WIT.md) through `map_plugin`, unchanged: the
loader tells it from a core module by its header, and the outputs are the core module's."""

import numpy as np

import sluice


def test_a_component_gives_the_core_modules_outputs(solarize_wasm, solarize_component):
    assert solarize_component.suffix == ".wasm"
    assert solarize_component.read_bytes()[4:8] == b"\x0d\x00\x01\x00"  # a component
    assert solarize_wasm.read_bytes()[4:8] == b"\x01\x00\x00\x00"  # a core module
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(24, 6, 5, 3), dtype=np.uint8)
    labels = np.arange(24, dtype=np.int64)
    config = {"p_gray": 0.5, "p_solarize": 0.5}

    def run(plugin):
        return (
            sluice.from_tensor_slices({"image": images, "label": labels})
            .map_plugin(plugin, config=config, limits={"memory": "64MiB"})
            .options(seed=11)
            .collect()
        )

    component = run(solarize_component)
    core = run(solarize_wasm)
    assert len(component) == len(core) == 24
    changed = 0
    for c, m, original in zip(component, core, images):
        np.testing.assert_array_equal(np.asarray(c["image"]), np.asarray(m["image"]))
        assert int(np.asarray(c["label"])) == int(np.asarray(m["label"]))
        changed += not np.array_equal(np.asarray(c["image"]), original)
    assert changed > 0, "the plugin changed some images"


def test_a_plugin_written_in_python_runs_in_a_python_pipeline(python_solarize, solarize_component):
    """The Python-written gray_solarize, compiled to a sandboxed component, in a pipeline
    driven from Python: the Rust component's outputs, bit for bit, at any parallelism."""
    assert python_solarize.read_bytes()[4:8] == b"\x0d\x00\x01\x00"
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(40, 8, 7, 3), dtype=np.uint8)
    config = {"p_gray": 0.5, "p_solarize": 0.5, "threshold": 100}

    def run(plugin, parallel):
        return [
            np.asarray(e["image"])
            for e in sluice.from_tensor_slices({"image": images})
            .map_plugin(plugin, config=config, num_parallel=parallel, chunk_size=4)
            .options(seed=5)
            .collect()
        ]

    python = run(python_solarize, 2)
    rust = run(solarize_component, 1)
    assert len(python) == len(rust) == 40
    for p, r in zip(python, rust):
        np.testing.assert_array_equal(p, r)
    assert sum(not np.array_equal(p, i) for p, i in zip(python, images)) > 0
