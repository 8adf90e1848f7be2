"""A server's C heap keeps what it freed (`aggregator.heap`): a worker thread that allocates
and frees a few MB again and again faults its pages in once, not on every round (which is what
glibc's defaults do, each fault a page the kernel zeroes); a buffer as large as a request near
a size limit is given back when freed."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

CHURN = """
import resource, sys, threading
from aggregator.heap import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
def churn():
    for _ in range(50):
        blocks = [bytes(1 << 20) for _ in range(6)]  # six 1 MiB buffers, then all freed
        del blocks
def rss_kb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
worker = threading.Thread(target=churn)
worker.start()
worker.join()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
resident = rss_kb()
large = b"\x01" * (8 << 20)  # as large as a request near its size limit, written
del large
print(faults, rss_kb() - resident)
"""


def churn(mode: str) -> tuple[int, int]:
    """Page faults of the churning thread, and the KiB resident after an 8 MiB buffer came
    and went."""
    run = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True
    )
    faults, kept_kib = run.stdout.split()
    return int(faults), int(kept_kib)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_worker_thread_reuses_its_freed_buffers_and_gives_a_huge_one_back() -> None:
    (default, _), (kept, large_kept_kib) = churn("default"), churn("kept")
    pages = 50 * 6 * (1 << 20) // 4096  # every buffer of every round faulted in afresh
    assert default > pages // 2
    assert kept < pages // 10  # the first round's pages, then reuse
    assert large_kept_kib < 4 << 10  # the 8 MiB buffer was unmapped, not kept
