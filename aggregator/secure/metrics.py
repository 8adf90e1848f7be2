"""Prometheus metrics of one secure-mode aggregator (its own registry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, start_http_server


class SecureMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.uploads = Counter(
            "ldpcollect_secure_uploads",
            "Leader: uploads by outcome (accepted, duplicate, or the refusal's name).",
            ["outcome"],
            registry=self.registry,
        )
        self.reports = Counter(
            "ldpcollect_secure_reports",
            "Reports verified in aggregation jobs: aggregated, or refused by reason "
            "(BAD_PROOF, BAD_CIPHERTEXT, WRONG_CONFIG_ID, WRONG_LENGTH, REPLAY, ...).",
            ["outcome"],
            registry=self.registry,
        )
        self.jobs = Counter(
            "ldpcollect_secure_jobs",
            "Aggregation jobs finished at this aggregator.",
            registry=self.registry,
        )
        self.helper_failures = Counter(
            "ldpcollect_secure_helper_failures",
            "Leader: aggregation jobs the helper did not finish (down, refused, or answered "
            "garbage); the job is retried.",
            ["reason"],
            registry=self.registry,
        )

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        self._http = server
        return int(server.server_port)

    def shutdown(self) -> None:
        server = getattr(self, "_http", None)
        if server is not None:
            server.shutdown()
            server.server_close()
