"""Redemption: a report to a query that requires tokens passes only with a fresh valid token.

Runs before admission (the store's `submit`), over a whole submission at once:
1. reports of queries that do not require tokens pass untouched (their tokens, if any, are
   ignored); a submission without such a query costs one set of its query ids;
2. each token is checked against the issuer's published keys and the challenge of its
   report's query and round (`ldpcollect.admission.verification`), in batches in a worker
   thread, off the event loop;
3. the valid tokens' nonces are spent in the store (`Store.redeem_tokens`, durable, one
   transaction per query) before the reports go to admission. A nonce already spent by the
   same report id is a retry and passes (the store then acknowledges the report once more as
   a duplicate); spent by another report it is a replay.
A refused report changes no count. A token spent on a report that admission then refuses
(e.g. wrong round) stays spent for that report id only: the same report may be sent again.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from aggregator.errors import (
    AlreadyExists,
    FailedPrecondition,
    Invalid,
    PermissionDenied,
    ServiceError,
    Unauthenticated,
    Unavailable,
)
from aggregator.model import Outcome, Redemption, SubmitResult
from aggregator.rounds import ReportColumns
from aggregator.store.base import Store
from ldpcollect.admission.directory import IssuerDirectory
from ldpcollect.admission.errors import AdmissionError
from ldpcollect.admission.query_challenge import query_challenge
from ldpcollect.admission.token_key import TokenPublicKey
from ldpcollect.admission.tokens import NONCE_LENGTH
from ldpcollect.admission.verification import Verdict, check_tokens

_NONCE_AT = 2  # a Token is type (2 bytes) || nonce || ...

_REFUSAL: dict[Verdict, Callable[[str], ServiceError]] = {
    Verdict.MALFORMED: Invalid,
    Verdict.UNKNOWN_KEY: FailedPrecondition,
    Verdict.WRONG_CHALLENGE: PermissionDenied,
    Verdict.BAD_SIGNATURE: PermissionDenied,
}
_ADVICE = {
    Verdict.MALFORMED: "send the 354-byte token finalize_token produced",
    Verdict.UNKNOWN_KEY: "fetch a token under the issuer's current key",
    Verdict.WRONG_CHALLENGE: "fetch a token for this query and round",
    Verdict.BAD_SIGNATURE: "fetch a new token from the issuer",
}


def token_refusal(verdict: Verdict) -> ServiceError:
    """The refusal of a token that is not valid, with its precise status and advice."""
    return _REFUSAL[verdict](
        f"the admission token is {verdict.value}: {_ADVICE[verdict]} (nothing counted)"
    )


class TokenKeys:
    """The issuer's directory (a JSON file its `--directory-out` writes), read again whenever
    the file changes, so a key rotation reaches the aggregator without a restart."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None
        self._issuer_name = ""
        self._keys: tuple[TokenPublicKey, ...] = ()
        self.refresh()

    def refresh(self) -> None:
        """Read the file if it changed; a file that cannot be read keeps the last good keys
        (and raises when there are none yet)."""
        try:
            stat = os.stat(self.path)
            if self._seen == (stat.st_mtime_ns, stat.st_size):
                return
            directory = IssuerDirectory.from_json(self.path.read_bytes())
        except (OSError, AdmissionError) as exc:
            if not self._keys:
                raise OSError(f"cannot read the token directory {self.path}: {exc}") from exc
            return
        name = urlsplit(directory.issuer_request_uri).netloc or directory.issuer_request_uri
        self._issuer_name = name
        self._keys = tuple(entry.token_key for entry in directory.token_keys)
        self._seen = (stat.st_mtime_ns, stat.st_size)

    @property
    def issuer_name(self) -> str:
        return self._issuer_name

    @property
    def keys(self) -> tuple[TokenPublicKey, ...]:
        return self._keys


@dataclass
class _Screened:
    kept: list[int] = field(default_factory=list)  # submission indices that go to admission
    rejected: list[tuple[int, Outcome]] = field(default_factory=list)

    def merge(self, admitted: SubmitResult) -> SubmitResult:
        """The submission's result: admission's (indices mapped back) and the refusals here."""
        rejected = [(self.kept[i], outcome) for i, outcome in admitted.rejected]
        rejected.extend(self.rejected)
        rejected.sort(key=lambda item: item[0])
        return SubmitResult(admitted.accepted, admitted.duplicates, rejected)


def _subset(reports: ReportColumns, indices: Sequence[int]) -> ReportColumns:
    return ReportColumns(
        [reports.query_ids[i] for i in indices],
        [reports.rounds[i] for i in indices],
        [reports.pseudonyms[i] for i in indices],
        [reports.report_ids[i] for i in indices],
        [reports.answers[i] for i in indices],
    )


def _check_groups(
    keys: tuple[TokenPublicKey, ...], groups: dict[bytes, list[tuple[int, bytes]]]
) -> dict[int, Verdict]:
    """Verdicts by submission index, one `check_tokens` batch per challenge digest."""
    verdicts: dict[int, Verdict] = {}
    for digest, items in groups.items():
        found = check_tokens(keys, [token for _, token in items], digest)
        verdicts.update(zip((i for i, _ in items), found, strict=True))
    return verdicts


