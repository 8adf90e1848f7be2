"""Both roles at release: this aggregator's aggregate share plus its own exact discrete
Gaussian noise on every count, sealed to the collector's HPKE key under a binding of what the
collector relies on (the query's parameters as this aggregator holds them, the reports it
aggregated, the sigma it added: `ldpcollect.secure.share_binding`). Each adds its own noise
so the counts stay protected even if the collector colludes with the other aggregator."""

from __future__ import annotations

from fractions import Fraction

from aggregator.secure.queries import config_of, mechanism_of, vdaf_of
from aggregator.secure.store import StoredQuery
from ldpcollect.accounting.discrete_gaussian import sample_discrete_gaussian
from ldpcollect.secure.sealing import seal_aggregate_share
from ldpcollect.secure.share_binding import ShareBinding, mechanism_text, sigma_text


def share_binding(query: StoredQuery, sigma: Fraction | None) -> ShareBinding:
    """The binding of this aggregator's share: its own parameters, count and noise."""
    targets = query.params["targets"]
    mechanism = mechanism_of(query)
    return ShareBinding(
        query.query_id,
        query.params["upload_round"],
        query.params["vdaf"],
        targets if isinstance(targets, int) else len(targets),
        query.params["min_reports"],
        mechanism_text(mechanism.name, mechanism.params()),
        query.aggregated,
        sigma_text(sigma),
    )


def noised_sealed_share(query: StoredQuery, role: int, sigma: Fraction | None) -> bytes:
    vdaf = vdaf_of(query)
    share = vdaf.decode_agg_share(query.aggregate)
    if sigma:
        modulus = vdaf.field.modulus
        noise = sample_discrete_gaussian(sigma * sigma, len(share))
        share = [(x + e) % modulus for x, e in zip(share, noise, strict=True)]
    return seal_aggregate_share(
        config_of(query.params, "collector"),
        role,
        share_binding(query, sigma),
        vdaf.encode_agg_share(share),
    )
