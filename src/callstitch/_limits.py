"""Limits that keep a hostile or broken stream from taking unbounded memory, and the cuts they (or damage) make."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MiB = 1 << 20
UNLIMITED = 1 << 62  # what None becomes inside the accumulators: a number no stream reaches

# Why a call was cut (_Slot.over in both twins): 0, not cut.
CUT_CALL_BYTES = 1
CUT_STREAM_BYTES = 2
CUT_EVENT_BYTES = 3  # an event dropped for its size may have held a piece of the call
CUT_UNREADABLE = 4  # so may an event that could not be read in full (a malformed chunk, a damaged message)
FREE_NAME = 256  # characters of a call's id or name that Limits.stream_bytes does not count (SlotBook._takes)
CUT_LIMITS = {CUT_CALL_BYTES: "call_bytes", CUT_STREAM_BYTES: "stream_bytes", CUT_EVENT_BYTES: "event_bytes"}
# How the event lost before a call was first seen was lost, by the CUT_* code it cuts with
_LOST = {CUT_EVENT_BYTES: "an event went past Limits.event_bytes and was dropped",
         CUT_UNREADABLE: "an event could not be read in full (see the stream's errors)"}


def cut_detail(cut: int, late: int, what: str = "arguments", none_came: bool = False) -> str:
    """Say why a call reads as truncated: the cut (a CUT_* code, or 0) that ended it, and whether it came late.

    late: 0, or the CUT_* code of an event lost (CUT_EVENT_BYTES, CUT_UNREADABLE) before the call
    was first seen, which may have held its start; a late call is reported so when it is cut,
    when its arguments do not parse, or when none came (none_came).
    """
    if cut == CUT_UNREADABLE:
        rest = (f"was dropped after an event that could not be read in full (see the stream's errors), which "
                f"may have held a piece of the {what}")
    else:
        rest = f"went past Limits.{CUT_LIMITS[cut]} and was dropped" if cut else ""
    if not late:
        return f"the rest of the {what} {rest}"
    start = f"the call was first seen after {_LOST[late]}; that event may have held the start of its {what}"
    if cut:
        return f"{start}, and the rest of them {rest}"
    return f"{start}: none came after it" if none_came else f"{start}, which do not parse without it"


@dataclass(frozen=True)
class Limits:
    """How much one stream may hold; each limit is a number, or None for no limit.

    Going past a limit records a StreamError of kind "limit" naming the limit and the call or
    event, drops only what is over it, and keeps everything else. A limit cuts, never alters:
    a call it reaches keeps nothing after that point and reads as truncated (arguments None,
    error kind "truncated"); a text it reaches keeps only what came before. A number above
    2**62 is refused (ValueError): use None for no limit.
    """

    call_bytes: int | None = 64 * MiB
    """Argument bytes of one call; the rest of that call's arguments are dropped."""
    stream_bytes: int | None = 256 * MiB
    """Argument and message-text bytes kept for the whole stream, call ids and names past their
    first 256 characters, and a server tool's input the turn keeps; apart, against the same
    number, the bytes of the events whose other fields the turn keeps (logprobs, citations …)."""
    calls: int | None = 4096
    """Tool calls in one stream; fragments of further calls are dropped."""
    choices: int | None = 128
    """Choices in one stream; further choices are dropped whole: text, calls, finish reason and turn fields."""
    event_bytes: int | None = 64 * MiB
    """Bytes of one SSE line or event, NDJSON line, event-stream message, JSON-array element or JSON document; a longer
    one is dropped as it arrives, never held, and every call still open and every text is cut there
    (the event may have held a piece of them)."""
    errors: int | None = 1000
    """Stream errors kept in Result.errors; further ones are only counted, and one last error of
    kind "limit" says how many were not kept (and where the first of them was)."""

    def __post_init__(self) -> None:
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 0 <= value <= UNLIMITED):
                raise ValueError(f"Limits.{name} must be an int from 0 to 2**62, or None for no limit, "
                                 f"not {value!r}")
        # What the accumulators take, worked out once: a gateway or batch job makes one per stream.
        object.__setattr__(self, "_numbers", tuple(UNLIMITED if v is None else v for v in (
            self.call_bytes, self.stream_bytes, self.calls, self.choices, self.event_bytes, self.errors)))


_FIELDS = ("call_bytes", "stream_bytes", "calls", "choices", "event_bytes", "errors")


DEFAULT_LIMITS = Limits()


def as_numbers(limits: Limits | None) -> tuple[int, int, int, int, int, int]:
    """Return (call_bytes, stream_bytes, calls, choices, event_bytes, errors) with None as UNLIMITED."""
    if limits is None:
        return _DEFAULT_NUMBERS
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a callstitch.Limits, not {type(limits).__name__}")
    return limits._numbers  # type: ignore[attr-defined, no-any-return]


_DEFAULT_NUMBERS = as_numbers(DEFAULT_LIMITS)


