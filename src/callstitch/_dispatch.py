"""The general path: events and chunk objects to format adapters, shared by both twins."""

from __future__ import annotations

import json
from typing import Any

import orjson

from . import _openai_chat

FORMATS = ("openai-chat",)


def check_format(format: str) -> str:
    """Return format if callstitch knows it, else raise ValueError naming the known ones."""
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; known formats: {', '.join(FORMATS)}")
    return format


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_payload(data: bytes) -> Any:
    """Parse one event's JSON payload with orjson.

    orjson refuses a lone UTF-16 surrogate escape; a server that cuts arguments by UTF-16 units
    sends exactly that, so such a payload is read with the standard library instead, and the
    surrogate joined to its partner later. Anything else orjson refuses is an error.
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc) or b"\\u" not in data:
            raise
        try:
            return json.loads(data, parse_constant=_reject_constant)
        except ValueError:
            raise exc from None


def handle_event(acc: Any, state: Any, event: str | None, data: bytes, offset: int | None) -> None:
    """Handle one framed event (SSE event name, data bytes) the compiled fast path did not."""
    if event is None and data[:1] == b"{":
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            _openai_chat.handle_chunk(acc, state, obj, offset)
            return
    stripped = data.strip(b" \t\r\n")
    if stripped == b"[DONE]":
        state.complete = True
        return
    if not stripped and event != "error":
        return  # an event with empty data (a bare "data:" line) carries nothing
    try:
        obj = decode_payload(data)
    except (orjson.JSONDecodeError, ValueError) as exc:
        kind = "in-band error" if event == "error" else "malformed chunk"
        state.error(kind, f"not valid JSON ({exc})", offset, data)
        return
    if event == "error":
        state.error("in-band error", _openai_chat._error_text(obj.get("error", obj) if type(obj) is dict else obj),
                    offset, obj)
        return
    _openai_chat.handle_chunk(acc, state, obj, offset)


def handle_object(acc: Any, state: Any, obj: Any) -> None:
    """Handle one chunk given as an object: a dict, an SDK model, or its JSON text."""
    if isinstance(obj, (bytes, bytearray, memoryview, str)):
        data = obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)
        handle_event(acc, state, None, data, None)
        return
    if type(obj) is not dict:
        dump = getattr(obj, "model_dump", None) or getattr(obj, "to_dict", None)
        if dump is None:
            raise TypeError(f"feed_chunk() takes a dict, JSON text or an object with model_dump(), "
                            f"not {type(obj).__name__}")
        obj = dump()
    _openai_chat.handle_chunk(acc, state, obj, None)
