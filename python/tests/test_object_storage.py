"""Pipelines over s3:// URLs give what the local files give: the fixtures uploaded to a
real S3-compatible server (moto's, installed with `pip install 'moto[server]'`), started on
127.0.0.1 for this module and reached as users reach S3-compatible stores (the AWS_*
environment variables)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import sluice

boto3 = pytest.importorskip("boto3", reason="moto[server] brings boto3")


@pytest.fixture(scope="module")
def s3(fixtures):
    server = os.environ.get("SLUICE_MOTO_SERVER") or shutil.which("moto_server")
    if server is None:
        candidate = Path(sys.executable).with_name("moto_server")
        server = str(candidate) if candidate.exists() else None
    assert server, "install moto: pip install 'moto[server]'"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "moto_server did not start"
            time.sleep(0.1)
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing-secret")
    client.create_bucket(Bucket="py-s3")
    for path in fixtures.iterdir():
        if path.is_file():
            client.upload_file(str(path), "py-s3", f"data/{path.name}")
    yield "s3://py-s3/data"
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    proc.terminate()
    proc.wait(timeout=10)


def test_builder_over_s3_equals_local(s3, fixtures):
    def pipeline(root):
        return (
            sluice.tfrecord(f"{root}/images.tfrecord-*")
            .interleave(cycle_length=2, num_parallel=2)
            .parse_example({"image": "string", "label": "int64"})
            .image_ops([{"op": "decode", "channels": 3}, {"op": "resize", "height": 8, "width": 8}])
            .batch(4)
            .options(seed=1)
        )

    local = pipeline(str(fixtures)).collect()
    remote = pipeline(s3).collect()
    assert len(remote) == len(local) == 8
    for a, b in zip(remote, local):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["label"], b["label"])


def test_errors_over_s3_name_the_url(s3):
    with pytest.raises(sluice.NotFoundError, match="s3://py-s3/data/nothing-"):
        sluice.tfrecord(f"{s3}/nothing-*").build()
    with pytest.raises(sluice.DataLossError) as info:
        sluice.tfrecord(f"{s3}/corrupt_data_crc.tfrecord").collect()
    assert info.value.file == f"{s3}/corrupt_data_crc.tfrecord"
    assert info.value.offset == 268


def test_explicit_storage_options_and_stats(s3, fixtures):
    name = "examples.tfrecord"
    size = (fixtures / name).stat().st_size
    before = sluice.storage_stats().get("s3://py-s3", {}).get("requests", 0)
    pipeline = sluice.tfrecord(
        f"{s3}/{name}",
        storage={"aws_endpoint": os.environ["AWS_ENDPOINT_URL"], "aws_allow_http": True,
                 "block_size": 1000, "max_in_flight": 2},
    )
    remote = [e["record"] for e in pipeline]
    local = [e["record"] for e in sluice.tfrecord(str(fixtures / name))]
    assert remote == local and len(local) == 64
    stats = sluice.storage_stats()["s3://py-s3"]
    # 1000-byte blocks: one request per 1000 bytes at least.
    assert stats["requests"] - before > size // 1000
    assert stats["retries"] == 0
    with pytest.raises(sluice.InvalidArgumentError, match="aws_endpiont"):
        list(sluice.tfrecord(f"{s3}/{name}", storage={"aws_endpiont": "x"}))


@pytest.mark.parametrize("name", ["examples.tfrecord", "examples.tfrecord.gz", "examples.tfrecord.zlib"])
def test_every_compression_reads_as_the_local_file(s3, fixtures, name):
    remote = [e["record"] for e in sluice.tfrecord(f"{s3}/{name}")]
    local = [e["record"] for e in sluice.tfrecord(str(fixtures / name))]
    assert len(local) == 64
    assert remote == local


def test_global_shuffle_over_s3_equals_local(s3, fixtures, tmp_path):
    def shuffled(root):
        return [e["record"] for e in sluice.tfrecord(f"{root}/images.tfrecord-*", global_shuffle=True,
                                                     index_dir=tmp_path).options(seed=3)]
    local = shuffled(str(fixtures))
    assert len(local) == 32
    assert shuffled(s3) == local
