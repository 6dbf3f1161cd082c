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
