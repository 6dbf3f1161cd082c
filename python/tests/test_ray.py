"""Sluice on Ray (`sluice.ray`), on a real local Ray and on a real two-node Ray cluster on
127.0.0.1: read tasks running Sluice shards, a WASM plugin in `map_batches` actors, TFRecord
shards written and read back; every record exactly once (file- and record-level task
counts, and when the worker of a read task is killed midway and Ray retries it); errors
naming the file and offset."""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import sluice
from conftest import run_python

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ray[data]'); CI installs it")
import sluice.ray  # noqa: E402

# The functions of this module that run in Ray workers (Python maps of the read pipelines)
# travel by value: the workers cannot import the tests.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

FEATURES = {"image": "string", "label": "int64"}
SHAPE = [32, 48, 3]  # every image of the fixtures


def _source(fixtures):
    return sluice.tfrecord(str(fixtures / "images.tfrecord-*")).parse_example(FEATURES)


def _steps(wasm):
    """Decode, then the WASM plugin solarizing every image (values >= 128 become 255 - x)."""
    return (
        sluice.ray.stages()
        .image_ops([{"op": "decode", "channels": 3}])
        .map_plugin(wasm, config={"p_gray": 0.0, "p_solarize": 1.0}, limits={"memory": "64MiB"})
        .options(seed=3)
    )


