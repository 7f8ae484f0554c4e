"""The Responses API turn: the `response` object, and its output items as the next request's input items.

The server's own response object of `response.completed` (or `.incomplete` / `.failed`) is the
turn when it came. Otherwise it is rebuilt the way openai-python's ResponseStreamState does: the
last lifecycle response (`response.created` / `.queued` / `.in_progress`) with the output items as
far as they came: an item's `output_item.done` as sent, else its `output_item.added` with the
arguments, input and texts streamed since. Nothing is invented: a cut stream keeps the status the
stream last said ("in_progress"), and an item keeps the status its added event gave it.
"""

from __future__ import annotations

from typing import Any

from .._exactjson import loads_exact as loads
from .fresh import fresh

# Text of a content part, by part type: which of the choice's texts its deltas went to (sink.TEXT_*).
_PART_TEXT = {"output_text": 0, "refusal": 2, "reasoning_text": 1, "summary_text": 1}
_PART_FIELD = {"output_text": "text", "refusal": "refusal", "reasoning_text": "text", "summary_text": "text"}


class ResponsesTurn:
    """What a Responses stream says of its turn besides the calls and texts the accumulator keeps.

    Events are kept as they came and read only when the turn is asked for: a dict from the general
    path, or the event's JSON text (bytes) where the compiled twin read it in place; both are read
    the same way. No delta is kept: texts, arguments and inputs are the accumulator's.

    lifecycle: the last response.created / .queued / .in_progress event, or None.
    final: the response.completed / .incomplete / .failed event, or None.
    added: [output_item.added event, slot index of the call it registered or None], in order.
    parts: [content_part / reasoning_summary_part .added or .done event, the lengths of the choice's
           content, reasoning and refusal texts when it came], in order: a part's text is the slice of
           the choice's text between its added and done events. Past Limits.stream_bytes the last
           entry has None for its event: every part still open ends there, and none is listed after.
    done: the output_item.done events, in order.
    pieces: [output_index, the item field, text] of each delta of an item that is no call (an MCP
            call's arguments, a code interpreter's code), for an item not done when the stream ends.
    """

    __slots__ = ("lifecycle", "final", "added", "parts", "done", "pieces", "bare")

    def __init__(self) -> None:
        self.lifecycle: dict | bytes | None = None
        self.final: dict | bytes | None = None
        self.added: list[list] = []
        self.parts: list[list] = []
        self.done: list[dict | bytes] = []
        self.pieces: list[list] = []
        self.bare: set[int] = set()  # the calls (slots) an added item is kept of, past the budget too

    def __getstate__(self) -> tuple:
        return (self.lifecycle, self.final, self.added, self.parts, self.done, self.pieces)

    def __setstate__(self, state: tuple) -> None:
        self.lifecycle, self.final, self.added, self.parts, self.done, self.pieces = state
        self.bare = set()  # (the stream is over: no item comes to ask it)

    def end(self, event: dict | bytes, has_output: bool) -> None:
        """Keep the end event; when its response carries the output, it is the turn: nothing else is kept."""
        self.final = event
        if has_output:  # what the other events said is all in it (response() reads only it then)
            self.lifecycle = None
            self.added, self.parts, self.done, self.pieces = [], [], [], []

    def part(self, acc: Any, event: dict | bytes) -> None:
        """Keep a part's added or done event with the lengths of the texts, where its text starts or ends.

        Past Limits.stream_bytes, the parts still open end where the texts are now (one entry, its
        event None): without it, a part whose done event the budget refused ran on to the end of
        its text, over the parts after it (a limit must cut, never join).
        """
        parts = self.parts
        if parts and parts[-1][0] is None:
            return  # past the budget: no part is listed from then on
        kept = event if acc.keep_own(event) else None
        parts.append([kept, acc.text_length(0, 0), acc.text_length(0, 1), acc.text_length(0, 2)])

    def piece(self, acc: Any, event: dict, field: str) -> None:
        """Keep a delta of an item's field (not a call's: an MCP call's arguments, code), within Limits.stream_bytes."""
        position, text = event.get("output_index"), event.get("delta")
        if type(position) is int and type(text) is str and text and acc.keep_own(event):
            self.pieces.append([position, field, text])

    def item_added(self, acc: Any, event: dict | bytes, slot: int | None) -> None:
        """Keep an output item's added event; slot: its call's, or None for an item that is no call.

        Within Limits.stream_bytes it is kept whole. Past it, a call's item is kept bare (_bare: the
        call is in the result, cut or whole, and the output lists it); another item is not listed.
        """
        if acc.keep_own(event):
            self.added.append([event, slot])
        elif slot is not None and slot not in self.bare:
            self.added.append([_bare(event), slot])
        if slot is not None:
            self.bare.add(slot)  # (once per call: an item added again past the budget is not kept)

    def item_done(self, acc: Any, event: dict | bytes) -> None:
        """Keep an output item's done event, within Limits.stream_bytes (past it, the item reads as streamed)."""
        if acc.keep_own(event):
            self.done.append(event)


