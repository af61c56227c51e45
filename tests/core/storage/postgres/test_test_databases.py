"""The test databases themselves: a released one is dropped a few
releases later (a copy made right after a drop is slow on ext4), and none
outlives the process that made it."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memors_core.testing import postgres

pytestmark = pytest.mark.postgres_run("the PostgreSQL engine's own tests")


def existing(names: list[str]) -> list[str]:
    with psycopg.connect(postgres.admin_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", (names,)
        ).fetchall()
    return sorted(r[0] for r in rows)


def test_released_databases_are_dropped_lag_behind_and_all_at_the_end():
    postgres.require_server()
    urls = [postgres.new_database() for _ in range(postgres.DROP_LAG + 2)]
    names = [conninfo_to_dict(u)["dbname"] for u in urls]
    assert existing(names) == sorted(names)
    for url in urls:
        postgres.drop_database(url)
    # The two released first are gone; the last DROP_LAG wait.
    assert existing(names) == sorted(names[2:])
    postgres.drop_released()
    assert existing(names) == []
