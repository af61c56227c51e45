"""Export files made by hand, for the tests of import.

:func:`seal` closes a file's lines (a header and rows) the way
``memors-mcp export`` does, as docs/cli.md describes the closing line: the
rows of each table counted, and the SHA-256 of every line before it as
export writes it (``json.dumps(obj, ensure_ascii=False)``) with its
newline. Written here from the documented format, not with memors'
own code, so a test that seals an altered file proves import checks more
than the checksum, and one that compares with export's own closing line
proves the format is the documented one.
"""

from __future__ import annotations

import hashlib
import json


def body(lines: list[str]) -> list[str]:
    """An export's lines without its closing line."""
    assert json.loads(lines[-1]).get("end") == "memors-export", lines[-1][:200]
    return lines[:-1]


def seal(lines: list[str]) -> list[str]:
    """``lines`` (a header, then rows) with the closing line they call for."""
    digest = hashlib.sha256()
    rows: dict[str, int] = {}
    for line in lines:
        obj = json.loads(line)
        # each line as export writes it (non-ASCII as UTF-8, not escaped)
        written = json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")
        digest.update(written + b"\n")
        table = obj.get("table")
        if table is not None:
            rows[table] = rows.get(table, 0) + 1
    end = {"end": "memors-export", "rows": rows, "sha256": digest.hexdigest()}
    return [*lines, json.dumps(end, ensure_ascii=False)]
