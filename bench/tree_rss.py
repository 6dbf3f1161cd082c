"""The peak resident memory of a process and all its descendants (DataLoader and Grain
workers, tf.data's threads are in the process itself), polled with psutil."""

import threading
import time

import psutil


class TreePeakRss:
    """Polls the RSS of process `pid` and its descendants, summed, every 20 ms on a thread
    of its own, until `stop()`, which returns the peak in bytes. Listing the descendants
    scans /proc (milliseconds): it is done every 0.2 s, and the RSS of the known processes
    (one small /proc read each) every 20 ms."""

    def __init__(self, pid):
        self._pid = pid
        self._peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self):
        try:
            p = psutil.Process(self._pid)
        except psutil.Error:
            return
        tree, listed = [p], 0.0
        while not self._done.is_set():
            now = time.monotonic()
            if now - listed >= 0.2:
                try:
                    tree = [p] + p.children(recursive=True)
                except psutil.Error:
                    pass
                listed = now
            rss = 0
            for c in tree:
                try:
                    rss += c.memory_info().rss
                except psutil.Error:
                    pass
            self._peak = max(self._peak, rss)
            self._done.wait(0.02)

    def stop(self):
        """Stops polling; the peak seen, in bytes."""
        self._done.set()
        self._thread.join()
        return self._peak
