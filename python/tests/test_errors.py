"""Every exception type from a real bad input, with the context the Rust error carries;
Ctrl-C; closing and dropping iterators."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import sluice
from conftest import REPO


def test_data_loss_names_file_offset_and_record(fixtures):
    path = str(fixtures / "corrupt_data_crc.tfrecord")
    it = sluice.tfrecord(path).iter()
    assert next(it)["record"].item()  # TensorFlow reads 1 record before the error
    with pytest.raises(sluice.DataLossError) as info:
        next(it)
    e = info.value
    assert "corrupted record at 268" in str(e)  # TensorFlow's words
    assert e.kind == "DataLoss"
    assert e.file == path and e.offset == 268 and e.record_index == 1
    assert isinstance(e, sluice.SluiceError)
    # The iterator ended with the error.
    with pytest.raises(StopIteration):
        next(it)


def test_truncated_file(fixtures):
    with pytest.raises(sluice.DataLossError, match="truncated record at 15224"):
        sluice.tfrecord(str(fixtures / "truncated.tfrecord")).collect()


def test_skip_policy_counts_what_it_drops(fixtures):
    p = sluice.tfrecord(str(fixtures / "corrupt_data_crc.tfrecord")).options(error_policy="skip")
    records = p.collect()
    assert len(records) >= 1
    assert p.stats()["skipped"] >= 1


def test_invalid_argument_from_toml_has_line_and_column():
    with pytest.raises(sluice.InvalidArgumentError) as info:
        sluice.Pipeline.from_toml("[source]\nfiles = ['x']\n[[stage]]\nkind = 'batch'\nbatchsize = 8\n")
    e = info.value
    assert (e.line, e.column) == (5, 1)
    assert "did you mean `batch_size`?" in str(e)
    assert isinstance(e, ValueError)


def test_invalid_argument_from_builder(fixtures):
    p = sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
    with pytest.raises(sluice.InvalidArgumentError, match="batch_size"):
        p.batch(0)
    with pytest.raises(sluice.InvalidArgumentError, match="cpu_budget"):
        p.options(cpu_budget=0)
    with pytest.raises(sluice.InvalidArgumentError, match="unknown"):
        p.stage("batchh", batch_size=3)
    with pytest.raises(sluice.InvalidArgumentError, match="interleave"):
        p.parse_example({"label": "int64"}).interleave().build()


def test_not_found(tmp_path):
    with pytest.raises(sluice.NotFoundError) as info:
        sluice.tfrecord(str(tmp_path / "nothing-*.tfrecord")).build()
    assert isinstance(info.value, FileNotFoundError)


def test_invalid_data_names_the_feature(fixtures):
    p = sluice.tfrecord(str(fixtures / "images.tfrecord-*")).parse_example({"missing": "int64"})
    with pytest.raises(sluice.InvalidDataError) as info:
        p.collect()
    e = info.value
    assert e.feature == "missing"
    assert e.file is not None and e.file.endswith("images.tfrecord-00000-of-00004")
    assert e.offset == 0 and e.record_index == 0
    assert "is required but could not be found" in str(e)


def test_image_error(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "examples.tfrecord"))
        .parse_example({"id": "string"})
        .image_ops([{"op": "decode"}], input="id")
    )
    with pytest.raises(sluice.ImageError) as info:
        p.collect()
    assert info.value.file is not None and info.value.offset == 0


def test_resource_exhausted(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
        .cache()
        .options(ram_budget="1KiB")
    )
    with pytest.raises(sluice.ResourceExhaustedError, match="(?i)ram"):
        p.collect()


def test_plugin_error(noise_plugin):
    p = sluice.from_tensor_slices({"image": np.zeros((4, 8, 8, 3), np.float32)})
    with pytest.raises(sluice.PluginError) as info:
        p.map_plugin(noise_plugin, config={"sigma": -1.0}).build()
    assert str(noise_plugin) in str(info.value)
    # The plugin declares what it does: a map plugin is no filter.
    with pytest.raises(sluice.PluginError, match="is a map plugin; run it with map_plugin"):
        p.filter_plugin(noise_plugin, config={"sigma": 0.5}).build()
    # A working one, for contrast.
    out = p.map_plugin(noise_plugin, config={"sigma": 0.5, "p": 1.0}).options(seed=1).collect()
    assert any(float(np.abs(e["image"]).sum()) > 0 for e in out)


def test_failed_precondition(fixtures):
    p = sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
    it = p.iter()
    next(it)
    checkpoint = it.checkpoint()
    with pytest.raises(sluice.FailedPreconditionError):
        p.take(3).iter(resume=checkpoint)
    with pytest.raises(sluice.FailedPreconditionError):
        p.iter(resume=b"not a checkpoint")


def test_io_error(fixtures, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    p = sluice.tfrecord(str(fixtures / "images.tfrecord-*")).cache(blocker / "cache")
    with pytest.raises(sluice.IoError) as info:
        p.collect()
    assert isinstance(info.value, OSError)


def test_user_code_error_keeps_the_cause():
    def boom(e):
        if int(e["x"]) == 3:
            raise KeyError("no luck at 3")
        return e

    p = sluice.from_tensor_slices({"x": np.arange(5)}).map(boom)
    with pytest.raises(sluice.UserCodeError) as info:
        p.collect()
    e = info.value
    assert isinstance(e.__cause__, KeyError)
    assert "no luck at 3" in str(e)
    assert e.stage is not None and "map" in e.stage


def test_map_returning_bad_types():
    p = sluice.from_tensor_slices({"x": np.arange(3)})
    with pytest.raises(sluice.InvalidArgumentError, match="dict"):
        p.map(lambda e: 3).collect()
    with pytest.raises(sluice.InvalidArgumentError, match="bool"):
        p.map(lambda e: {"b": np.array([True])}).collect()


def test_close_stops_and_ends(fixtures):
    p = sluice.tfrecord(str(fixtures / "images.tfrecord-*")).repeat().prefetch(4)
    it = p.iter()
    next(it)
    it.close()
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(RuntimeError):
        it.checkpoint()


def test_dropping_iterators_stops_their_threads(fixtures):
    psutil = pytest.importorskip("psutil")
    proc = psutil.Process()
    p = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
        .interleave(cycle_length=4, num_parallel=4)
        .repeat()
        .parse_example({"image": "string"})
        .image_ops([{"op": "decode", "channels": 3}], num_parallel=3)
        .prefetch(8)
    )
    before = proc.num_threads()
    for _ in range(5):
        it = p.iter()
        for _ in range(10):
            next(it)
        assert proc.num_threads() > before
        del it
    deadline = time.monotonic() + 5
    while proc.num_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.num_threads() == before


INTERRUPT = textwrap.dedent(
    """
    import sys, time, sluice
    fixtures = sys.argv[1]
    # Slow batches: 4096 decoded-and-resized images each, forever.
    p = (sluice.tfrecord(fixtures + "/images.tfrecord-*").repeat()
         .parse_example({"image": "string"})
         .image_ops([{"op": "decode", "channels": 3},
                     {"op": "resize", "height": 256, "width": 256}])
         .batch(4096))
    it = p.iter()
    print("ready", flush=True)
    try:
        next(it)
        print("finished a batch before the interrupt", flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
    """
)


def test_ctrl_c_interrupts_a_waiting_next(fixtures):
    # The child gets SIGINT's default action back: a test run started in the background by
    # a shell without job control inherits SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler at all.
    proc = subprocess.Popen(
        [sys.executable, "-c", INTERRUPT, str(fixtures)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)  # inside next(), waiting on the batch
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # The line the child printed when its KeyboardInterrupt arrived (anything else on its
    # stdout is shown if it is missing).
    lines = [line.split() for line in out.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1 and len(lines[0]) == 2, (out, err)
    latency = float(lines[0][1]) - sent
    # The target is 100 ms (the wait polls every 20 ms); a loaded CI machine gets slack.
    assert latency < 0.5, f"KeyboardInterrupt took {latency * 1000:.0f} ms"