_CALL_KEYS = ("type", "id", "call_id", "name", "status")  # what a call's item keeps past the turn's budget


def _bare(event: dict | bytes) -> dict:
    """Return a call item's added event with what lists the call: output_index and the item's _CALL_KEYS."""
    read = _read(event)
    item = read.get("item")  # (a dict: the adapter gives a call's event only)
    return {"output_index": read.get("output_index"), "item": {k: item[k] for k in _CALL_KEYS if k in item}}


def _read(kept: dict | bytes) -> Any:
    """Return a kept event as a dict of its own: the general path's is shared with nothing, but copied all the same."""
    return loads(kept) if type(kept) is bytes else fresh(kept)


def response(result: Any, turn: ResponsesTurn | None) -> dict[str, Any]:
    """Return the Responses `response` object of the turn: the server's own, else rebuilt from the stream."""
    if turn is None:
        return {"object": "response", "output": []}
    final = _response_of(turn.final)
    if final is not None:
        if final.get("output") is None:  # a server that leaves the output to the items streamed (as the SDK reads it)
            final["output"] = _output(result, turn)
        return final
    rebuilt = _response_of(turn.lifecycle) or {"object": "response"}
    rebuilt["output"] = _output(result, turn)
    return rebuilt


def _response_of(kept: dict | bytes | None) -> dict | None:
    """Return a new copy of the response object a kept lifecycle or end event carries, or None."""
    event = _read(kept) if kept is not None else None
    if type(event) is not dict or type(event.get("response")) is not dict:
        return None
    return event["response"]


def _output(result: Any, turn: ResponsesTurn) -> list:
    """Return the output items as far as the stream brought them, in output order."""
    added: dict[int, tuple[dict, int | None, list[_Part]]] = {}
    for kept, slot in turn.added:
        event = _read(kept)
        item, position = event.get("item"), event.get("output_index")
        if type(item) is dict and type(position) is int:
            added[position] = (item, slot, [])
    still_open: dict[int | None, list[_Part]] = {}  # per text, the parts whose end is not yet known
    for kept, *lengths in turn.parts:
        if kept is None:  # the budget's end: every part still open ends here
            for which, parts in still_open.items():
                for part in parts:
                    if part.end is None:
                        part.end = lengths[which] if which is not None else 0
            break
        _apply_part(added, _read(kept), lengths, still_open)
    texts = _texts(result) if turn.parts else (b"", b"", b"")
    items = {position: _streamed_item(result, item, slot, parts, texts)
             for position, (item, slot, parts) in added.items()}
    _join_pieces(items, turn.pieces)
    for kept in turn.done:
        event = _read(kept)
        item, position = event.get("item"), event.get("output_index")
        if type(item) is dict and type(position) is int:
            items[position] = item
    return [items[position] for position in sorted(items)]


def _join_pieces(items: dict, pieces: list) -> None:
    """Give each item not done its field's text as streamed (as added, an MCP call's arguments are "")."""
    joined: dict[tuple[int, str], list[str]] = {}
    for position, field, text in pieces:
        joined.setdefault((position, field), []).append(text)
    for (position, field), texts in joined.items():
        item = items.get(position)
        if item is not None:
            item[field] = (item.get(field) if type(item.get(field)) is str else "") + "".join(texts)


