"""The trusted aggregator's services at the edge (`aggregator.edge`): Collector and Admin, each
request taken as bytes and checked there (Admin's token first), with the trusted role's limits
(`role_limits.trusted_limits`).

SubmitBatch takes its bytes as they are (`CollectorService.SubmitBatch` decodes uniform
batches itself).
"""

from __future__ import annotations

import grpc

from aggregator.edge import EdgeGate, register
from aggregator.service import AdminService, CollectorService
from ldpcollect.v1 import ldpcollect_pb2 as pb

COLLECTOR = pb.DESCRIPTOR.services_by_name["Collector"]
ADMIN = pb.DESCRIPTOR.services_by_name["Admin"]


def add_services(
    server: grpc.aio.Server, collector: CollectorService, admin: AdminService, gate: EdgeGate
) -> None:
    """Register both services on `server`, taking every request as bytes."""
    register(server, COLLECTOR, collector, gate, raw=frozenset({"SubmitBatch"}))
    register(server, ADMIN, admin, gate, authorize=admin.authorize)
