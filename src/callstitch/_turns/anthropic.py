"""Anthropic Messages: the stream's `Message` rebuilt, and the assistant turn as a request message.

The adapter (_formats/anthropic.py) keeps an AnthropicTurn while the stream is fed: the
message_start object, each content block's start object in order, where its text begins and ends
in the choice's text, its citations and signature, and the message_delta fields. Texts and tool
calls are not copied: a block's text is a slice of result.text (or result.reasoning for
thinking), a tool_use block's input is its call's arguments.

The merge is the Anthropic SDK's (anthropic.lib.streaming accumulate_event): text_delta and
citations_delta go to text blocks, thinking_delta and signature_delta (the last one wins) to
thinking blocks, input_json_delta to blocks that carry an input; a block of any other type
(redacted_thinking, web_search_tool_result, one callstitch has never heard of) is its start object
as sent; message_delta's fields replace message_start's (a null container does not), and the
usage is message_start's merged with message_delta's.
"""

from __future__ import annotations

from typing import Any

from .._exactjson import loads_exact
from .calls import CallsById
from .fresh import fresh
from .partial_json import object_so_far

TEXT, THINKING = 0, 1  # which text of the choice a block's text is in (sink.TEXT_CONTENT, TEXT_REASONING)
_WHICH = {"text": TEXT, "thinking": THINKING}
_TEXT_FIELD = ("text", "thinking")


class Block:
    """One content block as streamed.

    index: the block's index in the stream; start: its content_block_start object as sent (the
    compiled twin keeps the event's JSON text until it is read: start_object()); which: TEXT or
    THINKING for the blocks whose text streams, else -1; spans: [start, end] byte positions of its
    text in the choice's text of that kind (end -1: still open); citations: the citations_delta
    citations, or None; signature: the last signature_delta, or None; pieces: the input_json_delta
    pieces of a block with an input that is not a client call (server_tool_use, mcp_tool_use …), or None.
    """

    __slots__ = ("index", "start", "which", "spans", "citations", "signature", "pieces")

    def __init__(self, index: int, start: Any, which: int) -> None:
        self.index = index
        self.start = start
        self.which = which
        self.spans: list[list[int]] = []
        self.citations: list | None = None
        self.signature: Any = None
        self.pieces: list[str] | None = None

    def start_object(self) -> dict:
        """Return the block's start object, parsed from its text on first use."""
        start = self.start
        if type(start) is not dict:  # the text of its content_block_start event (the compiled twin)
            start = self.start = loads_exact(start)["content_block"]
        return start

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


def which_of(kind: Any) -> int:
    """Return TEXT or THINKING for a block type whose text streams, else -1."""
    return _WHICH.get(kind, -1) if type(kind) is str else -1


FOLD_AT = 64  # message_delta objects kept before they are folded into one (a stream sends one)
SETTLE_AT = 64  # block starts and stops logged before a stop reads them into blocks


class AnthropicTurn:
    """What an Anthropic stream said besides its calls and texts.

    message: the message_start message object as sent, or its JSON text (the compiled twin: read by
    message_object()), None until it came; log: the block starts
    and stops as they came, not yet read into blocks: (index, start object, which, text position)
    for a start, (index, text position, thinking position) for a stop (text positions: where the
    choice's next text of each kind goes); deltas: the message_delta delta objects not yet folded
    (the compiled twin keeps each event's JSON text), or None; fields: those folded so far, later
    over earlier, in a dict of the turn's own, or None. Read from the log (settle()): blocks, the content
    blocks in order of their start; by_index, the latest block started at each index; open, per
    kind of text (TEXT, THINKING), the block whose text is arriving, or None. cut: the turn's budget
    (Limits.stream_bytes) ran out at a block's start: no block is listed from then on, and no text
    that follows is in a block (the turn reads as far as the budget went).
    """

    __slots__ = ("message", "log", "deltas", "fields", "blocks", "by_index", "open", "cut")

    def __init__(self) -> None:
        self.message: dict | bytes | None = None
        self.log: list[tuple] = []
        self.deltas: list | None = None
        self.fields: dict | None = None
        self.blocks: list[Block] = []
        self.by_index: dict[int, Block] = {}
        self.open: list[Block | None] = [None, None]
        self.cut = False

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)

    def message_object(self) -> dict | None:
        """Return the message_start object, parsed from its text on first use."""
        message = self.message
        if isinstance(message, bytes):
            message = self.message = loads_exact(message)
        return message

    def settle(self) -> None:
        """Read the block starts and stops logged since the last call into the blocks, and let the log go."""
        log = self.log
        for entry in log:
            if len(entry) == 4:
                index, start, which, at = entry
                block = Block(index, start, which)
                self.blocks.append(block)
                self.by_index[index] = block
                if which >= 0:
                    self.attend(which, block, at)
            else:
                stopped = self.by_index.get(entry[0])
                if stopped is not None and stopped.which >= 0 and self.open[stopped.which] is stopped:
                    self.attend(stopped.which, None, entry[1 + stopped.which])
        log.clear()  # a block's start read (start_object()) must not be held a second time as its text

    def stop_listing(self, text_at: int, thinking_at: int) -> None:
        """List no block from now on: the open blocks end where each text is now (text_at, thinking_at)."""
        self.settle()
        self.attend(TEXT, None, text_at)
        self.attend(THINKING, None, thinking_at)
        self.cut = True

    def attend(self, which: int, block: Block | None, at: int) -> None:
        """Make block the one the next text of that kind belongs to (None: no block), closing the last one's span."""
        current = self.open[which]
        if current is block:
            return
        if current is not None:
            current.spans[-1][1] = at
        if block is not None:
            block.spans.append([at, -1])
        self.open[which] = block

    def add_delta(self, delta: Any) -> None:
        """Keep a message_delta's delta (or its event's text); every FOLD_AT of them, fold them into the fields."""
        if self.deltas is None:
            self.deltas = [delta]
            return
        self.deltas.append(delta)
        if len(self.deltas) >= FOLD_AT:  # a stream that repeats message_delta must not be held event by event
            # Folded into the same dict each time, never a copy of it: a stream whose every
            # message_delta brings new keys would otherwise copy all the earlier ones per fold.
            if self.fields is None:
                self.fields = {}
            _fold(self.fields, self.deltas)
            self.deltas.clear()

    def delta_fields(self) -> dict:
        """Return the message_delta fields, later ones over earlier (a dict of the caller's own)."""
        fields = dict(self.fields) if self.fields is not None else {}
        _fold(fields, self.deltas or ())
        return fields