class _Part:
    """A content or summary part while the output is rebuilt: as added, its text's slice, or as done."""

    __slots__ = ("field", "index", "which", "part", "start", "end", "done")

    def __init__(self, field: str, index: int, which: int | None, part: dict, start: int) -> None:
        self.field, self.index, self.which, self.part, self.start = field, index, which, part, start
        self.end: int | None = None  # None: still open, its text runs to the end of what came
        self.done = False


def _apply_part(added: dict, event: Any, lengths: list[int], still_open: dict) -> None:
    """Apply a part's added or done event to its item (lengths: the choice's texts when it came).

    still_open: per text, the parts added whose end is not known yet: a new part of that text ends
    them (a look at those, not at every part of every item: n parts, not n squared).
    """
    kind = event.get("type")
    field = "summary" if type(kind) is str and kind.startswith("response.reasoning_summary_part") else "content"
    position, index = event.get("output_index"), event.get("summary_index" if field == "summary" else "content_index")
    part = event.get("part")
    if type(kind) is not str or type(position) is not int or type(index) is not int or type(part) is not dict \
            or position not in added:
        return
    which = _PART_TEXT.get(part.get("type"))  # type: ignore[arg-type]
    here = lengths[which] if which is not None else 0
    parts = added[position][2]
    if kind.endswith(".added"):
        for other in still_open.pop(which, ()):  # a new part of the same text ends the ones still open
            if other.end is None:
                other.end = here
        new = _Part(field, index, which, part, here)
        parts.append(new)
        still_open[which] = [new]
        return
    for noted in reversed(parts):
        if noted.field == field and noted.index == index:
            noted.part, noted.done = part, True  # the part as sent, its text included
            if noted.end is None:
                noted.end = here
            return


def _streamed_item(result: Any, item: dict, slot: int | None, parts: list[_Part], texts: tuple) -> dict:
    """Return an item not done yet: as added, with the arguments, input or texts streamed into it since."""
    kind = item.get("type")
    if slot is not None and kind in ("function_call", "custom_tool_call"):
        for call in result.tool_calls:
            if call.index == slot and call.choice == 0:
                item["input" if kind == "custom_tool_call" else "arguments"] = call.raw_arguments
                break
        return item
    # The parts by their index (content_index, summary_index): placed in order, not padded up to
    # it (a hostile index of 10**9 would make a list of that many nulls).
    placed: dict[str, dict[int, Any]] = {}
    for noted in parts:
        part = noted.part
        field = _PART_FIELD.get(part.get("type"))  # type: ignore[arg-type]
        if not noted.done and noted.which is not None and field is not None:
            part = dict(part)
            part[field] = texts[noted.which][noted.start:noted.end].decode("utf-8", "replace")
        placed.setdefault(noted.field, {})[noted.index] = part
    for field in ("content", "summary"):
        listed = item.get(field)
        if field in placed:
            by_index = dict(enumerate(listed)) if type(listed) is list else {}
            by_index.update(placed[field])
            listed = item[field] = [by_index[index] for index in sorted(by_index)]
        if parts and type(listed) is list:
            item[field] = [part for part in listed if part is not None]
    return item


def _texts(result: Any) -> tuple[bytes, bytes, bytes]:
    """Return the first choice's content, reasoning and refusal as UTF-8 bytes (parts are byte slices)."""
    choice = result.choices[0] if result.choices and result.choices[0].index == 0 else None
    if choice is None:
        return b"", b"", b""
    return tuple((text or "").encode("utf-8", "surrogatepass") for text in  # type: ignore[return-value]
                 (choice.text, choice.reasoning, choice.refusal))


def message(result: Any, turn: ResponsesTurn | None, choice: int) -> list[dict[str, Any]]:
    """Return the turn's output items as input items of the next request, ready to extend its `input` with."""
    if choice != 0:
        raise IndexError(f"a Responses stream has one choice, 0; there is no choice {choice}")
    output = response(result, turn).get("output")
    return [item for item in output if type(item) is dict] if type(output) is list else []
