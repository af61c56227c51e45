"""What a run is set up with before it starts: the kinds it writes pages for
and the model and timeout from the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import usage_error

if TYPE_CHECKING:
    from memors_core.plugins.kinds import KindRegistry

DEFAULT_TIMEOUT = 300.0


def _and_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def executor_kinds(kinds: list[str] | None, registry: KindRegistry) -> list[str]:
    """The kinds to write pages for: those asked for (all of the installed
    kinds that write pages by default), each of which must write pages."""
    writers = [k.name for k in registry if k.writes_page]
    writers.sort()
    if not writers:
        usage_error("--executor ollama writes pages, and no installed kind takes a page")
    if kinds is None:
        return writers
    others = [k for k in dict.fromkeys(kinds) if k not in writers]
    if others:
        usage_error(
            f"--executor ollama writes pages: --kinds may name only {_and_list(writers)}, "
            f"not {', '.join(others)}"
        )
    return list(dict.fromkeys(kinds))


def model_from_env(env: dict[str, str]) -> str:
    model = env.get("MEMORS_OLLAMA_MODEL", "").strip()
    if not model:
        usage_error(
            "--executor ollama needs a model: set MEMORS_OLLAMA_MODEL "
            "(a non-thinking instruction model, e.g. qwen2.5:7b-instruct)",
            code="no-model",
        )
    return model


def timeout_from_env(env: dict[str, str]) -> float:
    raw = env.get("MEMORS_OLLAMA_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        usage_error(f"MEMORS_OLLAMA_TIMEOUT must be a number of seconds above 0, got {raw!r}")
    return value
