"""The values a reassembly produces: ToolCall, Result, and the errors they carry."""

from __future__ import annotations

import reprlib
from typing import Any

from ._limits import call_named
from . import _turns  # its package module alone: each format's turn module is imported when first asked for

__all__ = ["ArgumentsError", "StreamError", "ToolCall", "Result", "Choice"]

_EXCERPT = 60


def excerpt(text: str | bytes | bytearray, offset: int = 0) -> str:
    """Return a short printable excerpt of text around offset."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    start = max(0, offset - _EXCERPT // 2)
    piece = text[start:start + _EXCERPT]
    return ("…" if start else "") + piece + ("…" if start + _EXCERPT < len(text) else "")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxdict = _REPR.maxlist = 6
_REPR.maxlevel = 3


def _short(value: Any, width: int = 60) -> str:
    """Return a repr of value cut to about width characters (a huge argument object is never rendered whole)."""
    if type(value) is str:
        return repr(value if len(value) <= width else value[:width - 3] + "...")
    text = _REPR.repr(value)
    return text if len(text) <= width + 20 else text[:width + 17] + "..."


class ArgumentsError(ValueError):
    """A call's arguments did not parse into a JSON object.

    ``kind`` is one of "truncated", "malformed", "trailing data", "not an object";
    ``offset`` is the byte offset in the call's argument bytes where the problem is.
    """

    def __init__(self, kind: str, detail: str, *, call_id: str | None, name: str | None,
                 offset: int, raw: str | bytes | bytearray) -> None:
        self.kind = kind
        self.detail = detail
        self.call_id = call_id
        self.name = name
        self.offset = offset
        self.excerpt = excerpt(raw, offset)
        super().__init__(
            f"{call_named(call_id, name)}: arguments {kind} at byte {offset}: {detail} near {self.excerpt!r}")

    def __reduce__(self):  # keep exceptions picklable for process pools
        return (_rebuild_arguments_error, (self.kind, self.detail, self.call_id, self.name, self.offset, self.excerpt))


def _rebuild_arguments_error(kind, detail, call_id, name, offset, raw):
    return ArgumentsError(kind, detail, call_id=call_id, name=name, offset=offset, raw=raw)


class StreamError(ValueError):
    """A problem met in the stream itself: a malformed chunk, an in-band error event, an unexpected shape.

    ``kind`` is "malformed chunk", "in-band error", "unexpected shape", "limit", "wrong format"
    (the events are another known format's) or "not a stream" (no event of the format came: an
    error page, noise, an empty body); ``offset`` is the byte offset of the event in the stream
    (None for chunks fed as objects).
    """

    def __init__(self, kind: str, detail: str, *, offset: int | None = None, data: Any = None) -> None:
        self.kind = kind
        self.detail = detail
        self.offset = offset
        self.data = data
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{kind}{where}: {detail}")

    def __reduce__(self):
        return (_rebuild_stream_error, (self.kind, self.detail, self.offset, self.data))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, StreamError) and (self.kind, self.detail, self.offset, self.data)
                == (other.kind, other.detail, other.offset, other.data))

    __hash__ = ValueError.__hash__


def _rebuild_stream_error(kind, detail, offset, data):
    return StreamError(kind, detail, offset=offset, data=data)


class ToolCall:
    """One finished tool call.

    ``kind`` is "function" for a function call (arguments: the parsed JSON), or "custom" for an
    OpenAI custom (free-form) tool call, whose ``arguments`` is its input text as sent, never parsed.
    """

    __slots__ = ("id", "name", "choice", "index", "arguments", "_raw", "error", "quirks", "kind")

    def __init__(self, id: str | None, name: str | None, choice: int, index: int, arguments: Any,
                 raw_arguments: str | bytes | bytearray, error: ArgumentsError | None = None,
                 quirks: tuple[str, ...] = (), kind: str = "function") -> None:
        self.id = id
        self.name = name
        self.choice = choice
        self.index = index
        self.arguments = arguments
        # Kept as bytes until asked for (most callers only want arguments); the compiled twin may
        # keep a whole call's arguments as sent instead, in an object whose compact() re-encodes them.
        self._raw: Any = raw_arguments
        self.error = error
        self.quirks = quirks
        self.kind = kind

    @property
    def raw_arguments(self) -> str:
        """Return exactly the argument text received (after quirk normalisation)."""
        raw = self._raw
        if type(raw) is not str:
            if not isinstance(raw, (bytes, bytearray)):  # a whole call's arguments as sent: compact them now
                raw = raw.compact()
            raw = self._raw = raw.decode("utf-8", "replace")
        return raw

    def __reduce__(self) -> tuple:
        # Pickled with its raw text as a string: a call whose arguments the compiled twin kept as
        # sent then loads where the extension is not built.
        return (ToolCall, (self.id, self.name, self.choice, self.index, self.arguments, self.raw_arguments,
                           self.error, self.quirks, self.kind))

    def to_dict(self) -> dict[str, Any]:
        """Return the call as a plain dict (the CLI's record shape)."""
        d = {"choice": self.choice, "index": self.index, "id": self.id, "name": self.name, "kind": self.kind,
             "arguments": self.arguments, "error": None if self.error is None else str(self.error),
             "quirks": list(self.quirks)}
        if self.arguments is None:
            d["raw_arguments"] = self.raw_arguments
        return d

    def _key(self) -> tuple:
        err = None if self.error is None else (self.error.kind, self.error.offset)
        return (self.id, self.name, self.choice, self.index, self.arguments, self.raw_arguments, err, self.quirks,
                self.kind)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # Every public attribute in slot order (one added later shows up too); the raw text only
        # when the arguments did not parse, under its own name; an error by its kind; the kind only
        # when it is not the usual "function".
        parts = []
        for name in type(self).__slots__:
            if name.startswith("_") or name == "error" or name == "quirks" or (name == "kind" and self.kind == "function"):
                continue
            parts.append(f"{name}={_short(getattr(self, name))}")
            if name == "arguments" and self.arguments is None:
                parts.append(f"raw_arguments={_short(self.raw_arguments)}")
        if self.error is not None:
            parts.append(f"error={self.error.kind!r}")
        if self.quirks:
            parts.append(f"quirks={self.quirks!r}")
        return f"ToolCall({', '.join(parts)})"


class Choice:
    """Everything one choice of the response said: text, reasoning, refusal, finish reason, calls."""

    __slots__ = ("index", "text", "reasoning", "refusal", "finish_reason", "tool_calls")

    def __init__(self, index: int, text: str | None, reasoning: str | None, refusal: str | None,
                 finish_reason: str | None, tool_calls: list[ToolCall]) -> None:
        self.index = index
        self.text = text
        self.reasoning = reasoning
        self.refusal = refusal
        self.finish_reason = finish_reason
        self.tool_calls = tool_calls

    def _key(self) -> tuple:
        return (self.index, self.text, self.reasoning, self.refusal, self.finish_reason, self.tool_calls)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Choice) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Choice(index={self.index}, finish_reason={self.finish_reason!r}, "
                f"tool_calls={len(self.tool_calls)}, text={_short(self.text, 30)})")


