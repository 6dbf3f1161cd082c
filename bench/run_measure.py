"""Measuring one benchmark run: a command in a process (group) of its own, with its wall
time, CPU, the rest of the machine's CPU meanwhile, the peak RSS of its process tree, a
timeout, and the shared memory its workers left behind. Shared by driver.py,
python_augment.py and ray_read.py.

psutil (in the benchmark venvs) gives the tree's peak RSS and the machine's CPU; without it
the peak is the child's own (wait4) and the machine's CPU is not known.
"""
import json
import os
import resource
import subprocess
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHM_DIR = "/dev/shm"


def have_psutil():
    try:
        import psutil  # noqa: F401
        return True
    except ImportError:
        return False


def busy_seconds():
    """CPU seconds the whole machine has spent busy (all CPUs, all processes)."""
    import psutil

    c = psutil.cpu_times()
    return c.user + c.nice + c.system + getattr(c, "irq", 0) + getattr(c, "softirq", 0) + getattr(c, "steal", 0)


def wait_quiet(limit, max_wait=600):
    """Waits (up to max_wait s) until the machine's CPU use over 1 s is below limit % of all
    CPUs: runs of other users' processes (builds, installs) would be measured otherwise.
    Returns (seconds waited, the last CPU % seen)."""
    import psutil

    t = time.monotonic()
    while True:
        used = psutil.cpu_percent(interval=1.0)
        if used < limit or time.monotonic() - t >= max_wait:
            return round(time.monotonic() - t, 1), used


def shm_segments(shm_dir=SHM_DIR):
    """Names of Python `multiprocessing.shared_memory` segments (`psm_*`) in shm_dir."""
    try:
        return {n for n in os.listdir(shm_dir) if n.startswith("psm_")}
    except OSError:
        return set()


def remove_orphaned_segments(before, shm_dir=SHM_DIR):
    """Removes the `psm_*` segments that appeared in shm_dir since `before` (a set of names)
    and returns their total size in bytes. Called once a run's whole process group is gone:
    a peer's worker processes ended by the group kill (Grain's) never unlink the segments
    they made, and a driver run left ~5 GB of them in /dev/shm (memory no one could use)."""
    freed = 0
    for name in shm_segments(shm_dir) - before:
        path = os.path.join(shm_dir, name)
        try:
            freed += os.path.getsize(path)
            os.unlink(path)
        except OSError:
            pass
    return freed


def wait4_peak(usage, parent_peak):
    """The child's peak RSS in bytes from its wait4 `usage`, or 0 when it says nothing of the
    child: on Linux a child's `ru_maxrss` starts from its parent's peak at fork (the forked
    memory's high-water mark survives exec), so a value at or below `parent_peak` (this
    process's `ru_maxrss` before the fork, KiB) may be the parent's."""
    return usage.ru_maxrss * 1024 if usage.ru_maxrss > parent_peak else 0


def last_json(text):
    """The last line of `text` that is a JSON object (a run's result)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def measure(cmd, timeout=None, env=None, cwd=REPO):
    """Runs cmd in its own process group (killed after `timeout` s, if given); returns a
    dict: exit, stdout, stderr, peak_rss (bytes, of the tree), process_seconds,
    cpu_seconds (the child's and the descendants it waited for: DataLoader workers are
    joined by their parent), other_cpu_seconds (the rest of the machine meanwhile; None
    without psutil), timed_out, shm_left (bytes of shared-memory segments the run left
    behind, removed). What is left of the group when the child ends is killed."""
    out = tempfile.TemporaryFile(mode="w+")
    err = tempfile.TemporaryFile(mode="w+")
    psutil = None
    if have_psutil():
        import psutil
    me = psutil.Process() if psutil else None
    mine0 = sum(me.cpu_times()[:2]) if me else 0.0
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # see wait4_peak
    busy0 = busy_seconds() if psutil else 0.0
    shm0 = shm_segments()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd, start_new_session=True)
    rss = None
    if psutil:
        from tree_rss import TreePeakRss

        rss = TreePeakRss(proc.pid)
    done = threading.Event()
    timed_out = [False]

    def kill_on_timeout():
        if not done.wait(timeout):
            timed_out[0] = True
            try:
                os.killpg(proc.pid, 9)  # the run's own process group (start_new_session)
            except ProcessLookupError:
                pass

    killer = threading.Thread(target=kill_on_timeout, daemon=True)
    killer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    busy = busy_seconds() - busy0 if psutil else None
    done.set()
    killer.join()
    peak = rss.stop() if rss else 0
    if not timed_out[0]:
        # Descendants left behind (a worker not joined) are ended with the group.
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
    shm_left = remove_orphaned_segments(shm0)
    cpu = usage.ru_utime + usage.ru_stime
    other = None
    if psutil:
        other = max(0.0, busy - cpu - (sum(me.cpu_times()[:2]) - mine0))
    out.seek(0)
    err.seek(0)
    return {"exit": os.waitstatus_to_exitcode(status), "stdout": out.read(), "stderr": err.read(),
            "peak_rss": max(peak, wait4_peak(usage, own_peak)),
            "process_seconds": wall, "cpu_seconds": cpu,
            "other_cpu_seconds": other, "timed_out": timed_out[0], "shm_left": shm_left}
