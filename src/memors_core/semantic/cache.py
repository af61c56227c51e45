"""The model's optimized graph, kept between processes.

onnxruntime rewrites a model's graph every time it loads it (constant
folding, fused attention and layer-norm nodes). The first process saves
the rewritten graph (``SessionOptions.optimized_model_filepath``) under the
user's cache (``$XDG_CACHE_HOME/memors``, else ``~/.cache/memors``); later
ones load that file with every rewrite switched off, which takes less CPU
(docs/performance.md has the figures).

The file is named by a key of what it was made from: the model file's hash
(the one its package pins, else the file's own), size and modification
time, the onnxruntime version, the machine's architecture and the rewrite
level. A model or onnxruntime of another version so never loads a graph
made for another; the older files are removed when a new one is written.

Safe against processes writing at once and against damage: each writer
writes a file of its own and renames it into place (a reader sees a whole
file or none), and beside the graph a small record says its size and the
vector it gave for a fixed probe text. A graph that does not load, is not
that size or gives another vector is ignored and made again from the
model; a cache that cannot be written costs nothing but the saving.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

#: The file names' prefix: a cache file of this model (any version).
PREFIX = "minilm-int8-"
#: A probe vector may differ from the recorded one by this much (thread
#: counts change the order of float sums, not more).
TOLERANCE = 1e-3


def folder() -> Path:
    """Where cached graphs go: ``$XDG_CACHE_HOME/memors``, else ``~/.cache/memors``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memors"


def key(model: Path, pinned_sha256: str | None, runtime_version: str, level: str) -> str:
    """What a cached graph was made from, as a short hex name."""
    stat = model.stat()
    digest = pinned_sha256 or hashlib.sha256(model.read_bytes()).hexdigest()
    made_of = "\0".join(
        (digest, str(stat.st_size), str(stat.st_mtime_ns), runtime_version,
         platform.machine(), level)
    )  # fmt: skip
    return hashlib.sha256(made_of.encode()).hexdigest()[:32]


def load(
    open_session: Callable[[str, str | None], Any],
    model: Path,
    name: str,
    probe: Callable[[Any], list[float]],
    where: Path | None = None,
) -> tuple[Any, str]:
    """A session of ``model``: from the cached graph ``name`` when it is
    sound, else from the model (saving the graph for the next process).
    ``open_session(path, save_to)`` opens one (``save_to``: where
    onnxruntime writes the rewritten graph, None: load as it is);
    ``probe(session)`` is the fixed text's vector. Returns the session and
    where it came from: ``"cache"`` or ``"model"``."""
    where = where or folder()
    graph, record = where / f"{PREFIX}{name}.onnx", where / f"{PREFIX}{name}.json"
    cached = _from_cache(open_session, graph, record, probe)
    if cached is not None:
        return cached, "cache"
    try:
        where.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".onnx", dir=where)
        os.close(handle)
    except OSError:  # no cache to be had here: the model as it is
        return open_session(str(model), None), "model"
    try:
        session = open_session(str(model), temporary)
        _keep(temporary, graph, record, probe(session))
        _remove_others(where, name)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    return session, "model"


def _from_cache(
    open_session: Callable[[str, str | None], Any],
    graph: Path,
    record: Path,
    probe: Callable[[Any], list[float]],
) -> Any:
    """The cached graph's session, or None if it is missing or unsound."""
    try:
        said = json.loads(record.read_text(encoding="utf-8"))
        if graph.stat().st_size != said["size"]:
            return None
        session = open_session(str(graph), None)
        got = probe(session)
        expected = said["probe"]
    except Exception:  # missing, unreadable, not a graph onnxruntime loads
        return None
    if len(got) != len(expected) or any(
        abs(a - b) > TOLERANCE for a, b in zip(got, expected, strict=True)
    ):
        return None
    return session


def _keep(temporary: str, graph: Path, record: Path, vector: list[float]) -> None:
    """Put the written graph and its record in place (each renamed whole);
    a failure leaves the cache as it was."""
    try:
        size = os.path.getsize(temporary)
        if not size:
            return
        os.replace(temporary, graph)
        handle, written = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".json", dir=graph.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"size": size, "probe": vector}, out)
        os.replace(written, record)
    except OSError:
        return


def _remove_others(where: Path, name: str) -> None:
    """Remove the graphs of other versions (a process that still opens one
    finds it gone and makes its own), and what killed writers left (an hour
    old)."""
    import time

    with contextlib.suppress(OSError):
        for path in where.glob(f"{PREFIX}*"):
            if not path.name.startswith(f"{PREFIX}{name}."):
                with contextlib.suppress(OSError):
                    path.unlink()
        for path in where.glob(f".{PREFIX}*"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < time.time() - 3600:
                    path.unlink()
