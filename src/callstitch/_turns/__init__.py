"""The whole turn in the provider's own shape: one module per format, each with response() and message().

Each module reads the Result (calls, texts, finish reasons, usage) and the record its format's
adapter kept on the way (``result._turn``: ids, model, block order, signatures, fields callstitch
does not know), and builds the provider's non-streamed response and the assistant message of a
request from them. Nothing here runs while a stream is fed: the turn costs the calls nothing.
Each module gives the caller objects of its own, shared with neither the Result nor its record:
fresh.fresh() over what it returns, or copies of just the parts it takes from the record
(openai_chat, where copying the whole response would cost about as much as building it, and
openai_responses, whose kept events are parsed or copied as read). tests/test_turn_copies.py holds
every format to it.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any


_MODULES: dict[str, Any] = {}  # format -> its turn module, once found (import_module costs a turn's tenth)


def _module(result: Any) -> Any:
    found = _MODULES.get(result.format)
    if found is not None:
        return found
    # A format's turn module has its adapter's module name (the registry's ADAPTERS). Imported
    # here: the adapters import their turn modules, which makes this package part of their import.
    from .._formats.registry import ADAPTERS

    adapter = ADAPTERS.get(result.format)
    if adapter is None:
        raise ValueError(f"the stream's format was never recognised (format {result.format!r}), so it has no "
                         f"turn to give; see result.errors")
    name = f"{__name__}.{adapter.__name__.rpartition('.')[2]}"
    try:
        found = _MODULES[result.format] = import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ValueError(f"format {result.format!r} has no turn module ({name})") from None
    return found


def to_response(result: Any) -> dict[str, Any]:
    """Return the provider's non-streamed response object for result."""
    return _module(result).response(result, result._turn)


def to_message(result: Any, choice: int = 0) -> Any:
    """Return the assistant message of result's choice in the provider's request shape."""
    if type(choice) is not int:
        raise TypeError(f"choice must be an int, not {type(choice).__name__}")
    return _module(result).message(result, result._turn, choice)
