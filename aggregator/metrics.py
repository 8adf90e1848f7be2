"""Prometheus metrics of one aggregator (its own registry, so servers in one process never
collide)."""

from __future__ import annotations

from collections import Counter as Tally
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from aggregator.model import SubmitResult
from aggregator.status_map import outcome_status
from aggregator.store.writer_phases import WriterPhases
from aggregator.thread_cpu import ThreadCpuCollector

_SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000)
_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


class AggregatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.accepted = Counter(
            "ldpcollect_reports_accepted",
            "Reports accepted (new and durable).",
            registry=self.registry,
        )
        self.duplicates = Counter(
            "ldpcollect_reports_duplicate",
            "Reports acknowledged again under an already accepted report id (counted once).",
            registry=self.registry,
        )
        self.rejected = Counter(
            "ldpcollect_reports_rejected",
            "Reports rejected, by gRPC status code name.",
            ["reason"],
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "ldpcollect_submission_reports",
            "Reports per submission (unary 1, stream or batch many).",
            ["path"],
            buckets=_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.commit_latency = Histogram(
            "ldpcollect_commit_seconds",
            "Time to apply and commit one transaction group.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.commit_group_reports = Histogram(
            "ldpcollect_commit_group_reports",
            "Reports committed together in one transaction (group commit).",
            buckets=(0, *_SIZE_BUCKETS),
            registry=self.registry,
        )
        self.commit_group_requests = Histogram(
            "ldpcollect_commit_group_requests",
            "Requests (RPC chunks and admin changes) sharing one transaction.",
            buckets=_SIZE_BUCKETS,
            registry=self.registry,
        )

        self.writer_seconds = Counter(
            "ldpcollect_writer_seconds",
            "Time the SQLite store's single writer spent in each phase of its transaction "
            "groups: apply (the rules, admin changes), write (log rows; answer files flushed "
            "to disk), commit. A total rate near 1 s/s: the writer is the bottleneck.",
            ["phase"],
            registry=self.registry,
        )
        # Which stage is hot: each Python thread's CPU time (aggregator/thread_cpu.py).
        self.registry.register(ThreadCpuCollector())

    def observe_commit(
        self, seconds: float, requests: int, reports: int, phases: WriterPhases | None = None
    ) -> None:
        self.commit_latency.observe(seconds)
        self.commit_group_requests.observe(requests)
        self.commit_group_reports.observe(reports)
        if phases is not None:
            for phase, spent in phases._asdict().items():
                self.writer_seconds.labels(phase=phase).inc(spent)

    def observe_submission(self, result: SubmitResult) -> None:
        """Add a submission's outcomes with one increment per kind."""
        if result.accepted:
            self.accepted.inc(result.accepted)
        if result.duplicates:
            self.duplicates.inc(result.duplicates)
        if result.rejected:
            tally = Tally(outcome_status(outcome).name for _, outcome in result.rejected)
            for reason, n in tally.items():
                self.rejected.labels(reason=reason).inc(n)

    def observe_rejected_rpc(self, code: grpc.StatusCode, reports: int = 1) -> None:
        """A whole submission refused before any report was looked at."""
        self.rejected.labels(reason=code.name).inc(reports)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve /metrics over HTTP; returns the bound port (port 0 picks a free one)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._http_server: Any = server
        return int(server.server_port)

    def shutdown(self) -> None:
        server: Any = getattr(self, "_http_server", None)
        if server is not None:
            server.shutdown()
            server.server_close()
            self._http_server = None
