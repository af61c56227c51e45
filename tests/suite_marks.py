"""Whether a test starts a process (for the `subprocess` marker that
`make test-quick` leaves out): read from its code, its fixtures' and the
helpers of their modules they call. A module of its own, not conftest.py,
so that a test can import it whichever conftest is loaded first."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from functools import cache
from typing import Any

#: What starts a process: the CLI (`cli`, `memors_cli`, `run_cli`), a server
#: (`ServerProcess`), a benchmark or script (`subprocess`, `sys.executable`),
#: another interpreter (`multiprocessing`).
SPAWNS = re.compile(r"\b(subprocess|Popen|run_cli|ServerProcess|sys\.executable|multiprocessing)\b")


@cache
def starts_a_process(func: Callable[..., Any], depth: int = 0) -> bool:
    """True when ``func`` (or a function of its module it calls, three deep)
    names a way of starting a process."""
    func = inspect.unwrap(func)
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return False
    if SPAWNS.search(source):
        return True
    if depth >= 3:
        return False
    module, names = getattr(func, "__module__", None), set()
    codes = [getattr(func, "__code__", None)]
    while codes:
        code = codes.pop()
        if code is not None:
            names.update(code.co_names)
            codes += [c for c in code.co_consts if inspect.iscode(c)]
    found = getattr(func, "__globals__", {})
    return any(
        starts_a_process(found[n], depth + 1)
        for n in sorted(names)
        if inspect.isfunction(found.get(n)) and found[n].__module__ == module
    )
