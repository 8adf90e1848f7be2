"""Each role's edge limits (`aggregator.edge.RoleLimits`): the largest request each RPC takes,
sized to what it legitimately carries, and the work each role takes on at once.
docs/design.md ("Every role's edge") has the same table, with the reasoning.

Sizes measured on sealed secure reports: about 18 bytes per target for a randomized-response
round and 34 for a Sampling Privacy pair, so one report for the largest query (65,536 targets)
is at most 2.2 MiB, and a 100-target report under 6 KiB.
"""

from __future__ import annotations

from aggregator.edge import KIB, MIB, RoleLimits

# A query definition: up to 65,536 targets (at most 10 bytes each) and its text fields.
QUERY_DEFINITION_BYTES = 1 * MIB


def trusted_limits(max_message_bytes: int) -> RoleLimits:
    """Batches and streamed messages up to `max_message_bytes` (`serve --max-message-bytes`,
    4 MiB by default); a query's definition 1 MiB; everything else, one report included, 64 KiB
    (a report for the largest query is 8 KiB per round, plus its token). At most
    8 x `max_message_bytes` (32 MiB at least) of requests are worked on at once."""
    return RoleLimits(
        message_bytes={
            "Collector/SubmitBatch": max_message_bytes,
            "Collector/StreamReports": max_message_bytes,
            "Admin/CreateQuery": QUERY_DEFINITION_BYTES,
        },
        max_inflight_bytes=max(32 * MIB, 8 * max_message_bytes),
    )


# The leader: an upload of up to 1,000 reports in 8 MiB (1,000 reports of a ~400-target
# query, or 3 of the largest); 32 MiB of requests at once (4 full uploads).
LEADER_LIMITS = RoleLimits(
    message_bytes={
        "SecureCollector/UploadSecureReports": 8 * MIB,
        "SecureAdmin/CreateSecureQuery": QUERY_DEFINITION_BYTES,
    },
    max_inflight_bytes=32 * MIB,
)

# The helper: one aggregation job of up to 500 reports (the leader driver's JOB_REPORTS), each at
# most ~10 KiB for the largest query (public share, sealed helper share, the leader's verifier
# share, a token): 16 MiB leaves room for batches of 1,600. Jobs run one at a time.
HELPER_LIMITS = RoleLimits(
    message_bytes={"Helper/Aggregate": 16 * MIB},
    max_inflight_bytes=32 * MIB,
)

# The issuer: up to 1,000 blinded token requests (259 bytes each) per call.
ISSUER_LIMITS = RoleLimits(
    message_bytes={"Issuer/IssueTokens": 512 * KIB},
    max_inflight_bytes=16 * MIB,
)
