"""Both roles at release: this aggregator's aggregate share plus its own exact discrete
Gaussian noise on every count, sealed to the collector's HPKE key. Each adds its own noise so
the counts stay protected even if the collector colludes with the other aggregator."""

from __future__ import annotations

from aggregator.secure.queries import config_of, sigma_of, vdaf_of
from aggregator.secure.store import StoredQuery
from ldpcollect.accounting.discrete_gaussian import sample_discrete_gaussian
from ldpcollect.secure.sealing import seal_aggregate_share


def noised_sealed_share(query: StoredQuery, role: int) -> bytes:
    vdaf = vdaf_of(query)
    share = vdaf.decode_agg_share(query.aggregate)
    sigma = sigma_of(query.params)
    if sigma is not None:
        modulus = vdaf.field.modulus
        noise = sample_discrete_gaussian(sigma * sigma, len(share))
        share = [(x + e) % modulus for x, e in zip(share, noise, strict=True)]
    return seal_aggregate_share(
        config_of(query.params, "collector"),
        role,
        query.query_id,
        query.params["upload_round"],
        vdaf.encode_agg_share(share),
    )