class Redeemer:
    """Screens submissions for the store; `keys` None: this aggregator accepts no tokens.

    Tokens are verified in a worker thread, or with `verify_processes` > 0 split across that
    many worker processes (spawned, not forked: the gRPC server has threads), which is what
    scales verification with the machine's cores."""

    def __init__(
        self, store: Store, keys: TokenKeys | None = None, verify_processes: int = 0
    ) -> None:
        if verify_processes < 0:
            raise ValueError(f"verify_processes must be >= 0, got {verify_processes}")
        self._store = store
        self._keys = keys
        self._shares = max(verify_processes, 1)
        self._pool: ProcessPoolExecutor | None = None
        if verify_processes > 0 and keys is not None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(verify_processes, mp_context=context)

    async def start(self) -> None:
        """Start the worker processes now (spawning one takes a moment and imports this
        package), so the first reports do not wait for them."""
        pool = self._pool
        if pool is not None:
            loop = asyncio.get_running_loop()
            work = (loop.run_in_executor(pool, _check_groups, (), {}) for _ in range(self._shares))
            await asyncio.gather(*work)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def _verdicts(
        self, keys: tuple[TokenPublicKey, ...], groups: dict[bytes, list[tuple[int, bytes]]]
    ) -> dict[int, Verdict]:
        pool = self._pool
        if pool is None:
            return await asyncio.to_thread(_check_groups, keys, groups)
        shares: list[dict[bytes, list[tuple[int, bytes]]]] = [{} for _ in range(self._shares)]
        for digest, items in groups.items():
            size = -(-len(items) // self._shares)
            for k, share in enumerate(shares):
                if items[k * size : (k + 1) * size]:
                    share[digest] = items[k * size : (k + 1) * size]
        loop = asyncio.get_running_loop()
        found = await asyncio.gather(
            *(loop.run_in_executor(pool, _check_groups, keys, share) for share in shares if share)
        )
        return {i: verdict for part in found for i, verdict in part.items()}

    def issuer_name(self) -> str:
        """The issuer a new token-requiring query binds to; refuses when none is configured."""
        if self._keys is None:
            raise FailedPrecondition(
                "this aggregator accepts no tokens: start it with --token-directory (the "
                "issuer's directory file) to create queries that require them"
            )
        self._keys.refresh()
        return self._keys.issuer_name

    async def submit(
        self,
        reports: ReportColumns,
        tokens: Callable[[], Sequence[bytes]],
        admit: Callable[[ReportColumns], Awaitable[SubmitResult]],
    ) -> SubmitResult:
        """`admit(reports)` for the reports whose tokens pass (all of them when no query here
        requires tokens); `tokens()` gives each report's token (b"" for none), in order."""
        requiring: dict[str, str] = {}
        for query_id in set(reports.query_ids):
            info = self._store.query(query_id)
            if info is not None and info.spec.token_issuer is not None:
                requiring[query_id] = info.spec.token_issuer
        if not requiring:
            return await admit(reports)
        screened = await self._screen(reports, tokens(), requiring)
        if not screened.kept:
            return screened.merge(SubmitResult())
        return screened.merge(await admit(_subset(reports, screened.kept)))

    async def _screen(
        self, reports: ReportColumns, tokens: Sequence[bytes], requiring: dict[str, str]
    ) -> _Screened:
        screened = _Screened()
        groups: dict[bytes, list[tuple[int, bytes]]] = {}
        digests: dict[tuple[str, int], bytes | ServiceError] = {}
        for i, (query_id, round_) in enumerate(zip(reports.query_ids, reports.rounds, strict=True)):
            issuer = requiring.get(query_id)
            if issuer is None:
                screened.kept.append(i)
                continue
            if not tokens[i]:
                refusal: ServiceError = Unauthenticated(
                    f"query {query_id!r} requires an admission token with every report: get "
                    f"one from the issuer {issuer} for this query and round (nothing counted)"
                )
                screened.rejected.append((i, Outcome(refusal)))
                continue
            digest = digests.get((query_id, round_))
            if digest is None:
                try:
                    digest = query_challenge(issuer, query_id, round_).digest()
                except AdmissionError as exc:
                    digest = Invalid(f"no token challenge for this report: {exc}")
                digests[(query_id, round_)] = digest
            if isinstance(digest, ServiceError):
                screened.rejected.append((i, Outcome(digest)))
                continue
            groups.setdefault(digest, []).append((i, tokens[i]))
        if groups:
            await self._verify_and_spend(reports, tokens, groups, screened)
        screened.kept.sort()
        return screened

    async def _verify_and_spend(
        self,
        reports: ReportColumns,
        tokens: Sequence[bytes],
        groups: dict[bytes, list[tuple[int, bytes]]],
        screened: _Screened,
    ) -> None:
        if self._keys is None:
            raise Unavailable(
                "a query here requires tokens but this aggregator was started without "
                "--token-directory; nothing was counted: retry once the operator restarts it"
            )
        self._keys.refresh()
        verdicts = await self._verdicts(self._keys.keys, groups)
        valid: dict[str, list[int]] = {}
        for i, verdict in sorted(verdicts.items()):
            if verdict is Verdict.VALID:
                valid.setdefault(reports.query_ids[i], []).append(i)
            else:
                screened.rejected.append((i, Outcome(token_refusal(verdict))))
        for query_id, indices in valid.items():
            nonces = [bytes(tokens[i][_NONCE_AT : _NONCE_AT + NONCE_LENGTH]) for i in indices]
            items = list(zip(nonces, (reports.report_ids[i] for i in indices), strict=True))
            outcomes = await self._store.redeem_tokens(query_id, items)
            for i, outcome in zip(indices, outcomes, strict=True):
                if outcome is Redemption.SPENT:
                    refusal = AlreadyExists(
                        "the admission token was already redeemed by another report of this "
                        "query: a token is spent once (nothing counted)"
                    )
                    screened.rejected.append((i, Outcome(refusal)))
                else:
                    screened.kept.append(i)
