"""What a run is set up with before it starts: which server it speaks to
(the :class:`Flavor` of executor), the kinds it writes pages for, and the
model, endpoint, timeout and API key from the environment."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .endpoint import Endpoint, resolve_endpoint
from .errors import usage_error

if TYPE_CHECKING:
    from memors_core.plugins.kinds import KindRegistry

DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Flavor:
    """What differs between the executors in their settings and messages."""

    name: str  # the --executor value
    server: str  # how messages name the server
    url_var: str
    model_var: str
    timeout_var: str
    default_url: str | None  # None: the URL must be set
    default_port: int | None  # for a URL given as host alone (None: the scheme's)
    model_hint: str  # what the model variable holds
    start_hint: str  # what to check when the server cannot be reached
    key_var: str | None = None  # the API key's variable, if the server takes one
    default_path: str = ""  # the base path of a URL given without one


OLLAMA = Flavor(
    name="ollama",
    server="Ollama",
    url_var="MEMORS_OLLAMA_URL",
    model_var="MEMORS_OLLAMA_MODEL",
    timeout_var="MEMORS_OLLAMA_TIMEOUT",
    default_url="http://127.0.0.1:11434",
    default_port=11434,
    model_hint="a non-thinking instruction model, e.g. qwen2.5:7b-instruct",
    start_hint="is `ollama serve` running there?",
)

OPENAI = Flavor(
    name="openai",
    server="the server",
    url_var="MEMORS_EXECUTOR_URL",
    model_var="MEMORS_EXECUTOR_MODEL",
    timeout_var="MEMORS_EXECUTOR_TIMEOUT",
    default_url=None,
    default_port=None,
    model_hint="a non-thinking instruction model, as the server's /v1/models names it",
    start_hint="is the model server running there?",
    key_var="MEMORS_EXECUTOR_API_KEY",
    default_path="/v1",
)

FLAVORS = {f.name: f for f in (OLLAMA, OPENAI)}


@dataclass(frozen=True)
class Settings:
    flavor: Flavor
    model: str
    timeout: float
    endpoint: Endpoint
    api_key: str | None  # never printed, logged or reported

    def __repr__(self) -> str:  # the key stays out of any repr
        return f"Settings({self.flavor.name}, {self.model!r}, {self.endpoint.url})"


def load_settings(flavor: Flavor, env: dict[str, str], allow_remote: bool) -> Settings:
    """The run's settings from the environment, or a usage error (exit 2)
    before any connection."""
    model = model_from_env(flavor, env)
    timeout = timeout_from_env(flavor, env)
    url = env.get(flavor.url_var, "").strip() or flavor.default_url
    if url is None:
        usage_error(
            f"--executor {flavor.name} needs the server's address: set {flavor.url_var} "
            "(its OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1)",
            code="no-url",
        )
    endpoint = resolve_endpoint(url, allow_remote, flavor.url_var, flavor.default_port)
    if not endpoint.base_path and flavor.default_path:
        endpoint = replace(
            endpoint, base_path=flavor.default_path, url=endpoint.url + flavor.default_path
        )
    key = (env.get(flavor.key_var, "").strip() or None) if flavor.key_var else None
    return Settings(flavor, model, timeout, endpoint, key)


def _and_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def executor_kinds(kinds: list[str] | None, registry: KindRegistry, executor: str) -> list[str]:
    """The kinds to write pages for: those asked for (all of the installed
    kinds that write pages by default), each of which must write pages."""
    writers = [k.name for k in registry if k.writes_page]
    writers.sort()
    if not writers:
        usage_error(f"--executor {executor} writes pages, and no installed kind takes a page")
    if kinds is None:
        return writers
    others = [k for k in dict.fromkeys(kinds) if k not in writers]
    if others:
        usage_error(
            f"--executor {executor} writes pages: --kinds may name only {_and_list(writers)}, "
            f"not {', '.join(others)}"
        )
    return list(dict.fromkeys(kinds))


def model_from_env(flavor: Flavor, env: dict[str, str]) -> str:
    model = env.get(flavor.model_var, "").strip()
    if not model:
        usage_error(
            f"--executor {flavor.name} needs a model: set {flavor.model_var} ({flavor.model_hint})",
            code="no-model",
        )
    return model


def timeout_from_env(flavor: Flavor, env: dict[str, str]) -> float:
    raw = env.get(flavor.timeout_var, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        usage_error(f"{flavor.timeout_var} must be a number of seconds above 0, got {raw!r}")
    return value
