"""Uniform-batch decoding agrees with protobuf on every input, and a server that takes
SubmitBatch as raw bytes answers exactly like one registered with the generated deserializer."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aggregator.batch_codec import (
    decode_batch,
    decode_uniform,
    decode_uniform_python,
    report_columns,
)
from aggregator.metrics import AggregatorMetrics
from aggregator.release import release_function
from aggregator.rounds import ReportColumns
from aggregator.server import AggregatorServer
from aggregator.service import AdminService, CollectorService
from aggregator.store.sqlite import SqliteStore
from ldpcollect.mechanisms import RandomizedResponse, SamplingPrivacy
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from tests.aggregator.conftest import (
    ADMIN,
    TOKEN,
    Device,
    Harness,
    connect,
    expected_counts,
    make_config,
)

# ---------------------------------------------------------------- encoding by hand


def varint(value: int, padding: int = 0) -> bytes:
    """`value` as a varint; `padding` > 0 adds that many redundant bytes (non-canonical)."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value == 0 and padding == 0:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)
        if value == 0:
            padding -= 1
            if padding == 0:
                out.append(0)
                return bytes(out)


def field(number: int, value: int | bytes, padding: int = 0) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value, padding)
    return varint(number << 3 | 2) + varint(len(value), padding) + value


def batch_of(bodies: Sequence[bytes]) -> bytes:
    return b"".join(field(1, body) for body in bodies)


def protobuf_columns(data: bytes) -> ReportColumns | None:
    """The reference: protobuf's parse, or None when protobuf refuses the bytes."""
    try:
        request = pb.SubmitBatchRequest.FromString(data)
    except DecodeError:
        return None
    return report_columns(request.reports)


def assert_agrees(data: bytes) -> ReportColumns | None:
    """decode_uniform returns protobuf's columns or None; decode_batch always agrees."""
    fast = decode_uniform(data)
    slow = protobuf_columns(data)
    if fast is not None:
        assert slow is not None, "fast path accepted bytes protobuf refuses"
        assert fast == slow
        for column in (fast.pseudonyms, fast.report_ids, fast.answers):
            assert all(type(value) is bytes for value in column)
        assert all(type(value) is int for value in fast.rounds)
    if slow is None:
        with pytest.raises(DecodeError):
            decode_batch(data)
    else:
        assert decode_batch(data) == slow
    return fast


# ---------------------------------------------------------------- strategies

QUERY_IDS = st.sampled_from(["q", "rr-1", "bench-batch", "", "é-q", "x" * 130])


@dataclass
class Shape:
    """What every report of a uniform batch shares."""

    query_id: str
    key_bytes: int
    answer_bytes: int


SHAPES = st.builds(
    Shape,
    query_id=QUERY_IDS,
    key_bytes=st.sampled_from([16, 16, 16, 1, 15, 17]),
    answer_bytes=st.sampled_from([1, 2, 13, 40, 140]),
)


@st.composite
def uniform_batches(draw: st.DrawFn) -> tuple[Shape, list[pb.Report]]:
    shape = draw(SHAPES)
    n = draw(st.integers(1, 12))
    rounds = st.integers(1, 127) if draw(st.booleans()) else st.sampled_from([1, 2])
    reports = [
        pb.Report(
            query_id=shape.query_id,
            round=draw(rounds),
            device_pseudonym=draw(st.binary(min_size=shape.key_bytes, max_size=shape.key_bytes)),
            report_id=draw(st.binary(min_size=shape.key_bytes, max_size=shape.key_bytes)),
            answers=draw(st.binary(min_size=shape.answer_bytes, max_size=shape.answer_bytes)),
        )
        for _ in range(n)
    ]
    return shape, reports


ANY_REPORT = st.builds(
    pb.Report,
    query_id=QUERY_IDS,
    round=st.sampled_from([0, 1, 2, 127, 128, 300, 2**32 - 1]),
    device_pseudonym=st.binary(max_size=18),
    report_id=st.binary(max_size=18),
    answers=st.binary(max_size=20),
)


