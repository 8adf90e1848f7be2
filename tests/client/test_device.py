"""The device SDK against the real aggregator: state survives restarts, retries keep the id."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from client.admin import AdminClient
from client.device import Device, Outcome
from client.state import DeviceState
from ldpcollect import bits, geo
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.client.server_thread import ServerThread

LAT, LON = geo.DEFAULT_CENTER
HOME = geo.GridScheme().locate(LAT, LON)
TARGETS = [HOME - 1, HOME, HOME + 1, HOME + 2]


def _rr(admin: AdminClient, query_id: str) -> pb.Query:
    return admin.create_query(RandomizedResponse("0.85", "0.3"), "grid", TARGETS, query_id=query_id)


def _sp(admin: AdminClient, query_id: str) -> pb.Query:
    return admin.create_query(SamplingPrivacy("1/2"), "grid", TARGETS, query_id=query_id)


def _statuses(outcomes: list[Outcome]) -> dict[str, str]:
    return {o.query_id: o.status for o in outcomes}


def test_restarted_device_answers_byte_identically_and_only_once(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr")
    state_path = tmp_path / "device.json"
    with grpc.insecure_channel(server.address) as channel:
        first = Device(state_path, LAT, LON)
        assert _statuses(first.participate(channel)) == {"q-rr": "accepted"}
        sent = first.report(first.state.queries["q-rr"], 1).SerializeToString()

        restarted = Device(state_path, LAT, LON)  # a new process reading the same file
        again = restarted.report(restarted.state.queries["q-rr"], 1).SerializeToString()
        assert again == sent
        assert _statuses(restarted.participate(channel)) == {"q-rr": "already_acknowledged"}
    assert list(admin.get_query("q-rr").reports_per_round) == [1]


def test_lost_ack_is_resent_with_the_same_report_id_and_counted_once(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr")
    state_path = tmp_path / "device.json"
    with grpc.insecure_channel(server.address) as channel:
        Device(state_path, LAT, LON).participate(channel)
        # crash after the server stored the report but before the ack was saved
        data = json.loads(state_path.read_text())
        data["queries"]["q-rr"]["acked"] = [False]
        state_path.write_text(json.dumps(data))
        outcomes = Device(state_path, LAT, LON).participate(channel)
    assert _statuses(outcomes) == {"q-rr": "duplicate"}
    assert list(admin.get_query("q-rr").reports_per_round) == [1]
    assert DeviceState.load(state_path).queries["q-rr"].acked == [True]


def test_sp_device_never_redraws_across_rounds_and_restarts(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _sp(admin, "q-sp")
    state_path = tmp_path / "device.json"
    with grpc.insecure_channel(server.address) as channel:
        Device(state_path, LAT, LON).participate(channel)
        saved = json.loads(state_path.read_text())["queries"]["q-sp"]
        admin.advance("q-sp")
        device = Device(state_path, LAT, LON)
        assert _statuses(device.participate(channel)) == {"q-sp": "accepted"}
        round2 = device.report(device.state.queries["q-sp"], 2)
    after = json.loads(state_path.read_text())["queries"]["q-sp"]
    for key in ("draw", "pseudonym", "report_ids", "location_id"):
        assert after[key] == saved[key]
    assert after["acked"] == [True, True]
    draw = device.state.queries["q-sp"].draw
    assert draw is not None
    assert round2.answers == draw.answers(2)
    # the draw is one SP draw: every bit equal in both rounds except possibly the home cell
    r1, r2 = bits.unpack(draw.answers(1), 4), bits.unpack(draw.answers(2), 4)
    home = TARGETS.index(HOME)
    assert [i for i in range(4) if r1[i] != r2[i]] in ([], [home])
    assert admin.get_query("q-sp").completed_devices == 1


def test_transient_failure_retried_with_same_report_id_after_restart(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr")
    state_path = tmp_path / "device.json"
    seen: list[str] = []

    def on_retry(attempt: int, err: grpc.RpcError) -> None:
        # The draw and report id are on disk BEFORE anything was sent.
        record = json.loads(state_path.read_text())["queries"]["q-rr"]
        seen.append(record["report_ids"][0])
        if attempt == 1:
            server.start()  # same db file, same port

    with grpc.insecure_channel(server.address) as channel:
        query = pb_grpc.CollectorStub(channel).ListOpenQueries(pb.ListOpenQueriesRequest())
        server.stop()
        device = Device(state_path, LAT, LON, on_retry=on_retry)
        outcome = device.answer(pb_grpc.CollectorStub(channel), query.queries[0])
    assert outcome.status == "accepted"
    assert outcome.attempts >= 2
    assert seen and all(rid == seen[0] for rid in seen)
    assert device.state.queries["q-rr"].report_ids[0].hex() == seen[0]
    assert list(admin.get_query("q-rr").reports_per_round) == [1]


def test_permanent_error_is_surfaced_not_retried(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr")
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.CollectorStub(channel)
        query = stub.ListOpenQueries(pb.ListOpenQueriesRequest()).queries[0]
        admin.close("q-rr")
        outcome = Device(tmp_path / "d.json", LAT, LON).answer(stub, query)
    assert outcome.status == "failed"
    assert outcome.code == "FAILED_PRECONDITION"
    assert outcome.attempts == 1
    assert outcome.message


def test_device_budget_declines_and_persists(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr1")
    _rr(admin, "q-rr2")
    _sp(admin, "q-sp")
    state_path = tmp_path / "device.json"
    with grpc.insecure_channel(server.address) as channel:
        device = Device(state_path, LAT, LON, budget_epsilon=6.0)
        outcomes = _statuses(device.participate(channel, query_ids=["q-rr1"]))
        assert outcomes == {"q-rr1": "accepted"}
        # RR over 4 targets costs 5.198; a second would exceed 6; linked SP costs (0, 1/2)
        later = _statuses(Device(state_path, LAT, LON, budget_epsilon=6.0).participate(channel))
    assert later == {"q-rr1": "already_acknowledged", "q-rr2": "declined", "q-sp": "declined"}
    assert list(admin.get_query("q-rr2").reports_per_round) == [0]
    with pytest.raises(ParameterError, match="budget_epsilon"):
        Device(state_path, LAT, LON, budget_epsilon=100.0)


def test_device_outside_the_grid_answers_no_everywhere_truthfully(
    tmp_path: Path, server: ServerThread, admin: AdminClient
) -> None:
    _rr(admin, "q-rr")
    with grpc.insecure_channel(server.address) as channel:
        device = Device(tmp_path / "d.json", -45.0, 170.0)  # New Zealand: off the regional grid
        assert _statuses(device.participate(channel)) == {"q-rr": "accepted"}
    record = device.state.queries["q-rr"]
    assert record.location_id is not None and record.location_id not in TARGETS
