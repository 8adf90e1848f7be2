"""`ldpcollect store migrate`: create or upgrade the PostgreSQL schema ahead of time.

Replicas apply missing schema versions themselves when they start (one at a time, under an
advisory lock); operators who keep schema changes apart from deploys run this first, as a
user allowed to create tables, and can then run the replicas as one that is not.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer

from ldpcollect.errors import ParameterError
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import Json


def is_postgres_url(text: str) -> bool:
    return text.startswith(("postgresql://", "postgres://"))


store_app = typer.Typer(help="The aggregator's PostgreSQL database.", no_args_is_help=True)

StoreUrl = Annotated[
    str,
    typer.Option(
        "--store", envvar="LDPCOLLECT_STORE", help="postgresql://USER@HOST:PORT/DB to migrate."
    ),
]


@store_app.command("migrate")
def migrate_command(store: StoreUrl, json_out: Json = False) -> None:
    """Bring the database's ldpcollect schema to this version (a no-op when it is)."""
    guarded(lambda: _migrate(store, json_out))


def _migrate(url: str, json_out: bool) -> None:
    if not is_postgres_url(url):
        raise ParameterError("--store", url, "a PostgreSQL URL: postgresql://USER@HOST:PORT/DB")
    import psycopg

    from aggregator.store.pg_migrations import SchemaTooNew, migrate, migrations
    from aggregator.store.postgres import DatabaseUnreachable

    async def run() -> list[int]:
        async with await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=10
        ) as conn:
            return await migrate(conn)

    try:
        applied = asyncio.run(run())
    except (psycopg.Error, SchemaTooNew) as exc:
        raise DatabaseUnreachable(url, exc) from None
    version = max(m.version for m in migrations())
    if json_out:
        print(json.dumps({"schema_version": version, "applied": applied}))
    elif applied:
        print(f"applied schema version(s) {', '.join(map(str, applied))}; now at {version}")
    else:
        print(f"schema already at version {version}; nothing to do")


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
