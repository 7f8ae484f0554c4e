"""AWS Bedrock Converse: the stream's Converse output rebuilt, and the assistant turn as a request message.

The adapter (_formats/bedrock.py) keeps a BedrockTurn while a ConverseStream is fed: messageStart's
role, per contentBlockIndex the contentBlockStart object and what the deltas said besides texts
and client-call input (signatures, redacted reasoning, citations, tool results, server tool
input, members callstitch does not know), where each block's text begins and ends in the choice's
text, and the messageStop and metadata fields. Texts and calls are not copied: a block's text is a
slice of result.text (or result.reasoning), a client toolUse block's input is its call's arguments.

A ContentBlockDelta is a union (one member per event): a delta with a text string or a
reasoningContent object is read for those alone (a text piece is what the compiled twin's fast
path takes); citation, toolResult, image and unknown members are read from deltas with neither.
redactedContent is a blob: base64 text in to_response() (the JSON the service sends), bytes in
to_message() (what botocore's converse() takes and base64-encodes itself).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .calls import CallsById
from .fresh import fresh
from .partial_json import object_so_far

TEXT, REASONING = 0, 1  # which text of the choice a span is in (sink.TEXT_CONTENT, TEXT_REASONING)
PADDING = "p"  # the padding field Bedrock adds to every event so that sizes leak nothing: not part of the output


class Block:
    """One content block, by its contentBlockIndex.

    start: the contentBlockStart "start" object as sent, or None (text and reasoning blocks have none);
    client: its toolUse is a client call (the call's arguments are its input); spans: [which, begin,
    end] byte positions of its text pieces in the choice's text of that kind (end -1: still open);
    signature: the last reasoning signature, or None; redacted: the redactedContent pieces (base64
    text), or None; citations: the citation deltas, or None; pieces: toolUse input pieces of a
    block that is not a client call, or None; results: the toolResult delta items, or None; other:
    delta members callstitch does not read (image, new ones), later over earlier, or None.
    """

    __slots__ = ("index", "start", "client", "spans", "signature", "redacted", "citations", "pieces", "results",
                 "other")

    def __init__(self, index: int) -> None:
        self.index = index
        self.start: dict | None = None
        self.client = False
        self.spans: list[list[int]] = []
        self.signature: Any = None
        self.redacted: list | None = None
        self.citations: list | None = None
        self.pieces: list | None = None
        self.results: list | None = None
        self.other: dict | None = None

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)


class BedrockTurn:
    """What a ConverseStream said besides its calls and texts.

    role: messageStart's role, or None; blocks: the Blocks by contentBlockIndex; text_open /
    reasoning_open: the index of the block whose text / reasoning is arriving, -1 for none (the
    compiled twin's fast path takes a text delta only for the block in text_open); stop: the
    messageStop fields; metadata: the metadata fields (usage, metrics, trace, performanceConfig …),
    later events over earlier; cut: the turn's budget (Limits.stream_bytes) ran out at a new block or
    span: none is listed from then on (but a client call's, under Limits.calls), and no text that
    follows is in a block (the turn reads as far as the budget went).
    """

    __slots__ = ("role", "blocks", "text_open", "reasoning_open", "stop", "metadata", "cut")

    def __init__(self) -> None:
        self.role: Any = None
        self.blocks: dict[int, Block] = {}
        self.text_open = -1
        self.reasoning_open = -1
        self.stop: dict = {}
        self.metadata: dict = {}
        self.cut = False

    def __getstate__(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple) -> None:
        for name, value in zip(self.__slots__, state):
            setattr(self, name, value)

    def block(self, index: int) -> Block:
        """Return the block at index, made on first mention."""
        block = self.blocks.get(index)
        if block is None:
            block = self.blocks[index] = Block(index)
        return block

    def listed(self, acc: Any, kept: Any, index: int) -> Block | None:
        """Return the block at index, made on first mention within the turn's budget (kept: the event); None past it."""
        block = self.blocks.get(index)
        if block is None and self._fits(acc, kept):
            block = self.blocks[index] = Block(index)
        return block

    def text_at(self, acc: Any, kept: Any, which: int, index: int, at: int) -> None:
        """Text of that kind (which) comes for the block at index, at; its span opens within the turn's budget."""
        if self._fits(acc, kept):
            self.attend(which, index, at)

    def _fits(self, acc: Any, kept: Any) -> bool:
        """Tell whether the turn may list one more block or span (the event kept); past its budget, stop listing."""
        if self.cut:
            return False
        if acc.keep_own(kept):
            return True
        self.attend(TEXT, -1, acc.text_length(0, TEXT))
        self.attend(REASONING, -1, acc.text_length(0, REASONING))
        self.cut = True
        return False

    def attend(self, which: int, index: int, at: int) -> None:
        """Make the block at index (-1: none) the one the next text of that kind belongs to; at: where it goes."""
        current = self.reasoning_open if which else self.text_open
        if current == index:
            return
        if current >= 0:  # close its open span of that kind (the last one: a block may hold both kinds)
            for span in reversed(self.blocks[current].spans):
                if span[0] == which:
                    span[2] = at
                    break
        if index >= 0:
            self.block(index).spans.append([which, at, -1])
        if which:
            self.reasoning_open = index
        else:
            self.text_open = index


def note_reasoning(block: Block, reasoning: dict) -> None:
    """Note a reasoningContent delta's signature and redacted content (its text is the choice's reasoning)."""
    if reasoning.get("signature") is not None:
        block.signature = reasoning["signature"]
    if reasoning.get("redactedContent") is not None:
        # Appended in place: a new list per piece would cost a stream of n pieces n squared.
        if block.redacted is None:
            block.redacted = []
        block.redacted.append(reasoning["redactedContent"])


def note_other(block: Block, delta: dict) -> None:
    """Note a delta with neither text nor reasoningContent: citation, toolResult, members callstitch does not read."""
    for key, value in delta.items():
        if key == "toolUse":
            continue
        # The lists grow in place: a new list per delta would cost a stream of n deltas n squared.
        if key == "citation":
            if block.citations is None:
                block.citations = []
            block.citations.append(value)
        elif key == "toolResult":
            if block.results is None:
                block.results = []
            if type(value) is list:
                block.results.extend(value)
            else:
                block.results.append(value)
        else:
            block.other = block.other or {}
            held = block.other.get(key)
            if type(value) is dict and type(held) is dict:
                held.update(value)  # (its own copy, made below: in place, not a new dict per delta)
            else:
                block.other[key] = dict(value) if type(value) is dict else value


def response(result: Any, turn: BedrockTurn | None) -> dict[str, Any]:
    """Return the Converse output: the message, then messageStop's and metadata's fields as sent."""
    turn = turn or BedrockTurn()
    out: dict[str, Any] = {"output": {"message": _message(result, turn, False)}}
    for fields in (turn.stop, turn.metadata):
        out.update((key, value) for key, value in fields.items() if key != PADDING)
    return fresh(out)


def message(result: Any, turn: BedrockTurn | None, choice: int) -> dict[str, Any]:
    """Return the assistant Message for the next converse() call (redactedContent as bytes)."""
    if choice != 0:
        raise IndexError(f"a Bedrock stream has one choice (0), not choice {choice}")
    return fresh(_message(result, turn or BedrockTurn(), True))


def _message(result: Any, turn: BedrockTurn, blobs: bool) -> dict[str, Any]:
    texts = _Texts(result)
    calls = CallsById(result)
    content = []
    for index in sorted(turn.blocks):
        content.extend(_entries(turn.blocks[index], texts, calls, blobs))
    role = turn.role if type(turn.role) is str else "assistant"
    return {"role": role, "content": content}


def _entries(block: Block, texts: _Texts, calls: CallsById, blobs: bool) -> list[dict]:
    """Return the content blocks one streamed block makes (one, unless a mangled stream mixed kinds)."""
    out: list[dict[str, Any]] = []
    merged = set()  # the members of block.other merged into the start's (the record is read, never changed)
    for kind, value in (block.start or {}).items():
        if kind == "toolUse" and type(value) is dict:
            out.append({"toolUse": {**value, "input": _tool_input(block, value, calls)}})
        elif kind == "toolResult" and type(value) is dict:
            out.append({"toolResult": {**value, "content": list(block.results or ())}})
        elif type(value) is dict and block.other and type(block.other.get(kind)) is dict:
            out.append({kind: {**value, **block.other[kind]}})
            merged.add(kind)
        else:
            out.append({kind: value})
    text = texts.of(block, TEXT)
    if text is not None and block.citations:
        out.append({"citationsContent": {"content": [{"text": text}], "citations": block.citations}})
    elif text is not None:
        out.append({"text": text})
    elif block.citations:
        out.append({"citationsContent": {"citations": block.citations}})
    reasoning = texts.of(block, REASONING)
    if reasoning is not None or block.signature is not None:
        reasoning_text = {"text": reasoning or ""}
        if block.signature is not None:
            reasoning_text["signature"] = block.signature
        out.append({"reasoningContent": {"reasoningText": reasoning_text}})
    if block.redacted:
        out.append({"reasoningContent": {"redactedContent": _redacted(block.redacted, blobs)}})
    if block.results and not (block.start and "toolResult" in block.start):
        out.append({"toolResult": {"content": block.results}})
    out.extend({kind: value} for kind, value in (block.other or {}).items() if kind not in merged)
    return out


def _tool_input(block: Block, start: dict, calls: CallsById) -> Any:
    """Return a toolUse block's input: its call's arguments, or its streamed text; the complete part when cut."""
    if not block.client:
        return object_so_far("".join(block.pieces or ()), {})
    call = calls.take(start.get("toolUseId"))
    if call is None:
        return {}  # no call of its own (Limits.calls refused it): nothing of its input was kept
    if call.error is None and type(call.arguments) is dict:
        return call.arguments
    return object_so_far(call.raw_arguments, {})


def _redacted(pieces: list, blobs: bool) -> Any:
    """Return the redacted reasoning: base64 text as sent (blobs: its bytes); several pieces joined as bytes."""
    if len(pieces) == 1 and not blobs:
        return pieces[0]
    try:
        data = b"".join(base64.b64decode(piece, validate=True) for piece in pieces)
    except (binascii.Error, TypeError, ValueError):
        return pieces[0] if len(pieces) == 1 else "".join(str(piece) for piece in pieces)  # not base64: as sent
    return data if blobs else base64.b64encode(data).decode()


class _Texts:
    """The choice's texts as UTF-8, encoded once, to cut the blocks' slices from."""

    def __init__(self, result: Any) -> None:
        first = next((c for c in result.choices if c.index == 0), None)
        self.texts = (first.text, first.reasoning) if first is not None else (None, None)
        self.data: list[bytes | None] = [None, None]

    def of(self, block: Block, which: int) -> str | None:
        """Return the block's text of that kind, None when it has none."""
        spans = [span for span in block.spans if span[0] == which]
        if not spans:
            return None
        text = self.texts[which] or ""
        if len(spans) == 1 and spans[0][1] == 0 and (spans[0][2] < 0 or (spans[0][2] == len(text)
                                                                         and text.isascii())):
            return text  # the whole text is this block's (the common case)
        data = self.data[which]
        if data is None:
            data = self.data[which] = text.encode()
        return b"".join(data[begin:len(data) if end < 0 else end] for _, begin, end in spans).decode("utf-8",
                                                                                                   "replace")
