"""AWS Bedrock ConverseStream: tool input fragments keyed by contentBlockIndex.

Events come named (the event-stream ``:event-type`` header, or an SSE ``event:`` line) with
the payload alone, or already decoded as one-key objects such as ``{"contentBlockDelta": {...}}``
(boto3's shape); both are taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._limits import event_not_an_object, shape_unreadable
from .._text import compact_json
from .._turns import bedrock as _turn
from .._turns.partial_json import keep_input_piece

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .sink import Sink



def _unwrap(event: str | None, obj: Any) -> tuple[str | None, Any]:
    if event in _EVENTS or (event is not None and event.endswith("Exception")):
        return event, obj
    if type(obj) is dict and len(obj) == 1:
        (name, inner), = obj.items()
        if name in _EVENTS or name.endswith("Exception"):
            return name, inner
    return event, obj


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is a ConverseStream event, or a whole Converse response (one not streamed)."""
    name, _ = _unwrap(event, obj)
    return name in _EVENTS or (event is not None and event.endswith("Exception")) or is_whole(obj)


def is_whole(obj: Any) -> bool:
    """Tell whether a JSON object is a Converse response (not streamed): its message under output."""
    return type(obj) is dict and type(obj.get("output")) is dict and type(obj["output"].get("message")) is dict


class State:
    """What a Bedrock ConverseStream remembers between events."""

    __slots__ = ("tools",)

    def __init__(self) -> None:
        self.tools: set[int] = set()  # content block indices that are tool calls


