"""Anthropic Messages streaming: content blocks keyed by index, tool input as input_json_delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


from .inband import error_text
from .._limits import event_not_an_object, shape_unreadable
from .._text import compact_json
from .._turns.anthropic import SETTLE_AT, AnthropicTurn, which_of
from .._turns.partial_json import keep_input_piece

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink

_EVENTS = frozenset(("message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop", "ping"))
# Tool blocks whose calls the client runs; server_tool_use, mcp_tool_use … run on Anthropic's side.
_CLIENT_BLOCKS = frozenset(("tool_use",))
# What the Anthropic SDK's messages.stream() yields besides the raw events (anthropic/lib/streaming
# _types.py and _beta_types.py): each repeats what a raw event beside it carries, so it is skipped.
SDK_DERIVED = frozenset(("text", "citation", "thinking", "signature", "input_json", "compaction"))
_KINDS = ("text", "thinking")  # a text delta's kind of block, by which
_FIELDS = ("text", "reasoning")  # the Result field that kind of text is in


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is an Anthropic Messages stream event, or a whole Message (a response not streamed)."""
    return type(obj) is dict and type(obj.get("type")) is str and (obj["type"] in _EVENTS or is_whole(obj))


def is_whole(obj: Any) -> bool:
    """Tell whether a JSON object is a Message not streamed: type "message", its content blocks in it."""
    return type(obj) is dict and obj.get("type") == "message" and type(obj.get("content")) is list


class State:
    """What an Anthropic stream remembers between events."""

    __slots__ = ("tools", "streamed", "usage")

    def __init__(self) -> None:
        self.tools: dict[int, Any] = {}  # tool_use block index -> the input its start event carried
        self.streamed: set[int] = set()  # tool blocks whose input streamed, or was settled from the start
        self.usage: dict | None = None  # the usage merge_usage made, merged into in place from then on


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Messages stream event."""
    if type(obj) is not dict:
        event_not_an_object(acc, state, "an event must be a JSON object", offset, obj)
        return
    kind = obj.get("type")
    if kind == "content_block_delta":
        index, delta = obj.get("index"), obj.get("delta")
        if type(index) is not int or type(delta) is not dict:
            shape_unreadable(acc, state, "content_block_delta without an integer index and a delta", offset, obj)
            return
        if delta.get("type") == "input_json_delta":  # the commonest, here rather than a call away
            text = delta.get("partial_json")
            notes: State = state.notes
            if index in notes.tools and type(text) is str:
                if text:  # an empty delta brings nothing: the block's start input still counts
                    notes.streamed.add(index)
                acc.fragment(0, index, None, None, text)
            elif type(text) is str:
                _server_input(acc, state, index, text)
            else:  # a piece of a tool's input that cannot be read: the input goes on without it, altered
                shape_unreadable(acc, state, "input_json_delta whose partial_json is not a string", offset, obj)
        else:
            _block_delta(acc, state, index, delta, offset, obj)
    elif kind == "content_block_start":
        index, block = obj.get("index"), obj.get("content_block")
        if type(index) is not int or type(block) is not dict:
            shape_unreadable(acc, state, "content_block_start without an integer index and a block", offset, obj)
            return
        start_block(acc, state, index, block, offset)
    elif kind == "content_block_stop":
        index = obj.get("index")
        if type(index) is int:
            (state.turn or turn_of(state)).log.append((index, acc.text_length(0, 0), acc.text_length(0, 1)))
            stop_block(acc, state, index)
    elif kind == "message_delta":
        message_delta(acc, state, obj.get("delta"), obj.get("usage"))
    elif kind == "message_start":
        message = obj.get("message")
        if type(message) is dict:
            message_start(state, message, message.get("usage"))
    elif kind == "message_stop":
        state.complete = True
        acc.complete(None, None)
    elif kind == "error":
        state.error("in-band error", error_text(obj.get("error", obj)), offset, obj)
    elif is_whole(obj):
        whole_message(acc, state, obj, offset)
    elif kind != "ping" and not (type(kind) is str and kind in SDK_DERIVED):
        state.error("unexpected shape", f"unknown event type {kind!r}", offset, obj)


def whole_message(acc: Sink, state: StreamState, message: dict, offset: int | None) -> None:
    """A Message not streamed (a JSON body): read as the events its stream would have brought.

    message_start (the Message with no content yet), a start and a stop for each content block,
    whole (a tool_use block's input is its call's arguments, as a start's input is that no delta
    follows), message_delta with its stop reason and message_stop: so the turn gives the Message back.
    """
    handle(acc, state, None, {"type": "message_start", "message": {**message, "content": []}}, offset)
    for index, block in enumerate(message["content"]):
        handle(acc, state, None, {"type": "content_block_start", "index": index, "content_block": block}, offset)
        handle(acc, state, None, {"type": "content_block_stop", "index": index}, offset)
    stop = {key: message[key] for key in ("stop_reason", "stop_sequence") if key in message}
    handle(acc, state, None, {"type": "message_delta", "delta": stop}, offset)
    handle(acc, state, None, {"type": "message_stop"}, offset)


def turn_of(state: StreamState) -> AnthropicTurn:
    """Return the stream's turn record, made on first use."""
    turn = state.turn
    if turn is None:
        turn = state.turn = AnthropicTurn()
    return turn


