"""What the secure roles need of their store, whichever keeps it: `store.SecureStore`
(one SQLite file per aggregator) or `pg_store.PostgresSecureStore` (one PostgreSQL
database shared by any number of replicas of one role). Both commit every mutating call
before it returns; the methods' semantics are documented on `SecureStore`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from aggregator.secure.store_core import HeldReport, StoredQuery
from ldpcollect.secure.sealing import HpkeKeyPair


class SecureStoreApi(Protocol):
    @property
    def name(self) -> str:
        """Where the state is, for the ready line and messages (a URL without password)."""
        ...

    def open(self) -> None: ...

    def close(self) -> None: ...

    def load_key_pair(self, role: str, main_db: str) -> HpkeKeyPair:
        """This aggregator's HPKE key pair, created on first use (every replica of a role
        must hold the same one: devices seal to it)."""
        ...

    # -- queries
    def create_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> StoredQuery: ...

    def provision_query(
        self, query_id: str, params: dict[str, Any], verify_key: bytes, aggregate: bytes
    ) -> None: ...

    def has_query(self, query_id: str) -> bool: ...

    def query(self, query_id: str) -> StoredQuery: ...

    def progress(self, query_id: str) -> tuple[StoredQuery, int]: ...

    def all_progress(self) -> list[tuple[StoredQuery, int]]: ...

    def queries(self) -> list[StoredQuery]: ...

    def close_query(self, query_id: str) -> StoredQuery: ...

    def release(
        self,
        query_id: str,
        seal: Callable[[StoredQuery], bytes],
        charge: Callable[[str | None], str] | None = None,
    ) -> bytes: ...

    # -- the ledger
    def ledger(self) -> str | None: ...

    def update_ledger(self, update: Callable[[str | None], str]) -> str: ...

    # -- leader: held reports and jobs
    def hold_reports(
        self, query_id: str, reports: Sequence[tuple[bytes, bytes, bytes, bytes]]
    ) -> list[str]: ...

    def claim_job(
        self, query_id: str, limit: int, new_job_id: bytes, busy: frozenset[bytes] = frozenset()
    ) -> tuple[bytes, list[HeldReport]] | None: ...

    def finish_job(
        self,
        query_id: str,
        job_id: bytes,
        outcomes: Sequence[tuple[bytes, str]],
        merge: Callable[[bytes], bytes],
    ) -> None: ...

    def let_go(self, job_id: bytes) -> None:
        """This process stops driving the job (its attempt failed): another replica may take
        it, with the same id and reports."""
        ...

    def pending(self, query_id: str | None = None) -> dict[str, int]: ...

    # -- helper: jobs, seen report ids, spent nonces
    def job_response(self, job_id: bytes) -> bytes | None: ...

    def seen_reports(self, query_id: str, report_ids: Sequence[bytes]) -> set[bytes]: ...

    def spent_nonces(self, query_id: str, nonces: Sequence[bytes]) -> set[bytes]: ...

    def record_job(
        self,
        query_id: str,
        job_id: bytes,
        response: bytes,
        seen: Sequence[bytes],
        accepted: int,
        refused: int,
        merge: Callable[[bytes], bytes],
        spend: Sequence[tuple[bytes, bytes]] = (),
        replayed: Collection[bytes] = frozenset(),
    ) -> bytes: ...