def handle(acc: Sink, state: StreamState, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one ConverseStream event."""
    name, body = _unwrap(event, obj)
    if name is None and is_whole(obj):
        _whole(acc, state, obj, offset)
        return
    if name is not None and name.endswith("Exception"):
        message = body.get("message") if type(body) is dict else body
        state.error("in-band error", f"{name}: {message}", offset, obj)
        return
    if type(body) is not dict:
        event_not_an_object(acc, state, "an event must be a JSON object", offset, obj)
        return
    turn = state.turn
    if turn is None:
        turn = state.turn = _turn.BedrockTurn()
    apply = _APPLY.get(name) if type(name) is str else None
    if apply is None:
        state.error("unexpected shape", f"unknown event {name!r}", offset, obj)
        return
    apply(acc, state, turn, body, offset, obj)


def _block_delta(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """contentBlockDelta: a piece of a tool's input, of text or of reasoning."""
    index, delta = body.get("contentBlockIndex"), body.get("delta")
    if type(index) is not int or type(delta) is not dict:
        shape_unreadable(acc, state, "contentBlockDelta without an index and a delta", offset, obj)
        return
    tool = delta.get("toolUse")
    if type(tool) is dict:
        notes: State = state.notes
        if index in notes.tools:
            acc.fragment(0, index, None, None, tool.get("input"))
        elif type(tool.get("input")) is str:  # a server tool's input: the turn keeps it, in its started block
            block = turn.blocks.get(index)
            if block is not None and block.start is not None and not block.client:
                keep_input_piece(acc, block, tool["input"])
        return
    text = delta.get("text")
    if type(text) is str:
        if turn.text_open != index:  # the first piece of a block's text: the turn notes where it starts
            turn.text_at(acc, body, 0, index, acc.text_length(0, 0))
        acc.text_piece(0, 0, text)
    reasoning = delta.get("reasoningContent")
    if type(reasoning) is dict:
        if type(reasoning.get("text")) is str:
            if turn.reasoning_open != index:
                turn.text_at(acc, body, 1, index, acc.text_length(0, 1))
            acc.text_piece(0, 1, reasoning["text"])
        if ("signature" in reasoning or "redactedContent" in reasoning) and acc.keep_own(reasoning):
            _turn.note_reasoning(turn.block(index), reasoning)
    elif type(text) is not str and acc.keep_own(delta):
        _turn.note_other(turn.block(index), delta)


def _block_start(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """contentBlockStart: a client tool's call begins with its id and name; the turn keeps the start."""
    index, start = body.get("contentBlockIndex"), body.get("start")
    if type(index) is not int or type(start) is not dict:
        return
    tool = start.get("toolUse")
    if type(tool) is dict and tool.get("type", "tool_use") == "tool_use":
        call_id, tool_name = tool.get("toolUseId"), tool.get("name")
        acc.fragment(0, index, call_id if type(call_id) is str else None,
                     tool_name if type(tool_name) is str else None, None)
        if acc.call_at(0, index) is None:  # Limits.calls dropped the call: the turn keeps nothing of it either,
            dropped = turn.blocks.get(index)  # and a block before it at its index takes none of its input
            if dropped is not None and type(dropped.pieces) is not tuple:
                dropped.pieces = tuple(dropped.pieces or ())
            return
        notes: State = state.notes
        notes.tools.add(index)
        block = turn.block(index)  # (listed whatever the turn's budget: the call is in the result)
        block.client = True
    else:
        block = turn.listed(acc, body, index)
        if block is None:
            return
    block.start = start


def _block_stop(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """contentBlockStop: a block's text ends, a tool's call is complete."""
    index = body.get("contentBlockIndex")
    if type(index) is not int:
        return
    if turn.text_open == index:
        turn.attend(0, -1, acc.text_length(0, 0))
    if turn.reasoning_open == index:
        turn.attend(1, -1, acc.text_length(0, 1))
    notes: State = state.notes
    if index in notes.tools:
        acc.complete(0, index)


def _message_stop(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """messageStop: the stop reason; every call is complete."""
    if acc.keep_own(body):
        turn.stop.update(body)
    reason = body.get("stopReason")
    if type(reason) is str:
        acc.choice_finished(0, reason)
    else:
        state.complete = True
    acc.complete(None, None)


def _metadata(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """metadata: usage and metrics, for the turn."""
    if acc.keep_own(body):
        turn.metadata.update(body)
    if body.get("usage") is not None:
        state.usage = body["usage"]


def _message_start(acc: Sink, state: StreamState, turn: Any, body: dict, offset: int | None, obj: Any) -> None:
    """messageStart: the role."""
    turn.role = body.get("role")


_STOP_FIELDS = ("stopReason", "additionalModelResponseFields")  # a response's fields that messageStop carries


def _whole(acc: Sink, state: StreamState, response: dict, offset: int | None) -> None:
    """A Converse response not streamed (a JSON body): read as the events its stream would have brought.

    messageStart with the role, each content block as its start, deltas and stop, messageStop
    with the stop reason, metadata with the rest (usage, metrics …): so the turn gives it back.
    """
    message = response["output"]["message"]
    handle(acc, state, "messageStart", {"role": message.get("role")}, offset)
    content = message.get("content")
    for index, block in enumerate(content if type(content) is list else ()):
        for event, body in _block_events(block):
            handle(acc, state, event, {"contentBlockIndex": index, **body}, offset)
        handle(acc, state, "contentBlockStop", {"contentBlockIndex": index}, offset)
    handle(acc, state, "messageStop", {k: v for k, v in response.items() if k in _STOP_FIELDS}, offset)
    rest = {k: v for k, v in response.items() if k != "output" and k not in _STOP_FIELDS}
    if rest:
        handle(acc, state, "metadata", rest, offset)


def _block_events(block: Any) -> list[tuple[str, dict]]:
    """Return the events (name, body without the index) a content block of a Converse message streams as."""
    if type(block) is not dict or len(block) != 1:
        return [("contentBlockStart", {"start": block})]  # kept as it came (a block of no shape Converse has)
    (kind, value), = block.items()
    if kind == "text":
        return [("contentBlockDelta", {"delta": {"text": value}})]
    if kind == "toolUse" and type(value) is dict:
        start = {k: v for k, v in value.items() if k != "input"}
        events = [("contentBlockStart", {"start": {"toolUse": start}})]
        if value.get("input") is not None:
            events.append(("contentBlockDelta", {"delta": {"toolUse": {"input": compact_json(value["input"]).decode()}}}))
        return events
    if kind == "toolResult" and type(value) is dict:
        start = {k: v for k, v in value.items() if k != "content"}
        events = [("contentBlockStart", {"start": {"toolResult": start}})]
        if type(value.get("content")) is list:
            events.append(("contentBlockDelta", {"delta": {"toolResult": value["content"]}}))
        return events
    if kind == "reasoningContent" and type(value) is dict and len(value) == 1:
        text = value.get("reasoningText")
        if type(text) is dict and type(text.get("text")) is str:
            events = [("contentBlockDelta", {"delta": {"reasoningContent": {"text": text["text"]}}})]
            if "signature" in text:
                events.append(("contentBlockDelta", {"delta": {"reasoningContent": {"signature": text["signature"]}}}))
            return events
        if "redactedContent" in value:
            return [("contentBlockDelta", {"delta": {"reasoningContent": value}})]
    if kind == "citationsContent" and type(value) is dict and type(value.get("citations")) is list:
        parts = value["content"] if type(value.get("content")) is list else []
        # (a stream brings one text a block, so several are kept as sent: below)
        if len(parts) <= 1 and all(type(part) is dict and type(part.get("text")) is str for part in parts):
            return ([("contentBlockDelta", {"delta": {"text": part["text"]}}) for part in parts]
                    + [("contentBlockDelta", {"delta": {"citation": c}}) for c in value["citations"]])
    return [("contentBlockStart", {"start": block})]


# What each ConverseStream event does; any other name is reported as unknown.
_APPLY = {"contentBlockDelta": _block_delta, "contentBlockStart": _block_start,
          "contentBlockStop": _block_stop, "messageStop": _message_stop, "metadata": _metadata,
          "messageStart": _message_start}
_EVENTS = frozenset(_APPLY)  # the event names of the format (claims, _unwrap)