def message_start(state: StreamState, message: dict | bytes, usage: Any) -> None:
    """The message starts: keep its object (the first one, as the SDK does; its JSON text from the compiled twin) and its usage."""
    turn = turn_of(state)
    if turn.message is None:
        turn.message = message
    merge_usage(state, usage)


def message_delta(acc: Sink, state: StreamState, delta: Any, usage: Any) -> None:
    """The message's closing fields: the stop reason (which ends the calls), stop_sequence, container …, usage."""
    if type(delta) is dict and type(delta.get("stop_reason")) is str:
        acc.choice_finished(0, delta["stop_reason"])
    note_delta(acc, state, delta)  # kept as sent: a delta that is not an object reads as none
    merge_usage(state, usage)


def note_delta(acc: Sink, state: StreamState, delta: Any) -> None:
    """Keep a message_delta's delta object (or its event's JSON text) for the turn, within Limits.stream_bytes."""
    if acc.keep_own(delta):
        (state.turn or turn_of(state)).add_delta(delta)


def start_block(acc: Sink, state: StreamState, index: int, block: dict, offset: int | None) -> None:
    """A content block starts: start its call if it is a client tool's, note it in the turn, take its start text."""
    btype = block.get("type")
    which = which_of(btype)
    call = None
    if type(btype) is str and btype in _CLIENT_BLOCKS:
        call = start_tool(acc, state, index, block.get("id"), block.get("name"), block.get("input"))
    note_start(acc, state, index, block, which, call)
    if btype == "text":
        _text(acc, state, 0, block.get("text"), offset, empty_ok=False)
    elif btype == "thinking":
        _text(acc, state, 1, block.get("thinking"), offset, empty_ok=False)


def note_start(acc: Sink, state: StreamState, index: int, start: dict | bytes, which: int, call: bool | None) -> bool:
    """Log a block's start in the turn (start: its object, or its event's JSON text); False: it is not listed.

    call: for a client tool's block, start_tool's answer (True: listed; False: Limits.calls dropped
    the call, which is not in the turn either); None for any other block, listed within the turn's
    budget (Limits.stream_bytes, keep_own). Past the budget the turn lists no block from then on,
    and the text that follows is in none (AnthropicTurn.stop_listing).
    """
    turn = state.turn or turn_of(state)
    if call is None and not turn.cut and acc.keep_own(start):
        call = True
    if not call:
        if call is None and not turn.cut:
            turn.stop_listing(acc.text_length(0, 0), acc.text_length(0, 1))
        elif call is False:  # a dropped call's deltas at index are no listed block's (a server tool's before it)
            turn.settle()
            turn.by_index.pop(index, None)
        return False
    turn.log.append((index, start, which, acc.text_length(0, which) if which >= 0 else 0))
    return True


def _block_delta(acc: Sink, state: StreamState, index: int, delta: dict, offset: int | None, obj: dict) -> None:
    dtype = delta.get("type")
    if dtype == "text_delta" or dtype == "thinking_delta":
        which = 0 if dtype == "text_delta" else 1
        text = delta.get("text" if which == 0 else "thinking")
        if type(text) is str and not (state.turn is not None and state.turn.cut):  # (cut: the text is in no block)
            turn = state.turn or turn_of(state)
            if turn.log:
                turn.settle()
            block = turn.by_index.get(index)
            if block is None or block.which != which:
                block = _misdirected(state, turn, index, block, dtype, offset, obj)
            if turn.open[which] is not block:  # a span more for the block, within the turn's budget
                if block is None or acc.keep_own(delta):
                    turn.attend(which, block, acc.text_length(0, which))
                else:
                    turn.stop_listing(acc.text_length(0, 0), acc.text_length(0, 1))
        _text(acc, state, which, text, offset)
    elif dtype == "citations_delta" or dtype == "signature_delta":
        turn = state.turn
        if turn is None or turn.cut:
            return  # (cut: the turn keeps nothing more of its blocks)
        turn.settle()
        block = turn.by_index.get(index)
        if block is None:
            return
        if dtype == "signature_delta" and block.which == 1 and "signature" in delta:
            block.signature = delta["signature"]
        elif dtype == "citations_delta" and block.which == 0 and "citation" in delta and acc.keep_own(delta):
            if block.citations is None:
                block.citations = []
            block.citations.append(delta["citation"])


