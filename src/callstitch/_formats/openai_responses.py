"""OpenAI Responses API streaming: function_call items, arguments deltas keyed by item_id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._limits import event_not_an_object, shape_unreadable
from .._turns.openai_responses import ResponsesTurn
from .inband import error_text

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink

_TEXT = {"response.output_text.delta": 0, "response.reasoning_summary_text.delta": 1,
         "response.reasoning_text.delta": 1, "response.refusal.delta": 2}
_ENDS = ("response.completed", "response.incomplete", "response.failed")
_LIFECYCLE = ("response.created", "response.queued", "response.in_progress")
# Content parts of output items: the turn notes where each one's text starts and ends in the choice's text.
_PARTS = ("response.content_part.added", "response.content_part.done", "response.reasoning_summary_part.added",
          "response.reasoning_summary_part.done")
# Deltas of an item's field that is no call's arguments: the turn keeps them for an item not done.
_PIECES = {"response.mcp_call_arguments.delta": "arguments", "response.code_interpreter_call_code.delta": "code"}


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is a Responses API stream event, or a whole response (one not streamed)."""
    return type(obj) is dict and (type(obj.get("type")) is str and obj["type"].startswith("response.")
                                  or is_whole(obj))


def is_whole(obj: Any) -> bool:
    """Tell whether a JSON object is a response not streamed: the `response` object itself, its output in it."""
    return type(obj) is dict and obj.get("object") == "response" and type(obj.get("output")) is list and "type" not in obj


class State:
    """What a Responses stream remembers between events."""

    __slots__ = ("calls", "streamed")

    def __init__(self) -> None:
        self.calls: set[str] = set()     # item ids of function_call and custom_tool_call items
        self.streamed: set[str] = set()  # items whose arguments came as deltas (or were taken whole)


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Responses stream event."""
    if type(obj) is not dict:
        event_not_an_object(acc, state, "an event must be a JSON object", offset, obj)
        return
    kind = obj.get("type")
    if type(kind) is not str:
        if is_whole(obj):
            _whole(acc, state, obj, offset)
        return  # like any event type it does not know (JSON values may be unhashable: no lookups)
    apply = _APPLY.get(kind)
    if apply is not None:  # else text done events, annotations …: the done item and the response repeat them
        apply(acc, state, kind, obj, offset)


def _delta(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    """A piece of a call's arguments (or of a custom tool call's input: its item says it is custom)."""
    item, delta = obj.get("item_id"), obj.get("delta")
    notes: State = state.notes
    if type(item) is str and item in notes.calls:
        if type(delta) is not str:  # a piece of the call that cannot be read: it would go on without it, altered
            shape_unreadable(acc, state, f"{kind} whose delta is not a string", offset, obj)
            return
        if delta:  # an empty delta brings nothing: the done event's arguments still count
            notes.streamed.add(item)
        acc.fragment(0, state.key(item), None, None, delta)


def _text(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    """A piece of output text, reasoning or refusal."""
    delta = obj.get("delta")
    if type(delta) is str:
        acc.text_piece(0, _TEXT[kind], delta)


def _output_item(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    """An output item added or done: a call's id and name, or its whole arguments; the turn keeps the event."""
    item = obj.get("item")
    done = kind.endswith("done")
    slot = None
    if type(item) is dict and item.get("type") == "function_call":
        slot = _item(acc, state, item, done=done)
    elif type(item) is dict and item.get("type") == "custom_tool_call":
        slot = _item(acc, state, item, done=done, custom=True, offset=offset)
    if slot == _DROPPED:
        return  # Limits.calls dropped the call: the turn keeps nothing of it either
    # The turn keeps the event as the compiled twin does, read only when the turn is asked for.
    turn = state.turn or keep_turn(state)
    if done:
        turn.item_done(acc, obj)
    else:
        turn.item_added(acc, obj, slot)


