"""Reading from object storage, side by side in one run: a plain client's parallel ranged
GETs (the server's ceiling), `sluice verify` and the `parse` pipeline (`sluice run`) over
s3:// URLs, on the same objects, through a latency-adding proxy at 0, 20, 50 and 100 ms.

    PY bench/object_storage.py DATA_DIR --sluice target/release/sluice \
        --proxy target/release/examples/fault_proxy [--moto PATH] [--s3s PATH] \
        [--latencies 0,20,50,100] [--rounds 3] [--out FILE]

DATA_DIR holds the bench shards (`train.tfrecord-*`, written by `tfdata_baseline.py gen`);
`--copies N` uploads each N times (`...-of-00016-c1`, ...), all read by the same pattern.
PY needs boto3 (it comes with `moto[server]`). The servers run on 127.0.0.1:
- moto (`pip install 'moto[server]'`), written in Python: the server the tests use;
- s3s-fs (`cargo install s3s-fs --features binary`), a Rust S3 server over a directory,
  when `--s3s` names its binary: a faster ceiling.
The proxy is `cargo build --release -p sluice-storage --example fault_proxy --features testing`:
it forwards every request and adds the latency before it.

Per server and latency, the best of `--rounds` runs of each reader, in MB/s of object bytes:
- `ceiling qN` / `ceiling wN`: boto3 from N threads, every object once, in ranged GETs of a
  quarter object each (the blocks Sluice asks for) or of the whole object; the best of these
  is the server's ceiling;
- `verify`: `sluice verify --json` on the 16 objects (its own MB/s, listing included);
- `parse mN`: `sluice run` of examples/pipelines/parse.toml (interleave 4, five passes, batches
  of 256 parsed), with `[source.storage] max_in_flight = N`: bytes read from the store (its
  stats) over the run's seconds.
Prints a table and the issue's ratios; writes every run to one JSON file.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
from botocore.config import Config

BUCKET = "bench"
ACCESS, SECRET = "benchkey", "benchsecret"
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"{what} did not start on port {port}")
            time.sleep(0.1)


def start_moto(path: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([path, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, "moto_server")
    return proc, f"http://127.0.0.1:{port}"


def start_s3s(path: str, root: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([path, "--host", "127.0.0.1", "--port", str(port),
                             "--access-key", ACCESS, "--secret-key", SECRET, str(root)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, "s3s-fs")
    return proc, f"http://127.0.0.1:{port}"


def start_proxy(path: str, upstream: str, latency_ms: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([path, "--upstream", upstream, "--latency-ms", str(latency_ms)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        sys.exit(f"the proxy said {line!r}")
    return proc, line.removeprefix("listening on ")


def client(endpoint: str, threads: int = 16):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=ACCESS, aws_secret_access_key=SECRET,
                        config=Config(max_pool_connections=max(threads, 10),
                                      retries={"max_attempts": 0}))


def upload(endpoint: str, files: list[Path], copies: int) -> None:
    s3 = client(endpoint)
    s3.create_bucket(Bucket=BUCKET)
    for f in files:
        for k in range(copies):
            s3.upload_file(str(f), BUCKET, object_key(f, k))


def object_key(f: Path, copy: int) -> str:
    """`data/train.tfrecord-00000-of-00016`, and `-c1`, `-c2`, ... for the other copies."""
    return f"data/{f.name}" + (f"-c{copy}" if copy else "")


def ceiling(endpoint: str, sizes: dict[str, int], threads: int, whole: bool) -> dict:
    """Every object once, in ranged GETs from `threads` threads: a quarter object each (the
    blocks Sluice asks for by default here), or the whole object."""
    s3 = client(endpoint, threads)
    jobs = []
    for key, size in sizes.items():
        block = size if whole else max(1 << 20, -(-size // 4))
        for start in range(0, size, block):
            jobs.append((key, start, min(size, start + block) - 1))

    def get(job):
        key, a, b = job
        body = s3.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={a}-{b}")["Body"].read()
        assert len(body) == b - a + 1, (key, a, b, len(body))
        return len(body)

    t = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as pool:
        total = sum(pool.map(get, jobs))
    seconds = time.perf_counter() - t
    return {"bytes": total, "seconds": seconds, "mb_per_s": total / 1e6 / seconds,
            "requests": len(jobs)}


def sluice_env(endpoint: str) -> dict:
    env = dict(os.environ)
    env.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": ACCESS,
                "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                "AWS_ALLOW_HTTP": "true"})
    return env


def verify(sluice: str, endpoint: str, total: int) -> dict:
    out = subprocess.run([sluice, "verify", "--json", f"s3://{BUCKET}/data/train.tfrecord-*"],
                         env=sluice_env(endpoint), capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["bytes"] == total and report["damaged_files"] == 0, report
    store = report["storage"][f"s3://{BUCKET}"]
    return {"bytes": report["bytes"], "seconds": report["seconds"],
            "mb_per_s": report["mb_per_s"], "requests": store["requests"],
            "retries": store["retries"], "max_in_flight": store["max_in_flight"]}


def parse(sluice: str, endpoint: str, in_flight: int, workdir: Path, total: int) -> dict:
    pipeline = workdir / f"parse-m{in_flight}.toml"
    text = (REPO / "examples/pipelines/parse.toml").read_text()
    text = text.replace('files = ["train.tfrecord-*"]\n',
                        f'files = ["train.tfrecord-*"]\n\n[source.storage]\nmax_in_flight = {in_flight}\n')
    pipeline.write_text(text)
    out = subprocess.run([sluice, "run", str(pipeline), "--data", f"s3://{BUCKET}/data", "--json"],
                         env=sluice_env(endpoint), capture_output=True, text=True, check=True)
    s = json.loads(out.stdout.strip().splitlines()[-1])
    store = s["storage"][f"s3://{BUCKET}"]
    assert store["bytes_read"] == 5 * total, (store, total)
    return {"bytes": store["bytes_read"], "seconds": s["seconds"],
            "mb_per_s": store["bytes_read"] / 1e6 / s["seconds"],
            "requests": store["requests"], "retries": store["retries"],
            "max_in_flight": store["max_in_flight"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--moto", default=shutil.which("moto_server")
                    or str(Path(sys.executable).with_name("moto_server")))
    ap.add_argument("--s3s", default=None)
    ap.add_argument("--latencies", default="0,20,50,100")
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--in-flight", default="1,4,16")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--copies", type=int, default=1,
                    help="upload each shard this many times (more objects: a run's fixed start, "
                         "the listing and the first byte, weighs less)")
    ap.add_argument("--out", type=Path, default=Path("object_storage_bench.json"))
    a = ap.parse_args()

    files = sorted(a.data.glob("train.tfrecord-*"))
    assert files, f"no train.tfrecord-* in {a.data}"
    sizes = {object_key(f, k): f.stat().st_size for f in files for k in range(a.copies)}
    total = sum(sizes.values())
    latencies = [int(x) for x in a.latencies.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    in_flight = [int(x) for x in a.in_flight.split(",")]
    runs: list[dict] = []
    best: dict[tuple, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        servers = [("moto", lambda: start_moto(a.moto))]
        if a.s3s:
            servers.append(("s3s-fs", lambda: start_s3s(a.s3s, workdir / "s3s")))
        for server_name, start in servers:
            server, endpoint = start()
            try:
                upload(endpoint, files, a.copies)
                for latency in latencies:
                    proxy, via = start_proxy(a.proxy, endpoint, latency)
                    try:
                        readers = [(f"ceiling {'w' if w else 'q'}{t}", lambda t=t, w=w: ceiling(via, sizes, t, w))
                                   for w in (False, True) for t in threads]
                        readers.append(("verify", lambda: verify(a.sluice, via, total)))
                        readers += [(f"parse m{m}", lambda m=m: parse(a.sluice, via, m, workdir, total))
                                    for m in in_flight]
                        for r in range(a.rounds):
                            # Rotate the order each round so no reader always goes first.
                            order = readers[r % len(readers):] + readers[:r % len(readers)]
                            for name, fn in order:
                                result = fn()
                                result.update(server=server_name, latency_ms=latency, reader=name, round=r)
                                runs.append(result)
                                key = (server_name, latency, name)
                                if key not in best or result["mb_per_s"] > best[key]["mb_per_s"]:
                                    best[key] = result
                                print(f"{server_name:7} {latency:4} ms  {name:11} {result['mb_per_s']:8.1f} MB/s",
                                      file=sys.stderr, flush=True)
                    finally:
                        proxy.stdin.close()
                        proxy.terminate()
                        proxy.wait()
            finally:
                server.terminate()
                server.wait()

    a.out.write_text(json.dumps({"total_bytes": total, "objects": len(sizes), "runs": runs}, indent=1))
    names = list(dict.fromkeys(r["reader"] for r in runs if r["round"] == 0))
    names.sort(key=lambda n: ("ceiling", "verify", "parse").index(n.split()[0]))
    print(f"\nbest of {a.rounds} rounds, MB/s of object bytes ({len(sizes)} objects, {total / 1e6:.1f} MB)")
    for server_name in sorted({k[0] for k in best}, key=lambda s: s != "moto"):
        print(f"\n{server_name}: " + " | ".join(f"{n:>11}" for n in ["latency"] + names))
        for latency in latencies:
            row = [f"{best[(server_name, latency, n)]['mb_per_s']:11.1f}" for n in names]
            print(f"{'':{len(server_name) + 2}}{latency:>8} ms | " + " | ".join(row))
        for latency in latencies:
            ceil = max(best[(server_name, latency, n)]["mb_per_s"] for n in names if n.startswith("ceiling"))
            v = best[(server_name, latency, "verify")]["mb_per_s"]
            p = max(best[(server_name, latency, n)]["mb_per_s"] for n in names if n.startswith("parse"))
            v0 = best[(server_name, latencies[0], "verify")]["mb_per_s"]
            p0 = max(best[(server_name, latencies[0], n)]["mb_per_s"] for n in names if n.startswith("parse"))
            print(f"  {latency:>3} ms: verify {v / ceil:.0%} of the ceiling, parse {p / ceil:.0%};"
                  f" of their {latencies[0]} ms figure: verify {v / v0:.0%}, parse {p / p0:.0%}")
    print(f"\nevery run: {a.out}")


if __name__ == "__main__":
    main()
