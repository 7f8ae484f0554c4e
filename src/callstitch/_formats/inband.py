"""What an in-band error event says, in one line (every adapter and the dispatch report it)."""

from __future__ import annotations

from typing import Any


def error_text(error: Any) -> str:
    """Return a one-line description of an in-band error object."""
    if type(error) is dict:
        message = error.get("message") or error.get("Message")
        kind = error.get("type") or error.get("code") or error.get("__type")
        if message is not None:
            return f"{kind}: {message}" if kind else str(message)
    return str(error)
