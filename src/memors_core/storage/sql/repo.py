"""The base of every SQL repository, and the lookups search needs, in a
module that imports nothing heavy: ``memors-mcp search`` reads a store
through these without the rest of the storage layer (no attrs, no typing).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than Python's start
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Iterable
    from typing import Any

    from memors_core.storage.sql.tx import SqlTx


class Repo:
    """A repository: the transaction's connection and its sibling repositories."""

    def __init__(self, tx: SqlTx) -> None:
        self.tx = tx
        self.db: Any = tx.db
        # The connection's own query helpers (Store.one, .all, .scalar), bound once.
        self.one = self.db.one
        self.all = self.db.all
        self.scalar = self.db.scalar
        # :meth:`all` of a statement the engine plans once per connection
        # (PostgreSQL prepares it; SQLite's statement cache already does):
        # for the reads a view makes on every request.
        self.planned = self.db.all_planned

    def planned_one(
        self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()
    ) -> tuple[Any, ...] | None:
        """The first row of :meth:`planned` (None for none): a look-up made
        often enough that planning it each time costs more than running it."""
        rows = self.planned(sql, params)
        return rows[0] if rows else None

    def run(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """Execute a statement; returns how many rows it changed."""
        changed: int = self.db.run(sql, params)
        return changed

    def number(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> int:
        """The whole number a query answers (a count, a clock): :meth:`scalar`, typed."""
        value: int = self.scalar(sql, params)
        return value

    def text(self, sql: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> str | None:
        """The string a query answers, None for no row: :meth:`scalar`, typed."""
        value: str | None = self.scalar(sql, params)
        return value


def entity_name(alias: str) -> str:
    """SQL: the name of the entity ``alias`` now (its newest rename, else its name as written)."""
    return (
        f"coalesce((SELECT n_.name FROM entity_names n_ WHERE n_.entity = {alias}.id "
        f"ORDER BY n_.rowid DESC LIMIT 1), {alias}.name)"
    )


def live_alias(alias: str) -> str:
    """SQL: the alias row ``alias`` was not taken back (an undone merge retracts the
    names it gave; giving the name again restores it)."""
    return (
        "coalesce((SELECT c_.state FROM alias_changes c_ WHERE c_.entity = "
        f"{alias}.entity AND c_.key = {alias}.key ORDER BY c_.rowid DESC LIMIT 1), "
        "'restored') = 'restored'"
    )


def json_list(values: Iterable[int | str]) -> str:
    """``values`` (whole numbers, strings) as a JSON array, for ``json_each(?)``.

    Row ids, entity ids and folded names are written out directly; anything
    else (a string with a quote, a backslash or a control character) goes
    through :mod:`json`, which a search would otherwise import only for this.
    """
    items = list(values)
    out = []
    for value in items:
        if type(value) is int:
            out.append(str(value))
        elif type(value) is str and '"' not in value and "\\" not in value and value.isprintable():
            out.append(f'"{value}"')
        else:
            import json

            return json.dumps(items)
    return "[" + ",".join(out) + "]"


def named_entities(
    rows: Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]],
    namespace: str,
    folded: Iterable[str],
) -> dict[str, str]:
    """:meth:`memors_core.storage.api.Entities.named`, given a query runner
    (``rows(sql, params)``): folded names -> the canonical entity each names."""
    names = sorted(set(folded))
    if not names:
        return {}
    found: dict[str, str] = {}
    for name, canonical in rows(
        """SELECT n.folded, n.canonical FROM (
               SELECT folded, canonical, rowid AS age, 0 AS alias FROM entities
               WHERE namespace = ? AND folded IN (SELECT value FROM json_each(?))
               UNION ALL
               SELECT a.folded, e.canonical, e.rowid, 1 FROM aliases a
               JOIN entities e ON e.id = a.entity
               WHERE a.namespace = ? AND a.folded IN (SELECT value FROM json_each(?))
           ) n ORDER BY n.alias DESC, n.age DESC""",
        (namespace, json_list(names), namespace, json_list(names)),
    ):
        found[name] = canonical  # the last written wins: a name before an alias, oldest first
    return found