def _digest(label, image):
    return int(label), hashlib.sha256(np.ascontiguousarray(image, dtype=np.uint8).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def expected(fixtures):
    """(label, digest of the solarized image) of every record, computed here with NumPy from
    Sluice's decode (not through Ray or the plugin)."""
    got = _source(fixtures).image_ops([{"op": "decode", "channels": 3}]).collect()
    digests = []
    for e in got:
        image = e["image"]
        digests.append(_digest(e["label"], np.where(image >= 128, 255 - image, image)))
    assert len(digests) == 32 and len(set(digests)) == 32  # every record is told apart
    return collections.Counter(digests)


def _read_back(paths):
    spec = {"image": {"dtype": "int64", "shape": SHAPE}, "label": "int64"}
    rows = sluice.tfrecord([str(p) for p in paths]).parse_example(spec).collect()
    return collections.Counter(_digest(e["label"], e["image"]) for e in rows)


def _pipeline_through_ray(fixtures, wasm, out_dir, num_tasks, **read_options):
    """read (num_tasks tasks) -> map_batches(decode, WASM solarize) -> 3 TFRecord shards."""
    ds = sluice.ray.read(_source(fixtures), num_tasks=num_tasks, **read_options)
    ds = sluice.ray.map_batches(ds, _steps(wasm), batch_size=8, concurrency=1)
    written = sluice.ray.write_tfrecord(ds, out_dir, num_shards=3)
    names = [os.path.basename(p) for p, _ in written]
    assert names == [f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert sorted(os.listdir(out_dir)) == names  # nothing else under a final name
    assert sum(n for _, n in written) == 32
    return [p for p, _ in written]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=128 << 20,
             configure_logging=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("num_tasks,level", [(2, "file"), (3, "record")])
def test_read_map_write_every_record_once(local_ray, fixtures, solarize_wasm, expected, tmp_path,
                                          num_tasks, level):
    # 4 files: 2 tasks get 2 files each (file level); 3 tasks would get 2, 1 and 1, beyond
    # 1.25x, so each reads every file and keeps its records (record level).
    explain = _source(fixtures).with_shard(num_tasks, 0).explain()
    assert ("shard_pushdown" in explain) == (level == "file")
    paths = _pipeline_through_ray(fixtures, solarize_wasm, tmp_path / "out", num_tasks)
    assert _read_back(paths) == expected


def test_transform_draws_are_keyed_by_row_not_position(fixtures):
    # A SluiceTransform (as a map_batches actor holds it, here called directly): a row gets
    # the same random crop in any batch and position; another epoch draws anew.
    records = [e["record"].item() for e in sluice.tfrecord(str(fixtures / "images.tfrecord-*"))][:6]
    steps = (sluice.ray.stages().parse_example(FEATURES)
             .image_ops([{"op": "decode", "channels": 3},
                         {"op": "random_crop", "height": 16, "width": 16}])
             .options(seed=3))

    def crops(transform, rows):
        (out,) = transform({"record": np.array(rows, dtype=object)})
        return out["image"]

    transform = sluice.ray.SluiceTransform(steps)
    whole = crops(transform, records)
    assert np.array_equal(crops(transform, records[::-1]), whole[::-1])
    assert np.array_equal(crops(transform, records[2:4]), whole[2:4])
    assert not np.array_equal(crops(sluice.ray.SluiceTransform(steps, epoch=1), records), whole)
    with pytest.raises(sluice.InvalidArgumentError, match="element-wise"):
        sluice.ray.SluiceTransform(sluice.ray.stages().shuffle(8))


def _kill_first_attempt(marker, pids, at, element):
    """A Python map in the read pipeline: records this worker's pid and, on the first
    attempt only (the marker, created atomically, says which), kills its own worker with
    SIGKILL at the `at`-th element, after earlier blocks were already given to Ray."""
    with open(pids, "a") as f:
        f.write(f"{os.getpid()}\n")
    _kill_first_attempt.seen = getattr(_kill_first_attempt, "seen", 0) + 1
    if _kill_first_attempt.seen == at:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return element
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)
    return element


def test_killed_read_worker_is_retried_and_every_record_is_read_once(
        local_ray, fixtures, solarize_wasm, expected, tmp_path):
    marker, pids = tmp_path / "killed", tmp_path / "pids"
    kill = functools.partial(_kill_first_attempt, str(marker), str(pids), 11)
    pipeline = _source(fixtures).map(kill)
    # One task reading all 32 records in blocks of 4: 2 blocks are with Ray when it dies.
    ds = sluice.ray.read(pipeline, num_tasks=1, rows_per_block=4)
    ds = sluice.ray.map_batches(ds, _steps(solarize_wasm), batch_size=8, concurrency=1)
    written = sluice.ray.write_tfrecord(ds, tmp_path / "out", num_shards=3)
    assert marker.exists()  # the first attempt was killed
    workers = set(pids.read_text().split())
    assert len(workers) == 2  # and a second worker process read the shard again
    assert _read_back([p for p, _ in written]) == expected


def test_killed_write_task_is_retried_and_each_shard_is_whole(local_ray, tmp_path):
    # 3 shards of 40 random 96x96 RGB images; the write task of shard 1 is SIGKILLed while its
    # hidden temporary file (".NAME.partial-PID-N", PID the writing worker's) exists.
    images = np.random.default_rng(7).integers(0, 256, size=(120, 96, 96, 3), dtype=np.uint8)
    ds = ray.data.from_items([{"id": i, "image": images[i]} for i in range(len(images))])
    out = tmp_path / "out"
    out.mkdir()
    pattern = re.compile(r"\.part-00001-of-00003\.tfrecord\.partial-(\d+)-\d+$")
    killed_midway = []
    stop = threading.Event()

    def watch():
        while not stop.is_set() and not killed_midway:
            for name in os.listdir(out):
                match = pattern.match(name)
                if match:
                    os.kill(int(match.group(1)), signal.SIGKILL)
                    # Still there after the kill: the writer died before it could commit.
                    if (out / name).exists():
                        killed_midway.append(name)
                    break
            time.sleep(0.0002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        written = sluice.ray.write_tfrecord(ds, out, num_shards=3)
    finally:
        stop.set()
        watcher.join()
    assert killed_midway, "the write task of shard 1 finished before it could be killed"
    names = [f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    assert [os.path.basename(p) for p, _ in written] == names
    assert sorted(os.listdir(out)) == names  # the killed attempt's temporary file is gone
    spec = {"id": "int64", "image": {"dtype": "int64", "shape": [96, 96, 3]}}
    rows = sluice.tfrecord([p for p, _ in written]).parse_example(spec).collect()
    assert sorted(int(e["id"]) for e in rows) == list(range(len(images)))
    for e in rows:
        assert np.array_equal(e["image"], images[int(e["id"])])


def test_error_in_a_read_task_names_the_file_and_offset(local_ray, fixtures):
    bad = fixtures / "corrupt_data_crc.tfrecord"
    ds = sluice.ray.read(sluice.tfrecord(str(bad)))
    with pytest.raises(Exception) as info:
        ds.materialize()
    text = str(info.value)
    assert str(bad) in text and "corrupted record at 268" in text, text
    # Ray raises its task error as an instance of the cause's class too.
    assert isinstance(info.value, sluice.DataLossError), type(info.value).mro()


def _ray_cli():
    return os.path.join(os.path.dirname(sys.executable), "ray")


def _start_node(args, log):
    """`ray start ARGS --block` in a session of its own: every process of the node (GCS,
    raylet, workers) is in its process group, which the fixture ends by id."""
    return subprocess.Popen([_ray_cli(), "start", "--block", *args], stdout=log, stderr=log,
                            start_new_session=True)


def _stop_node(proc):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=2)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def two_node_cluster(local_ray, tmp_path):
    """A head node and one worker node started with `ray start` (1 CPU each, small object
    stores, their own temp dir; Ray gives both this machine's address), stopped at the end.
    The head has the custom resource `head`, the worker node `worker`. Yields the address."""
    ray.shutdown()  # the local Ray of the other tests
    temp = tempfile.mkdtemp(prefix="sr")  # short: Ray's socket paths must fit
    port = 6390 + os.getpid() % 500
    common = ["--num-cpus=1", "--object-store-memory=100000000", "--disable-usage-stats",
              f"--temp-dir={temp}", "--node-ip-address=127.0.0.1"]
    log_path = tmp_path / "ray-nodes.log"
    log = open(log_path, "w")
    nodes = [_start_node(["--head", f"--port={port}", "--include-dashboard=false",
                          '--resources={"head": 1}', *common], log)]
    try:
        time.sleep(3)
        nodes.append(_start_node([f"--address=127.0.0.1:{port}", '--resources={"worker": 1}',
                                  *common], log))
        yield f"127.0.0.1:{port}"
    finally:
        for node in reversed(nodes):
            _stop_node(node)
        log.close()


# The driver of the two-node test, in a process of its own (a Ray driver that already ran a
# local Ray cannot join another cluster cleanly): reads on the worker node (2 tasks, each
# row tagged with the node that read it), runs the WASM plugin in an actor on the head node,
# writes 3 shards; prints the worker node's id.
TWO_NODE_DRIVER = """
import json, os, sys, time
import numpy as np, ray, sluice, sluice.ray
address, files, wasm, out = sys.argv[1:5]
deadline = time.monotonic() + 90
while True:
    try:
        ray.init(address=address, configure_logging=False, log_to_driver=False)
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(1)
while len([n for n in ray.nodes() if n["Alive"]]) < 2:
    assert time.monotonic() < deadline, "the worker node did not join"
    time.sleep(0.5)
worker = [n["NodeID"] for n in ray.nodes() if n["Alive"] and "worker" in n["Resources"]][0]

def tag(element):
    element["node"] = np.frombuffer(ray.get_runtime_context().get_node_id().encode(), np.uint8)
    return element

source = sluice.tfrecord(files).parse_example({"image": "string", "label": "int64"}).map(tag)
steps = (sluice.ray.stages().image_ops([{"op": "decode", "channels": 3}])
         .map_plugin(wasm, config={"p_gray": 0.0, "p_solarize": 1.0}).options(seed=3))
ds = sluice.ray.read(source, num_tasks=2, resources={"worker": 0.1})
ds = sluice.ray.map_batches(ds, steps, batch_size=8, concurrency=1, resources={"head": 0.1})
written = sluice.ray.write_tfrecord(ds, out, num_shards=3)
print(json.dumps({"worker": worker, "written": written}))
"""


def test_two_nodes_read_map_write_every_record_once(two_node_cluster, fixtures, solarize_wasm,
                                                     expected, tmp_path):
    out = tmp_path / "out"
    env_files = str(fixtures / "images.tfrecord-*")
    done = run_python(TWO_NODE_DRIVER, two_node_cluster, env_files, str(solarize_wasm), str(out),
                      timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    written = result["written"]
    assert [os.path.basename(p) for p, _ in written] == [
        f"part-0000{i}-of-00003.tfrecord" for i in range(3)]
    spec = {"image": {"dtype": "int64", "shape": SHAPE}, "label": "int64",
            "node": {"dtype": "int64", "shape": [len(result["worker"])]}}
    rows = sluice.tfrecord([p for p, _ in written]).parse_example(spec).collect()
    # Every record once, each read on the worker node and transformed on the head node.
    assert collections.Counter(_digest(e["label"], e["image"]) for e in rows) == expected
    assert {bytes(e["node"].astype(np.uint8)).decode() for e in rows} == {result["worker"]}
