"""Each Python thread's CPU time on /metrics (`aggregator/thread_cpu.py`), and how
`bench.ingest` turns two scrapes into microseconds a report."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aggregator.thread_cpu import (
    PER_THREAD_CLOCKS,
    ThreadCpuCollector,
    thread_clock,
    thread_cpu_seconds,
    thread_label,
)
from bench.ingest import PYTHON_CORES, thread_share, threads_line
from client.loadgen import LoadResult

pytestmark = pytest.mark.skipif(not PER_THREAD_CLOCKS, reason="per-thread CPU clocks: Linux only")

BURN_SECONDS = 0.05


def test_labels_drop_pythons_default_numbering_only() -> None:
    assert thread_label("Thread-7 (process_request_thread)") == "process_request_thread"
    assert thread_label("Thread-12") == "Thread"
    assert thread_label("sqlite-writer") == "sqlite-writer"
    assert thread_label("sqlite-aside_1") == "sqlite-aside_1"
    assert thread_label("MainThread") == "MainThread"
    assert thread_label("My-Thread-3 (x)") == "My-Thread-3 (x)"


def test_a_threads_clock_is_the_one_pthreads_gives_it() -> None:
    assert thread_clock(threading.get_native_id()) == time.pthread_getcpuclockid(
        threading.get_ident()
    )


def test_an_ended_threads_clock_cannot_be_read() -> None:
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    assert ended.native_id is not None
    # `join` returns when Python is done with the thread; the kernel's thread may take a
    # moment more to exit.
    deadline = time.monotonic() + 10
    while True:
        try:
            time.clock_gettime(thread_clock(ended.native_id))
        except OSError:
            break
        assert time.monotonic() < deadline, "an ended thread's clock still reads"
        time.sleep(0.01)


def _burner(started: threading.Event, stop: threading.Event) -> None:
    """Use BURN_SECONDS of this thread's CPU, then wait."""
    while time.thread_time() < BURN_SECONDS:
        pass
    started.set()
    stop.wait()


def test_a_threads_cpu_time_is_reported_while_it_lives() -> None:
    started, stop = threading.Event(), threading.Event()
    burner = threading.Thread(target=_burner, args=(started, stop), name="burner")
    burner.start()
    try:
        assert started.wait(30)
        process_before = time.process_time()
        seconds = thread_cpu_seconds()
        # At least what it spun for, and no more than the whole process has used.
        assert BURN_SECONDS <= seconds["burner"] <= process_before
        assert seconds["MainThread"] > 0
        registry = CollectorRegistry()
        registry.register(ThreadCpuCollector())
        text = generate_latest(registry).decode()
    finally:
        stop.set()
        burner.join()
    (family,) = text_string_to_metric_families(text)
    assert family.name == "ldpcollect_thread_cpu_seconds"
    assert family.type == "gauge"
    exported = {s.labels["thread"]: s.value for s in family.samples}
    assert exported["burner"] >= BURN_SECONDS
    assert "burner" not in thread_cpu_seconds()  # ended: its time leaves the figures


def test_bench_turns_two_scrapes_into_microseconds_a_report() -> None:
    result = LoadResult("batch", 1000, 1000, 0, 2.0, [])
    before = {"MainThread": 1.0, "sqlite-writer": 0.5, "sqlite-aside_0": 0.1, "scrape": 0.2}
    after = {
        "MainThread": 1.002,
        "sqlite-writer": 0.503,
        "sqlite-aside_0": 0.1,
        "late": 0.0005,
        "scrape": 0.001,  # another thread under the same label: its time went down
    }
    share = thread_share(before, after, result)
    assert share is not None
    assert share["MainThread"] == pytest.approx(2.0)
    assert share["sqlite-writer"] == pytest.approx(3.0)
    assert share["late"] == pytest.approx(0.5)  # a thread started during the run
    assert "sqlite-aside_0" not in share  # no CPU in the run
    assert "scrape" not in share
    assert share[PYTHON_CORES] == pytest.approx(0.0055 / 2.0)
    assert thread_share(None, after, result) is None  # a server without the metric
    line = threads_line(share, process_us=6.0)
    assert line.startswith("µs a report: sqlite-writer 3.00, MainThread 2.00, ")
    assert "other Python threads 0.50 (the whole process 6.00)" in line
