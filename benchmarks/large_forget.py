"""Forgetting and purging one large document, on both engines (issue 29).

    python -m benchmarks.large_forget                       # both engines, 9.8 MB
    python -m benchmarks.large_forget --engines postgres --mb 2

One document of about ``--mb`` MB (9.8 by default, about 8,000 passages)
of real English text written by people: the licences in
/usr/share/common-licenses and the READMEs, copyright notices, NEWS and
change logs under /usr/share/doc, read in name order (``--source`` adds
other folders), so the same machine always builds the same document.

For each engine this remembers the document twice, in two namespaces,
then forgets one copy (``forget document:…``: a tombstone per passage,
each taking the passage out of the search index) and purges the other
(the erasure of every passage, its postings and what depends on it, and
the finishing step: VACUUM FULL on PostgreSQL, VACUUM and a checkpoint
on SQLite). On PostgreSQL the purge runs twice more on fresh copies: as
the tables' owner (a role that is not a superuser, as docs/postgres.md
sets up) and as an application role, whose erasure goes through
``memors_erase()``; the application role cannot rewrite the tables, so
its purge leaves the finishing step to the owner. Each figure is one
call of the library, in seconds, beside the target: 10 s.

The PostgreSQL server is ``$MEMORS_TEST_POSTGRES`` (default
``postgresql:///postgres``, a role that may create roles and databases);
the databases and roles it makes are dropped at the end.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from benchmarks.run import report, timed

ENGINES = ("sqlite", "postgres")
SOURCES = ("/usr/share/common-licenses", "/usr/share/doc")
TARGET_S = 10.0
#: Paragraphs are joined up to this size: the reported document's passages
#: (8,171 in 9.8 MB) were about as long.
PARAGRAPH_BYTES = 950
#: File names (or their start) read as text, compressed or not.
TEXT_NAMES = ("README", "NEWS", "copyright", "changelog", "CHANGES", "AUTHORS")


def _texts(folder: Path) -> Iterator[str]:
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        name = path.name
        if folder.name != "common-licenses" and not name.startswith(TEXT_NAMES):
            continue
        try:
            raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
            yield raw.decode("utf-8")
        except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
            continue


def _joined(text: str) -> Iterator[str]:
    """The text's paragraphs, short ones joined (one line each) into
    paragraphs of at least :data:`PARAGRAPH_BYTES`."""
    chunk: list[str] = []
    size = 0
    for paragraph in text.split("\n\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        chunk.append(paragraph)
        size += len(paragraph.encode()) + 1
        if size >= PARAGRAPH_BYTES:
            yield "\n".join(chunk)
            chunk, size = [], 0
    if chunk:
        yield "\n".join(chunk)


def document(mb: float, sources: list[str]) -> str:
    """About ``mb`` MB (10**6 bytes) of the sources' text, as one document."""
    limit = int(mb * 1_000_000)
    parts: list[str] = []
    size = 0
    for source in sources:
        folder = Path(source)
        if not folder.is_dir():
            continue
        for text in _texts(folder):
            for part in _joined(text):
                parts.append(part)
                size += len(part.encode()) + 2
            if size >= limit:
                body = "\n\n".join(parts).encode()[:limit]
                return body.decode("utf-8", errors="ignore")
    raise SystemExit(f"only {size:,} bytes of text in {', '.join(sources)}; pass --source DIR")


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _steps(memory, body: str, label: str, tag: str, owner: bool = True) -> None:
    """Remember ``body`` in two namespaces; forget one copy, purge the other."""
    forgotten, purged_ns = f"{tag}-forgotten", f"{tag}-purged"
    took, remembered = timed(lambda: memory.remember(body, namespace=forgotten))
    report(f"{label}: remember", f"{took:.2f} s", f"{len(remembered.passages):,} passages")
    second = memory.remember(body, namespace=purged_ns)
    took, _ = timed(lambda: memory.forget(remembered.document, namespace=forgotten))
    report(f"{label}: forget", f"{took:.2f} s", _load(), "", f"<= {TARGET_S:.0f} s")
    took, purged = timed(lambda: memory.purge(second.document, namespace=purged_ns))
    report(
        f"{label}: purge" + ("" if owner else " (erasure)"),
        f"{took:.2f} s",
        f"{len(purged.erased):,} erased; {_load()}",
        "",
        f"<= {TARGET_S:.0f} s",
    )


def run_sqlite(body: str) -> None:
    from memors_core import Memory

    work = Path(tempfile.mkdtemp(prefix="memors-large-forget-"))
    try:
        with Memory.open(work / "store.db") as memory:
            _steps(memory, body, "sqlite", "s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_postgres(body: str) -> None:
    import psycopg
    from psycopg import sql

    from memors_core import Memory
    from memors_core.storage.postgres.privileges import grant_application_role
    from memors_core.testing import postgres

    postgres.require_server()
    url = postgres.new_database()
    try:
        with Memory.open(url) as memory:
            _steps(memory, body, "postgres, superuser", "s")
    finally:
        postgres.drop_database(url)

    # The set-up of docs/postgres.md: an owner that is no superuser, an application role.
    tag = uuid.uuid4().hex[:8]
    dbname, owner, app = f"memors_b_{tag}", f"memors_b_owner_{tag}", f"memors_b_app_{tag}"
    admin = psycopg.connect(postgres.admin_url(), autocommit=True)
    try:
        for role in (owner, app):
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(dbname), sql.Identifier(owner)
            )
        )
        owner_url, app_url = f"postgresql://{owner}@/{dbname}", f"postgresql://{app}@/{dbname}"
        with Memory.open(owner_url) as memory:
            _steps(memory, body, "postgres, owner", "o")
        grant_application_role(owner_url, app)
        with Memory.open(app_url) as memory:
            _steps(memory, body, "postgres, app role", "a", owner=False)
    finally:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )
        for role in (app, owner):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=9.8, help="the document's size in MB")
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--source", action="append", default=[], help="another folder of text")
    args = parser.parse_args(argv)
    os.environ.setdefault("MEMORS_VECTORS", "off")
    body = document(args.mb, [*SOURCES, *args.source])
    print(f"one document of {len(body.encode()) / 1e6:.1f} MB; load {os.getloadavg()[0]:.2f}")
    for engine in args.engines:
        {"sqlite": run_sqlite, "postgres": run_postgres}[engine](body)


if __name__ == "__main__":
    main()
