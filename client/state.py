"""A device's persistent state: per-query randomness, pseudonym, report ids, acks and budget.

One JSON file per device, replaced atomically (temp file + fsync + os.replace) after every
change. The draw, pseudonym and report ids of a query are decided once and saved BEFORE the
first report leaves the device, so a crash or restart can never lead to fresh randomness for
the same query (re-randomizing leaks) and a retried report always carries the same report id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from client.atomic import write_atomic
from client.leakage import DeviceBudget
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import DeviceDraw, draw_from_json

STATE_FORMAT = "ldpcollect.device-state/1"
KEY_BYTES = 16

RecordStatus = Literal["answering", "declined"]


def query_fingerprint(
    mechanism: str, params: Mapping[str, str], scheme: str, targets: Sequence[int]
) -> str:
    """A digest of a query's public parameters: a device never reuses a draw for other ones."""
    text = json.dumps(
        {"mechanism": mechanism, "params": dict(params), "scheme": scheme, "targets": targets},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class QueryRecord:
    """What a device decided for one query."""

    query_id: str
    fingerprint: str
    status: RecordStatus
    charge_epsilon: float
    charge_delta: float = 0.0
    location_id: int | None = None
    pseudonym: bytes = b""
    report_ids: tuple[bytes, ...] = ()
    draw: DeviceDraw | None = None
    acked: list[bool] = field(default_factory=list)
    reason: str = ""
    # Admission tokens, one per round (b"" until fetched): saved before the report is sent,
    # so a retry carries the same token as well as the same report id.
    tokens: list[bytes] = field(default_factory=list)
    # A secure query's one upload (every round's answers, sharded and sealed), kept from
    # before it is first sent: a retry, even after a restart, sends the same bytes.
    sealed: bytes = b""

    def token(self, round_: int) -> bytes:
        return self.tokens[round_ - 1] if round_ <= len(self.tokens) else b""

    def set_token(self, round_: int, token: bytes) -> None:
        self.tokens.extend(b"" for _ in range(round_ - len(self.tokens)))
        self.tokens[round_ - 1] = token

    def to_json(self) -> dict[str, object]:
        return {
            "fingerprint": self.fingerprint,
            "status": self.status,
            "charge": [self.charge_epsilon, self.charge_delta],
            "location_id": self.location_id,
            "pseudonym": self.pseudonym.hex(),
            "report_ids": [rid.hex() for rid in self.report_ids],
            "draw": None if self.draw is None else self.draw.to_json(),
            "acked": list(self.acked),
            "reason": self.reason,
            "tokens": [token.hex() for token in self.tokens],
            "sealed": self.sealed.hex(),
        }

    @classmethod
    def from_json(cls, query_id: str, data: Mapping[str, object]) -> QueryRecord:
        try:
            status = data["status"]
            if status not in ("answering", "declined"):
                raise ValueError(f"unknown status {status!r}")
            charge = data["charge"]
            if not isinstance(charge, list) or len(charge) != 2:
                raise ValueError("charge must be [epsilon, delta]")
            draw_raw = data.get("draw")
            draw = None if draw_raw is None else draw_from_json(draw_raw)  # type: ignore[arg-type]
            location = data.get("location_id")
            acked = data.get("acked", [])
            report_ids = data.get("report_ids", [])
            tokens = data.get("tokens", [])
            if not all(isinstance(x, list) for x in (acked, report_ids, tokens)):
                raise ValueError("acked, report_ids and tokens must be lists")
            assert isinstance(acked, list) and isinstance(report_ids, list)
            assert isinstance(tokens, list)
            record = cls(
                query_id=query_id,
                fingerprint=str(data["fingerprint"]),
                status=status,
                charge_epsilon=float(charge[0]),
                charge_delta=float(charge[1]),
                location_id=None if location is None else int(location),  # type: ignore[call-overload]
                pseudonym=bytes.fromhex(str(data.get("pseudonym", ""))),
                report_ids=tuple(bytes.fromhex(str(rid)) for rid in report_ids),
                draw=draw,
                acked=[bool(a) for a in acked],
                reason=str(data.get("reason", "")),
                tokens=[bytes.fromhex(str(token)) for token in tokens],
                sealed=bytes.fromhex(str(data.get("sealed", ""))),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ParameterError(
                "device state", query_id, "a query record written by this SDK", str(exc)
            ) from exc
        if record.status == "answering" and (
            record.draw is None
            or len(record.pseudonym) != KEY_BYTES
            or len(record.report_ids) != record.draw.rounds
            or len(record.acked) != record.draw.rounds
        ):
            raise ParameterError(
                "device state", query_id, "a complete query record", "draw or keys missing"
            )
        return record


@dataclass
class DeviceState:
    """Everything a device remembers; `save` after every change."""

    path: Path
    budget: DeviceBudget | None
    queries: dict[str, QueryRecord] = field(default_factory=dict)

    @classmethod
    def open(
        cls, path: Path | str, budget_epsilon: float | None = None, budget_delta: float = 0.0
    ) -> DeviceState:
        """Load the state at `path`, or start an empty one (with this budget) if none exists.

        A budget is fixed when the state is created; asking for a different one later raises
        ParameterError rather than silently resetting what the device already spent.
        """
        path = Path(path)
        if not path.exists():
            budget = None if budget_epsilon is None else DeviceBudget(budget_epsilon, budget_delta)
            return cls(path=path, budget=budget)
        state = cls.load(path)
        saved = None if state.budget is None else (state.budget.epsilon, state.budget.delta)
        if budget_epsilon is not None and saved != (budget_epsilon, budget_delta):
            raise ParameterError(
                "budget_epsilon",
                budget_epsilon,
                f"the budget saved in {path} ({saved})",
                "a device's budget cannot change once it has state",
            )
        return state

    @classmethod
    def load(cls, path: Path | str) -> DeviceState:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ParameterError(
                "device state", str(path), "a readable JSON file", str(exc)
            ) from exc
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            raise ParameterError("device state", str(path), f"a {STATE_FORMAT} file")
        budget_raw = data.get("budget")
        budget = None if budget_raw is None else DeviceBudget.from_json(budget_raw)
        queries_raw = data.get("queries", {})
        if not isinstance(queries_raw, dict):
            raise ParameterError("device state", str(path), "queries as an object")
        queries = {qid: QueryRecord.from_json(qid, rec) for qid, rec in queries_raw.items()}
        return cls(path=path, budget=budget, queries=queries)

    def to_json(self) -> dict[str, object]:
        return {
            "format": STATE_FORMAT,
            "budget": None if self.budget is None else self.budget.to_json(),
            "queries": {qid: rec.to_json() for qid, rec in sorted(self.queries.items())},
        }

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.to_json(), indent=1).encode())