def _arguments_done(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    """A call's arguments (or input) as a whole: checked against the pieces, and the call complete."""
    item = obj.get("item_id")
    notes: State = state.notes
    if type(item) is str and item in notes.calls:
        sent = obj.get("arguments" if kind.endswith("arguments.done") else "input")
        if kind.endswith("input.done") and sent is not None and type(sent) is not str:
            shape_unreadable(acc, state, "custom tool call input is not a string", offset, obj)
            sent = None
        _arguments(acc, state, item, sent)
        acc.complete(0, state.key(item))


def _part(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    keep_turn(state).part(acc, obj)


def _piece(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    keep_turn(state).piece(acc, obj, _PIECES[kind])


def _lifecycle(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    keep_turn(state).lifecycle = obj


def _end(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    """The response completed, incomplete or failed: usage, the finish reason, every call complete."""
    response = obj.get("response")
    keep_turn(state).end(obj, type(response) is dict and response.get("output") is not None)
    if type(response) is dict:
        if response.get("usage") is not None:
            state.usage = response["usage"]
        if kind == "response.failed" and response.get("error") is not None:
            state.error("in-band error", error_text(response["error"]), offset, obj)
        details = response.get("incomplete_details")
        reason = details.get("reason") if type(details) is dict else None
        acc.choice_finished(0, reason if type(reason) is str else response.get("status") or kind.split(".")[1])
    else:
        state.complete = True
    acc.complete(None, None)


# Where an output item's texts are, by item type: (the list of parts, each part type's text field
# and which text of the choice it is: 0 output text, 1 reasoning, 2 refusal), as the deltas bring them.
_ITEM_TEXTS = {"message": (("content", {"output_text": ("text", 0), "refusal": ("refusal", 2)}),),
               "reasoning": (("summary", {"summary_text": ("text", 1)}), ("content", {"reasoning_text": ("text", 1)}))}


def _whole(acc: Sink, state: StreamState, response: dict, offset: int | None) -> None:
    """A response not streamed (a JSON body): read as the events its stream would have brought.

    Each output item's texts, as their deltas would come; each call's item added and done, its
    arguments whole; then the end event of its status (completed, incomplete, failed), which
    carries the response itself: so the turn gives it back as it came.
    """
    for item in response["output"]:
        kind = item.get("type") if type(item) is dict else None
        if type(kind) is not str:  # (JSON values may be unhashable: no lookups)
            continue
        for field, parts in _ITEM_TEXTS.get(kind, ()):
            for part in item[field] if type(item.get(field)) is list else ():
                found = parts.get(part["type"]) if type(part) is dict and type(part.get("type")) is str else None
                if found is not None and type(part.get(found[0])) is str:
                    acc.text_piece(0, found[1], part[found[0]])
        if kind in ("function_call", "custom_tool_call"):
            custom = kind == "custom_tool_call"
            if _item(acc, state, item, done=False, custom=custom, offset=offset) != _DROPPED:
                _item(acc, state, item, done=True, custom=custom, offset=offset)
    status = response.get("status")
    end = f"response.{status}" if status in ("completed", "incomplete", "failed") else None
    if end is not None:
        _end(acc, state, end, {"type": end, "response": response}, offset)
    else:  # queued or in progress (a background response, asked for before it ended): kept, not ended
        keep_turn(state).end({"type": f"response.{status}", "response": response}, True)


def _error(acc: Sink, state: StreamState, kind: str, obj: dict, offset: int | None) -> None:
    state.error("in-band error", error_text(obj.get("error", obj)), offset, obj)


# What each event type does. Any other passes untouched, as the compiled twin's fast path lets it pass.
_APPLY = {**dict.fromkeys(_TEXT, _text), **dict.fromkeys(_ENDS, _end), **dict.fromkeys(_LIFECYCLE, _lifecycle),
          **dict.fromkeys(_PARTS, _part), **dict.fromkeys(_PIECES, _piece),
          "response.function_call_arguments.delta": _delta, "response.custom_tool_call_input.delta": _delta,
          "response.output_item.added": _output_item, "response.output_item.done": _output_item,
          "response.function_call_arguments.done": _arguments_done,
          "response.custom_tool_call_input.done": _arguments_done, "error": _error}
HANDLED_EVENTS = frozenset(_APPLY)


def keep_turn(state: StreamState) -> ResponsesTurn:
    """Return the stream's turn record, made when its first event that the turn keeps comes."""
    turn = state.turn
    if turn is None:
        turn = state.turn = ResponsesTurn()
    return turn


_DROPPED = -1  # what _item returns for a call Limits.calls dropped


def _item(acc: Sink, state: StreamState, item: dict, done: bool, custom: bool = False,
          offset: int | None = None) -> int | None:
    """Register a function_call or custom_tool_call item (the call id is call_id; the item id keys its deltas).

    Return the call's slot index, None for an item with no usable id, or _DROPPED for a call
    Limits.calls dropped (nothing of it is kept: not even its key).
    """
    key = item.get("id") or item.get("call_id")
    if type(key) is not str:
        return None  # an item with no usable id cannot be told apart from the others
    notes: State = state.notes
    calls = notes.calls
    call_id, name = item.get("call_id"), item.get("name")
    call_id = call_id if type(call_id) is str else None
    name = name if type(name) is str else None
    if key not in calls:
        numbered = key in state.keys
        # A call first seen by its done item: its added item may have been in an event dropped at
        # Limits.event_bytes, with pieces the done item need not repeat. So it starts without its
        # name, as a call whose start was dropped does (the slot rules cut it, keeping nothing, after
        # a drop), and gets the name next.
        (acc.custom_fragment if custom else acc.fragment)(0, state.key(key), call_id, None if done else name, None)
        if acc.call_at(0, state.keys[key]) is None:
            if not numbered:  # (the newest number: the next key takes it again)
                del state.keys[key]
            return _DROPPED
        calls.add(key)
        if done:
            acc.identify(0, state.key(key), call_id, name)
    else:  # the item again (done, or added twice): it may bring the id or name the first one lacked
        acc.identify(0, state.key(key), call_id, name)
    arguments = item.get("input" if custom else "arguments")
    if custom and arguments is not None and type(arguments) is not str:
        shape_unreadable(acc, state, "custom tool call input is not a string", offset, item)
        arguments = None
    if arguments:
        _arguments(acc, state, key, arguments)
    if done:
        acc.complete(0, state.key(key))
    return state.keys[key]


def _arguments(acc: Sink, state: StreamState, key: Any, arguments: Any) -> None:
    """Take the complete arguments a done event repeats, unless deltas already brought them."""
    notes: State = state.notes
    streamed = notes.streamed
    if key in streamed or arguments in (None, ""):
        return
    streamed.add(key)
    acc.fragment(0, state.key(key), None, None, arguments)
