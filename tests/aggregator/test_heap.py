"""A server's C heap keeps what it freed (`aggregator.heap`): a worker thread that allocates
and frees a few MB again and again faults its pages in once, not on every round (which is what
glibc's defaults do, each fault a page the kernel zeroes)."""

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
        blocks = [bytes(4 << 20) for _ in range(3)]  # three 4 MiB buffers, then all freed
        del blocks
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
worker = threading.Thread(target=churn)
worker.start()
worker.join()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    run = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True
    )
    return int(run.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_worker_thread_reuses_its_freed_buffers_instead_of_faulting_them_in_again() -> None:
    default, kept = page_faults("default"), page_faults("kept")
    pages = 50 * 3 * (4 << 20) // 4096  # every buffer of every round faulted in afresh
    assert default > pages // 2
    assert kept < pages // 10  # the first round's pages, then reuse
