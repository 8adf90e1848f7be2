"""SIGKILL of either secure role mid-upload: every report the leader acknowledged is counted
exactly once after the killed role restarts, and a device that retries what was not
acknowledged makes the counts whole."""

from __future__ import annotations

import random
from pathlib import Path

import grpc
import pytest

from client.secure_collector import create_secure_query, release_secure_query
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.key_file import load_or_create_key_pair
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from tests.secure.roles import ADMIN, ADMIN_AUTH, aggregated, secure_pair

TARGETS = [1, 2, 3, 4, 5]
BATCH = 25
BATCHES = 12


@pytest.mark.parametrize("victim", ["leader", "helper"])
def test_sigkill_of_a_role_mid_upload_loses_nothing_acknowledged(
    tmp_path: Path, victim: str
) -> None:
    collector = load_or_create_key_pair(tmp_path / "collector.key")
    rr = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
    rng = random.Random(11)
    answers = [[rng.randrange(2) for _ in TARGETS] for _ in range(BATCH * BATCHES)]
    with secure_pair(tmp_path) as pair:
        with pair.channel() as channel:
            query = create_secure_query(channel, ADMIN, collector, rr, TARGETS, 1)
            device = pair.device(channel, query.query_id)
        bodies = [device.seal_measurement(a) for a in answers]
        batches = [bodies[i : i + BATCH] for i in range(0, len(bodies), BATCH)]
        acknowledged: set[int] = set()
        role = pair.leader if victim == "leader" else pair.helper
        with pair.channel() as channel:
            stub = spb_grpc.SecureCollectorStub(channel)
            admin = spb_grpc.SecureAdminStub(channel)
            for i in range(BATCHES // 2):
                stub.UploadSecureReports(spb.UploadSecureReportsRequest(reports=batches[i]))
                acknowledged.add(i)
            in_flight = [
                (
                    i,
                    stub.UploadSecureReports.future(
                        spb.UploadSecureReportsRequest(reports=batches[i]), timeout=30
                    ),
                )
                for i in range(BATCHES // 2, BATCHES // 2 + 3)
            ]
            role.kill()
            for i, future in in_flight:
                try:
                    future.result()
                    acknowledged.add(i)
                except grpc.RpcError:
                    pass  # not acknowledged: the device retries below
            if victim == "helper":  # the leader keeps acknowledging while its helper is down
                for i in range(BATCHES // 2 + 3, BATCHES):
                    stub.UploadSecureReports(spb.UploadSecureReportsRequest(reports=batches[i]))
                    acknowledged.add(i)
                held = admin.GetSecureQuery(
                    spb.GetSecureQueryRequest(query_id=query.query_id), metadata=ADMIN_AUTH
                )
                assert held.pending_reports > 0
        role.start()
        with pair.channel() as channel:
            stub = spb_grpc.SecureCollectorStub(channel)
            # Acknowledged reports are all there: held or aggregated, none lost.
            state = spb_grpc.SecureAdminStub(channel).GetSecureQuery(
                spb.GetSecureQueryRequest(query_id=query.query_id), metadata=ADMIN_AUTH
            )
            assert state.pending_reports + state.aggregated_reports >= BATCH * len(acknowledged)
            for i in range(BATCHES):  # the device retries everything (duplicates are acked)
                done = stub.UploadSecureReports(spb.UploadSecureReportsRequest(reports=batches[i]))
                assert list(done.rejected) == []
                if i in acknowledged:
                    assert done.accepted == 0
            final = aggregated(channel, query.query_id)
            assert (final.aggregated_reports, final.refused_reports) == (len(answers), 0)
            release = release_secure_query(channel, ADMIN, collector, query.query_id)
    assert release.round_counts == [[sum(col) for col in zip(*answers, strict=True)]]
