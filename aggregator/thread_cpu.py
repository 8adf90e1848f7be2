"""CPU time of each live Python thread of the process, for /metrics.

The process's CPU total (`process_cpu_seconds_total`) cannot say which stage is hot. The
aggregator's stages are threads: the gRPC event loop (`MainThread` under `ldpcollect serve`),
the SQLite store's single writer (`sqlite-writer`), its helpers (`sqlite-aside_N`). Their
Python code shares one interpreter lock, so when their CPU per report adds up to about one
core the server is bound by that lock, not by any one thread (docs/ingest_profile.md).

Each thread's CPU clock is read at scrape time, named by the thread's kernel id (Linux only;
elsewhere nothing is reported). Not `time.pthread_getcpuclockid`: it reads the thread's
pthread handle, which a thread ending between `threading.enumerate` and the call leaves
dangling; a kernel id of an ended thread only makes `clock_gettime` fail.

Threads Python numbers by default ("Thread-7 (process_request_thread)", one for each scrape of
the metrics server) are grouped under the name of their target, so the label set stays
bounded. A gauge, not a counter: when a thread ends its time leaves the sum, and C threads
Python did not start (gRPC's own) are not listed (the process total less these is their
share).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

_NUMBERED = re.compile(r"^Thread-\d+(?: \((?P<target>.+)\))?$")


def thread_label(name: str) -> str:
    """A thread's name without Python's default numbering ("Thread-7 (run)" -> "run")."""
    numbered = _NUMBERED.match(name)
    if numbered is None:
        return name
    return numbered.group("target") or "Thread"


PER_THREAD_CLOCKS = sys.platform == "linux"


def thread_clock(native_id: int) -> int:
    """The CPU clock id of the thread with kernel id `native_id`: Linux's encoding
    (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`), as glibc's `pthread_getcpuclockid` makes it."""
    return (~native_id << 3) | 6


def thread_cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by each live Python thread, summed by `thread_label`."""
    seconds: dict[str, float] = {}
    if not PER_THREAD_CLOCKS:
        return seconds
    for thread in threading.enumerate():
        native_id = thread.native_id
        if native_id is None:
            continue
        try:
            spent = time.clock_gettime(thread_clock(native_id))
        except OSError:  # the thread just ended
            continue
        label = thread_label(thread.name)
        seconds[label] = seconds.get(label, 0.0) + spent
    return seconds


class ThreadCpuCollector(Collector):
    """`ldpcollect_thread_cpu_seconds{thread=...}` for a registry."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "ldpcollect_thread_cpu_seconds",
            "CPU seconds used so far by each live Python thread of the process, by thread name "
            "(MainThread: the gRPC event loop; sqlite-writer: the store's single writer).",
            labels=["thread"],
        )
        for label, spent in sorted(thread_cpu_seconds().items()):
            family.add_metric([label], spent)
        yield family
