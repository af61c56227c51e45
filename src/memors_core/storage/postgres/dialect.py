"""The shared repositories' SQL, rendered for PostgreSQL.

:mod:`memors_core.storage.sql` writes its statements once, in SQLite's
spelling. This module turns one into PostgreSQL's, once per statement text
(the result is cached): ``?``, ``?N`` and ``:name`` placeholders become
psycopg's ``%s`` (with the parameters reordered to match), a literal ``%``
is doubled, ``json_each(?)`` (a JSON list parameter read as rows) becomes
``json_array_elements_text``, and ``INSERT OR IGNORE`` becomes
``INSERT … ON CONFLICT DO NOTHING``, and ``CROSS JOIN … ON`` a plain join. Anything else that differs is not
rendered but written per engine (search, the clocks, purge, transfer).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

# Tokens that matter, in one pass: string literals and quoted names (left
# alone), placeholders, and a bare %.
_TOKEN = re.compile(
    r"""(?P<literal>'(?:[^']|'')*'|"(?:[^"]|"")*")"""
    r"""|(?P<numbered>\?(?P<number>\d+))"""
    r"""|(?P<plain>\?)"""
    r"""|(?P<named>(?<![:\w]):(?P<name>[A-Za-z_]\w*))"""
    r"""|(?P<percent>%)"""
)
_JSON_EACH = re.compile(
    r"json_each\((?P<arg>[^()]*)\)"
    r"(?P<alias>\s+(?!(?:WHERE|JOIN|CROSS|INNER|LEFT|ON|ORDER|GROUP|LIMIT|UNION)\b)[A-Za-z_]\w*)?",
    re.IGNORECASE,
)
# SQLite's CROSS JOIN … ON fixes the join order; PostgreSQL spells it JOIN.
_CROSS_ON = re.compile(r"\bCROSS\s+JOIN\s+(\w+(?:\s+\w+)?)\s+ON\b", re.IGNORECASE)
_OR_IGNORE = re.compile(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO\b", re.IGNORECASE)
_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)


class Rendered:
    """One statement in PostgreSQL's spelling and how to order its parameters."""

    __slots__ = ("names", "order", "sql")

    def __init__(self, sql: str, order: tuple[int, ...] | None, names: tuple[str, ...] | None):
        self.sql = sql
        #: For positional parameters: the index of the given parameter each
        #: ``%s`` takes (None: they are taken as given).
        self.order = order
        #: For named parameters: the name each ``%s`` takes.
        self.names = names

    def params(self, params: Sequence[Any] | Mapping[str, Any]) -> Sequence[Any]:
        if self.names is not None:
            return [params[n] for n in self.names]  # type: ignore[call-overload]
        if self.order is None:
            return params  # type: ignore[return-value]
        return [params[i] for i in self.order]  # type: ignore[index]


@functools.lru_cache(maxsize=4096)
def render(sql: str) -> Rendered:
    """``sql`` (SQLite's spelling, as the shared repositories write it) for PostgreSQL."""
    sql = _JSON_EACH.sub(_json_each, sql)
    sql = _CROSS_ON.sub(r"JOIN \1 ON", sql)
    ignore = bool(_OR_IGNORE.match(sql))
    if ignore:
        sql = _OR_IGNORE.sub("INSERT INTO", sql, count=1)
    out: list[str] = []
    order: list[int] = []
    names: list[str] = []
    numbered = False
    pos = 0
    for m in _TOKEN.finditer(sql):
        out.append(sql[pos : m.start()])
        pos = m.end()
        if m.group("literal"):
            out.append(m.group("literal").replace("%", "%%"))
        elif m.group("numbered"):
            numbered = True
            order.append(int(m.group("number")) - 1)
            out.append("%s")
        elif m.group("plain"):
            order.append(len(order))
            out.append("%s")
        elif m.group("named"):
            names.append(m.group("name"))
            out.append("%s")
        else:
            out.append("%%")
    out.append(sql[pos:])
    text = "".join(out)
    if ignore:
        returning = _RETURNING.search(text)
        if returning:
            text = f"{text[: returning.start()]}ON CONFLICT DO NOTHING {text[returning.start() :]}"
        else:
            text = f"{text.rstrip().rstrip(';')} ON CONFLICT DO NOTHING"
    if names and order:
        raise ValueError(f"one statement mixes named and positional parameters: {sql!r}")
    return Rendered(text, tuple(order) if numbered else None, tuple(names) if names else None)


def _json_each(m: re.Match[str]) -> str:
    alias = (m.group("alias") or "").strip()
    arg = m.group("arg")
    if alias:
        return f"json_array_elements_text(CAST({arg} AS json)) AS {alias}(value)"
    return f"json_array_elements_text(CAST({arg} AS json)) AS value"
