"""Leader: the device-facing upload (served as SecureCollector by `services`).

Each upload is checked as far as the leader alone can (it decodes, the query is open, the
round, both config ids, the leader's share opens and has the right length, the helper's
ciphertext has the right size), then held durably and acknowledged; the aggregation driver
verifies it with the helper afterwards (docs/secure-mode.md, "Acknowledgement").

What is held of a report: its opened leader share, and the report with its leader ciphertext
replaced by the ciphertext's SHA-256 (`held_body`): the share is stored once, not twice
(sealed and opened), and the store's digest of the held body still tells the same upload from
any other."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from aggregator.errors import (
    AlreadyExists,
    FailedPrecondition,
    Invalid,
    NotFound,
    ServiceError,
    Unauthenticated,
)
from aggregator.redemption import token_refusal
from aggregator.secure.metrics import SecureMetrics
from aggregator.secure.queries import config_of, vdaf_of
from aggregator.secure.store import OPEN, StoredQuery, UploadOutcome
from aggregator.secure.store_api import SecureStoreApi
from aggregator.secure.token_check import (
    TOKEN_MISSING,
    SecureTokens,
    missing_token,
    replayed_token,
    requires_tokens,
)
from ldpcollect.admission.verification import Verdict
from ldpcollect.secure import _native_hpke
from ldpcollect.secure.sealing import (
    ENC_SIZE,
    INPUT_SHARE_LABEL,
    ROLE_LEADER,
    TAG_SIZE,
    HpkeKeyPair,
)
from ldpcollect.secure.upload import (
    REPORT_ID_SIZE,
    BitsVdaf,
    Refusal,
    ReportRejected,
    SecureFormatError,
    SecureReport,
    open_shares,
)
from ldpcollect.vdaf.errors import VdafError
from ldpcollect.vdaf.xof import SEED_SIZE

MAX_UPLOAD_REPORTS = 1_000


@dataclass(frozen=True)
class Checked:
    """An upload that passed the leader's checks: what the store holds (`body` is the
    held body, `held_body`)."""

    query_id: str
    report_id: bytes
    body: bytes
    leader_share: bytes
    token: bytes = b""


def held_body(report: SecureReport, body: bytes) -> bytes:
    """The report as the leader holds it until its job (`body`: its upload, the exact
    encoding of `report`): the leader ciphertext replaced by its SHA-256 (the opened share is
    held beside it). Two uploads of one report id give the same held body only if they are
    the same bytes (up to a SHA-256 collision), so the store's duplicate check keeps its
    meaning; the job reads the public share and the helper's ciphertext from it as from the
    upload."""
    end = len(body) - 4 - len(report.helper_ciphertext)
    start = end - 4 - len(report.leader_ciphertext)
    return (
        body[:start] + _HASH_SIZE + hashlib.sha256(report.leader_ciphertext).digest() + body[end:]
    )


_HASH_SIZE = struct.pack(">I", hashlib.sha256().digest_size)
_U32 = struct.Struct(">I")


def held_fields(held: bytes) -> tuple[bytes, bytes, bytes]:
    """(report id, public share, helper ciphertext) of a held body (`held_body`'s output,
    read back from this leader's own store, so not checked again)."""
    at = 1 + held[0] + 4  # after the query id and the round
    report_id, at = held[at : at + REPORT_ID_SIZE], at + REPORT_ID_SIZE
    (size,) = _U32.unpack_from(held, at)
    public_share, at = held[at + 4 : at + 4 + size], at + 4 + size
    at += 4 + _U32.unpack_from(held, at)[0]  # the leader ciphertext's digest
    (size,) = _U32.unpack_from(held, at)
    return report_id, public_share, held[at + 4 : at + 4 + size]


@dataclass(frozen=True)
class QueryRules:
    """What every report of one query is checked against, worked out once per upload."""

    query: StoredQuery
    vdaf: BitsVdaf
    helper_config_id: int
    helper_size: int

    @classmethod
    def of(cls, query: StoredQuery) -> QueryRules:
        helper_size = 1 + ENC_SIZE + 2 * SEED_SIZE + TAG_SIZE
        return cls(query, vdaf_of(query), config_of(query.params, "helper").config_id, helper_size)


class ReportRefused(Invalid):
    """An upload refused by the leader's own checks, with the refusal's name."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class TokenRefused:
    """An upload whose token the leader refuses: the status to answer, the metric's name."""

    error: ServiceError
    reason: str


@dataclass
class UploadResult:
    accepted: int = 0
    duplicates: int = 0
    # (index in the upload, report id if known, the refusal)
    rejected: list[tuple[int, bytes, ServiceError]] = field(default_factory=list)


def check_sealed(report: SecureReport, rules: QueryRules, key_pair: HpkeKeyPair) -> None:
    """What the leader checks about `report` for the query of `rules` before opening its
    share; raises a refusal (ReportRefused for the report's own faults)."""
    query = rules.query
    if query.state != OPEN:
        raise FailedPrecondition(f"secure query {query.query_id!r} is not open")
    expected_round = query.params["upload_round"]
    if report.round != expected_round:
        raise ReportRefused("WRONG_ROUND", f"round must be {expected_round} for this query")
    helper, helper_size = report.helper_ciphertext, rules.helper_size
    if not helper or helper[0] != rules.helper_config_id:
        raise ReportRefused("WRONG_CONFIG_ID", "the helper's share names another config")
    if len(helper) != helper_size:
        raise ReportRefused(
            "WRONG_LENGTH",
            f"the helper's ciphertext is {len(helper)} bytes, expected {helper_size}",
        )
    ciphertext = report.leader_ciphertext
    if not ciphertext or ciphertext[0] != key_pair.config.config_id:
        raise ReportRefused("WRONG_CONFIG_ID", "the leader's share names another config")


def check_opened(
    report: SecureReport, body: bytes, rules: QueryRules, opened: bytes | ReportRejected
) -> Checked:
    """The rest, once the leader's share is opened (`opened`: its plaintext, or why it did
    not open): the public share and the opened share decode for the query's VDAF."""
    if isinstance(opened, ReportRejected):
        raise ReportRefused(opened.reason.name, opened.detail)
    check_shares(rules, report.public_share, opened)
    return Checked(report.query_id, report.report_id, held_body(report, body), opened)


def check_shares(rules: QueryRules, public_share: bytes, opened: bytes) -> None:
    """The public share and the opened leader share decode for the query's VDAF."""
    try:
        rules.vdaf.decode_public_share(public_share)
        rules.vdaf.check_input_share(0, opened)
    except VdafError as error:
        raise ReportRefused(Refusal.WRONG_LENGTH.name, str(error)) from None


def open_uploads(
    key_pair: HpkeKeyPair, rules: QueryRules, bodies: Sequence[bytes]
) -> list[Checked | ServiceError | None]:
    """The compiled path for a batch of uploads of one open query: per body its `Checked`,
    its refusal (the VDAF checks), or None where `_native_hpke.open_uploads` leaves the body
    to the reference path (`_check`, `open_shares`, `check_opened`), which gives the
    refusal's reason; the same results for every body it takes (tests/secure/
    test_upload_fast_path.py)."""
    query = rules.query
    opened = _native_hpke.open_uploads(
        key_pair.private_bytes(),
        INPUT_SHARE_LABEL + bytes([ROLE_LEADER]),
        query.query_id.encode(),
        query.params["upload_round"],
        key_pair.config.config_id,
        rules.helper_config_id,
        rules.helper_size,
        bodies,
    )
    results: list[Checked | ServiceError | None] = []
    for item in opened:
        if item is None:
            results.append(None)
            continue
        report_id, public_share, held, share = item
        try:
            check_shares(rules, public_share, share)
        except ReportRefused as refused:
            results.append(refused)
            continue
        results.append(Checked(query.query_id, report_id, held, share))
    return results


def query_id_of(body: bytes) -> str | None:
    """The query id an upload names, if its first field decodes."""
    try:
        query = body[1 : 1 + body[0]]
        return query.decode() if len(query) == body[0] > 0 else None
    except (IndexError, UnicodeDecodeError):
        return None


def _decode(body: bytes) -> SecureReport:
    try:
        return SecureReport.decode(body)
    except SecureFormatError as error:
        raise ReportRefused("MALFORMED", f"not a secure report: {error}") from None


class LeaderUpload:
    """Checks, holds durably and acknowledges uploads (run in a worker thread). For a query
    that requires tokens, each report's token is checked too (one batch per query, in this
    worker thread) and its nonce spent in the transaction that holds the report."""

    def __init__(
        self,
        store: SecureStoreApi,
        key_pair: HpkeKeyPair,
        metrics: SecureMetrics,
        on_held: Callable[[], None],
        tokens: SecureTokens | None = None,
    ) -> None:
        self.store, self.key_pair, self.metrics, self.on_held = store, key_pair, metrics, on_held
        self.tokens = tokens or SecureTokens(None)

    def upload(self, bodies: list[bytes], tokens: Sequence[bytes] = ()) -> UploadResult:
        if len(bodies) > MAX_UPLOAD_REPORTS:
            raise Invalid(f"at most {MAX_UPLOAD_REPORTS} reports per upload, got {len(bodies)}")
        if tokens and len(tokens) != len(bodies):
            raise Invalid(
                f"{len(tokens)} tokens for {len(bodies)} reports: send one token per report, "
                "in the same order, or none (nothing counted)"
            )
        result = UploadResult()
        queries: dict[str, QueryRules | None] = {}
        passed: list[tuple[int, Checked]] = []
        sealed: list[tuple[int, bytes, SecureReport, QueryRules]] = []
        for index, (body, fast) in enumerate(zip(bodies, self._fast(bodies, queries), strict=True)):
            if isinstance(fast, Checked):
                passed.append((index, fast))
                continue
            try:
                if fast is not None:
                    raise fast
                sealed.append((index, body, *self._check(body, queries)))
            except ServiceError as refused:
                self._reject(result, index, b"", refused)
        # what the compiled path left: the leader's shares opened in one call (per query)
        opened = open_shares(self.key_pair, ROLE_LEADER, [s[2] for s in sealed])
        for (index, body, report, rules), share in zip(sealed, opened, strict=True):
            try:
                passed.append((index, check_opened(report, body, rules, share)))
            except ServiceError as refused:
                self._reject(result, index, b"", refused)
        held: dict[str, list[tuple[int, Checked]]] = {}
        for index, item in sorted(passed, key=lambda pair: pair[0]):
            if tokens:
                item = replace(item, token=bytes(tokens[index]))
            held.setdefault(item.query_id, []).append((index, item))
        for query_id, items in held.items():
            found = queries[query_id]  # never None: its reports were checked against it
            if found is not None and requires_tokens(found.query.params):
                try:
                    items = self._redeemable(found.query, items, result)
                except ServiceError as refused:  # no token directory here
                    for index, checked in items:
                        self._reject(result, index, checked.report_id, refused)
                    continue
            rows = [(c.report_id, c.body, c.leader_share, c.token) for _, c in items]
            try:
                outcomes = self.store.hold_reports(query_id, rows)
            except ServiceError as refused:  # closed meanwhile
                for index, checked in items:
                    self._reject(result, index, checked.report_id, refused)
                continue
            for (index, checked), outcome in zip(items, outcomes, strict=True):
                if outcome == UploadOutcome.NEW:
                    result.accepted += 1
                elif outcome == UploadOutcome.DUPLICATE:
                    result.duplicates += 1
                elif outcome == UploadOutcome.TOKEN_SPENT:
                    spent = TokenRefused(replayed_token(), "TOKEN_REPLAY")
                    self._reject(result, index, checked.report_id, spent)
                else:
                    conflict = AlreadyExists("REPLAY: this report id was uploaded with other bytes")
                    self._reject(result, index, checked.report_id, conflict)
        if result.duplicates:
            self.metrics.uploads.labels("duplicate").inc(result.duplicates)
        if result.accepted:
            self.metrics.uploads.labels("accepted").inc(result.accepted)
            self.on_held()
        result.rejected.sort(key=lambda rejected: rejected[0])
        return result

    def _redeemable(
        self, query: StoredQuery, items: list[tuple[int, Checked]], result: UploadResult
    ) -> list[tuple[int, Checked]]:
        """The items whose token verifies (the others refused into `result`); a query's
        reports are one batch. Whether a nonce is fresh is the store's to decide."""
        kept: list[tuple[int, Checked]] = []
        with_token = [(index, checked) for index, checked in items if checked.token]
        verdicts = self.tokens.check(query, [checked.token for _, checked in with_token])
        for index, checked in items:
            if not checked.token:
                error = Unauthenticated(missing_token(query.query_id, query.params["token_issuer"]))
                refused = TokenRefused(error, TOKEN_MISSING)
                self._reject(result, index, checked.report_id, refused)
        for (index, checked), verdict in zip(with_token, verdicts, strict=True):
            if verdict is Verdict.VALID:
                kept.append((index, checked))
            else:
                refused = TokenRefused(token_refusal(verdict), f"TOKEN_{verdict.name}")
                self._reject(result, index, checked.report_id, refused)
        return kept

    def _fast(
        self, bodies: Sequence[bytes], queries: dict[str, QueryRules | None]
    ) -> list[Checked | ServiceError | None]:
        """`open_uploads` for the bodies of the query the first body names, if it is open;
        None for the rest."""
        query_id = query_id_of(bodies[0]) if bodies else None
        rules = None if query_id is None else self._rules(query_id, queries)
        if rules is None or rules.query.state != OPEN:
            return [None] * len(bodies)
        return open_uploads(self.key_pair, rules, bodies)

    def _rules(self, query_id: str, queries: dict[str, QueryRules | None]) -> QueryRules | None:
        if query_id not in queries:
            try:
                queries[query_id] = QueryRules.of(self.store.query(query_id))
            except NotFound:
                queries[query_id] = None
        return queries[query_id]

    def _check(
        self, body: bytes, queries: dict[str, QueryRules | None]
    ) -> tuple[SecureReport, QueryRules]:
        report = _decode(body)
        rules = self._rules(report.query_id, queries)
        if rules is None:
            raise NotFound(f"no secure query {report.query_id!r}")
        check_sealed(report, rules, self.key_pair)
        return report, rules

    def _reject(
        self,
        result: UploadResult,
        index: int,
        report_id: bytes,
        refusal: ServiceError | TokenRefused,
    ) -> None:
        if isinstance(refusal, TokenRefused):
            reason, refusal = refusal.reason, refusal.error
        elif isinstance(refusal, ReportRefused):
            reason = refusal.reason
        else:
            reason = "REPLAY" if isinstance(refusal, AlreadyExists) else type(refusal).__name__
        self.metrics.uploads.labels(reason).inc()
        result.rejected.append((index, report_id, refusal))
