"""A query's public parameters, read from the wire into the shared core's objects."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from client.state import query_fingerprint
from ldpcollect import geo, wire
from ldpcollect.errors import ParameterError
from ldpcollect.mechanisms import Mechanism
from ldpcollect.mechanisms.targets import validate_targets
from ldpcollect.v1 import ldpcollect_pb2 as pb

# A device outside the area a scheme covers (the grid is regional) is in no target: it answers
# "No" everywhere. Its draw uses this id, which is no grid cell and no valid H3 cell.
OUTSIDE_LOCATION = 2**64 - 1


@dataclass(frozen=True)
class QueryInfo:
    query_id: str
    mechanism: Mechanism
    scheme_text: str
    scheme: geo.LocationScheme
    targets: tuple[int, ...]
    rounds: int
    current_round: int
    is_open: bool

    @classmethod
    def from_proto(cls, query: pb.Query) -> QueryInfo:
        """ParameterError when the published parameters are invalid (the device won't answer):
        the mechanism or its parameters, the location scheme, or the targets (none, more than
        65,536, or one twice)."""
        scheme_text = wire.scheme_to_text(query.location_scheme)
        mechanism = wire.mechanism_from_proto(query.mechanism)
        return cls(
            query_id=query.query_id,
            mechanism=mechanism,
            scheme_text=scheme_text,
            scheme=geo.scheme_from_text(scheme_text),
            targets=validate_targets(int(t) for t in query.targets),
            rounds=mechanism.rounds,
            current_round=int(query.current_round),
            is_open=query.state == pb.QUERY_STATE_OPEN,
        )

    @property
    def fingerprint(self) -> str:
        return query_fingerprint(
            self.mechanism.name, self.mechanism.params(), self.scheme_text, self.targets
        )

    def locate(self, lat: float, lon: float) -> int:
        """The device's location id; OUTSIDE_LOCATION when the scheme does not cover it."""
        try:
            return self.scheme.locate(lat, lon)
        except ParameterError:
            return OUTSIDE_LOCATION

    def locate_many(
        self, lats: npt.NDArray[np.float64], lons: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.uint64]:
        """Vectorized `locate`; points the scheme cannot map get OUTSIDE_LOCATION."""
        try:
            return np.asarray(self.scheme.locate_many(lats, lons), dtype=np.uint64)
        except ParameterError:
            return np.fromiter(
                (self.locate(float(a), float(b)) for a, b in zip(lats, lons, strict=True)),
                dtype=np.uint64,
                count=len(lats),
            )
