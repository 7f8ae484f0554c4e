"""Ollama's /api/chat turn: the response a request with ``stream: false`` gets, and the assistant message.

Ollama's server builds its non-streamed answer from the stream itself: the last line (``done:
true``, with the reason and the durations), its message's content, thinking and tool calls replaced
by those of every line joined, and the logprobs of every line in order. This does the same, so any
field of the last line callstitch has never heard of comes along.
"""

from __future__ import annotations

from typing import Any

from .._exactjson import loads_exact
from .fresh import fresh
from .partial_json import object_so_far

# The record of an Ollama stream (state.turn), a list and not a class instance: the compiled reader
# makes one per stream, and a class instance cost 1.3% of a short stream's instructions where a list
# costs 0.1%. Its slots, by position:
#   FIRST     the first line (a dict, or JSON text: the compiled reader keeps the line up to its
#             message.role, closed, all that is read of it): the model and created_at of a stream cut
#             before its last line
#   LAST      the last line (done true), likewise, or None
#   CALLS     per whole call taken, in order: None, function.index as sent (the compiled reader), or
#             (call fields, function fields) besides id, name and arguments
#   LOGPROBS  every line's logprobs joined, or None
FIRST, LAST, CALLS, LOGPROBS = range(4)


def new_turn(first: Any) -> list:
    """Return the record of a stream whose first line is first."""
    return [first, None, [], None]


def call_extras(call: dict, function: dict) -> Any:
    """Return what a tool call entry holds besides id, function name and arguments, or None."""
    outer = {k: v for k, v in call.items() if k not in ("id", "function")}
    inner = {k: v for k, v in function.items() if k not in ("name", "arguments")}
    return (outer, inner) if outer or inner else None


def note_call(acc: Any, turn: list, extras: Any) -> None:
    """Keep the extras of the whole call just taken (call_extras), by its position among the calls.

    A call Limits.calls dropped keeps nothing (the latest call is then an earlier one); past the
    turn's budget (Limits.stream_bytes, keep_own: the line, once) the call is listed without them.
    extras: call_extras(), or the compiled reader's function.index (None: none sent).
    """
    calls = turn[CALLS]
    found = acc.call_at(0, None)
    if found is None or found[1] != len(calls):
        return
    calls.append(extras if _index_only(extras) or acc.keep_own(extras) else None)


def _index_only(extras: Any) -> bool:
    """Tell whether a call's extras are none but an integer function.index (every Ollama call has one): not counted."""
    if type(extras) is tuple:
        outer, inner = extras
        return not outer and len(inner) == 1 and type(inner.get("index")) is int
    return extras is None or type(extras) is int


def _line(line: Any) -> dict:
    return loads_exact(line) if type(line) is bytes else line


def _tool_calls(result: Any, turn: Any) -> list[dict]:
    """Return message.tool_calls: each call as sent, its arguments the object received."""
    extras = turn[CALLS] if turn is not None else []
    out = []
    for k, call in enumerate(result.choices[0].tool_calls if result.choices else ()):
        extra = extras[k] if k < len(extras) else None
        outer, inner = ({}, {}) if extra is None else extra if type(extra) is tuple else ({}, {"index": extra})
        entry: dict = {} if call.id is None else {"id": call.id}
        entry["function"] = {**inner, "name": call.name, "arguments": _arguments(call)}
        entry.update(outer)
        out.append(entry)
    return out


def _arguments(call: Any) -> Any:
    """Return a call's arguments as the response gives them: the value sent; of a call cut, the object so far.

    A call comes whole in one line, but Limits.stream_bytes or call_bytes may cut it: it then holds
    the part of its text that came whole (as a cut Anthropic input), {} when none did, never null,
    which no Ollama response has there. A value no object (a server's fault, reported) stays as sent.
    """
    if call.arguments is not None:
        return call.arguments
    text = call.raw_arguments or ""
    try:
        return loads_exact(text)
    except ValueError:  # (orjson's JSONDecodeError is one): cut
        return object_so_far(text, {})


def _message(result: Any, turn: Any, base: Any) -> dict:
    """Return the merged message: base's fields, its texts and calls those of the whole stream."""
    choice = result.choices[0] if result.choices else None
    message: dict[str, Any] = {"role": "assistant"}
    if type(base) is dict:
        message.update(base)
    message["content"] = choice.text or "" if choice else ""
    if choice is not None and choice.reasoning is not None:
        message["thinking"] = choice.reasoning
    else:
        message.pop("thinking", None)
    calls = _tool_calls(result, turn)
    if calls:
        message["tool_calls"] = calls
    else:
        message.pop("tool_calls", None)
    return message


def response(result: Any, turn: Any) -> dict[str, Any]:
    """Return the /api/chat response of stream false: the last line, its message the whole stream's.

    A stream cut before its last line gives the first line's model and created_at with done false
    and no done_reason, as no last line said why it ended.
    """
    last = _line(turn[LAST]) if turn is not None and turn[LAST] is not None else None
    first = _line(turn[FIRST]) if turn is not None else {}
    if last is not None:
        out = dict(last)
    else:
        out = {k: v for k, v in first.items() if k not in ("message", "done", "done_reason")}
        out["done"] = False
    out["message"] = _message(result, turn, (last if last is not None else first).get("message"))
    if turn is not None and turn[LOGPROBS] is not None:
        out["logprobs"] = list(turn[LOGPROBS])
    return fresh(out)


def message(result: Any, turn: Any, choice: int) -> dict[str, Any]:
    """Return the assistant message for the next request's messages: role, content, thinking, tool_calls."""
    if choice != 0:
        raise IndexError(f"choice {choice} out of range: an Ollama stream has one choice")
    full = response(result, turn)["message"]
    out = {k: full[k] for k in ("role", "content", "thinking", "images", "tool_calls") if k in full}
    out["role"] = "assistant"
    return out
