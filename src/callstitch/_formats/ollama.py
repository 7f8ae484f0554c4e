"""Ollama's native /api/chat stream: NDJSON, each tool call complete with its arguments as an object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._limits import event_not_an_object
from .._turns.ollama import LAST, LOGPROBS, call_extras, new_turn, note_call
from .inband import error_text

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is an Ollama chat stream line."""
    return type(obj) is dict and "done" in obj and ("message" in obj or "model" in obj)


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Ollama stream line."""
    if type(obj) is not dict:
        event_not_an_object(acc, state, "a line must be a JSON object", offset, obj)
        return
    if obj.get("error") is not None:
        state.error("in-band error", error_text(obj["error"]), offset, obj)
        return
    turn = state.turn
    if turn is None:
        turn = state.turn = new_turn(obj)
    logprobs = obj.get("logprobs")
    if type(logprobs) is list and acc.keep_own(logprobs):  # Ollama's own answer joins every line's
        if turn[LOGPROBS] is None:
            turn[LOGPROBS] = []
        turn[LOGPROBS].extend(logprobs)
    message = obj.get("message")
    if type(message) is dict:
        for field, which in (("content", 0), ("thinking", 1)):
            text = message.get(field)
            if type(text) is str and text:
                acc.text_piece(0, which, text)
        calls = message.get("tool_calls")
        for call in calls if type(calls) is list else ():
            tool_call(acc, state, call, offset)
    if obj.get("done") is True:
        turn[LAST] = obj
        finish(acc, state, obj.get("done_reason"), {k: obj[k] for k in ("prompt_eval_count", "eval_count") if k in obj})


def tool_call(acc: Sink, state: StreamState, call: Any, offset: int | None) -> None:
    """Apply one entry of message.tool_calls: a whole call (the compiled twin does the same in place)."""
    function = call.get("function") if type(call) is dict else None
    if type(function) is not dict:
        state.error("unexpected shape", "a tool call without a function", offset, call)
        return
    name, call_id = function.get("name"), call.get("id")
    # Each call arrives whole, its arguments an object (taken as the value): a call of its own.
    acc.whole(0, call_id if type(call_id) in (str, int) else None, name if type(name) is str else None,
              function.get("arguments"))
    note_call(acc, state.turn, call_extras(call, function))


def finish(acc: Sink, state: StreamState, reason: Any, usage: dict) -> None:
    """Apply the last line (done: true): its reason, its token counts, the end of every call.

    The compiled twin's in-place reader does the same itself.
    """
    if usage:
        state.usage = usage
    acc.choice_finished(0, reason if type(reason) is str else "stop")
    acc.complete(None, None)
