"""Hosts sharding one pipeline (`.shard(num_hosts, rank)`) read every record once together:
file level with enough files, record level without, and a global shuffle's shards read one
global order (see docs/multi-host.md)."""

from __future__ import annotations

import pytest

import sluice


def records(pipeline):
    return [e["record"].item() for e in pipeline]


@pytest.mark.parametrize("hosts", [1, 2, 3, 4])
@pytest.mark.parametrize("global_shuffle", [False, True])
def test_hosts_read_every_record_once(fixtures, tmp_path, hosts, global_shuffle):
    def source():
        return sluice.tfrecord(str(fixtures / "images.tfrecord-*"), global_shuffle=global_shuffle,
                               index_dir=tmp_path if global_shuffle else None).options(seed=5)

    whole = records(source())
    assert len(whole) == 32 and len(set(whole)) == 32
    parts = [records(source().shard(hosts, rank)) for rank in range(hosts)]
    together = [r for part in parts for r in part]
    assert sorted(together) == sorted(whole)
    if global_shuffle:
        for rank, part in enumerate(parts):
            assert part == whole[rank::hosts]


def _run_hosts(make, hosts, resume=None, steps=None):
    """Runs `hosts` hosts of `make(hosts, rank)`; each takes `steps[rank]` elements (all when
    None). Returns the records delivered and each host's checkpoint."""
    delivered, checkpoints = [], []
    for rank in range(hosts):
        it = make(hosts, rank).iter(resume=resume)
        for i, batch in enumerate(it):
            delivered.extend(batch["record"].tolist())
            if steps is not None and i + 1 >= steps[rank % len(steps)]:
                break
        checkpoints.append(it.checkpoint())
        it.close()
    return delivered, checkpoints


@pytest.mark.parametrize("before,after", [(2, 3), (3, 2), (1, 4), (4, 1)])
@pytest.mark.parametrize("global_shuffle", [False, True])
def test_hosts_resume_on_another_number_of_hosts(fixtures, tmp_path, before, after, global_shuffle):
    # N hosts stop part way and checkpoint; M hosts given all N checkpoints finish the epoch:
    # every record once (shuffle, filter and batch after the shard).
    def make(hosts, rank):
        return (
            sluice.tfrecord(str(fixtures / "images.tfrecord-*"), global_shuffle=global_shuffle,
                            index_dir=tmp_path if global_shuffle else None)
            .shard(hosts, rank)
            .shuffle(5)
            .batch(3)
            .options(seed=8)
        )

    whole, _ = _run_hosts(make, 1)
    assert len(whole) == 32
    first, checkpoints = _run_hosts(make, before, steps=[2, 1, 3])
    rest, _ = _run_hosts(make, after, resume=checkpoints)
    assert sorted(first + rest) == sorted(whole)


def test_an_elastic_resume_needs_every_hosts_checkpoint(fixtures):
    def make(hosts, rank):
        return sluice.tfrecord(str(fixtures / "images.tfrecord-*")).shard(hosts, rank).options(seed=1)

    _, checkpoints = _run_hosts(make, 3, steps=[2])
    with pytest.raises(sluice.errors.SluiceError) as info:
        make(2, 0).iter(resume=checkpoints[:2])
    assert "no checkpoint holds lane 2" in str(info.value)
    with pytest.raises(sluice.errors.InvalidArgumentError):
        make(2, 0).iter(resume=["not bytes"])