def describe(name: str, value: int) -> str:
    """Return 'name (value)' with bytes shown in MiB where that reads better."""
    shown = f"{value // MiB} MiB" if name.endswith("bytes") and value >= MiB and value % MiB == 0 else str(value)
    return f"Limits.{name} ({shown})"


def line_dropped(state: Any, limit: int, offset: int, what: str = "line") -> None:
    """Record that an over-long line (or event-stream message) was dropped.

    The accumulator's cut_open() follows, for a line of a stream: it may have held a piece of a call or text.
    """
    state.error("limit", f"{describe('event_bytes', limit)} exceeded by a {what}; the {what} is dropped", offset)


def event_dropped(state: Any, limit: int, offset: int) -> None:
    """Record that an over-long event (its data lines together) was dropped; cut_open() follows."""
    state.error("limit", f"{describe('event_bytes', limit)} exceeded by an event; the event is dropped", offset)


def event_unreadable(acc: Any, state: Any, detail: str, offset: int | None, data: Any = None,
                     kind: str = "malformed chunk") -> None:
    """Record an event that could not be read in full, and cut every call and text open: it may have held a piece.

    kind: "malformed chunk" (no JSON, a damaged message), or "unexpected shape" for JSON whose
    part that carries calls is not of the API's shape. A call missing a piece may still parse,
    as something the server never sent: cut, it reads as truncated instead (a limit or damage
    may cut a call, never alter it).
    """
    state.error(kind, detail, offset, data)
    acc.cut_open(CUT_UNREADABLE)


def shape_unreadable(acc: Any, state: Any, detail: str, offset: int | None, item: Any) -> None:
    """Record an item not of the API's shape that carries calls or text (a choice, a delta, a block), and cut (as above)."""
    event_unreadable(acc, state, detail, offset, item, "unexpected shape")


def event_not_an_object(acc: Any, state: Any, detail: str, offset: int | None, event: Any) -> None:
    """Record an event (a chunk, a line) that is no JSON object: a list may hold pieces and cuts; a scalar does not.

    A null, a number or a word in a logged list of chunks, or as an SSE payload, is no chunk
    mangled (a chunk is an object), so the calls around it go on; a list may be chunks wrapped.
    """
    if type(event) is list:
        shape_unreadable(acc, state, detail, offset, event)
    else:
        state.error("unexpected shape", detail, offset, event)


def call_cut(state: Any, limit: int, call_id: Any, name: Any, offset: int | None) -> None:
    """Record that a call's arguments were cut at the per-call limit, by the event at offset."""
    state.error("limit", f"{describe('call_bytes', limit)} exceeded by {call_named(call_id, name)}; "
                         f"the rest of its arguments is dropped", offset)


def stream_full(state: Any, limit: int, first: str, offset: int | None) -> None:
    """Record that the stream's byte budget ran out, first reached by first (call_named, text_named) at offset."""
    state.error("limit", f"{describe('stream_bytes', limit)} exceeded, first by {first}; each call or text that "
                         f"reached it is cut there (a call reads as truncated), and only what still fits is kept "
                         f"after it", offset)


def own_full(state: Any, limit: int, offset: int | None) -> None:
    """Record that the turn's own fields (logprobs, citations, tool results …) ran out of their byte budget."""
    state.error("limit", f"{describe('stream_bytes', limit)} exceeded by the events whose fields the turn keeps "
                         "besides calls and texts (logprobs, citations, tool results, fields callstitch does not "
                         "read); from this event on, the turn keeps none of them", offset)


def envelopes_full(state: Any, limit: int) -> None:
    """Record that Gemini's changed envelopes (a chunk's fields but its parts) ran out of their byte budget."""
    state.error("limit", f"{describe('stream_bytes', limit)} exceeded by the Gemini chunks whose fields the turn "
                         "keeps (their fields but parts, counted on their own); the turn's fields read as the "
                         "last of them within it left them", None)


def too_many(state: Any, name: str, limit: int, first: str, offset: int | None) -> None:
    """Record that a stream had more calls or choices than allowed; first: the first one dropped, at offset."""
    what = "it and further tool calls are dropped" if name == "calls" else (
        "it and further choices are dropped: their text, calls, finish reason and other fields")
    state.error("limit", f"{describe(name, limit)} exceeded, first by {first}; {what}", offset)


def call_named(call_id: Any, name: Any) -> str:
    """Name a call in a limit's error: its id and name as far as they came, each cut short past 100 characters."""
    return f"tool call {_brief(call_id)} ({_brief(name)})"


def _brief(value: Any) -> str:
    """Return repr(value), a long str cut to its first 100 characters (an error must not hold a huge name)."""
    if type(value) is str and len(value) > 100:
        return f"{value[:100]!r}… ({len(value)} characters)"
    return repr(value)


_TEXTS = ("text", "reasoning", "refusal")


def text_named(choice: Any, which: int) -> str:
    """Name a choice's text (which: 0 content, 1 reasoning, 2 refusal) in a limit's error."""
    return f"the {_TEXTS[which]} of choice {choice!r}"