@st.composite
def hand_encoded_report(draw: st.DrawFn) -> bytes:
    """A Report body with any field order, explicit defaults, repeats, unknown fields and
    padded varints: all of which protobuf reads."""
    qid = draw(QUERY_IDS).encode()
    fields: list[tuple[int, int | bytes]] = [
        (1, qid),
        (2, draw(st.sampled_from([0, 1, 2, 200]))),
        (3, draw(st.binary(min_size=16, max_size=16))),
        (4, draw(st.binary(min_size=16, max_size=16))),
        (5, draw(st.binary(max_size=3))),
    ]
    if draw(st.booleans()):
        fields = draw(st.permutations(fields))
    if draw(st.booleans()):
        fields.append(draw(st.sampled_from(fields)))  # a repeated field: the last one wins
    if draw(st.booleans()):
        unknown = draw(st.integers(6, 40))
        fields.insert(draw(st.integers(0, len(fields))), (unknown, draw(st.binary(max_size=4))))
    padding = draw(st.sampled_from([0, 0, 0, 1]))
    return b"".join(field(number, value, padding) for number, value in fields)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` unchanged, or with one byte replaced, inserted or removed, truncated, or extended."""
    kind = draw(st.sampled_from(["none", "replace", "insert", "delete", "truncate", "append"]))
    if kind == "none" or not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    byte = bytes([draw(st.integers(0, 255))])
    if kind == "replace":
        return data[:at] + byte + data[at + 1 :]
    if kind == "insert":
        return data[:at] + byte + data[at:]
    if kind == "delete":
        return data[:at] + data[at + 1 :]
    if kind == "truncate":
        return data[:at]
    return data + draw(st.binary(min_size=1, max_size=3))


# Byte values that mean something in this layout (tags, small lengths, varint continuation).
INTERESTING_BYTES = st.sampled_from(
    [0x00, 0x01, 0x02, 0x0A, 0x10, 0x1A, 0x22, 0x2A, 0x7F, 0x80, 0xFF]
)


@st.composite
def tiny_uniform_with_a_changed_byte(draw: st.DrawFn) -> bytes:
    """A uniform batch of short records (mostly tags and lengths), one byte changed."""
    key = st.binary(min_size=1, max_size=1)
    n = draw(st.integers(2, 5))
    reports = [
        pb.Report(
            query_id="q",
            round=draw(st.integers(1, 3)),
            device_pseudonym=draw(key),
            report_id=draw(key),
            answers=draw(key),
        )
        for _ in range(n)
    ]
    data = bytearray(pb.SubmitBatchRequest(reports=reports).SerializeToString())
    data[draw(st.integers(0, len(data) - 1))] = draw(INTERESTING_BYTES | st.integers(0, 255))
    return bytes(data)


@st.composite
def any_batch_bytes(draw: st.DrawFn) -> bytes:
    source = draw(st.sampled_from(["uniform", "tiny", "any", "hand"]))
    if source == "tiny":
        return draw(tiny_uniform_with_a_changed_byte())
    if source == "uniform":
        data = pb.SubmitBatchRequest(reports=draw(uniform_batches())[1]).SerializeToString()
    elif source == "any":
        reports = draw(st.lists(ANY_REPORT, max_size=6))
        data = pb.SubmitBatchRequest(reports=reports).SerializeToString()
    else:
        data = batch_of(draw(st.lists(hand_encoded_report(), max_size=5)))
        if draw(st.booleans()):
            data += field(draw(st.integers(2, 9)), b"??")  # an unknown batch field
    return draw(mutated(data))


# ---------------------------------------------------------------- parse-level properties

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(any_batch_bytes())
def test_decoding_agrees_with_protobuf_on_any_bytes(data: bytes) -> None:
    fast = assert_agrees(data)
    event("fast path" if fast is not None else "fallback")


@FAST
@given(uniform_batches())
def test_every_uniform_ascii_batch_takes_the_fast_path(
    batch: tuple[Shape, list[pb.Report]],
) -> None:
    shape, reports = batch
    data = pb.SubmitBatchRequest(reports=reports).SerializeToString()
    fast = assert_agrees(data)
    if shape.query_id and shape.query_id.isascii():
        assert fast is not None
        assert len(fast) == len(reports)
    else:
        assert fast is None  # proto3 leaves out an empty query id; UTF-8 is protobuf's to check


def _serialized(batch: tuple[Shape, list[pb.Report]]) -> bytes:
    return pb.SubmitBatchRequest(reports=batch[1]).SerializeToString()


@FAST
@given(st.one_of(any_batch_bytes(), uniform_batches().map(_serialized)))
def test_the_compiled_one_query_decoder_agrees_with_the_python_one(data: bytes) -> None:
    """Where the compiled decoder takes a batch (packed columns), the Python reference takes it
    too, with the same columns; batches of one query and round never miss it."""
    fast = decode_uniform(data)
    reference = decode_uniform_python(data)
    if fast is not None and fast.packed is not None:
        assert reference == fast
        assert len(set(reference.query_ids)) == 1 and len(set(reference.rounds)) == 1
    elif reference is not None:
        assert len(set(zip(reference.query_ids, reference.rounds, strict=True))) > 1
        assert fast == reference


def _report(query_id: str = "rr", round_: int = 1, answers: bytes = b"\x12\x40") -> pb.Report:
    return pb.Report(
        query_id=query_id,
        round=round_,
        device_pseudonym=secrets.token_bytes(16),
        report_id=secrets.token_bytes(16),
        answers=answers,
    )


def _uniform_body() -> list[tuple[int, int | bytes]]:
    values: dict[int, int | bytes] = {
        1: b"rr",
        2: 1,
        3: secrets.token_bytes(16),
        4: secrets.token_bytes(16),
        5: b"\x12\x40",
    }
    return list(values.items())


def _encode(fields: Sequence[tuple[int, int | bytes]]) -> bytes:
    return b"".join(field(number, value) for number, value in fields)


FALLBACKS: dict[str, bytes] = {
    "round 0 is left out": pb.SubmitBatchRequest(
        reports=[_report(), _report(round_=0), _report()]
    ).SerializeToString(),
    "every round 0": pb.SubmitBatchRequest(
        reports=[_report(round_=0), _report(round_=0)]
    ).SerializeToString(),
    "empty answers are left out": pb.SubmitBatchRequest(
        reports=[_report(answers=b""), _report(answers=b"")]
    ).SerializeToString(),
    "a second query id of equal length, not ASCII": pb.SubmitBatchRequest(
        reports=[_report("ab"), _report("é")]
    ).SerializeToString(),
    "two queries of different lengths": pb.SubmitBatchRequest(
        reports=[_report("ab"), _report("abc")]
    ).SerializeToString(),
    "answers of different lengths": pb.SubmitBatchRequest(
        reports=[_report(), _report(answers=b"\x00")]
    ).SerializeToString(),
    "a two-byte round": pb.SubmitBatchRequest(
        reports=[_report(round_=200), _report(round_=200)]
    ).SerializeToString(),
    "non-ASCII query id": pb.SubmitBatchRequest(
        reports=[_report("é"), _report("é")]
    ).SerializeToString(),
    "fields reordered": batch_of([_encode(_uniform_body()[::-1]) for _ in range(3)]),
    "an unknown report field": batch_of([_encode([*_uniform_body(), (9, 7)]) for _ in range(3)]),
    "a repeated field": batch_of([_encode([*_uniform_body(), (2, 2)]) for _ in range(3)]),
    "an explicit empty answers field": batch_of([_encode(_uniform_body())[:-4] + b"\x2a\x00"] * 2),
    "a padded length varint": batch_of(
        [b"".join(field(n, v, padding=1) for n, v in _uniform_body()) for _ in range(2)]
    ),
    "an unknown batch field": pb.SubmitBatchRequest(
        reports=[_report(), _report()]
    ).SerializeToString()
    + field(2, b"x" * 50),
    "a later record's round byte starts a longer varint": pb.SubmitBatchRequest(
        reports=[_report(), _report()]
    )
    .SerializeToString()
    .replace(b"\x10\x01\x1a", b"\x10\x81\x1a")
    .replace(b"\x10\x81\x1a", b"\x10\x01\x1a", 1),
    "a trailing byte": pb.SubmitBatchRequest(reports=[_report()]).SerializeToString() + b"\x00",
    "no reports": b"",
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_unusual_batches_fall_back_to_protobuf(name: str) -> None:
    data = FALLBACKS[name]
    assert decode_uniform(data) is None
    assert_agrees(data)


def test_a_batch_mixing_queries_whose_ids_have_one_length_takes_the_fast_path() -> None:
    reports = [_report(q) for q in ("ab", "cd", "ab", "ef", "cd")]
    fast = assert_agrees(pb.SubmitBatchRequest(reports=reports).SerializeToString())
    assert fast is not None
    assert fast.query_ids == ["ab", "cd", "ab", "ef", "cd"]


@st.composite
def mixed_query_batches(draw: st.DrawFn) -> list[pb.Report]:
    """Batches mixing up to a dozen queries whose ids have one length (ASCII, NUL included):
    few enough to be told apart one by one, or more, to be sorted."""
    length = draw(st.integers(1, 3))
    ids = st.text(st.characters(max_codepoint=0x7F), min_size=length, max_size=length)
    names = draw(st.lists(ids, min_size=1, max_size=12, unique=True))
    return [
        _report(draw(st.sampled_from(names)), draw(st.sampled_from([1, 2])))
        for _ in range(draw(st.integers(1, 40)))
    ]


@FAST
@given(mixed_query_batches())
def test_batches_mixing_queries_take_the_fast_path(reports: list[pb.Report]) -> None:
    fast = assert_agrees(pb.SubmitBatchRequest(reports=reports).SerializeToString())
    assert fast is not None
    assert fast.query_ids == [r.query_id for r in reports]
    event(f"{len(set(fast.query_ids))} queries")


def test_columns_keep_nul_bytes_and_long_records() -> None:
    """Trailing NUL bytes survive (no fixed-width string trimming); records over 127 bytes
    have a two-byte length prefix."""
    reports = [
        pb.Report(
            query_id="q" * 64,
            round=2,
            device_pseudonym=b"\x00" * 16,
            report_id=b"\x01" + b"\x00" * 15,
            answers=b"\x80" + b"\x00" * 99,
        )
        for _ in range(3)
    ]
    data = pb.SubmitBatchRequest(reports=reports).SerializeToString()
    fast = assert_agrees(data)
    assert fast is not None
    assert fast.pseudonyms == [b"\x00" * 16] * 3
    assert fast.report_ids == [b"\x01" + b"\x00" * 15] * 3
    assert fast.rounds == [2, 2, 2]
    assert fast.query_ids == ["q" * 64] * 3


# ---------------------------------------------------------------- through real servers

TARGETS = list(range(100, 110))  # 10 targets: 2 answer bytes, 6 padding bits
MAX_BATCH = 50


@dataclass
class Pair:
    """The aggregator (raw-bytes SubmitBatch) and a reference server over the same services
    with the generated registration (protobuf deserializes every request)."""

    fast: Harness
    reference: Harness
    reference_store: SqliteStore


async def _reference_server(db: Path) -> tuple[grpc.aio.Server, SqliteStore, int]:
    store = SqliteStore(db)
    await store.open()
    server = grpc.aio.server()
    collector = CollectorService(store, AggregatorMetrics(), MAX_BATCH, chunk=1_000)
    pb_grpc.add_CollectorServicer_to_server(collector, server)
    pb_grpc.add_AdminServicer_to_server(AdminService(store, TOKEN, release_function()), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, store, port


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[Pair]:
    fast = await connect(
        AggregatorServer(make_config(tmp_path / "fast.db", max_batch_reports=MAX_BATCH))
    )
    server, store, port = await _reference_server(tmp_path / "reference.db")
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    reference = Harness(
        fast.server, channel, pb_grpc.CollectorStub(channel), pb_grpc.AdminStub(channel)
    )
    try:
        yield Pair(fast, reference, store)
    finally:
        await channel.close(None)
        await server.stop(None)
        await store.close()
        await fast.channel.close(None)
        await fast.server.stop(grace=None)


Outcome = tuple[str, bytes | str]


async def send(h: Harness, data: bytes) -> Outcome:
    """SubmitBatch with these exact bytes: the serialized response, or the status."""
    call = h.channel.unary_unary(
        "/ldpcollect.v1.Collector/SubmitBatch",
        request_serializer=None,
        response_deserializer=None,
    )
    try:
        response: bytes = await call(data)
    except grpc.aio.AioRpcError as exc:
        return (exc.code().name, exc.details() or "")
    return ("OK", response)


async def both(p: Pair, data: bytes) -> pb.SubmitReportsResponse | tuple[str, str]:
    """Send to both servers; they must answer identically. Returns the decoded answer."""
    fast, reference = await send(p.fast, data), await send(p.reference, data)
    assert fast == reference
    status, body = fast
    if status == "OK":
        assert isinstance(body, bytes)
        return pb.SubmitReportsResponse.FromString(body)
    assert isinstance(body, str)
    return status, body


def serialized(reports: Sequence[pb.Report]) -> bytes:
    return pb.SubmitBatchRequest(reports=reports).SerializeToString()


async def test_raw_bytes_submit_batch_matches_the_protobuf_registration(pair: Pair) -> None:
    rr, sp = RandomizedResponse("0.85", "0.3"), SamplingPrivacy("1/2")
    for h in (pair.fast, pair.reference):
        await h.create("rr", rr, TARGETS)
        await h.create("sp", sp, TARGETS)
    rr_devices = [Device(rr, 100 + i % 10, TARGETS) for i in range(45)]
    sp_devices = [Device(sp, 100 + i % 10, TARGETS) for i in range(30)]

    # A uniform valid batch (fast path), then the same bytes again: all duplicates.
    first = serialized([d.report("rr", 1) for d in rr_devices[:40]])
    assert decode_uniform(first) is not None
    reply = await both(pair, first)
    assert isinstance(reply, pb.SubmitReportsResponse)
    assert (reply.accepted, reply.duplicates, len(reply.rejected)) == (40, 0, 0)
    reply = await both(pair, first)
    assert isinstance(reply, pb.SubmitReportsResponse)
    assert (reply.accepted, reply.duplicates) == (0, 40)

    # Uniform layout, per-report problems: reused id with other answers, padding bits set,
    # wrong round, a device reporting twice, plus new valid reports.
    reused = rr_devices[0].report("rr", 1)
    flipped = bytes([reused.answers[0] ^ 0x80]) + reused.answers[1:]
    other_id = rr_devices[1].report("rr", 1)
    mixed = [
        rr_devices[40].report("rr", 1),
        pb.Report(
            query_id="rr",
            round=1,
            device_pseudonym=reused.device_pseudonym,
            report_id=reused.report_id,
            answers=flipped,
        ),
        pb.Report(
            query_id="rr",
            round=1,
            device_pseudonym=secrets.token_bytes(16),
            report_id=secrets.token_bytes(16),
            answers=b"\x00\x01",
        ),
        pb.Report(
            query_id="rr",
            round=2,
            device_pseudonym=secrets.token_bytes(16),
            report_id=secrets.token_bytes(16),
            answers=b"\x00\x00",
        ),
        pb.Report(
            query_id="rr",
            round=1,
            device_pseudonym=other_id.device_pseudonym,
            report_id=secrets.token_bytes(16),
            answers=other_id.answers,
        ),
        rr_devices[41].report("rr", 1),
    ]
    data = serialized(mixed)
    assert decode_uniform(data) is not None
    reply = await both(pair, data)
    assert isinstance(reply, pb.SubmitReportsResponse)
    assert reply.accepted == 2
    assert [(r.index, r.code) for r in reply.rejected] == [
        (1, grpc.StatusCode.ALREADY_EXISTS.value[0]),
        (2, grpc.StatusCode.INVALID_ARGUMENT.value[0]),
        (3, grpc.StatusCode.FAILED_PRECONDITION.value[0]),
        (4, grpc.StatusCode.ALREADY_EXISTS.value[0]),
    ]

    # Fallbacks: several queries (one unknown), a short pseudonym, fields in another order.
    several = serialized(
        [
            rr_devices[42].report("rr", 1),
            sp_devices[0].report("sp", 1),
            rr_devices[43].report("nope", 1),
        ]
    )
    short = rr_devices[44].report("rr", 1)
    short.device_pseudonym = short.device_pseudonym[:15]
    short_key = serialized([rr_devices[43].report("rr", 1), short])
    reordered = batch_of(
        [
            _encode(
                [
                    (5, d.report("sp", 1).answers),
                    (4, d.report("sp", 1).report_id),
                    (3, d.pseudonym),
                    (2, 1),
                    (1, b"sp"),
                ]
            )
            for d in sp_devices[1:5]
        ]
    )
    for data in (several, short_key, reordered):
        assert decode_uniform(data) is None
        reply = await both(pair, data)
        assert isinstance(reply, pb.SubmitReportsResponse)
    assert reply.accepted == 4

    # Sampling Privacy round 1 for the rest (fast), round 2 for all but two, plus one device
    # that never answered round 1.
    data = serialized([d.report("sp", 1) for d in sp_devices[5:]])
    assert decode_uniform(data) is not None
    await both(pair, data)
    for h in (pair.fast, pair.reference):
        await h.admin.AdvanceRound(pb.AdvanceRoundRequest(query_id="sp"), metadata=ADMIN)
    stranger = Device(sp, 105, TARGETS)
    round2 = [d.report("sp", 2) for d in sp_devices[:28]] + [stranger.report("sp", 2)]
    data = serialized(round2)
    assert decode_uniform(data) is not None
    reply = await both(pair, data)
    assert isinstance(reply, pb.SubmitReportsResponse)
    assert reply.accepted == 28
    assert [r.index for r in reply.rejected] == [28]

    # Batch-level refusals: empty, too many, malformed bytes.
    assert await both(pair, b"") == (
        "INVALID_ARGUMENT",
        "the batch has no reports; send at least one",
    )
    too_many = serialized([Device(rr, 100, TARGETS).report("rr", 1) for _ in range(MAX_BATCH + 1)])
    assert decode_uniform(too_many) is not None
    refusal = await both(pair, too_many)
    assert isinstance(refusal, tuple) and refusal[0] == "RESOURCE_EXHAUSTED"
    # Malformed bytes: the raw-bytes handler says what is wrong (grpc's own deserializer, on the
    # reference registration, cannot), and nothing is counted (checked below).
    for malformed in (first[:-3], b"\x0a\x03\x0a\x01\xff", b"\xff\xff\xff"):
        status, body = await send(pair.fast, malformed)
        assert status == "INVALID_ARGUMENT"
        assert isinstance(body, str) and "not a valid ldpcollect.v1.SubmitBatchRequest" in body

    # Same state on both servers, and the counts are the devices' bits.
    for query_id in ("rr", "sp"):
        fast_q, reference_q = [await h.query(query_id) for h in (pair.fast, pair.reference)]
        assert fast_q.reports_per_round == reference_q.reports_per_round
        assert (fast_q.completed_devices, fast_q.state, fast_q.current_round) == (
            reference_q.completed_devices,
            reference_q.state,
            reference_q.current_round,
        )
        assert (
            pair.fast.server.store.counts(query_id).tolist()
            == pair.reference_store.counts(query_id).tolist()
        )
    assert pair.fast.server.store.counts("rr").tolist() == expected_counts(rr_devices[:44], 1, 10)
    assert pair.fast.server.store.counts("sp").tolist() == expected_counts(sp_devices[:28], 2, 10)
