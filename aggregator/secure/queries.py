"""A secure query's parameters as stored (JSON) and as sent (SecureQuery), shared by both
roles."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from aggregator.secure.store import StoredQuery
from ldpcollect.geo import LocationScheme
from ldpcollect.mechanisms import Mechanism, mechanism_from_params
from ldpcollect.secure.query_vdaf import query_vdaf
from ldpcollect.secure.sealing import HpkeConfig
from ldpcollect.secure.upload import BitsVdaf
from ldpcollect.v1 import ldpcollect_pb2 as pb
from ldpcollect.v1 import secure_pb2 as spb
from ldpcollect.wire import mechanism_to_proto, scheme_from_proto, scheme_from_text

# A secure query created before queries carried a scheme (or without one) is on the grid.
DEFAULT_SCHEME = "grid"


def secure_scheme(scheme: pb.LocationScheme) -> LocationScheme:
    """The requested location scheme; an unset one is the grid, as `query create` defaults."""
    if scheme.WhichOneof("scheme") is None:
        return scheme_from_proto(scheme_from_text(DEFAULT_SCHEME))
    return scheme_from_proto(scheme)


def vdaf_of(query: StoredQuery) -> BitsVdaf:
    """The query's VDAF (the helper stores only the target count, the leader the targets)."""
    targets = query.params["targets"]
    return query_vdaf(query.params["vdaf"], targets if isinstance(targets, int) else len(targets))


def mechanism_of(query: StoredQuery) -> Mechanism:
    return mechanism_from_params(query.params["mechanism"], query.params["mechanism_params"])


def sigma_of(params: dict[str, Any]) -> Fraction | None:
    text = params.get("noise_sigma", "")
    return Fraction(text) if text else None


def config_of(params: dict[str, Any], role: str) -> HpkeConfig:
    return HpkeConfig.decode(bytes.fromhex(params[f"{role}_config"]))


def query_message(query: StoredQuery, pending: int = 0) -> spb.SecureQuery:
    p = query.params
    return spb.SecureQuery(
        query_id=query.query_id,
        description=p.get("description", ""),
        mechanism=mechanism_to_proto(mechanism_of(query)),
        targets=p["targets"],
        min_reports=p["min_reports"],
        noise_sigma=p.get("noise_sigma", ""),
        leader_hpke_config=bytes.fromhex(p.get("leader_config", "")),
        helper_hpke_config=bytes.fromhex(p.get("helper_config", "")),
        collector_hpke_config=bytes.fromhex(p.get("collector_config", "")),
        state=query.state,  # type: ignore[arg-type]
        upload_round=p["upload_round"],
        aggregated_reports=query.aggregated,
        pending_reports=pending,
        refused_reports=query.refused,
        require_tokens=bool(p.get("token_issuer")),
        token_issuer=p.get("token_issuer", ""),
        token_origins=p.get("token_origins", []),
        location_scheme=scheme_from_text(p.get("scheme", DEFAULT_SCHEME)),
    )
