"""What the leader's public endpoints show: what a device needs to upload, no progress. A
device's refused report is visible to the operator (admin token) only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from client.secure_collector import create_secure_query
from client.secure_device import SecureDevice, upload
from ldpcollect.mechanisms import mechanism_from_params
from ldpcollect.secure.sealing import generate_key_pair
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc
from ldpcollect.wire import MAX_DESCRIPTION_CHARS
from tests.secure.roles import ADMIN, Pair, aggregated, secure_pair
from tests.secure.test_roles_end_to_end import lying_pair_vdaf

RR = mechanism_from_params("rr", {"flip1": "0.85", "flip2": "0.3"})
SP = mechanism_from_params("sp", {"sampling_rate": "0.5"})
TARGETS = [1, 2, 3, 4]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with secure_pair(Path(tmp_path_factory.mktemp("public"))) as running:
        yield running


def test_progress_is_shown_to_the_operator_only(pair: Pair) -> None:
    with pair.channel() as channel:
        created = create_secure_query(channel, ADMIN, generate_key_pair(3), SP, TARGETS, 1)
        device = pair.device(channel, created.query_id)
        honest = [device.seal(device.draw(target)) for target in TARGETS[:3]]
        liar = SecureDevice(device.query, device.helper)
        liar.vdaf = lying_pair_vdaf(len(TARGETS))
        lie = liar.seal_measurement([0] * 4 + [1] * 4 + [1])  # refused at aggregation
        assert upload(channel, [*honest, lie]).accepted == 4
        operator = aggregated(channel, created.query_id)
        assert (operator.aggregated_reports, operator.refused_reports) == (3, 1)

        public = spb_grpc.SecureCollectorStub(channel)
        shown = public.GetSecureQuery(spb.GetSecureQueryRequest(query_id=created.query_id))
        listed = public.ListSecureQueries(spb.ListSecureQueriesRequest()).queries
        for query in (shown, *[q for q in listed if q.query_id == created.query_id]):
            assert (query.aggregated_reports, query.pending_reports, query.refused_reports) == (
                0,
                0,
                0,
            )
            assert query.leader_hpke_config and query.helper_hpke_config  # enough to upload
        assert [q.query_id for q in listed].count(created.query_id) == 1


def test_a_description_longer_than_the_bound_is_refused(pair: Pair) -> None:
    with pair.channel() as channel:
        for length, ok in ((MAX_DESCRIPTION_CHARS, True), (MAX_DESCRIPTION_CHARS + 1, False)):
            try:
                create_secure_query(
                    channel, ADMIN, generate_key_pair(4), RR, TARGETS, 1, description="d" * length
                )
                assert ok, length
            except grpc.RpcError as err:
                assert not ok, err
                assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
                details = err.details() or ""
                assert f"{length} characters" in details and len(details) < 300
