"""PostgreSQL schema migrations: versioned `.sql` files applied once each, in order.

The files are `aggregator/store/schema/postgres_v<N>.sql`. Applying them takes a
transaction-scoped advisory lock, so replicas starting together apply each version exactly
once (the others wait, then find it done); `ldpcollect_migrations` records what was applied.
A database migrated by a newer ldpcollect (a version this one does not know) is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

# pg_advisory_xact_lock key for migrations ("ldpc" in ASCII).
MIGRATION_LOCK = 0x6C647063
_FILE = re.compile(r"postgres_v(\d+)\.sql")
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    script: str


def migrations() -> list[Migration]:
    """The schema files shipped with this ldpcollect, oldest first."""
    found: list[Migration] = []
    for entry in resources.files("aggregator.store").joinpath("schema").iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    return sorted(found, key=lambda m: m.version)


class SchemaTooNew(RuntimeError):
    """The database holds a schema version this ldpcollect does not know."""


async def migrate(
    conn: psycopg.AsyncConnection[Any], schema: str | None = None, upto: int | None = None
) -> list[int]:
    """Bring the database (or `schema` in it, created if missing) to the newest version (or
    to version `upto`, as an older ldpcollect would); returns the versions applied now (empty
    when it was up to date)."""
    known = [m for m in migrations() if upto is None or m.version <= upto]
    applied_now: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        if schema is not None:
            await conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
            )
            await conn.execute(
                sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema))
            )
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS ldpcollect_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cursor = await conn.execute("SELECT version FROM ldpcollect_migrations")
        applied = {int(row[0]) for row in await cursor.fetchall()}
        newest = max((m.version for m in migrations()), default=0)
        if applied and max(applied) > newest:
            raise SchemaTooNew(
                f"the database has schema version {max(applied)}, newer than this ldpcollect "
                f"knows ({newest}): upgrade ldpcollect on this replica"
            )
        for migration in known:
            if migration.version in applied:
                continue
            await conn.execute(migration.script.encode())
            await conn.execute(
                "INSERT INTO ldpcollect_migrations (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            applied_now.append(migration.version)
    return applied_now
