"""The table builder of bench/driver.py on synthetic runs: medians, min-max, ratios, RSS ratios,
the targets met / not met, "—" for workloads a system has not, failed runs left out.

Runs with pytest or plain python3 (`python3 bench/tests/test_driver.py`); needs nothing beyond
the standard library.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import driver  # noqa: E402
import run_measure  # noqa: E402


def run(workload, system, rate, rss, ok=True, rnd=0, mb=None):
    r = {"round": rnd, "workload": workload, "system": system, "ok": ok, "peak_rss_mb": rss,
         "version": f"{system} 1.0"}
    if ok:
        r["records_per_s"] = rate
        r["mb_per_s"] = mb
    return r


def synthetic():
    runs = []
    # augment: Sluice 5000/5200/5400 (median 5200), tf.data 2500/3000/4000 (median 3000, best 4000)
    for i, (s, t, d, p, g, rss) in enumerate([(5000, 2500, 1900, 1000, 900, 90), (5400, 4000, 1800, 1100, 950, 80),
                                              (5200, 3000, 2000, 900, 1000, 88)]):
        runs += [run("augment", "sluice-cli", s, rss, rnd=i), run("augment", "tfdata", t, 640, rnd=i),
                 run("augment", "dali", d, 560, rnd=i), run("augment", "torch", p, 1600, rnd=i),
                 run("augment", "grain", g, 300, rnd=i), run("augment", "sluice-decode-only", 6000, 100, rnd=i)]
    # parse: Sluice 150k, tf.data 50k (3.0x exactly), verify 300k (0.5: not met); a failed run
    runs += [run("parse", "sluice-cli", 150_000, 50), run("parse", "tfdata", 50_000, 400),
             run("parse", "sluice-verify", 300_000, 20), run("parse", "tfdata", None, None, ok=False, rnd=1)]
    # read with MB/s
    runs += [run("read", "sluice-verify", 330_000, 20, mb=6200.0), run("read", "tfdata", 100_000, 500, mb=1800.0)]
    return runs


def test_summary_medians_and_extremes():
    s = driver.summarize(synthetic())
    a = s[("augment", "sluice-cli")]
    assert (a["median"], a["min"], a["max"], a["runs"]) == (5200, 5000, 5400, 3)
    assert a["rss_median"] == 88
    t = s[("augment", "tfdata")]
    assert (t["median"], t["max"]) == (3000, 4000)
    p = s[("parse", "tfdata")]
    assert p["runs"] == 1 and p["failed"] == 1 and p["median"] == 50_000
    assert s[("read", "sluice-verify")]["mb_median"] == 6200.0


def test_targets():
    got = {words: (value, met) for words, value, _, _, met in driver.check_targets(driver.summarize(synthetic()))}
    value, met = got["parse >= 3x tf.data"]
    assert abs(value - 3.0) < 1e-12 and met is True  # exactly at the goal counts as met
    value, met = got["parse >= 60 % of `sluice verify`'s records/s"]
    assert abs(value - 0.5) < 1e-12 and met is False
    # "either mode": against tf.data's fastest run (4000), not its median (3000)
    value, met = got["augment >= 2x tf.data in either mode (against tf.data's fastest run)"]
    assert abs(value - 1.3) < 1e-12 and met is False
    value, met = got["augment >= 3x DALI CPU"]
    assert abs(value - 5200 / 1900) < 1e-12 and met is False
    value, met = got["augment >= 5x PyTorch DataLoader"]
    assert abs(value - 5200 / 1000) < 1e-12 and met is True
    value, met = got["augment >= 85 % of the decode-only loop"]
    assert abs(value - 5200 / 6000) < 1e-12 and met is True
    value, met = got["augment peak RSS <= 0.25x tf.data"]
    assert abs(value - 88 / 640) < 1e-12 and met is True
    value, met = got["augment peak RSS <= 0.25x Grain"]
    assert abs(value - 88 / 300) < 1e-12 and met is False
    value, met = got["read: `sluice verify` >= 3x tf.data"]
    assert abs(value - 3.3) < 1e-12 and met is True
    # Nothing measured: neither met nor not met.
    assert got["cache2 >= 2x tf.data"] == (None, None)
    assert got["read: `sluice run read.toml` >= 3x tf.data"] == (None, None)


def test_targets_only_for_workloads_that_ran():
    rows = driver.check_targets(driver.summarize(synthetic()), ["parse"])
    assert [r[0] for r in rows] == ["parse >= 3x tf.data", "parse >= 60 % of `sluice verify`'s records/s"]


def test_table_markdown():
    meta = {"date": "2026-11-26 14:00 UTC", "machine": {"model": "AMD EPYC", "cpus": 2, "ram_gib": 23.5},
            "rounds": 3, "workloads": ["read", "parse", "augment"], "systems": driver.SYSTEMS,
            "versions": {"tfdata": "2.21.0"}, "skipped": {"sluice-python": "not installed"}, "data": "/d"}
    text = driver.table(synthetic(), meta)
    assert "AMD EPYC, 2 CPUs, 23.5 GiB RAM" in text and "2026-11-26" in text
    assert "Not run: Sluice Python: not installed." in text
    lines = text.splitlines()
    aug = lines.index("**augment** (images/s)")
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[aug:aug + 12] if ln.startswith("| ")}
    # ratio Sluice CLI / tf.data = 5200 / 3000, RSS 88 / 640
    assert "| 5,200 | 5,000–5,400 | — | 88 | — |" in rows["Sluice CLI"]
    assert "| 3,000 | 2,500–4,000 | 1.73× | 640 | 0.14× |" in rows["tf.data"]
    assert "| 1,000 | 900–1,100 | 5.20× | 1,600 | 0.06× |" in rows["PyTorch DataLoader + torchvision v2"]
    assert rows["Sluice Python"].count("—") == 5  # skipped
    # parse: peers without it show "—"; a failed run is counted
    par = lines.index("**parse** (records/s)")
    block = "\n".join(lines[par:aug])
    assert "| DALI CPU | — | — | — | — | — |" in block
    assert "| tf.data (1 failed) | 50.0k |" in block
    # read shows MB/s
    assert "330.0k (6,200 MB/s)" in text
    assert "| parse >= 60 % of `sluice verify`'s records/s | 0.50× | ≥ 0.6× | **not met** |" in text
    assert "| augment peak RSS <= 0.25x tf.data | 0.14× | ≤ 0.25× | met |" in text
    assert "cache2" not in text  # not a workload of this run


def test_cache2_second_epoch_from_the_cli_timeline():
    raw = {"epochs": 2, "elements": 8192, "seconds": 3.0, "sluice_version": "0.1.0",
           "timeline": {"events": [{"t": 0.0, "kind": "epoch", "text": "epoch 0 started"},
                                   {"t": 2.5, "kind": "epoch", "text": "epoch 1 started"}]}}
    n, seconds, rate, mb, _ = driver.read_result("sluice-cli", "cache2", raw)
    assert (n, seconds, rate, mb) == (4096, 0.5, 8192.0, None)


def test_commands_and_dashes():
    class A:
        data, images, sluice, bench_bin = "/d", "/i", "/s", "/b"
        sluice_py, tf_py, peers_py = "/py", "/tf", "/pp"

    assert driver.command("torch", "parse", A) is None
    assert driver.command("sluice-cli", "cache2", A)[-2:] == ["--epochs", "2"]
    assert driver.command("dali", "augment", A)[2:] == ["/d", "--threads", "2"]
    assert driver.command("grain", "eval", A)[2:] == ["grain", "/i"]
    assert driver.command("tfdata", "eval", A)[1].endswith("eval_baselines.py")


def test_orphaned_shared_memory_is_removed():
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        shm = pathlib.Path(d)
        (shm / "psm_before").write_bytes(b"x" * 10)
        (shm / "other").write_bytes(b"y" * 5)
        before = run_measure.shm_segments(d)
        assert before == {"psm_before"}
        (shm / "psm_new1").write_bytes(b"z" * 100)
        (shm / "psm_new2").write_bytes(b"w" * 28)
        (shm / "not_python").write_bytes(b"v" * 7)
        assert run_measure.remove_orphaned_segments(before, d) == 128
        assert sorted(p.name for p in shm.iterdir()) == ["not_python", "other", "psm_before"]
        assert run_measure.remove_orphaned_segments(before, str(shm / "missing")) == 0


def test_memory_probe_and_its_line_in_the_table():
    p = driver.memory_probe(mib=4)
    assert set(p) == {"fresh_page_us", "write_gb_s"}
    assert p["fresh_page_us"] > 0 and p["write_gb_s"] > 0
    meta = {"workloads": ["augment"], "systems": driver.SYSTEMS,
            "probes": [{"fresh_page_us": 2.0, "write_gb_s": 9.0}, {"fresh_page_us": 30.0, "write_gb_s": 3.0},
                       {"fresh_page_us": 5.0, "write_gb_s": 8.0}]}
    text = driver.table(synthetic(), meta)
    assert ("the first write to a fresh 4 KiB page 5.00 µs (2.00–30.00), copying 64 MiB 8.0 GB/s (3.0–9.0)."
            in text)
    assert "fresh 4 KiB page" not in driver.table(synthetic(), {"workloads": ["augment"]})


def test_a_round_waits_for_calm_memory_and_the_table_says_so():
    seen = iter([{"fresh_page_us": 20.0, "write_gb_s": 1.0}, None, {"fresh_page_us": 3.0, "write_gb_s": 6.0},
                 {"fresh_page_us": 1.0, "write_gb_s": 9.0}])
    slept = []
    p, waited, calm = driver.wait_calm_memory(4.0, 600, probe=lambda: next(seen), sleep=slept.append, every=30)
    assert (p["fresh_page_us"], waited, calm, slept) == (3.0, 60, True, [30, 30])
    # Never calm: the last probe after max_wait, and the round runs anyway.
    p, waited, calm = driver.wait_calm_memory(1.0, 45, probe=lambda: {"fresh_page_us": 9.0, "write_gb_s": 2.0},
                                              sleep=lambda s: None, every=30)
    assert (p["fresh_page_us"], waited, calm) == (9.0, 60, False)
    meta = {"workloads": ["augment"], "calm_memory_us": 4.0,
            "probes": [{"fresh_page_us": 3.0, "write_gb_s": 6.0}, {"fresh_page_us": 9.0, "write_gb_s": 2.0}],
            "calm_waits": [{"waited_for_calm_s": 60, "calm": True}, {"waited_for_calm_s": 60, "calm": False}]}
    assert ("Each round started once a fresh page cost at most 4 µs (`--calm-memory`): 120 s of waiting in "
            "all; 1 of 2 rounds started without, after `--calm-wait`." in driver.table(synthetic(), meta))
    assert "--calm-memory" not in driver.table(synthetic(), {**meta, "calm_memory_us": None})


def test_the_memory_probe_runs_apart_and_leaves_peak_rss_alone():
    # Run in the driver, a 128 MiB probe would lift its peak past 256 MiB (a mapping and a
    # block of that size); run apart, it stays the driver's own (~20 MB). Checked in a fresh
    # interpreter by its VmHWM (this process's peak is whatever the tests before left, and a
    # child's ru_maxrss starts from its parent's).
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import driver; "
            "p = driver.probe_memory_apart(mib=128); assert p and p['fresh_page_us'] > 0 and p['write_gb_s'] > 0; "
            "print([int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM')][0])")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(here, "..")], capture_output=True, text=True,
                         check=True).stdout
    assert int(out.strip()) < 128 * 1024  # KiB


def test_peak_rss_is_the_childs_not_the_drivers():
    # `true` holds a megabyte or two; its ru_maxrss reads this process's peak (tens of MB)
    # because it was forked from it, and must not be taken for the child's.
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    m = run_measure.measure(["true"], 10)
    assert m["exit"] == 0
    assert m["peak_rss"] < own


def test_decode_write_loop_runs_on_augment_only():
    import types
    a = types.SimpleNamespace(bench_bin="/b/pipelines", data="/d", images="/i")
    assert driver.command("sluice-decode-write", "augment", a) == ["/b/pipelines", "/d", "decode_to_batch"]
    assert driver.command("sluice-decode-only", "augment", a) == ["/b/pipelines", "/d", "decode_only"]
    assert driver.command("sluice-decode-write", "parse", a) is None
    assert "sluice-decode-write" in driver.SYSTEMS and driver.LABELS["sluice-decode-write"]


if __name__ == "__main__":
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    failed = 0
    for t in tests:
        try:
            t()
            print(f"ok   {t.__name__}")
        except Exception as e:  # noqa: BLE001
            failed += 1
            print(f"FAIL {t.__name__}: {e!r}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
