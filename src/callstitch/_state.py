"""What a stream says besides its calls, shared by both twins and every format adapter."""

from __future__ import annotations

from typing import Any

from ._limits import describe
from ._results import StreamError

STRAY_KEPT = 4096  # bytes of the first stray line kept: for an excerpt, and to tell a JSON line's format
DATA_KEPT = 4096  # an error's data (the event) is kept whole up to this many characters of its JSON text …
DATA_EXCERPT = 200  # … else the start of its text, as for an event given as bytes


class StreamState:
    """Errors, finish reasons, usage, whether the stream ended, and the format adapter's own notes."""

    __slots__ = ("format", "errors", "finish_reasons", "usage", "complete", "keys", "notes", "framing", "fallback", "brace", "framer",
                 "head", "event_limit", "ended", "error_limit", "errors_over", "errors_over_from",
                 "recognised", "misnamed", "stray", "first_event", "turn", "event_size")

    def __init__(self, format: str) -> None:
        self.format = format
        # How the body is framed: "sse", "ndjson", "eventstream", "json-array", "json-documents", or None
        # until its first bytes tell (_wire.framing.choose: Gemini streams SSE with alt=sse, one JSON
        # array without; any format's events may come as JSON lines, an error body or a non-streamed
        # response as a pretty-printed document); fallback, when they do not: the format's own.
        fallback, state_class = _STARTS[format]  # in one lookup
        self.framing: str | None = None
        self.fallback: str = fallback
        self.framer: Any = None   # the framer object for a framing other than SSE
        self.head: bytes | bytearray = b""  # first bytes held while the framing is not yet known (blanks)
        self.brace = False  # head ends in a first "{" whose line has not ended: that end tells (_wire.framing)
        self.event_limit = 1 << 62  # Limits.event_bytes, for the framers written once
        self.ended = False  # the stream's terminator ([DONE]) has come: nothing after it is this stream's
        self.errors: list[StreamError] = []
        self.error_limit = 1 << 62  # Limits.errors: errors kept; further ones are only counted …
        self.errors_over: dict[str, int] | None = None  # … here, by kind (made at the first: most streams have none) …
        self.errors_over_from: int | None = None  # … and where the first of them was
        self.finish_reasons: dict[int, str] = {}
        self.usage: Any = None
        self.complete = False
        # Adapters map their own call keys (item ids, block indices) to slot indices here,
        # and keep what else they need to remember between events in notes: their own State object
        # (None for "auto" until the format is known, and for a format that keeps nothing).
        self.keys: dict[Any, int] = {}
        self.notes: Any = None if state_class is None else state_class()  # inline: a tiny stream pays for every call
        # Whether the body was a stream of this format at all (_dispatch.foreign, _recognition):
        self.recognised = False   # an event of the format has come
        self.misnamed: str | None = None  # the other format the events look like, once reported
        # The first line that is no event of the framing: its offset and text.
        self.stray: tuple[int | None, bytes] | None = None
        self.first_event: tuple[int | None, Any] | None = None  # the first event of no known format
        # What the turn holds besides calls and texts (ids, model, block order, signatures …), in the
        # format's own record (_turns/<format>.py); None until the format's adapter makes it.
        self.turn: Any = None
        # The bytes of the event being handled, until the turn counts them for a field of its own
        # (Sink.keep_own, against Limits.stream_bytes: then 0); -1 for an event fed as an object.
        self.event_size = 0

    def error(self, kind: str, detail: str, offset: int | None, data: Any = None) -> None:
        """Record a problem met in the stream."""
        if len(self.errors) >= self.error_limit:
            # A stream of millions of bad events must not take memory by the error: count the rest.
            if self.errors_over is None:
                self.errors_over = {}
                self.errors_over_from = offset
            self.errors_over[kind] = self.errors_over.get(kind, 0) + 1
            return
        if isinstance(data, (bytes, bytearray)):
            data = bytes(data[:DATA_EXCERPT]).decode("utf-8", "replace")
        elif data is not None and type(data) is not int:
            # Limits.errors counts errors, not their size: an event kept whole is kept only while
            # small, else the start of its text (a thousand 64 MiB events would hold gigabytes).
            text = data if type(data) is str else _text_of(data)
            if len(text) > DATA_KEPT:
                data = text[:DATA_EXCERPT]
        self.errors.append(StreamError(kind, detail, offset=offset, data=data))

    def note_stray(self, line: bytes, offset: int | None) -> None:
        """Note the first line that is no event of the framing (an HTML tag, noise), for _recognition."""
        if self.stray is None:
            self.stray = (offset, bytes(line[:STRAY_KEPT]))

    def result_errors(self) -> list[StreamError]:
        """Return the errors for the Result: those kept, then one saying how many more were not."""
        if self.errors_over is None:
            return self.errors
        return [*self.errors, errors_not_kept(self.error_limit, self.errors_over, self.errors_over_from)]

    def key(self, key: Any) -> int:
        """Return the slot index for an adapter's call key (an item id, say), numbering new keys in order."""
        index = self.keys.get(key)
        if index is None:
            index = self.keys[key] = len(self.keys)
        return index


def errors_not_kept(limit: int, counts: dict[str, int], first: int | None) -> StreamError:
    """Return the last error of a stream that had more than Limits.errors: how many, of which kinds, from where.

    Its data is the count of each kind not kept, a dict (for a caller that totals kinds).
    """
    total = sum(counts.values())
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda item: -item[1]))
    return StreamError("limit", f"{describe('errors', limit)} reached; {total} more errors were not kept ({kinds})",
                       offset=first, data=dict(counts))


def finalized(method: str) -> RuntimeError:
    """Return the error for feeding an accumulator whose stream finalize() has ended."""
    return RuntimeError(f"{method}() after finalize(): finalize() was already called, and this Accumulator's "
                        f"stream is over; use a new Accumulator for another stream")


class RawJSON(bytes):
    """A JSON value kept as its text until the result is built (the compiled path's usage objects)."""

    __slots__ = ()


# Last: the registry imports the adapters, and they (through _text and _finalize) import this
# module's names; whichever of the two is imported first, the other is then partial (the registry
# defines its tables before it imports the adapters, and fills them in place).
from ._formats.registry import STARTS as _STARTS  # noqa: E402


def _text_of(data: Any) -> str:
    """Return an event's JSON text (its repr when JSON cannot write it), to measure and excerpt it."""
    from ._text import compact_json  # (here: _text imports _finalize, which imports this module)
    try:
        return compact_json(data).decode("utf-8", "replace")
    except (TypeError, ValueError):
        return repr(data)
