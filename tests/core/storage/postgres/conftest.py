"""A PostgreSQL store set up as docs/postgres.md says: the tables owned by a
role that is not a superuser, and an application role for the agents."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest


@dataclass
class Roles:
    dbname: str
    owner: str
    app: str

    @property
    def owner_url(self) -> str:
        return f"postgresql://{self.owner}@/{self.dbname}"

    @property
    def app_url(self) -> str:
        return f"postgresql://{self.app}@/{self.dbname}"


def _skip_without_server() -> None:
    from memors_core.testing import postgres

    postgres.require_server()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh migrated store database (connecting as the test server's role)."""
    from memors_core.testing import postgres

    _skip_without_server()
    url = postgres.new_database()
    yield url
    postgres.drop_database(url)


@contextlib.contextmanager
def roles_database(migrate: Callable[[str], None] | None = None) -> Iterator[Roles]:
    """A new database owned by a new login role (no superuser) that migrated
    it (``migrate(owner_url)``, by default opening it with memors), and a
    new login role granted the application role's privileges."""
    import psycopg
    from psycopg import sql

    from memors_core.memory import Memory
    from memors_core.storage.postgres.privileges import grant_application_role
    from memors_core.testing import postgres

    _skip_without_server()
    tag = uuid.uuid4().hex[:8]
    made = Roles(
        dbname=f"memors_t_roles_{tag}", owner=f"memors_t_owner_{tag}", app=f"memors_t_app_{tag}"
    )
    admin = psycopg.connect(postgres.admin_url(), autocommit=True)
    try:
        for role in (made.owner, made.app):
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(made.dbname), sql.Identifier(made.owner)
            )
        )
        if migrate is None:
            Memory.open(made.owner_url).close()  # the owner migrates the store
        else:
            migrate(made.owner_url)
        grant_application_role(made.owner_url, made.app)
        yield made
    finally:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(made.dbname))
        )
        for role in (made.app, made.owner):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()


@pytest.fixture(scope="module")
def roles() -> Iterator[Roles]:
    """A store set up as docs/postgres.md says (see :func:`roles_database`)."""
    with roles_database() as made:
        yield made