class Result:
    """What a stream amounted to: its tool calls, its errors, whether it ended, and the message around them.

    ``text``, ``reasoning``, ``refusal`` and ``finish_reason`` are those of the first choice;
    ``choices`` holds them for every choice (n > 1).
    """

    __slots__ = ("tool_calls", "errors", "complete", "format", "choices", "usage", "_turn")

    def __init__(self, tool_calls: list[ToolCall], errors: list[StreamError], complete: bool, format: str,
                 choices: list[Choice], usage: Any = None, turn: Any = None) -> None:
        self.tool_calls = tool_calls
        self.errors = errors
        self.complete = complete
        self.format = format
        self.choices = choices
        self.usage = usage
        # The format's record of the rest of the turn (_turns/<format>.py), or None.
        self._turn = turn

    def to_response(self) -> dict[str, Any]:
        """Return the provider's own non-streamed response object for this turn, as a new dict.

        Built from what was streamed, merged the way the provider defines it; fields callstitch does
        not know are carried along. A cut or failed stream says so the provider's way (its finish
        reason or status), never with invented content.
        """
        return _turns.to_response(self)

    def to_message(self, choice: int = 0) -> Any:
        """Return the assistant turn in the provider's request shape, ready to append to the conversation.

        A message dict for most formats; for OpenAI Responses, the list of input items the output was.
        """
        return _turns.to_message(self, choice)

    def _first(self, attr: str) -> Any:
        return getattr(self.choices[0], attr) if self.choices else None

    @property
    def text(self) -> str | None:
        """Return the first choice's text content, or None when it sent none."""
        return self._first("text")

    @property
    def reasoning(self) -> str | None:
        """Return the first choice's reasoning (thinking) text, or None."""
        return self._first("reasoning")

    @property
    def refusal(self) -> str | None:
        """Return the first choice's refusal text, or None."""
        return self._first("refusal")

    @property
    def finish_reason(self) -> str | None:
        """Return the first choice's finish (stop) reason as sent, or None."""
        return self._first("finish_reason")

    def _key(self) -> tuple:
        return (self.tool_calls, [(e.kind, e.offset) for e in self.errors], self.complete, self.format,
                self.choices, self.usage)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Result(format={self.format!r}, complete={self.complete}, tool_calls={self.tool_calls!r}, "
                f"errors={[str(e) for e in self.errors]!r})")


def only_an_end(result: Result) -> bool:
    """Tell whether a Result is of a stream that held its end and nothing more (no call, text, usage, turn, error)."""
    return (result.complete and not result.tool_calls and not result.errors and not result.choices
            and result.usage is None and result._turn is None)
