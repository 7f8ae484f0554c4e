"""Cohere's v2 chat turn: the response of a request without streaming, and the assistant message.

Cohere's stream opens with the message's id (message-start), brackets each content block with
content-start / content-end (its type: text or thinking), sends citations whole (citation-start),
and ends with the finish reason and usage (message-end). The texts are those the accumulator kept:
a content block is a slice of the choice's text or reasoning, noted where it starts and ends; the
tool plan is the reasoning outside the thinking blocks.
"""

from __future__ import annotations

from typing import Any

from .fresh import fresh

# The message-start fields the response rebuilds from the stream itself.
REBUILT = ("role", "content", "tool_plan", "tool_calls", "citations")


class CohereTurn:
    """What a Cohere stream said besides its texts and calls, kept while it is fed.

    id: message-start's id. extra: message-start's message fields besides those rebuilt. blocks:
    per content block, [type, which text (0 content, 1 reasoning), start, end or None while open,
    the block's other fields]; start and end are byte positions in that text. citations: every
    citation-start's citation, in order. end: message-end's delta (finish_reason, usage …), or
    None. logprobs: content-delta's logprobs, in order, or None. open: the blocks still open (at
    most one per text: a block that starts ends the one before it in its text), while it is fed.
    cut: None, or where each text was (content, reasoning) when the turn's budget
    (Limits.stream_bytes) ran out at a block's start: no block is listed from then on, and the
    turn reads its texts as far as that (the tool plan too: reasoning past it may be a thinking block's).
    """

    __slots__ = ("id", "extra", "blocks", "citations", "end", "logprobs", "open", "cut")

    def __init__(self) -> None:
        self.id: Any = None
        self.extra: dict = {}
        self.blocks: list[list] = []
        self.citations: list = []
        self.end: dict | None = None
        self.logprobs: list | None = None
        self.open: list[list] = []
        self.cut: tuple[int, int] | None = None

    def __reduce__(self) -> tuple:
        return (_rebuild, (self.id, self.extra, self.blocks, self.citations, self.end, self.logprobs, self.cut))


def _rebuild(*fields: Any) -> CohereTurn:
    turn = CohereTurn()
    turn.id, turn.extra, turn.blocks, turn.citations, turn.end, turn.logprobs, turn.cut = fields
    return turn


def start(turn: CohereTurn, obj: dict, message: Any) -> None:
    """Note message-start: the id and the message's fields the stream does not rebuild."""
    turn.id = obj.get("id")
    if type(message) is dict:
        turn.extra = {k: v for k, v in message.items() if k not in REBUILT}


def open_block(turn: CohereTurn, acc: Any, content: Any) -> None:
    """Note content-start: a block of its type starts where its text's next piece will, within the turn's budget."""
    if turn.cut is not None:
        return
    if not acc.keep_own(content):
        turn.cut = (acc.text_length(0, 0), acc.text_length(0, 1))
        for block in turn.open:  # the blocks still open end here: what follows is in none
            block[3] = turn.cut[block[1]]
        turn.open = []
        return
    kind = content.get("type") if type(content) is dict else None
    kind = kind if type(kind) is str else "text"
    which = 1 if kind == "thinking" else 0
    extra = {k: v for k, v in content.items() if k not in ("type", "text", "thinking")} if type(content) is dict else {}
    here = acc.text_length(0, which)
    for block in turn.open:
        if block[1] == which:  # a block of its text left open (no content-end came) ends here: the
            block[3] = here   # text goes on in the new one (else n such blocks would each hold it all)
    block = [kind, which, here, None, extra]
    turn.open = [b for b in turn.open if b[3] is None] + [block]
    turn.blocks.append(block)


def close_block(turn: CohereTurn, acc: Any) -> None:
    """Note content-end: the block opened last and still open ends where its text is now."""
    if turn.open:
        block = turn.open.pop()
        block[3] = acc.text_length(0, block[1])


def _content(result: Any, turn: Any) -> tuple[list[dict], str | None]:
    """Return the content blocks and the tool plan (the reasoning outside thinking blocks)."""
    choice = result.choices[0] if result.choices else None
    texts = [(choice.text or "").encode() if choice else b"", (choice.reasoning or "").encode() if choice else b""]
    if turn is not None and turn.cut is not None:  # the texts as far as the turn's budget went
        texts = [texts[0][:turn.cut[0]], texts[1][:turn.cut[1]]]
    blocks: list[dict] = []
    covered: list[list[tuple[int, int]]] = [[], []]  # per text, the spans its blocks took
    for kind, which, begin, end, extra in turn.blocks if turn is not None else ():
        piece = texts[which][begin:len(texts[which]) if end is None else end]
        covered[which].append((begin, begin + len(piece)))
        field = "thinking" if which else "text"
        blocks.append({"type": kind, field: piece.decode("utf-8", "replace"), **extra})
    if not covered[0] and texts[0]:  # text outside any block (no content-start): one block of its own
        blocks.append({"type": "text", "text": texts[0].decode("utf-8", "replace")})
    plan, pos = [], 0
    for begin, end in sorted(covered[1]):
        plan.append(texts[1][pos:begin])
        pos = max(pos, end)
    plan.append(texts[1][pos:])
    tool_plan = b"".join(plan).decode("utf-8", "replace")
    return blocks, tool_plan or None


def _tool_calls(result: Any) -> list[dict]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
            for c in (result.choices[0].tool_calls if result.choices else ())]


def _message(result: Any, turn: Any) -> dict:
    message: dict = {"role": "assistant"}
    calls = _tool_calls(result)
    content, tool_plan = _content(result, turn)
    if calls:
        message["tool_calls"] = calls
    if tool_plan is not None:
        message["tool_plan"] = tool_plan
    if content:
        message["content"] = content
    if turn is not None and turn.citations:
        message["citations"] = list(turn.citations)
    if turn is not None:
        message.update(turn.extra)
    return message


def response(result: Any, turn: Any) -> dict[str, Any]:
    """Return the v2 chat response: id, finish_reason, message, usage, logprobs, message-end's other fields.

    A stream cut before message-end has no finish_reason (None) and no usage: nothing said how it ended.
    """
    end = turn.end if turn is not None and turn.end is not None else {}
    out: dict = {"id": turn.id if turn is not None else None, "finish_reason": end.get("finish_reason"),
                 "message": _message(result, turn)}
    out.update((k, v) for k, v in end.items() if k != "finish_reason")
    if turn is not None and turn.logprobs is not None:
        out["logprobs"] = list(turn.logprobs)
    return fresh(out)


def message(result: Any, turn: Any, choice: int) -> dict[str, Any]:
    """Return the assistant message for the next request: role, tool_calls, tool_plan, content, citations."""
    if choice != 0:
        raise IndexError(f"choice {choice} out of range: a Cohere stream has one choice")
    return fresh(_message(result, turn))
