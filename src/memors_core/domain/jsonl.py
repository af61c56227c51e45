"""Reading one line of JSON from a user's file: every way it can fail is bad
input naming the file and line, never an internal error."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from memors_core.errors import BadInput


def decode_line(line: bytes | bytearray, n: int, source: str) -> str:
    """Line ``n`` as UTF-8 text (a BOM at the start of the first dropped),
    or bad input naming ``source`` and the line."""
    try:
        return line.decode("utf-8-sig" if n == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(
            f"{source}:{n}: not UTF-8 text (bad byte at offset {exc.start} of the line)"
        ) from None


def parse_line(line: str, n: int, source: str) -> Any:
    """``json.loads(line)``, with malformed, too deeply nested or oversized
    input reported as ``SOURCE:N: …``."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}:{n}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise BadInput(f"{source}:{n}: not valid input (JSON nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise BadInput(f"{source}:{n}: not valid JSON ({str(exc).split(':')[0]})") from None


def iter_jsonl(lines: Iterable[str], source: str) -> Iterator[dict[str, Any]]:
    """Parse JSON lines, naming the line of the first malformed one."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        value = parse_line(line, n, source)
        if not isinstance(value, dict):
            raise BadInput(f"{source}:{n}: each line must be a JSON object")
        yield value