def _misdirected(state: StreamState, turn: AnthropicTurn, index: int, block: Any, dtype: str, offset: int | None,
                 obj: dict) -> Any:
    """Return the block a text delta aimed at no block of its kind goes to: the open one of its kind, if any.

    The text came in the stream of its kind (it is in result.text or .reasoning either way); the
    open block is where that stream was going, so the turn keeps every piece that came, in order.
    The anthropic SDK drops such a delta; the result says what happened.
    """
    which = 0 if dtype == "text_delta" else 1
    target = turn.open[which]
    if block is None:
        aimed = f"index {index}, no block"
    else:
        aimed = f"block {index}, a {block.start_object().get('type')!r} block"
    if target is None:
        state.error("unexpected shape", f"{dtype} for {aimed}, while no {_KINDS[which]} block is open: "
                    f"its text is in result.{_FIELDS[which]} only", offset, obj)
    else:
        state.error("unexpected shape", f"{dtype} for {aimed}: its text goes to the open {_KINDS[which]} "
                    f"block (index {target.index})", offset, obj)
    return target


def _server_input(acc: Sink, state: StreamState, index: int, text: str) -> None:
    """Keep an input piece of a block that carries an input but is not a client call (server_tool_use, mcp_tool_use …)."""
    turn = state.turn
    if turn is None:
        return
    turn.settle()
    block = turn.by_index.get(index)
    if block is not None and "input" in block.start_object():
        keep_input_piece(acc, block, text)


def start_tool(acc: Sink, state: StreamState, index: int, call_id: Any, name: Any, initial: Any) -> bool | None:
    """A tool_use block starts: its call, and the input its start carries (kept unless input streams).

    Return True when the turn lists the block whatever its budget (the first tool block at its
    index, of a call that is in: at most Limits.calls of them), False when Limits.calls dropped the
    call (nothing of it is kept), None for a tool block at an index that had one (a start sent
    again: listed within the budget, as any other block).
    """
    acc.fragment(0, index, call_id if type(call_id) is str else None, name if type(name) is str else None, None)
    if acc.call_at(0, index) is None:
        return False
    notes: State = state.notes
    again = index in notes.tools
    notes.tools[index] = initial
    notes.streamed.discard(index)  # (a new block at an index another had, a second Message's: its own input)
    return None if again else True  # (None: a tool block at its index before: a block more, counted as any other)


def stop_block(acc: Sink, state: StreamState, index: int) -> None:
    """A content block stops: a tool block's call is complete (the caller logs the stop in the turn)."""
    turn = state.turn
    if turn is not None and len(turn.log) >= SETTLE_AT:
        turn.settle()  # (else stops of blocks the turn did not keep, past its budget, pile up in the log)
    _settle(acc, state, index)
    notes: State = state.notes
    if index in notes.tools:
        acc.complete(0, index)


def _text(acc: Sink, state: StreamState, which: int, text: Any, offset: int | None, empty_ok: bool = True) -> None:
    if type(text) is str:
        if text or empty_ok:
            acc.text_piece(0, which, text)
    elif text is not None:
        state.error("unexpected shape", "text that is not a string", offset, text)


def merge_usage(state: StreamState, usage: Any) -> None:
    """Merge a usage object into the stream's (message_start brings the input side, message_delta the output)."""
    if type(usage) is dict:
        notes: State = state.notes
        merged = state.usage
        if merged is None or merged is not notes.usage:  # a copy once, not one per event (n events: n squared)
            merged = notes.usage = dict(merged) if type(merged) is dict else {}
        merged.update((k, v) for k, v in usage.items() if v is not None or k not in merged)
        state.usage = merged


def _settle(acc: Sink, state: StreamState, index: Any) -> None:
    """A tool block that streamed no input keeps the input its start event carried."""
    notes: State = state.notes
    tools = notes.tools
    if index not in tools or index in notes.streamed:
        return
    notes.streamed.add(index)
    initial = tools[index]
    if initial:  # {} (the usual placeholder) and None mean "no arguments"
        acc.fragment(0, index, None, None, compact_json(initial))


def close(acc: Sink, state: StreamState) -> None:
    """Settle tool blocks the stream never closed."""
    notes: State = state.notes
    for index in list(notes.tools):
        _settle(acc, state, index)
