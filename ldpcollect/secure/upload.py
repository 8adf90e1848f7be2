"""One secure-mode report and the pure steps both aggregators run on it.

A device shards its answer bits for one round with Prio3 for two aggregators and seals the
leader's and the helper's input shares to their HPKE configs, with (query, round, report id,
public share) bound in. Each aggregator opens its share and runs `verify_init`
(`open_and_verify_init`); the two verifier shares are combined into a verifier message
(`combine_batch`), and each aggregator keeps its output share only if the proof holds
(`finish_batch`). Output shares add up to aggregate shares; the two aggregate shares unshard
to the counts.

The VDAF for a round is Prio3SumVec with max_measurement 1 (bits = 1): its circuit checks
x * (x - 1) = 0 for every entry, i.e. every entry is 0 or 1, which is exactly an answer
vector. Prio3MultihotCountVec with max_weight = T proves the same about the entries but also
carries the weight's bits (ceil(log2(T+1)) more elements) and checks a weight bound that
allows everything: longer shares for no extra guarantee.

Replay: two reports with the same report id both verify (each is a valid report). Refusing the
second is the caller's job (the store's unique key on (query, round, report id)), as it is
for clear-text reports.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import isqrt

from ldpcollect.secure.sealing import (
    ROLE_HELPER,
    ROLE_LEADER,
    HpkeConfig,
    HpkeKeyPair,
    SealingError,
    config_id_of,
    open_input_share,
    open_input_shares,
    seal_input_shares,
)
from ldpcollect.vdaf.errors import MalformedShare, VdafError
from ldpcollect.vdaf.prio3 import (
    NONCE_SIZE,
    VERIFY_KEY_SIZE,
    PreparedShare,
    Prio3,
    VerifierMessage,
)
from ldpcollect.vdaf.variants import prio3_sum_vec

_U32 = struct.Struct(">I")

REPORT_ID_SIZE = NONCE_SIZE
"""The report id is the VDAF nonce, as in DAP: 16 bytes, fresh per report."""
CONTEXT_LABEL = b"ldpcollect-secure-v1 "
AGG_IDS = {ROLE_LEADER: 0, ROLE_HELPER: 1}

BitsVdaf = Prio3[Sequence[int], list[int]]


class SecureFormatError(ValueError):
    """A secure report's bytes that do not decode (the message says which field and why)."""


class Refusal(enum.Enum):
    """Why an aggregator refused one report; the roles map these to statuses and metrics."""

    WRONG_CONFIG_ID = "wrong HPKE config id"
    BAD_CIPHERTEXT = "ciphertext does not open (tampered, or other metadata)"
    WRONG_LENGTH = "share or public share malformed (wrong length, or an element out of range)"
    BAD_PROOF = "validity proof failed"