def _fold(fields: dict, deltas: Any) -> None:
    """Update fields with each delta in turn (an event's text is read first); a null container replaces none.

    As the SDK sets a container only from a delta whose container is not null: a message_delta
    that says null (after a pause_turn) keeps the container an earlier one, or message_start, named.
    """
    for delta in deltas:
        if type(delta) is bytes:  # the text of its message_delta event (the compiled twin)
            delta = loads_exact(delta).get("delta")
        if type(delta) is dict:
            for key, value in delta.items():
                if value is not None or key != "container":
                    fields[key] = value


def response(result: Any, turn: AnthropicTurn | None) -> dict[str, Any]:
    """Return the Message the API would have answered without streaming."""
    if turn is None:
        turn = AnthropicTurn()
    turn.settle()
    started = turn.message_object()
    message = dict(started) if started is not None else {"type": "message", "role": "assistant"}
    sent = message.get("content")
    message["content"] = (list(sent) if type(sent) is list else []) + _blocks(result, turn)
    message.update(turn.delta_fields())
    message.setdefault("stop_reason", None)
    message.setdefault("stop_sequence", None)
    if result.usage is not None:
        message["usage"] = result.usage
    return fresh(message)


def message(result: Any, turn: AnthropicTurn | None, choice: int) -> dict[str, Any]:
    """Return the assistant message for the next request: the content blocks as the Message has them."""
    if choice != 0:
        raise IndexError(f"an Anthropic stream has one choice (0), not choice {choice}")
    turn = turn or AnthropicTurn()
    turn.settle()
    return {"role": "assistant", "content": fresh(_blocks(result, turn))}


def _blocks(result: Any, turn: AnthropicTurn) -> list[dict]:
    texts = _Texts(result)
    calls = _Calls(result)
    out = []
    for block in turn.blocks:
        d = dict(block.start_object())
        if block.which >= 0:
            d[_TEXT_FIELD[block.which]] = texts.of(block)
            if block.which == TEXT and block.citations:
                sent = d.get("citations")
                d["citations"] = (list(sent) if type(sent) is list else []) + block.citations
            elif block.which == THINKING and block.signature is not None:
                d["signature"] = block.signature
        elif d.get("type") == "tool_use":
            d["input"] = calls.input_of(block)
        elif block.pieces:
            d["input"] = object_so_far("".join(block.pieces), d.get("input"))
        out.append(d)
    return out


class _Texts:
    """The choice's texts as UTF-8, encoded once, to cut the blocks' slices from."""

    def __init__(self, result: Any) -> None:
        first = next((c for c in result.choices if c.index == 0), None)
        self.texts = (first.text, first.reasoning) if first is not None else (None, None)
        self.data: list[bytes | None] = [None, None]

    def of(self, block: Block) -> str:
        text = self.texts[block.which]
        if text is None:
            return ""
        if len(block.spans) == 1 and block.spans[0][0] == 0:
            end = block.spans[0][1]
            if end < 0 or (end == len(text) and text.isascii()):
                return text  # the whole text is this block's (one text block: the common case)
        data = self.data[block.which]
        if data is None:
            data = self.data[block.which] = text.encode()
        pieces = (data[start:len(data) if end < 0 else end] for start, end in block.spans)
        return b"".join(pieces).decode("utf-8", "replace")


class _Calls(CallsById):
    """The client calls of choice 0, matched to their tool_use blocks by id in order."""

    def input_of(self, block: Block) -> Any:
        start = block.start_object()
        call = self.take(start.get("id"))
        if call is None:
            return start.get("input")  # no call of its own (a limit refused it): the input its start sent
        if call.error is None and type(call.arguments) is dict:
            return call.arguments
        return object_so_far(call.raw_arguments, start.get("input"))  # (the SDK's partial parse)
