"""The state of a whole simulated fleet, in memory or in ONE file (never a file per device).

Per device: location (lat, lon) and, per query, its location id, whether it answers or declined,
its pseudonym, one report id per round, its packed answers for every round and which rounds were
acknowledged. Saved as a single .npz (numpy arrays plus a JSON header), replaced atomically, so
a fleet of 10^5 devices is one file of a few MB and a rerun resends with the same report ids.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from client.atomic import write_atomic
from ldpcollect.errors import ParameterError
from ldpcollect.geo.coords import check_points

FLEET_FORMAT = "ldpcollect.fleet-state/1"

Float64s = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Bytes2D = npt.NDArray[np.uint8]


@dataclass
class FleetQuery:
    """What every device of the fleet decided for one query (arrays indexed by device)."""

    fingerprint: str
    charge_epsilon: float
    charge_delta: float
    location_ids: npt.NDArray[np.uint64]  # (n,)
    answering: Bools  # (n,) False = declined (budget)
    pseudonyms: Bytes2D  # (n, 16)
    report_ids: npt.NDArray[np.uint8]  # (rounds, n, 16)
    answers: npt.NDArray[np.uint8]  # (rounds, n, ceil(T/8))
    acked: npt.NDArray[np.bool_]  # (rounds, n)

    @property
    def rounds(self) -> int:
        return int(self.answers.shape[0])


@dataclass
class FleetState:
    lats: Float64s
    lons: Float64s
    budget_epsilon: float | None = None
    budget_delta: float = 0.0
    # When set, the fleet is a fixed set of devices, one name a device (`client.fleet_identity`):
    # pseudonyms, report ids and answers for a query derive from (fleet key, query id, name),
    # so sending it twice is deduplicated by the aggregator. A CSV fleet's names come from its
    # device id column or its rows' content, and the seed.
    names: npt.NDArray[np.uint8] | None = None
    # The operator's fleet key (not saved with the state: it stays in its own file).
    fleet_key: bytes | None = field(default=None, repr=False)
    queries: dict[str, FleetQuery] = field(default_factory=dict)
    # Queries in the order they were decided: a device's own ledger is the charges of the
    # queries it answered, in this order.
    order: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lats, self.lons = check_points(self.lats, self.lons)
        if self.budget_epsilon is not None and not 0 <= self.budget_epsilon < math.inf:
            raise ParameterError("device budget", self.budget_epsilon, "[0, inf) epsilon")
        if not 0 <= self.budget_delta <= 1:
            raise ParameterError("device budget delta", self.budget_delta, "[0, 1]")

    @property
    def size(self) -> int:
        return int(self.lats.size)

    def add_query(self, query_id: str, record: FleetQuery) -> None:
        self.queries[query_id] = record
        self.order.append(query_id)

    def spent(self) -> tuple[Float64s, Float64s]:
        """Each device's total (epsilon, delta) so far: the sums of its own ledger."""
        eps, delta = np.zeros(self.size), np.zeros(self.size)
        for qid in self.order:
            record = self.queries[qid]
            eps[record.answering] += record.charge_epsilon
            delta[record.answering] += record.charge_delta
        return eps, delta

    def save(self, path: Path | str) -> None:
        header = {
            "format": FLEET_FORMAT,
            "budget_epsilon": self.budget_epsilon,
            "budget_delta": self.budget_delta,
            "order": self.order,
            "queries": {
                qid: {
                    "fingerprint": rec.fingerprint,
                    "charge": [rec.charge_epsilon, rec.charge_delta],
                }
                for qid, rec in self.queries.items()
            },
        }
        arrays: dict[str, npt.NDArray[np.generic]] = {"lats": self.lats, "lons": self.lons}
        if self.names is not None:
            arrays["names"] = self.names
        for k, qid in enumerate(self.order):
            rec = self.queries[qid]
            arrays[f"q{k}_location_ids"] = rec.location_ids
            arrays[f"q{k}_answering"] = rec.answering
            arrays[f"q{k}_pseudonyms"] = rec.pseudonyms
            arrays[f"q{k}_report_ids"] = rec.report_ids
            arrays[f"q{k}_answers"] = rec.answers
            arrays[f"q{k}_acked"] = rec.acked
        buffer = io.BytesIO()
        np.savez(buffer, header=np.array(json.dumps(header)), **arrays)  # type: ignore[arg-type]
        write_atomic(Path(path), buffer.getvalue())

    @classmethod
    def load(cls, path: Path | str) -> FleetState:
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                if header.get("format") != FLEET_FORMAT:
                    raise ValueError(f"not a {FLEET_FORMAT} file")
                state = cls(lats=data["lats"], lons=data["lons"])
                state.budget_epsilon = header["budget_epsilon"]
                state.budget_delta = float(header.get("budget_delta", 0.0))
                state.names = data["names"] if "names" in data.files else None
                for k, qid in enumerate(header["order"]):
                    meta = header["queries"][qid]
                    charge_epsilon, charge_delta = (float(x) for x in meta["charge"])
                    state.add_query(
                        qid,
                        FleetQuery(
                            fingerprint=meta["fingerprint"],
                            charge_epsilon=charge_epsilon,
                            charge_delta=charge_delta,
                            location_ids=data[f"q{k}_location_ids"],
                            answering=data[f"q{k}_answering"],
                            pseudonyms=data[f"q{k}_pseudonyms"],
                            report_ids=data[f"q{k}_report_ids"],
                            answers=data[f"q{k}_answers"],
                            acked=data[f"q{k}_acked"].copy(),
                        ),
                    )
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ParameterError("fleet state", str(path), "a fleet state file", str(exc)) from exc
        return state
