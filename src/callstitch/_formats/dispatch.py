"""The general path: events and chunk objects to format adapters, shared by both twins.

Each format adapter is a module with ``handle(acc, state, event, obj, offset)``, which applies
one parsed event to the accumulator, and optionally ``close(acc, state)``, called before the
result is built, and ``claims(event, obj)``, which tells format="auto" that an event is its own.
The adapters, and the order auto-detection asks them in, come from the registry (registry.py);
what an adapter may call on the accumulator is the Sink protocol (sink.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from . import openai_chat as _openai_chat
from .._exactjson import REFUSED, exact, long_digit_run, past_double, read_standard
from .._limits import event_unreadable
from .inband import error_text
from .registry import ADAPTERS, AUTO, CLOSERS, DETECTION, names, new_state

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink


def check_format(format: str) -> str:
    """Return format if callstitch knows it, else raise ValueError naming the known ones."""
    if format not in ADAPTERS and format != AUTO:
        raise ValueError(f"unknown format {format!r}; known formats: {', '.join(names())}")
    return format


def decode_payload(data: bytes, long_run: bool | None = None) -> Any:
    """Parse one event's JSON payload with orjson, integers beyond 64 bits exact (loads_exact, long_run as it takes it).

    orjson refuses a lone UTF-16 surrogate escape; a server that cuts arguments by UTF-16 units
    sends exactly that, so such a payload is read with the standard library instead (which keeps
    integers exact too), and the surrogate joined to its partner later; so is one with an integer
    beyond a double (past_double), with or without such an escape. Anything else orjson refuses is
    an error.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        refusal = str(exc)
        # orjson names the first of the two it meets: either way the text may hold both
        either = "surrogate" in refusal or refusal.startswith("number is infinity")
        if not (either and b"\\u" in data):
            value = past_double(data, exc)
            if value is REFUSED:
                raise
            return value
        try:
            return read_standard(data)
        except (ValueError, RecursionError):  # (RecursionError: a caller already near the recursion limit)
            raise exc from None
    # loads_exact's test written out: a call less on every event of the general path
    if long_run or (long_run is None and long_digit_run(data)):
        return exact(data, value)
    return value


def detect(event: str | None, obj: Any) -> str | None:
    """Return the format an event belongs to, or None when it does not tell."""
    for name, claims in DETECTION:
        if claims(event, obj):
            return name
    return None


def foreign(state: StreamState, event: str | None, obj: Any, offset: int | None) -> bool:
    """Tell whether an event plainly belongs to a known format other than the stream's: it is then skipped.

    Asked only until the first event of the stream's own format (state.recognised), so a stream
    named right pays for it once. A stream named wrong is reported once, naming the format its
    events look like; its events are not handed to an adapter that would misread them.
    """
    if ADAPTERS[state.format].claims(event, obj):
        state.recognised = True
        return False
    found = detect(event, obj)
    if found is None:
        if type(obj) is dict and obj.get("error") is not None:
            # An error of no format's shape (a gateway's or a server's error body, read as a line of
            # JSON): the in-band error "auto" reports, whichever format was named.
            state.error("in-band error", error_text(obj["error"]), offset, obj)
            return True
        if state.first_event is None:
            state.first_event = (offset, obj)
        return False
    if state.misnamed is None:
        state.misnamed = found
        state.error("wrong format", f"the events look like {found}, not {state.format}; pass format={found!r} "
                    "or 'auto'", offset, obj)
    return True


