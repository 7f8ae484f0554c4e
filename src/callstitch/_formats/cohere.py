"""Cohere v2 chat streaming: tool-call-start / -delta / -end keyed by index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._limits import event_not_an_object, shape_unreadable
from .._turns import cohere as _turn

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink

# The event types handle passes over untouched (the compiled twin's fast path lets them pass) …
IGNORED_EVENTS = frozenset(("citation-end", "debug"))
# … and with those it acts on (message-start, content-start / -end and citation-start for the turn
# only), every event type of the format.
_EVENTS = IGNORED_EVENTS | frozenset(("message-start", "content-start", "content-end", "citation-start",
                                      "content-delta", "tool-plan-delta", "tool-call-start", "tool-call-delta",
                                      "tool-call-end", "message-end"))


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is a Cohere v2 chat stream event, or a whole v2 chat response (one not streamed)."""
    return type(obj) is dict and (type(obj.get("type")) is str and obj["type"] in _EVENTS or is_whole(obj))


def is_whole(obj: Any) -> bool:
    """Tell whether a JSON object is a v2 chat response (not streamed): its message beside its finish reason."""
    return (type(obj) is dict and type(obj.get("message")) is dict and "finish_reason" in obj
            and "type" not in obj and "choices" not in obj)


def _message(obj: dict) -> Any:
    delta = obj.get("delta")
    return delta.get("message") if type(delta) is dict else None


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Cohere stream event."""
    if type(obj) is not dict:
        event_not_an_object(acc, state, "an event must be a JSON object", offset, obj)
        return
    kind = obj.get("type")
    if kind is None and is_whole(obj):
        _whole(acc, state, obj, offset)
        return
    turn = state.turn
    if turn is None:
        turn = state.turn = _turn.CohereTurn()
    if kind in ("tool-call-start", "tool-call-delta"):
        index, message = obj.get("index"), _message(obj)
        call = message.get("tool_calls") if type(message) is dict else None
        if type(index) is not int or type(call) is not dict:
            shape_unreadable(acc, state, f"{kind} without an integer index and a tool call", offset, obj)
            return
        function = call.get("function")
        if function is None:
            function = {}
        elif type(function) is not dict:  # it may have held the call's name or a piece of its arguments
            shape_unreadable(acc, state, f"{kind} whose function is not an object", offset, obj)
            return
        name, call_id = function.get("name"), call.get("id")
        acc.fragment(0, index, call_id if type(call_id) in (str, int) else None,
                      name if type(name) is str else None, function.get("arguments"))
    elif kind == "content-delta":
        if obj.get("logprobs") is not None and acc.keep_own(obj["logprobs"]):
            if turn.logprobs is None:
                turn.logprobs = []
            turn.logprobs.append(obj["logprobs"])
        message = _message(obj)
        content = message.get("content") if type(message) is dict else None
        text = content.get("text") if type(content) is dict else None
        if type(text) is str:
            acc.text_piece(0, 0, text)
        thinking = content.get("thinking") if type(content) is dict else None
        if type(thinking) is str:
            acc.text_piece(0, 1, thinking)
    elif kind == "tool-plan-delta":
        message = _message(obj)
        plan = message.get("tool_plan") if type(message) is dict else None
        if type(plan) is str:
            acc.text_piece(0, 1, plan)
    elif kind == "tool-call-end":
        index = obj.get("index")
        if type(index) is int:
            acc.complete(0, index)
    elif type(kind) is str and kind in _TURN_ONLY:
        _TURN_ONLY[kind](acc, turn, obj)
    elif kind == "message-end":
        delta = obj.get("delta")
        if type(delta) is dict:
            turn.end = delta
            if delta.get("usage") is not None:
                state.usage = delta["usage"]
            if delta.get("error") is not None:
                state.error("in-band error", str(delta["error"]), offset, obj)
            reason = delta.get("finish_reason")
            if type(reason) is str:
                acc.choice_finished(0, reason)
                acc.complete(None, None)
                return
        state.complete = True
        acc.complete(None, None)


def _citation(acc: Sink, turn: Any, obj: dict) -> None:
    message = _message(obj)
    citation = message.get("citations") if type(message) is dict else None
    if citation is not None and acc.keep_own(citation):
        turn.citations.append(citation)


def _content_start(acc: Sink, turn: Any, obj: dict) -> None:
    """A block starts; text it starts with is its first piece (Cohere sends "", as Anthropic's blocks may not)."""
    message = _message(obj)
    content = message.get("content") if type(message) is dict else None
    _turn.open_block(turn, acc, content)
    if type(content) is dict:
        for field, which in (("text", 0), ("thinking", 1)):
            text = content.get(field)
            if type(text) is str and text:
                acc.text_piece(0, which, text)


def _message_start(acc: Sink, turn: Any, obj: dict) -> None:
    """The message starts; a tool plan it starts with is the plan's first piece (tool-plan-delta goes on)."""
    message = _message(obj)
    _turn.start(turn, obj, message)
    plan = message.get("tool_plan") if type(message) is dict else None
    if type(plan) is str and plan:
        acc.text_piece(0, 1, plan)


def _whole(acc: Sink, state: StreamState, response: dict, offset: int | None) -> None:
    """A v2 chat response not streamed (a JSON body): read as the events its stream would have brought.

    message-start (the message's fields the stream does not rebuild), the tool plan, each content
    block started whole and ended, each tool call started whole and ended, each citation, the
    logprobs as content deltas, and message-end with the rest: so the turn gives it back.
    """
    message = response["message"]

    def event(kind: str, **fields: Any) -> None:
        handle(acc, state, None, {"type": kind, **fields}, offset)

    def listed(field: str) -> list:
        return message[field] if type(message.get(field)) is list else []

    event("message-start", id=response.get("id"),
          delta={"message": {k: v for k, v in message.items() if k not in _turn.REBUILT}})
    if type(message.get("tool_plan")) is str and message["tool_plan"]:
        event("tool-plan-delta", delta={"message": {"tool_plan": message["tool_plan"]}})
    for index, call in enumerate(listed("tool_calls")):
        event("tool-call-start", index=index, delta={"message": {"tool_calls": call}})
        event("tool-call-end", index=index)
    for index, block in enumerate(listed("content")):
        event("content-start", index=index, delta={"message": {"content": block}})
        event("content-end", index=index)
    for citation in listed("citations"):
        event("citation-start", delta={"message": {"citations": citation}})
    for logprobs in response["logprobs"] if type(response.get("logprobs")) is list else ():
        event("content-delta", logprobs=logprobs, delta={"message": {"content": {}}})
    event("message-end", delta={k: v for k, v in response.items() if k not in ("id", "message", "logprobs")})


# The events only the turn needs: what each notes in the record (_turns/cohere.py).
_TURN_ONLY = {"message-start": _message_start,
              "content-start": _content_start,
              "content-end": lambda acc, turn, obj: _turn.close_block(turn, acc),
              "citation-start": _citation}
