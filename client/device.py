"""One device: list open queries, locate itself, answer each round once, remember everything.

One entry point for both trust models: `participate` asks the server for its open queries;
a leader of two aggregators answers with secure queries instead, and the device then
answers each in secure mode (`answer_secure`): the same draw, saved the same way, sealed
into shares for the two aggregators (the helper's config comes from `helper_config`, an input
of its own) and uploaded once for every round, the sealed bytes saved before they are sent.

The device half of the mechanisms is used (CSPRNG, exact rational probabilities). For each
query the device decides, once, whether it can afford it (its own budget, see
`client.leakage`), then draws every round's answers, a pseudonym and one report id per round,
and saves them before sending anything. Each round is sent with the saved report id; transient
failures are retried with the same id, and `duplicate=true` counts as success (the server had
it already). Permanent errors are returned in the outcome, never hidden.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import grpc

from client.leakage import query_cost
from client.query_info import QueryInfo
from client.retry import (
    RetryHook,
    RetryPolicy,
    error_code,
    error_details,
    is_retryable,
    is_transient,
    next_delay,
)
from client.state import KEY_BYTES, DeviceState, QueryRecord
from client.tokens import IssuerClient, IssuerKey, report_challenge
from ldpcollect.admission.tokens import TokenChallenge
from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import check_point
from ldpcollect.randomness import OS_RANDOM, RandomSource
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import ldpcollect_pb2_grpc as pb_grpc
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.v1 import secure_pb2_grpc as spb_grpc

if TYPE_CHECKING:
    from ldpcollect.secure.sealing import HpkeConfig

_T = TypeVar("_T")
# Where a device learns the helper's HPKE config for a secure query.
HelperConfigSource = Callable[[spb.SecureQuery], "HpkeConfig"]

OutcomeStatus = Literal[
    "accepted",  # the server stored this round's report
    "duplicate",  # the server had this report id already (e.g. our ack was lost): success
    "already_acknowledged",  # this round was acknowledged before; nothing sent
    "declined",  # the query would exceed the device's budget
    "missed",  # the query is past round 1 and this device never answered it: it stays out
    "failed",  # a permanent error (code and message say which)
]


@dataclass(frozen=True)
class Outcome:
    query_id: str
    round: int
    status: OutcomeStatus
    code: str = ""
    message: str = ""
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.status in ("accepted", "duplicate", "already_acknowledged")


class ReportFailed(Exception):
    """A report the server refused permanently, or that kept failing transiently."""

    def __init__(self, code: grpc.StatusCode | None, message: str, attempts: int) -> None:
        self.code = code
        self.message = message
        self.attempts = attempts
        name = code.name if code is not None else "UNKNOWN"
        super().__init__(f"{name}: {message} (after {attempts} attempt(s))")


class Device:
    """A device at (lat, lon) whose state lives in the JSON file `state_path`."""

    def __init__(
        self,
        state_path: Path | str,
        lat: float,
        lon: float,
        *,
        budget_epsilon: float | None = None,
        budget_delta: float = 0.0,
        retry: RetryPolicy | None = None,
        on_retry: RetryHook | None = None,
        sleep: Callable[[float], None] = time.sleep,
        issuer: IssuerClient | None = None,
        helper_config: HelperConfigSource | None = None,
        random_source: RandomSource = OS_RANDOM,
    ) -> None:
        """`issuer`: where this enrolled device gets admission tokens, for queries that
        require them (docs/admission.md). `helper_config`: the helper's HPKE config for a
        secure query, taken from the helper or a pinned copy, never only from the leader
        (`client.secure_keys`). `random_source`: where the draw, pseudonym and report ids
        come from (the OS CSPRNG; the conformance vectors replay given bytes)."""
        self.lat, self.lon = check_point(lat, lon)
        self.state = DeviceState.open(state_path, budget_epsilon, budget_delta)
        self.retry = retry or RetryPolicy()
        self._jitter_rng = random.Random()
        self.on_retry = on_retry
        self._sleep = sleep
        self.issuer = issuer
        self.helper_config = helper_config
        self._random = random_source

    def participate(
        self,
        target: grpc.Channel | pb_grpc.CollectorStub,
        *,
        query_ids: Iterable[str] | None = None,
    ) -> list[Outcome]:
        """Answer the current round of every open query (or just `query_ids`). `target` is a
        channel (`client.channels.open_channel(server, tls_ca=...)` for TLS) or a stub."""
        stub = (
            target if isinstance(target, pb_grpc.CollectorStub) else pb_grpc.CollectorStub(target)
        )
        wanted = None if query_ids is None else set(query_ids)
        try:
            listing = self._call(
                lambda: stub.ListOpenQueries(
                    pb.ListOpenQueriesRequest(), timeout=self.retry.rpc_timeout
                )
            )
        except ReportFailed as exc:
            if exc.code != grpc.StatusCode.UNIMPLEMENTED or isinstance(
                target, pb_grpc.CollectorStub
            ):
                raise
            return self._participate_secure(target, wanted)
        return [
            self.answer(stub, query)
            for query in listing.queries
            if wanted is None or query.query_id in wanted
        ]

    def answer(self, stub: pb_grpc.CollectorStub, query: pb.Query) -> Outcome:
        """Answer the query's current round (deciding and saving everything first)."""
        qid, round_ = query.query_id, int(query.current_round)
        try:
            info = QueryInfo.from_proto(query)
        except ParameterError as exc:
            return Outcome(
                qid, round_, "failed", "INVALID_ARGUMENT", f"bad query parameters: {exc}"
            )
        if not info.is_open:
            return Outcome(qid, round_, "failed", "FAILED_PRECONDITION", "query is not open")
        record = self.state.queries.get(qid)
        if record is None:
            if round_ > 1:
                return Outcome(
                    qid,
                    round_,
                    "missed",
                    message="joined after round 1; answering later rounds "
                    "alone would leak without counting",
                )
            record = self._decide(info)
        refused = _not_answerable(record, info, round_)
        if refused is not None:
            return refused
        if not 1 <= round_ <= len(record.acked):
            return Outcome(qid, round_, "failed", "FAILED_PRECONDITION", f"no round {round_}")
        if record.acked[round_ - 1]:
            return Outcome(qid, round_, "already_acknowledged")
        if query.require_tokens and not record.token(round_):
            refused = self._fetch_token(
                record, round_, query.token_issuer, lambda key: report_challenge(key, query, round_)
            )
            if refused is not None:
                return refused
        try:
            ack, attempts = self._send(stub, self.report(record, round_))
        except ReportFailed as exc:
            code = exc.code.name if exc.code is not None else "UNKNOWN"
            return Outcome(qid, round_, "failed", code, exc.message, exc.attempts)
        record.acked[round_ - 1] = True
        self.state.save()
        return Outcome(qid, round_, "duplicate" if ack.duplicate else "accepted", attempts=attempts)

    def _participate_secure(self, channel: grpc.Channel, wanted: set[str] | None) -> list[Outcome]:
        """The server is a leader: answer its open secure queries."""
        stub = spb_grpc.SecureCollectorStub(channel)
        listing = self._call(
            lambda: stub.ListSecureQueries(
                spb.ListSecureQueriesRequest(), timeout=self.retry.rpc_timeout
            )
        )
        return [
            self.answer_secure(channel, query)
            for query in listing.queries
            if wanted is None or query.query_id in wanted
        ]

    def answer_secure(self, channel: grpc.Channel, query: spb.SecureQuery) -> Outcome:
        """Answer a secure query: decide and draw as for a trusted one (saved first), seal
        every round's answers into one upload (saved before it is sent), upload it with
        retries of the same bytes; an acknowledgement answers every round."""
        from client.secure_admin import as_query
        from client.secure_device import SecureDevice
        from client.secure_device import report_challenge as secure_challenge
        from client.secure_keys import UntrustedAggregator

        qid, round_ = query.query_id, int(query.upload_round)
        if self.helper_config is None:
            return Outcome(
                qid,
                round_,
                "failed",
                "FAILED_PRECONDITION",
                "a secure query needs the helper's own HPKE key: Device(helper_config=...) "
                "(client.secure_keys: from the helper, or its operator's pinned copy)",
            )
        try:  # one upload answers every round: the device decides as at round 1
            info = replace(QueryInfo.from_proto(as_query(query)), current_round=1)
            device = SecureDevice(query, self.helper_config(query))
        except (ParameterError, UntrustedAggregator) as exc:
            return Outcome(qid, round_, "failed", "INVALID_ARGUMENT", f"bad query: {exc}")
        if query.state != spb.SECURE_QUERY_STATE_OPEN:
            return Outcome(qid, round_, "failed", "FAILED_PRECONDITION", "query is not open")
        record = self.state.queries.get(qid) or self._decide(info)
        refused = _not_answerable(record, info, round_)
        if refused is not None:
            return refused
        if all(record.acked):
            return Outcome(qid, round_, "already_acknowledged")
        if query.require_tokens and not record.token(round_):
            refused = self._fetch_token(
                record, round_, query.token_issuer, lambda key: secure_challenge(key, query)
            )
            if refused is not None:
                return refused
        if not record.sealed:
            assert record.draw is not None
            record.sealed = device.seal(record.draw, record.report_ids[0])
            self.state.save()
        try:
            duplicate, attempts = self._upload(channel, record.sealed, record.token(round_))
        except ReportFailed as exc:
            code = exc.code.name if exc.code is not None else "UNKNOWN"
            return Outcome(qid, round_, "failed", code, exc.message, exc.attempts)
        record.acked = [True] * len(record.acked)
        self.state.save()
        return Outcome(qid, round_, "duplicate" if duplicate else "accepted", attempts=attempts)

    def _upload(self, channel: grpc.Channel, sealed: bytes, token: bytes) -> tuple[bool, int]:
        """Upload one sealed report, retrying transient failures (refused in the answer or as
        the call's status) with the same bytes: (duplicate?, attempts)."""
        from client.secure_device import upload

        attempts = 0
        delays = self.retry.delays()
        while True:
            attempts += 1
            answer = self._call(
                lambda: upload(channel, [sealed], self.retry.rpc_timeout, [token] if token else [])
            )
            if not answer.rejected:
                return bool(answer.duplicates), attempts
            [rejection] = answer.rejected
            code = next((c for c in grpc.StatusCode if c.value[0] == rejection.code), None)
            delay = next(delays, None) if is_transient(code) else None
            if delay is None:
                raise ReportFailed(code, rejection.message, attempts)
            self._sleep(delay)

    @staticmethod
    def report(record: QueryRecord, round_: int) -> pb.Report:
        """The report for `round_`, rebuilt from the saved record (identical every time)."""
        assert record.draw is not None
        return pb.Report(
            query_id=record.query_id,
            round=round_,
            device_pseudonym=record.pseudonym,
            report_id=record.report_ids[round_ - 1],
            answers=record.draw.answers(round_),
            token=record.token(round_),
        )

    def _fetch_token(
        self,
        record: QueryRecord,
        round_: int,
        token_issuer: str,
        challenge_of: Callable[[IssuerKey], TokenChallenge],
    ) -> Outcome | None:
        """Get and save this round's token (for the query's challenge under the issuer's key)
        before the report is sent; an Outcome if not."""
        qid, issuer = record.query_id, self.issuer
        if issuer is None:
            return Outcome(
                qid,
                round_,
                "failed",
                "UNAUTHENTICATED",
                f"query {qid} requires admission tokens from {token_issuer}; this "
                "device has no issuer (Device(issuer=IssuerClient(...)))",
            )
        try:
            key = self._call(issuer.key)
            challenge = challenge_of(key)
            [token] = self._call(lambda: issuer.tokens(key, [challenge]))
        except ReportFailed as exc:
            code = exc.code.name if exc.code is not None else "UNKNOWN"
            return Outcome(qid, round_, "failed", code, f"token: {exc.message}", exc.attempts)
        except ParameterError as exc:
            return Outcome(qid, round_, "failed", "FAILED_PRECONDITION", str(exc))
        record.set_token(round_, token)
        self.state.save()
        return None

    def _decide(self, info: QueryInfo) -> QueryRecord:
        """Budget check, then draw once and save before anything is sent."""
        cost = query_cost(info.mechanism, len(info.targets))
        budget = self.state.budget
        if budget is not None and not budget.can_answer(cost.epsilon, cost.delta, info.query_id):
            record = QueryRecord(
                query_id=info.query_id,
                fingerprint=info.fingerprint,
                status="declined",
                charge_epsilon=cost.epsilon,
                charge_delta=cost.delta,
                reason=f"{cost.explanation}: (epsilon {cost.epsilon:.6g}, delta {cost.delta:g}) "
                f"would exceed the device budget (epsilon {budget.epsilon:g}, delta "
                f"{budget.delta:g}; spent {budget.spent_epsilon:.6g}, {budget.spent_delta:g})",
            )
        else:
            location = info.locate(self.lat, self.lon)
            draw = info.mechanism.draw(location, info.targets, self._random)
            record = QueryRecord(
                query_id=info.query_id,
                fingerprint=info.fingerprint,
                status="answering",
                charge_epsilon=cost.epsilon,
                charge_delta=cost.delta,
                location_id=location,
                pseudonym=self._random.token_bytes(KEY_BYTES),
                report_ids=tuple(self._random.token_bytes(KEY_BYTES) for _ in range(draw.rounds)),
                draw=draw,
                acked=[False] * draw.rounds,
            )
            if budget is not None:
                budget.record(info.query_id, cost.epsilon, cost.delta)
        self.state.queries[info.query_id] = record
        self.state.save()
        return record

    def _send(self, stub: pb_grpc.CollectorStub, report: pb.Report) -> tuple[pb.ReportAck, int]:
        request = pb.SubmitReportRequest(report=report)
        attempts = 0

        def call() -> pb.SubmitReportResponse:
            nonlocal attempts
            attempts += 1
            return stub.SubmitReport(request, timeout=self.retry.rpc_timeout)

        response = self._call(call)
        return response.ack, attempts

    def _call(self, fn: Callable[[], _T]) -> _T:
        """Run `fn`, retrying transient failures with backoff; raise ReportFailed otherwise."""
        delays = self.retry.delays()
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except grpc.RpcError as err:
                code = error_code(err)
                backoff = next(delays, None) if is_retryable(err) else None
                delay = next_delay(backoff, err, self._jitter_rng)
                if delay is None:
                    raise ReportFailed(code, error_details(err), attempt) from err
                if self.on_retry is not None:
                    self.on_retry(attempt, err)
                self._sleep(delay)


def _not_answerable(record: QueryRecord, info: QueryInfo, round_: int) -> Outcome | None:
    """Why a device with this draw does not answer the query (either trust model), or None:
    it declined it, or the query's public parameters changed since it drew."""
    if record.status == "declined":
        return Outcome(info.query_id, round_, "declined", message=record.reason)
    if record.fingerprint != info.fingerprint:
        return Outcome(
            info.query_id,
            round_,
            "failed",
            "FAILED_PRECONDITION",
            "the query's public parameters changed since this device drew its answers; "
            "it will not draw again for the same query id",
        )
    return None