def handle_event(acc: Sink, state: StreamState, event: str | None, data: bytes, offset: int | None,
                 long_run: bool | None = None) -> None:
    """Handle one framed event (SSE event name or event-stream type, payload bytes) the fast path did not.

    long_run: whether data holds a run of digits an integer beyond 64 bits needs, when the caller
    has looked (the compiled twin, in C); None to look here (_exactjson.loads_exact).
    """
    state.event_size = len(data)
    if event is None and state.format == "openai-chat" and data[:1] == b"{":
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if long_run or (long_run is None and long_digit_run(data)):  # as loads_exact, a call less
                obj = exact(data, obj)
            if state.recognised or not foreign(state, None, obj, offset):
                _openai_chat.handle_chunk(acc, state, obj, offset)
            return
    stripped = data.strip(b" \t\r\n")
    if stripped == b"[DONE]":
        state.complete = True
        state.ended = True
        acc.complete(None, None)
        return
    if not stripped and event != "error":
        return  # an event with empty data (a bare "data:" line) carries nothing
    try:
        obj = decode_payload(data, long_run)
    except (orjson.JSONDecodeError, ValueError) as exc:
        if event == "error":
            state.error("in-band error", f"not valid JSON ({exc})", offset, data)
        elif stripped[:1] in (b"{", b"["):  # a chunk damaged or cut: it may have held a piece of what is open
            event_unreadable(acc, state, f"not valid JSON ({exc})", offset, data)
        else:  # not even cut JSON (a keep-alive word, an HTML page, noise): no piece of a call
            state.error("malformed chunk", f"not valid JSON ({exc})", offset, data)
            if state.framing == "ndjson":
                state.note_stray(data.rstrip(b" \t\r\n"), offset)
        return
    handle_parsed(acc, state, event, obj, offset)


def handle_parsed(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Route one parsed event to its format's adapter, detecting the format first under "auto"."""
    if state.format == "auto":
        found = detect(event, obj)
        if found is None:
            if event == "error" or (type(obj) is dict and obj.get("error") is not None):
                state.error("in-band error", error_text(obj.get("error", obj) if type(obj) is dict else obj),
                            offset, obj)
            else:
                state.error("unexpected shape", "an event of no known format", offset, obj)
            return
        state.format = found
        state.notes = new_state(found)
        state.recognised = True
    if event == "error":
        state.error("in-band error", error_text(obj.get("error", obj) if type(obj) is dict else obj), offset, obj)
        return
    if not state.recognised and foreign(state, event, obj, offset):
        return
    ADAPTERS[state.format].handle(acc, state, event, obj, offset)


_JSON_VALUES = frozenset((bool, int, float, list))


def handle_object(acc: Sink, state: StreamState, obj: Any) -> None:
    """Handle one chunk given as an object: a dict, an SDK model, or its JSON text."""
    if isinstance(obj, (bytes, bytearray, memoryview, str)):
        data = obj.encode("utf-8") if isinstance(obj, str) else bytes(obj)
        handle_event(acc, state, None, data, None)
        return
    if type(obj) is not dict and not (obj is None or type(obj) in _JSON_VALUES):
        # (A JSON value that is no object, as a parsed list of chunks may hold, is handled as
        # its text would be: each format reports it as a chunk of the wrong shape.)
        original = obj
        dump = getattr(obj, "model_dump", None)
        if dump is not None:
            try:  # pydantic v2 models: JSON-ready values, wire names, only the fields the server sent
                obj = dump(mode="json", by_alias=True, exclude_unset=True)
            except TypeError:
                obj = dump()
            if type(obj) is dict and "type" not in obj and isinstance(getattr(original, "type", None), str):
                obj["type"] = original.type  # a discriminator left at its default still names the event
        else:
            dump = getattr(obj, "to_dict", None)
            if dump is None:
                raise TypeError(f"feed_chunk() takes a dict, JSON text or an object with model_dump(), "
                                f"not {type(obj).__name__}")
            obj = dump()
    state.event_size = -1  # no bytes to count: each field the turn keeps of it is measured
    handle_parsed(acc, state, None, obj, None)


def close(acc: Sink, state: StreamState) -> None:
    """Let the format adapter hand over what it still holds, before the result is built."""
    closer = CLOSERS.get(state.format)
    if closer is not None:
        acc.no_event()  # (what it hands over now came with the events before: a limit it reaches is at none)
        closer(acc, state)
