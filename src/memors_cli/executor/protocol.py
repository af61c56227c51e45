"""What a run asks of a model server's client, whichever API it speaks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .endpoint import Endpoint


@dataclass
class Answer:
    content: str
    done_reason: str | None  # "length" when the answer was cut off
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatRequest:
    messages: list[dict[str, str]]
    #: The JSON schema the answer must follow (structured output), or None
    #: for a Markdown page.
    schema: dict[str, Any] | None = None


class Client(Protocol):
    endpoint: Endpoint
    model: str
    #: Whether pages are first asked for as structured output (JSON).
    structured_output: bool

    def check_model(self) -> None:
        """The endpoint answers and serves the model, or EndpointFailed."""

    def chat(self, request: ChatRequest, on_progress: Callable[[int], None]) -> Answer:
        """The model's whole answer to the conversation, or ItemFailed."""
        ...
