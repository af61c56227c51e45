"""Reading one line of JSON from a user's file: every way it can fail is bad
input naming the file and line, never an internal error."""

from __future__ import annotations

import json
from typing import Any

from .errors import BadInput


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
