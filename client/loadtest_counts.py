"""After a load test: did the aggregator count exactly the reports it acknowledged?

Each address's count for the query is read (Admin GetQuery, needs the operator's token) before
the clock starts and after the drain. Two deployments are recognised: every address its own
store (each count grew by what that address accepted) and several replicas on one shared store
(each count grew by everything accepted). An RPC that failed with an unknown outcome (deadline,
cancelled, connection lost) may or may not have been counted, so it widens the allowed range.
Replicas on one shared store show each other's reports after a moment (PostgreSQL replicas
refresh their read view about every second), so with several addresses a mismatch is read
again for a few seconds before it is reported: a real loss never settles.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from client.admin import AdminClient
from client.channels import open_channel
from client.loadtest_secure import leader_count
from client.secure_admin import SecureAdminClient

ADMIN_TIMEOUT = 10.0


def read_counts(
    addresses: Sequence[str], query_id: str, round_: int, token: str, tls_ca: Path | None
) -> dict[str, int]:
    """Reports accepted so far for `query_id` in `round_`, per address; at a leader (no Admin
    service) every upload it acknowledged for the secure query."""
    counts = {}
    for address in addresses:
        with open_channel(address, tls_ca) as channel:
            try:
                query = AdminClient(channel, token, timeout=ADMIN_TIMEOUT).get_query(query_id)
            except grpc.RpcError as err:
                if not isinstance(err, grpc.Call) or err.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                secure = SecureAdminClient(channel, token, timeout=ADMIN_TIMEOUT)
                counts[address] = leader_count(secure.get_query(query_id))
                continue
        per_round = list(query.reports_per_round)
        counts[address] = int(per_round[round_ - 1]) if len(per_round) >= round_ else 0
    return counts


@dataclass(frozen=True)
class CountCheck:
    ok: bool
    message: str
    grew: dict[str, int]


def check_counts(
    before: Mapping[str, int],
    after: Mapping[str, int],
    accepted: Mapping[str, int],
    unknown: Mapping[str, int],
) -> CountCheck:
    """Compare each address's count growth with the reports it accepted (see module doc)."""
    grew = {a: after[a] - before[a] for a in before}
    total, total_unknown = sum(accepted.values()), sum(unknown.values())

    def within(a: str, low: int, slack: int) -> bool:
        return low <= grew[a] <= low + slack

    if all(within(a, accepted.get(a, 0), unknown.get(a, 0)) for a in grew):
        counted = sum(grew.values())
        where = "" if len(grew) == 1 else f" across {len(grew)} addresses"
        if counted == total:
            return CountCheck(
                True, f"OK: counted exactly the {total} accepted reports{where}", grew
            )
        return CountCheck(
            True,
            f"OK: counted the {total} accepted reports{where} and {counted - total} of the "
            f"{total_unknown} whose RPC ended with an unknown outcome",
            grew,
        )
    if len(grew) > 1 and all(within(a, total, total_unknown) for a in grew):
        return CountCheck(
            True,
            f"OK: the {len(grew)} addresses share one store, which counted all {total} "
            "accepted reports",
            grew,
        )
    detail = "; ".join(
        f"{a} counted {grew[a]} more, accepted {accepted.get(a, 0)}"
        + (f" (+{unknown[a]} unknown)" if unknown.get(a) else "")
        for a in grew
    )
    return CountCheck(False, f"DISCREPANCY: {detail}", grew)


def settled_check(
    addresses: Sequence[str],
    query_id: str,
    token: str,
    tls_ca: Path | None,
    before: Mapping[str, int],
    accepted: Mapping[str, int],
    unknown: Mapping[str, int],
    settle_s: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> CountCheck:
    """Read the counts after the run and compare them (see the module doc on settling)."""
    deadline = time.monotonic() + settle_s
    while True:
        after = read_counts(addresses, query_id, 1, token, tls_ca)
        check = check_counts(before, after, accepted, unknown)
        if check.ok or len(addresses) == 1 or time.monotonic() >= deadline:
            return check
        sleep(0.25)
