"""Each Python thread's CPU time on /metrics (`aggregator/thread_cpu.py`)."""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from aggregator.thread_cpu import ThreadCpuCollector, thread_cpu_seconds, thread_label

pytestmark = pytest.mark.skipif(
    not hasattr(time, "pthread_getcpuclockid"), reason="no per-thread CPU clocks here"
)

BURN_SECONDS = 0.05


def test_labels_drop_pythons_default_numbering_only() -> None:
    assert thread_label("Thread-7 (process_request_thread)") == "process_request_thread"
    assert thread_label("Thread-12") == "Thread"
    assert thread_label("sqlite-writer") == "sqlite-writer"
    assert thread_label("sqlite-aside_1") == "sqlite-aside_1"
    assert thread_label("MainThread") == "MainThread"
    assert thread_label("My-Thread-3 (x)") == "My-Thread-3 (x)"


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
