"""`ldpcollect store migrate`: create or upgrade the PostgreSQL schema ahead of time (the
trusted aggregator's, or with `--role leader|helper` a secure role's, in its own schema).
`ldpcollect store backup`: a consistent copy of a SQLite store, running or not.

Replicas apply missing schema versions themselves when they start (one at a time, under an
advisory lock); operators who keep schema changes apart from deploys run this first, as a
user allowed to create tables, and can then run the replicas as one that is not.

A SQLite store is its database file plus, for wide queries, their answer files
(`<db>.answers/`): `sqlite3 .backup` alone would copy the first without the second.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from ldpcollect.errors import ParameterError
from ldpcollect_cli.service_errors import guarded
from ldpcollect_cli.service_options import Json


def is_postgres_url(text: str) -> bool:
    return text.startswith(("postgresql://", "postgres://"))


store_app = typer.Typer(
    help="The aggregator's database: PostgreSQL schema, SQLite backups.", no_args_is_help=True
)

StoreUrl = Annotated[
    str,
    typer.Option(
        "--store", envvar="LDPCOLLECT_STORE", help="postgresql://USER@HOST:PORT/DB to migrate."
    ),
]


Role = Annotated[
    str,
    typer.Option(
        "--role",
        help="Whose tables: trusted (the default), or a secure-mode leader's or helper's "
        "(their own schema, ldpcollect_secure_leader or ldpcollect_secure_helper).",
    ),
]


@store_app.command("migrate")
def migrate_command(store: StoreUrl, role: Role = "trusted", json_out: Json = False) -> None:
    """Bring the database's ldpcollect schema to this version (a no-op when it is)."""
    guarded(lambda: _migrate(store, json_out, role))


def _migrate(url: str, json_out: bool, role: str = "trusted") -> None:
    if not is_postgres_url(url):
        raise ParameterError("--store", url, "a PostgreSQL URL: postgresql://USER@HOST:PORT/DB")
    if role != "trusted":
        _migrate_secure(url, json_out, role)
        return
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


def _migrate_secure(url: str, json_out: bool, role: str) -> None:
    import psycopg

    from aggregator.secure.pg_store import ROLE_SCHEMAS, migrate, schema_versions
    from aggregator.store.pg_migrations import SchemaTooNew
    from aggregator.store.postgres import DatabaseUnreachable

    if role not in ROLE_SCHEMAS:
        raise ParameterError("--role", role, "trusted, leader or helper")
    schema = ROLE_SCHEMAS[role]
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            applied = migrate(conn, schema)
    except (psycopg.Error, SchemaTooNew) as exc:
        raise DatabaseUnreachable(url, exc) from None
    version = max(schema_versions())
    if json_out:
        print(json.dumps({"schema": schema, "schema_version": version, "applied": applied}))
    elif applied:
        print(f"applied {schema} version(s) {', '.join(map(str, applied))}; now at {version}")
    else:
        print(f"{schema} already at version {version}; nothing to do")


@store_app.command("backup")
def backup_command(
    destination: Annotated[
        Path, typer.Argument(help="New file for the copy; its answer files go beside it.")
    ],
    db: Annotated[
        Path, typer.Option("--db", help="The SQLite database of `ldpcollect serve --db`.")
    ],
    json_out: Json = False,
) -> None:
    """Copy a SQLite store, its answer files included, while it serves or not.

    A consistent snapshot of the database, then exactly the answer bytes it names. Restore by
    stopping the service and putting both in place (the file and its `.answers` directory).
    """
    guarded(lambda: _backup(db, destination, json_out))


def _backup(db: Path, destination: Path, json_out: bool) -> None:
    from aggregator.store.sqlite_backup import backup

    done = backup(db, destination)
    if json_out:
        print(
            json.dumps(
                {
                    "database": str(done.database),
                    "answer_files": done.answer_files,
                    "answer_bytes": done.answer_bytes,
                    "snapshots": done.attempts,
                }
            )
        )
    else:
        print(
            f"copied {db} to {done.database} with {done.answer_files} answer file(s) "
            f"({done.answer_bytes:,} bytes) beside it"
        )


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
