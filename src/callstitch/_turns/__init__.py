"""The whole turn in the provider's own shape: one module per format, each with response() and message().

Each module reads the Result (calls, texts, finish reasons, usage) and the record its format's
adapter kept on the way (``result._turn``: ids, model, block order, signatures, fields callstitch
does not know), and builds the provider's non-streamed response and the assistant message of a
request from them. Nothing here runs while a stream is fed: the turn costs the calls nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_MODULES = {
    "openai-chat": "openai_chat",
    "openai-responses": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "bedrock": "bedrock",
    "cohere": "cohere",
    "ollama": "ollama",
}


def _module(result: Any) -> Any:
    name = _MODULES.get(result.format)
    if name is None:
        raise ValueError(f"the stream's format was never recognised (format {result.format!r}), so it has no "
                         f"turn to give; see result.errors")
    return import_module(f"{__name__}.{name}")


def to_response(result: Any) -> dict[str, Any]:
    """Return the provider's non-streamed response object for result."""
    return _module(result).response(result, result._turn)


def to_message(result: Any, choice: int = 0) -> Any:
    """Return the assistant message of result's choice in the provider's request shape."""
    if type(choice) is not int:
        raise TypeError(f"choice must be an int, not {type(choice).__name__}")
    return _module(result).message(result, result._turn, choice)
