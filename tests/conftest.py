"""Hypothesis profiles: chance never decides whether a submission lands.

`CI=true` (as `.ci/run` sets it) loads the ``ci`` profile: derandomized (the same examples on
every run), no example database, no deadline. Locally the ``dev`` profile draws new examples
each run; ``HYPOTHESIS_PROFILE=ci`` or ``HYPOTHESIS_PROFILE=dev`` picks one explicitly.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)


def _profile() -> str:
    chosen = os.environ.get("HYPOTHESIS_PROFILE")
    if chosen:
        return chosen
    return "ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev"


settings.load_profile(_profile())

# PostgreSQL fixtures (`postgres_url`, `fresh_postgres_url`) for every test module.
from tests.postgres_db import fresh_postgres_url, postgres_url  # noqa: E402, F401
