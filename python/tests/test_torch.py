"""PyTorch: the DataLoader round trip with 0 and 2 workers and two ranks (every record
exactly once per epoch), state_dict/load_state_dict, and the device hand-off's messages."""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402
import sluice.torch  # noqa: E402
from conftest import REPO  # noqa: E402


def records_pipeline(fixtures):
    # The raw records are all different: a record's bytes identify it.
    return sluice.tfrecord(str(fixtures / "images.tfrecord-*")).batch(3)


def all_records(fixtures):
    return collections.Counter(
        bytes(r) for b in records_pipeline(fixtures) for r in b["record"]
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_reads_every_record_once(fixtures, workers):
    ds = sluice.torch.IterableDataset(records_pipeline(fixtures))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
    for _epoch in range(2):
        seen = collections.Counter(bytes(r) for b in loader for r in b["record"])
        assert seen == all_records(fixtures)
        assert sum(seen.values()) == 32


def test_batches_become_tensors_without_a_copy(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"))
        .parse_example({"image": "string", "label": "int64"})
        .image_ops([{"op": "decode", "channels": 3}, {"op": "resize", "height": 8, "width": 8}])
        .batch(4)
    )
    ds = sluice.torch.IterableDataset(p)
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    assert batch["image"].dtype == torch.float32 and tuple(batch["image"].shape) == (4, 8, 8, 3)
    assert batch["label"].dtype == torch.int64
    numpy_batch = next(p.iter())
    t = sluice.torch.to_torch(numpy_batch)["image"]
    assert t.data_ptr() == numpy_batch["image"].__array_interface__["data"][0]


RANK = textwrap.dedent(
    """
    import sys, json, torch, torch.distributed as dist, sluice, sluice.torch
    rank, port, fixtures = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    p = sluice.tfrecord(fixtures + "/images.tfrecord-*").batch(3)
    ds = sluice.torch.IterableDataset(p)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    seen = [bytes(r).hex() for b in loader for r in b["record"]]
    print(json.dumps(seen))
    dist.destroy_process_group()
    """
)


def test_two_ranks_with_two_workers_read_every_record_once(fixtures):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, str(rank), str(port), str(fixtures)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    import json

    per_rank = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        per_rank.append([bytes.fromhex(h) for h in json.loads(out.strip().splitlines()[-1])])
    assert all(per_rank), "each rank reads a part"
    assert not set(per_rank[0]) & set(per_rank[1]), "the ranks' parts are disjoint"
    assert collections.Counter(per_rank[0] + per_rank[1]) == all_records(fixtures)


def test_state_dict_resumes_at_the_next_batch(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"), shuffle_files=True)
        .shuffle(16)
        .batch(3)
        .options(seed=5)
    )
    ds = sluice.torch.IterableDataset(p)
    it = iter(ds)
    head = [next(it) for _ in range(4)]
    state = ds.state_dict()
    rest = list(it)
    assert state["checkpoint"] is not None

    for given in (state, [state]):  # its own state, or every rank's (one rank here)
        fresh = sluice.torch.IterableDataset(p)
        fresh.load_state_dict(given)
        resumed = list(iter(fresh))
        assert len(resumed) == len(rest) and len(head) + len(rest) == 11
        for a, b in zip(resumed, rest):
            assert [bytes(r) for r in a["record"]] == [bytes(r) for r in b["record"]]


def test_device_hand_off(fixtures):
    p = sluice.from_tensor_slices({"x": np.arange(12, dtype=np.float32)}).batch(4)
    loader = torch.utils.data.DataLoader(sluice.torch.IterableDataset(p), batch_size=None)
    moved = list(sluice.torch.prefetch_to_device(loader, device="cpu", buffer_size=2))
    assert [b["x"].tolist() for b in moved] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            sluice.torch.prefetch_to_device(loader, device="cuda")
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            sluice.torch.IterableDataset(p, pin_memory=True)


def test_device_hand_off_raises_the_pipelines_error():
    def boom(e):
        raise ValueError("bad element")

    p = sluice.from_tensor_slices({"x": np.arange(4)}).map(boom)
    with pytest.raises(sluice.UserCodeError):
        list(sluice.torch.prefetch_to_device(sluice.torch.IterableDataset(p), device="cpu"))


def _double(e):
    return {"x": e["x"] * 2}


def test_pipelines_pickle_for_spawned_workers(fixtures):
    import pickle

    p = sluice.from_tensor_slices({"x": np.arange(6)}).map(_double).batch(2).options(seed=3)
    q = pickle.loads(pickle.dumps(p))
    assert [b["x"].tolist() for b in q] == [[0, 2], [4, 6], [8, 10]]
    ds = sluice.torch.IterableDataset(p)
    ctx = torch.multiprocessing.get_context("spawn")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=ctx)
    got = sorted(v for b in loader for v in b["x"].tolist())
    assert got == [0, 2, 4, 6, 8, 10]


def test_set_epoch_reshuffles_in_fresh_workers(fixtures):
    p = (
        sluice.tfrecord(str(fixtures / "images.tfrecord-*"), shuffle_files=True)
        .shuffle(32)
        .batch(4)
        .options(seed=11)
    )
    # What a single process sees in its first two epochs.
    reference = [[bytes(r) for b in p.iter() for r in b["record"]] for _ in range(2)]
    assert reference[0] != reference[1]
    ds = sluice.torch.IterableDataset(p)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)
    epochs = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        epochs.append([bytes(r) for b in loader for r in b["record"]])
    assert epochs == reference


def test_the_training_example_runs(tmp_path):
    from conftest import run_python

    script = REPO / "examples" / "python" / "torch_train.py"
    code = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    proc = run_python(code, str(script), "--state", str(tmp_path / "state.pt"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("epoch 0: 4 steps") and lines[1].startswith("epoch 1: 4 steps")
    assert (tmp_path / "state.pt").exists()


ELASTIC_RANK = textwrap.dedent(
    """
    import sys, json, pickle, pathlib, torch, torch.distributed as dist, sluice, sluice.torch
    rank, world, port, fixtures, states, phase = sys.argv[1:7]
    rank, world, states = int(rank), int(world), pathlib.Path(states)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    p = sluice.tfrecord(fixtures + "/images.tfrecord-*").shuffle(4).batch(3).options(seed=2)
    ds = sluice.torch.IterableDataset(p)
    if phase == "resume":
        # Every rank of the run that saved: this run's ranks share what the epoch has left.
        ds.load_state_dict([pickle.loads(f.read_bytes()) for f in sorted(states.glob("*.pkl"))])
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    seen = []
    for i, b in enumerate(loader):
        seen.extend(bytes(r).hex() for r in b["record"])
        if phase == "save" and i + 1 == 1 + rank:
            (states / f"rank{rank}.pkl").write_bytes(pickle.dumps(ds.state_dict()))
            break
    print(json.dumps(seen))
    dist.destroy_process_group()
    """
)


def _run_ranks(fixtures, world, states, phase):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ELASTIC_RANK, str(rank), str(world), str(port), str(fixtures),
             str(states), phase],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for rank in range(world)
    ]
    import json

    seen = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        seen.extend(bytes.fromhex(h) for h in json.loads(out.strip().splitlines()[-1]))
    return seen


def test_two_ranks_saved_resume_on_three(fixtures, tmp_path):
    # 2 ranks save their state part way; 3 ranks load both states and finish the epoch:
    # every record exactly once (elastic resume).
    before = _run_ranks(fixtures, 2, tmp_path, "save")
    after = _run_ranks(fixtures, 3, tmp_path, "resume")
    assert collections.Counter(before + after) == all_records(fixtures)
