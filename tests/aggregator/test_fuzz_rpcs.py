"""Random and mutated request bytes on every RPC of a real server: always a precise status.

Each case sends bytes (random, or a valid request with bytes flipped, cut, inserted or
repeated) to one method of the Collector or Admin service through a real server on 127.0.0.1
and checks the answer: a status a client can act on (never UNKNOWN or INTERNAL), the admin
token checked before anything else on Admin, and a message without a class name or traceback
and of bounded length. The statuses seen are printed (`pytest -s`) and kept as a test property.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ldpcollect.v1 import ldpcollect_pb2 as pb
from tests.client.server_thread import TOKEN, ServerThread

ACTIONABLE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
}
MAX_DETAILS = 1_000
TELLTALES = ("Traceback", "<class", "Exception", "Error:", 'File "')
AUTH = {
    "token": (("authorization", f"Bearer {TOKEN}"),),
    "none": (),
    "wrong": (("authorization", "Bearer not-the-token"),),
}

_RR = pb.MechanismSpec(randomized_response=pb.RandomizedResponse(flip1="0.85", flip2="0.3"))
_REPORT = pb.Report(
    query_id="fz", round=1, device_pseudonym=b"p" * 16, report_id=b"r" * 16, answers=b"\x80"
)
_CREATE = pb.CreateQueryRequest(
    query_id="fz",
    mechanism=_RR,
    location_scheme=pb.LocationScheme(grid=pb.GridScheme()),
    targets=[1, 2, 3],
    min_reports=1,
)
# One valid request per method (the mutations start from these).
SEEDS: dict[str, bytes] = {
    "Collector/ListOpenQueries": pb.ListOpenQueriesRequest().SerializeToString(),
    "Collector/GetQuery": pb.GetQueryRequest(query_id="fz").SerializeToString(),
    "Collector/SubmitReport": pb.SubmitReportRequest(report=_REPORT).SerializeToString(),
    "Collector/StreamReports": pb.SubmitReportRequest(report=_REPORT).SerializeToString(),
    "Collector/SubmitBatch": pb.SubmitBatchRequest(reports=[_REPORT] * 2).SerializeToString(),
    "Admin/CreateQuery": _CREATE.SerializeToString(),
    "Admin/ListQueries": pb.ListQueriesRequest().SerializeToString(),
    "Admin/GetQuery": pb.GetQueryRequest(query_id="fz").SerializeToString(),
    "Admin/AdvanceRound": pb.AdvanceRoundRequest(query_id="fz").SerializeToString(),
    "Admin/CloseQuery": pb.CloseQueryRequest(query_id="fz").SerializeToString(),
    "Admin/Release": pb.ReleaseRequest(query_id="fz").SerializeToString(),
    "Admin/GetRelease": pb.GetReleaseRequest(query_id="fz").SerializeToString(),
    "Admin/GetLedger": pb.GetLedgerRequest().SerializeToString(),
    "Admin/SetBudget": pb.SetBudgetRequest(epsilon=1.0, delta=1e-6).SerializeToString(),
}
METHODS = sorted(SEEDS)
STATUSES_SEEN: Counter[str] = Counter()


@st.composite
def payloads(draw: st.DrawFn, method: str) -> bytes:
    """Random bytes, or the method's seed request with a few byte-level mutations."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=96))
    data = bytearray(SEEDS[method])
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "repeat"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            data += data[at:]
    return bytes(data)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, list[bytes]]:
    method = draw(st.sampled_from(METHODS))
    auth = draw(st.sampled_from(["token"] * 4 + ["none", "wrong"]))
    count = draw(st.integers(1, 3)) if method.endswith("StreamReports") else 1
    return method, auth, [draw(payloads(method)) for _ in range(count)]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[grpc.Channel]:
    server = ServerThread(Path(tmp_path_factory.mktemp("fuzz")) / "fuzz.db")
    address = server.start()
    with grpc.insecure_channel(address) as chan:
        created = chan.unary_unary("/ldpcollect.v1.Admin/CreateQuery", None, None)
        created(SEEDS["Admin/CreateQuery"], metadata=AUTH["token"], timeout=30)
        yield chan
    server.close()


def call(chan: grpc.Channel, method: str, auth: str, messages: list[bytes]) -> tuple[str, str]:
    """Send the bytes as they are (no serializer) and return (status name, message)."""
    path = f"/ldpcollect.v1.{method}"
    metadata = AUTH[auth]
    try:
        if method.endswith("StreamReports"):
            chan.stream_unary(path, None, None)(iter(messages), metadata=metadata, timeout=30)
        else:
            chan.unary_unary(path, None, None)(messages[0], metadata=metadata, timeout=30)
    except grpc.RpcError as err:
        return err.code().name, err.details() or ""
    return "OK", ""


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_every_rpc_answers_malformed_bytes_with_an_actionable_status(
    channel: grpc.Channel, case: tuple[str, str, list[bytes]]
) -> None:
    method, auth, messages = case
    code, details = call(channel, method, auth, messages)
    STATUSES_SEEN[f"{method.split('/')[0]} {code}"] += 1
    assert grpc.StatusCode[code] in ACTIONABLE, (method, code, details)
    if method.startswith("Admin/") and auth != "token":
        assert code in {"UNAUTHENTICATED", "PERMISSION_DENIED"}, (method, code, details)
    assert len(details) <= MAX_DETAILS, (method, len(details))
    assert not any(word in details for word in TELLTALES), (method, details)


def test_a_huge_query_id_is_not_echoed_back(channel: grpc.Channel) -> None:
    long = "q" * 60_000  # within these methods' 64 KiB limit (role_limits)
    for method in ("Collector/GetQuery", "Admin/GetQuery", "Admin/GetRelease"):
        request = pb.GetQueryRequest(query_id=long).SerializeToString()
        code, details = call(channel, method, "token", [request])
        assert code == "NOT_FOUND", (method, code, details[:200])
        assert len(details) <= MAX_DETAILS and "60000 characters" in details
    create = pb.CreateQueryRequest()
    create.CopyFrom(_CREATE)
    create.query_id = "q" * 1_000_000  # CreateQuery takes up to 1 MiB
    code, details = call(channel, "Admin/CreateQuery", "token", [create.SerializeToString()])
    assert code == "INVALID_ARGUMENT" and len(details) <= MAX_DETAILS, (code, details[:200])


def test_statuses_seen_are_reported(
    channel: grpc.Channel, record_property: Callable[[str, object], None]
) -> None:
    """Runs after the fuzz test (file order): prints what it saw."""
    total = sum(STATUSES_SEEN.values())
    summary = ", ".join(f"{key}: {n}" for key, n in sorted(STATUSES_SEEN.items()))
    print(f"\nfuzz cases: {total}; statuses: {summary}")
    record_property("fuzz_statuses", dict(STATUSES_SEEN))
    assert total == 0 or not {k for k in STATUSES_SEEN if k.endswith(("UNKNOWN", "INTERNAL"))}
