"""A fresh PostgreSQL database per test run, dropped afterwards.

The server is the one at LDPCOLLECT_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432,
trust authentication). Where none is reachable the tests that need it skip, saying so, except
when LDPCOLLECT_REQUIRE_POSTGRES=1 (set by .ci/run): then they fail.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

SERVER_URL = os.environ.get("LDPCOLLECT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432")
REQUIRED = os.environ.get("LDPCOLLECT_REQUIRE_POSTGRES") == "1"


def database_url(name: str) -> str:
    return f"{SERVER_URL.rstrip('/')}/{name}"


def create_database(prefix: str = "ldpc_test") -> str:
    """Create an empty database; returns its name."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(database_url("postgres"), autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def drop_database(name: str) -> None:
    with psycopg.connect(database_url("postgres"), autocommit=True, connect_timeout=5) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a database created for this test run (skips when no server is reachable,
    unless LDPCOLLECT_REQUIRE_POSTGRES=1)."""
    try:
        name = create_database()
    except psycopg.OperationalError as exc:
        reason = f"no PostgreSQL reachable at {SERVER_URL} (set LDPCOLLECT_TEST_POSTGRES): {exc}"
        if REQUIRED:
            pytest.fail(f"LDPCOLLECT_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    try:
        yield database_url(name)
    finally:
        drop_database(name)


@pytest.fixture
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A database of its own for one test (several processes share it), dropped after."""
    name = create_database("ldpc_one")
    try:
        yield database_url(name)
    finally:
        drop_database(name)