class ReportRejected(Exception):
    """One report refused, with its reason and a detail naming sizes, never metadata."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def answer_vdaf(targets: int) -> BitsVdaf:
    """The VDAF for one round over `targets` answer bits (chunk length about sqrt(T), the
    draft's advice for the smallest proof)."""
    return prio3_sum_vec(2, targets, 1, max(1, isqrt(targets)))


def vdaf_context(query_id: str) -> bytes:
    """The VDAF application context: proofs made for one query do not verify in another."""
    return CONTEXT_LABEL + query_id.encode()


def check_report_id(report_id: bytes) -> None:
    """A report id is REPORT_ID_SIZE bytes (DAP's nonce); raises SecureFormatError."""
    if len(report_id) != REPORT_ID_SIZE:
        raise SecureFormatError(f"a report id is {REPORT_ID_SIZE} bytes, got {len(report_id)}")


@dataclass(frozen=True)
class SecureReport:
    """What a device uploads, once, to the leader for one round. The leader forwards
    `helper_ciphertext`, still sealed, with the metadata."""

    query_id: str
    round: int
    report_id: bytes
    public_share: bytes
    leader_ciphertext: bytes
    helper_ciphertext: bytes

    def __post_init__(self) -> None:
        if not 1 <= len(self.query_id.encode()) < 256:
            raise SecureFormatError("a query id is 1 to 255 bytes of UTF-8")
        if isinstance(self.round, bool) or not 0 <= self.round < 2**32:
            raise SecureFormatError(f"round must be an integer in [0, 2**32), got {self.round!r}")
        check_report_id(self.report_id)

    def encode(self) -> bytes:
        query = self.query_id.encode()
        return b"".join(
            [
                struct.pack(">B", len(query)),
                query,
                struct.pack(">I", self.round),
                self.report_id,
                *(
                    struct.pack(">I", len(field)) + field
                    for field in (self.public_share, self.leader_ciphertext, self.helper_ciphertext)
                ),
            ]
        )

    @classmethod
    def decode(cls, data: bytes) -> SecureReport:
        """The fields, each complete, nothing after them; a report that does not parse in
        one pass is parsed again field by field for the error naming what is wrong."""
        try:
            end = 1 + data[0]
            query_id = data[1:end].decode()
            (round_,) = _U32.unpack_from(data, end)
            report_id = data[end + 4 : end + 4 + REPORT_ID_SIZE]
            offset, fields = end + 4 + REPORT_ID_SIZE, []
            for _ in range(3):
                (size,) = _U32.unpack_from(data, offset)
                fields.append(data[offset + 4 : offset + 4 + size])
                offset += 4 + size
        except (IndexError, UnicodeDecodeError, struct.error):
            offset = -1
        if offset != len(data):  # a field cut short (or bytes after the last)
            return cls._decode_by_field(data)
        return cls(query_id, round_, report_id, *fields)

    @classmethod
    def _decode_by_field(cls, data: bytes) -> SecureReport:
        reader = _Reader(data)
        query = reader.take("query id", reader.unpack("query id length", ">B"))
        try:
            query_id = query.decode()
        except UnicodeDecodeError:
            raise SecureFormatError("the query id is not UTF-8") from None
        round_ = reader.unpack("round", ">I")
        report_id = reader.take("report id", REPORT_ID_SIZE)
        fields = [
            reader.take(name, reader.unpack(f"{name} length", ">I"))
            for name in ("public share", "leader ciphertext", "helper ciphertext")
        ]
        if reader.rest:
            raise SecureFormatError(f"{reader.rest} bytes after the helper ciphertext")
        return cls(query_id, round_, report_id, *fields)


def shard_report(
    vdaf: BitsVdaf,
    leader: HpkeConfig,
    helper: HpkeConfig,
    query_id: str,
    round: int,
    report_id: bytes,
    measurement: Sequence[int],
    rand: bytes,
    ikm_e: tuple[bytes, bytes] | None = None,
) -> SecureReport:
    """Shard `measurement` (for a round: the 0/1 answer per target) and seal each input share
    to its aggregator. `rand` is `vdaf.rand_size` fresh random bytes; `ikm_e` (leader's,
    helper's) fixes the HPKE ephemeral keys, for conformance vectors only."""
    [report] = shard_reports(
        vdaf, leader, helper, query_id, round, [(report_id, measurement, rand)], ikm_e
    )
    return report


def shard_reports(
    vdaf: BitsVdaf,
    leader: HpkeConfig,
    helper: HpkeConfig,
    query_id: str,
    round: int,
    reports: Sequence[tuple[bytes, Sequence[int], bytes]],
    ikms: tuple[bytes, bytes] | None = None,
) -> list[SecureReport]:
    """Many devices' (report id, measurement, rand) of one query and round, each sharded,
    then every leader share sealed in one compiled call and every helper share in another
    (`sealing.seal_input_shares`), each with its own fresh ephemeral key. `ikms` (the
    leader's, the helper's: 32 bytes a report each) fixes those keys, for vectors only."""
    sharded = []
    for report_id, values, rand in reports:
        check_report_id(report_id)
        public, shares = vdaf.shard_encoded(vdaf_context(query_id), values, report_id, rand)
        sharded.append((report_id, public, shares))
    sealed = [
        seal_input_shares(
            config,
            role,
            query_id,
            round,
            [(rid, public, s[i]) for rid, public, s in sharded],
            None if ikms is None else ikms[i],
        )
        for i, (config, role) in enumerate(((leader, ROLE_LEADER), (helper, ROLE_HELPER)))
    ]
    return [
        SecureReport(query_id, round, rid, public, mine, theirs)
        for (rid, public, _), mine, theirs in zip(sharded, *sealed, strict=True)
    ]


@dataclass(frozen=True)
class Prepared:
    """One aggregator's state for a report it opened and queried (encoded: the verifier
    share it sends, the joint randomness seed it expects back, its output share)."""

    ctx: bytes
    share: PreparedShare


Outcome = Prepared | ReportRejected
OutShare = bytes
"""An accepted report's output share, encoded (`Prio3.agg_encoded` adds them up)."""


def open_share(key_pair: HpkeKeyPair, role: int, report: SecureReport) -> bytes:
    """This role's input share, opened; raises `ReportRejected` (WRONG_CONFIG_ID,
    BAD_CIPHERTEXT)."""
    ciphertext = report.leader_ciphertext if role == ROLE_LEADER else report.helper_ciphertext
    if ciphertext and config_id_of(ciphertext) != key_pair.config.config_id:
        raise ReportRejected(
            Refusal.WRONG_CONFIG_ID,
            f"config id {ciphertext[0]}, this aggregator's is {key_pair.config.config_id}",
        )
    meta = (report.query_id, report.round, report.report_id, report.public_share)
    try:
        return open_input_share(key_pair, role, *meta, ciphertext)
    except SealingError as error:
        raise ReportRejected(Refusal.BAD_CIPHERTEXT, str(error)) from None


def open_shares(
    key_pair: HpkeKeyPair, role: int, reports: Sequence[SecureReport]
) -> list[bytes | ReportRejected]:
    """`open_share` for a batch, each query's reports in one compiled call (the same
    plaintexts and refusals, `tests/secure/test_native_hpke.py`)."""
    results: list[bytes | ReportRejected] = [b""] * len(reports)
    groups: dict[tuple[str, int], list[int]] = {}
    for i, report in enumerate(reports):
        groups.setdefault((report.query_id, report.round), []).append(i)
    for (query_id, round_), indices in groups.items():
        items = [
            (
                reports[i].report_id,
                reports[i].public_share,
                reports[i].leader_ciphertext
                if role == ROLE_LEADER
                else reports[i].helper_ciphertext,
            )
            for i in indices
        ]
        opened = open_query_shares(key_pair, role, query_id, round_, items)
        for i, share in zip(indices, opened, strict=True):
            results[i] = share
    return results


def open_query_shares(
    key_pair: HpkeKeyPair,
    role: int,
    query_id: str,
    round: int,
    items: Sequence[tuple[bytes, bytes, bytes]],
) -> list[bytes | ReportRejected]:
    """`open_share` for (report id, public share, this role's ciphertext) triples of one
    query and round, in one compiled call (`sealing.open_input_shares`)."""
    results: list[bytes | ReportRejected] = [b""] * len(items)
    sealed: list[int] = []
    for i, (_, _, ciphertext) in enumerate(items):
        if ciphertext and config_id_of(ciphertext) != key_pair.config.config_id:
            results[i] = ReportRejected(
                Refusal.WRONG_CONFIG_ID,
                f"config id {ciphertext[0]}, this aggregator's is {key_pair.config.config_id}",
            )
        else:
            sealed.append(i)
    opened = open_input_shares(key_pair, role, query_id, round, [items[i] for i in sealed])
    for i, share in zip(sealed, opened, strict=True):
        results[i] = (
            ReportRejected(Refusal.BAD_CIPHERTEXT, str(share))
            if isinstance(share, SealingError)
            else share
        )
    return results


def verify_opened(
    vdaf: BitsVdaf,
    role: int,
    verify_key: bytes,
    query_id: str,
    opened: Sequence[tuple[bytes, bytes, bytes]],
) -> list[Outcome]:
    """`verify_init` at one role over a batch of one query's opened reports, (report id,
    public share, opened input share) each, in one call: shares that do not decode are
    refused WRONG_LENGTH, a proof that cannot be queried BAD_PROOF."""
    _check_role_and_key(role, verify_key)
    ctx = vdaf_context(query_id)
    outcomes: list[Outcome] = []
    for result in vdaf.verify_init_encoded(verify_key, ctx, AGG_IDS[role], opened):
        if isinstance(result, MalformedShare):
            outcomes.append(ReportRejected(Refusal.WRONG_LENGTH, str(result)))
        elif isinstance(result, VdafError):
            outcomes.append(ReportRejected(Refusal.BAD_PROOF, str(result)))
        else:
            outcomes.append(Prepared(ctx, result))
    return outcomes


def open_and_verify_init(
    vdaf: BitsVdaf, key_pair: HpkeKeyPair, role: int, verify_key: bytes, report: SecureReport
) -> Prepared:
    """Open this role's input share and query it; raises `ReportRejected` for a bad report,
    ValueError for a bad role or verify key (the caller's mistake, not the report's)."""
    [outcome] = init_batch(vdaf, key_pair, role, verify_key, [report])
    if isinstance(outcome, ReportRejected):
        raise outcome
    return outcome


def _check_role_and_key(role: int, verify_key: bytes) -> None:
    if role not in AGG_IDS:
        raise ValueError(f"role must be {ROLE_LEADER:#04x} (leader) or {ROLE_HELPER:#04x} (helper)")
    if len(verify_key) != VERIFY_KEY_SIZE:
        raise ValueError(f"a verify key is {VERIFY_KEY_SIZE} bytes, got {len(verify_key)}")


def init_batch(
    vdaf: BitsVdaf,
    key_pair: HpkeKeyPair,
    role: int,
    verify_key: bytes,
    reports: Sequence[SecureReport],
) -> list[Outcome]:
    """Open each report's share at one aggregator (`open_shares`), then `verify_init` the
    opened ones of each query in one call; refusals in place."""
    _check_role_and_key(role, verify_key)
    outcomes: list[Outcome | None] = [None] * len(reports)
    by_query: dict[str, list[tuple[int, tuple[bytes, bytes, bytes]]]] = {}
    shares = open_shares(key_pair, role, reports)
    for i, (report, opened) in enumerate(zip(reports, shares, strict=True)):
        if isinstance(opened, ReportRejected):
            outcomes[i] = opened
            continue
        by_query.setdefault(report.query_id, []).append(
            (i, (report.report_id, report.public_share, opened))
        )
    for query_id, items in by_query.items():
        verified = verify_opened(vdaf, role, verify_key, query_id, [item for _, item in items])
        for (i, _), outcome in zip(items, verified, strict=True):
            outcomes[i] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


def combine_batch(
    vdaf: BitsVdaf, leader: Sequence[Outcome], helper: Sequence[Outcome]
) -> list[VerifierMessage | ReportRejected]:
    """The leader's step: per report, both verifier shares into the verifier message both
    roles finish with, or the refusal (the leader's reason first)."""
    if len(leader) != len(helper):
        raise ValueError(f"{len(leader)} leader outcomes but {len(helper)} helper outcomes")
    messages: list[VerifierMessage | ReportRejected] = []
    pending: dict[bytes, list[tuple[int, list[bytes]]]] = {}
    for i, (ours, theirs) in enumerate(zip(leader, helper, strict=True)):
        if isinstance(ours, ReportRejected):
            messages.append(ours)
        elif isinstance(theirs, ReportRejected):
            messages.append(theirs)
        else:
            messages.append(None)
            shares = [ours.share.verifier_share, theirs.share.verifier_share]
            pending.setdefault(ours.ctx, []).append((i, shares))
    for ctx, items in pending.items():
        combined = vdaf.verifier_messages_encoded(ctx, [shares for _, shares in items])
        for (i, _), message in zip(items, combined, strict=True):
            if isinstance(message, VdafError):
                messages[i] = ReportRejected(Refusal.BAD_PROOF, str(message))
            else:
                messages[i] = vdaf.decode_verifier_message(message)
    return messages


def finish_one(prepared: Prepared, message: VerifierMessage) -> OutShare:
    """`verify_next`: the output share if the joint randomness the client used is the one
    the aggregators computed; raises `ReportRejected` (BAD_PROOF) otherwise."""
    if (message or b"") != prepared.share.joint_rand_seed:
        raise ReportRejected(Refusal.BAD_PROOF, "joint randomness check failed")
    return prepared.share.out_share


def finish_batch(
    vdaf: BitsVdaf,
    prepared: Sequence[Outcome],
    messages: Sequence[VerifierMessage | ReportRejected],
) -> list[OutShare | ReportRejected]:
    """Each role's last step: its output share per accepted report, else the refusal."""
    if len(prepared) != len(messages):
        raise ValueError(f"{len(prepared)} prepared reports but {len(messages)} messages")
    results: list[OutShare | ReportRejected] = []
    for mine, message in zip(prepared, messages, strict=True):
        if isinstance(message, ReportRejected):
            results.append(message)
        elif isinstance(mine, ReportRejected):
            results.append(mine)
        else:
            try:
                results.append(finish_one(mine, message))
            except ReportRejected as rejected:
                results.append(rejected)
    return results


@dataclass(frozen=True)
class BatchResult:
    """Both roles' output shares for one batch, and each report's refusal if any."""

    leader_out: list[OutShare | ReportRejected]
    helper_out: list[OutShare | ReportRejected]

    def refusals(self) -> list[Refusal | None]:
        return [out.reason if isinstance(out, ReportRejected) else None for out in self.leader_out]


def verify_batch(
    vdaf: BitsVdaf,
    leader: HpkeKeyPair,
    helper: HpkeKeyPair,
    verify_key: bytes,
    reports: Sequence[SecureReport],
) -> BatchResult:
    """Both roles in one process (tests, benchmarks): init at each, combine, finish."""
    at_leader = init_batch(vdaf, leader, ROLE_LEADER, verify_key, reports)
    at_helper = init_batch(vdaf, helper, ROLE_HELPER, verify_key, reports)
    messages = combine_batch(vdaf, at_leader, at_helper)
    return BatchResult(
        finish_batch(vdaf, at_leader, messages), finish_batch(vdaf, at_helper, messages)
    )


def aggregate(vdaf: BitsVdaf, out_shares: Iterable[OutShare | ReportRejected]) -> list[int]:
    """One role's aggregate share (field elements, one per output entry) of the accepted
    output shares, in one call; refusals are skipped."""
    return vdaf.agg_encoded([out for out in out_shares if not isinstance(out, ReportRejected)])


def unshard(vdaf: BitsVdaf, leader_share: Sequence[int], helper_share: Sequence[int]) -> list[int]:
    """The counts: the two aggregate shares added up."""
    return vdaf.unshard([leader_share, helper_share], 0)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    @property
    def rest(self) -> int:
        return len(self.data) - self.offset

    def take(self, what: str, size: int) -> bytes:
        if self.rest < size:
            raise SecureFormatError(f"the {what} needs {size} bytes, only {self.rest} left")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def unpack(self, what: str, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self.take(what, struct.calcsize(fmt)))
        return int(value)
