"""The pure-Python twin of the accumulator: SSE framing, slots, and the append path.

The compiled twin (_accumulator_c.pyx) does exactly what this module does; tests run every
behaviour against both and require identical results. Everything that is not on the hot path
(chunk adapters, finalize, result types) is shared and lives in other modules.
"""

from __future__ import annotations

from typing import Any

import orjson
from orjson import JSONDecodeError as _JSONDecodeError
from orjson import loads as _loads

from . import _dispatch, _framing, _openai_chat
from ._finalize import (Q_CHANGING_ID, Q_EMPTY_NAME, Q_INTEGER_ID, Q_MISSING_INDEX, Q_NAME_CHANGED,
                        Q_NEW_CALL_SAME_INDEX, Q_OBJECT_ARGUMENTS, Q_RESENT_ID, Q_RESENT_NAME, Q_SPLIT_SURROGATE,
                        build_result, make_call, parses, raise_first_error)
from ._results import Result, ToolCall
from ._state import StreamState
from ._text import encode_fragment, escape_surrogate

__all__ = ["Accumulator"]

_BOM = b"\xef\xbb\xbf"


class _Slot:
    """One call being received: id, name and its argument bytes."""

    __slots__ = ("choice", "seq", "position", "id", "name", "buf", "last_start", "nfrags", "cumulative",
                 "pending", "quirks", "call", "call_nfrags")

    def __init__(self, choice: int, seq: int, position: int) -> None:
        self.choice = choice
        self.seq = seq
        self.position = position
        self.id: str | None = None
        self.name: str | None = None
        self.buf = bytearray()
        self.last_start = 0  # where the latest fragment starts in buf
        self.nfrags = 0
        # Lengths of the fragments while each began with the one before (cumulative arguments);
        # while this holds, buf keeps only the latest fragment. None once it stops holding.
        self.cumulative: list[int] | None = None
        self.pending = 0  # a high surrogate waiting for its low half
        self.quirks = 0
        self.call: ToolCall | None = None  # built when the protocol closed the call
        self.call_nfrags = 0


class _ChoiceState:
    """The calls of one choice: by index, and the latest one."""

    __slots__ = ("by_index", "latest", "count")

    def __init__(self) -> None:
        self.by_index: dict[int, _Slot] = {}
        self.latest: _Slot | None = None
        self.count = 0


class Accumulator:
    """Reassemble the tool calls of one streamed response.

    Feed it the raw response bytes as they arrive (``feed``), parsed chunks (``feed_chunk``) or
    fragments (``add``), then call ``finalize`` once for the Result.
    """

    def __init__(self, format: str = "openai-chat") -> None:
        self._state = StreamState(_dispatch.check_format(format))
        self._slots: list[_Slot] = []
        self._choices: dict[int, _ChoiceState] = {}
        self._texts: dict[int, list] = {}
        self._sse = self._state.framing == _framing.SSE
        self._result: Result | None = None
        self._done: list[ToolCall] = []  # calls completed since feed last returned
        # SSE framing state
        self._tail = b""          # an incomplete line carried to the next feed
        self._more: list[bytes] = []  # later reads that continue the tail line, not yet joined
        self._offset = 0          # stream offset of the first byte of _tail
        self._started = False     # the BOM check is done
        self._skip_lf = False     # the last feed ended in CR: a leading LF belongs to it
        self._data: list[bytes] = []
        self._data_offset = 0
        self._event_name: str | None = None

    # ---------------------------------------------------------------- framing

    def feed(self, data: bytes | bytearray | memoryview | str) -> list[ToolCall]:
        """Feed raw response bytes, split anywhere (mid-line, mid-CRLF, mid-character).

        Return the calls this data completed (closed by the protocol), each handed over once.
        """
        self._feed(data)
        return self._handed_over()

    def _handed_over(self) -> list[ToolCall]:
        if not self._done:
            return []
        done, self._done = self._done, []
        return done

    def _feed(self, data: bytes | bytearray | memoryview | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif not isinstance(data, bytes):
            data = bytes(data)
        if not data:
            return
        if not self._sse:
            data = _framing.route(self, self._state, data)
            if data is None:
                return
            self._sse = True
        if not self._started:
            head = self._tail + data
            if len(head) < 3 and _BOM.startswith(head):
                self._tail = head
                return
            self._started = True
            if head.startswith(_BOM):
                self._offset += 3
                head = head[3:]
            self._tail = b""
            data = head
        if self._skip_lf:
            self._skip_lf = False
            if data[:1] == b"\n":
                self._offset += 1
                data = data[1:]
        if self._tail and b"\n" not in data and b"\r" not in data:
            self._more.append(data)  # a long line still growing: join it once, when it ends
            return
        if self._more:
            self._tail = b"".join([self._tail, *self._more])
            self._more = []
        buf = self._tail + data if self._tail else data
        if b"\r" in buf:
            self._feed_lines_cr(buf)
            return
        # Split at blank lines first: most events are one "data:" line, handled inline.
        pieces = buf.split(b"\n\n")
        rest = pieces.pop()
        # When the LFs are exactly the separators (and rest's own), no piece holds a line break:
        # then a piece that starts with "data: " is a whole one-line event.
        single_lines = buf.count(b"\n") == 2 * len(pieces) + rest.count(b"\n")
        pos = self._offset
        state = self._state
        chunk = self._chunk
        # Inline only while no event is half read and the format is chat (auto may learn it on the way).
        inline = state.format == "openai-chat" and not self._data and self._event_name is None
        for piece in pieces:
            if inline and piece[:6] == b"data: " and (single_lines or piece.find(b"\n") < 0):
                chunk(piece[6:], pos)
            else:
                self._lines(piece, pos)
                self._line(b"", pos + len(piece) + 1)
                inline = state.format == "openai-chat" and not self._data and self._event_name is None
            pos += len(piece) + 2
        # Complete lines after the last blank line are taken now, so no line is read twice.
        end = rest.rfind(b"\n")
        if end >= 0:
            self._lines(rest[:end], pos)
            pos += end + 1
            rest = rest[end + 1:]
        self._tail = rest
        self._offset = pos

    def _lines(self, text: bytes, pos: int) -> None:
        for line in text.split(b"\n"):
            self._line(line, pos)
            pos += len(line) + 1

    def _feed_lines_cr(self, buf: bytes) -> None:
        lines = buf.splitlines(True)
        last = lines[-1]
        if last[-1:] not in (b"\n", b"\r"):
            self._tail = lines.pop()
        else:
            self._tail = b""
        if buf.endswith(b"\r"):
            self._skip_lf = True
        pos = self._offset
        for line in lines:
            n = len(line)
            if line.endswith(b"\r\n"):
                self._line(line[:-2], pos)
            else:
                self._line(line[:-1], pos)
            pos += n
        self._offset = pos

    def _chunk(self, payload: bytes, offset: int) -> None:
        """Apply one event's chunk: the commonest shape inline, every other through the general adapter.

        The twin of the compiled fast path. The inline part takes only a chunk that continues one
        known call's arguments with plain text; the general adapter (_openai_chat) would do the
        same with it, and takes everything else.
        """
        try:
            chunk = _loads(payload)
        except _JSONDecodeError:
            _dispatch.handle_event(self, self._state, None, payload, offset)
            return
        try:
            choices = chunk["choices"]
            choice = choices[0]
            delta = choice["delta"]
            calls = delta["tool_calls"]
            call = calls[0]
            function = call["function"]
            arguments = function["arguments"]
            index = call["index"]
            number = choice["index"]
        except (KeyError, IndexError, TypeError):
            pass  # not the commonest shape
        else:
            if (type(arguments) is str and type(index) is int and type(number) is int and type(chunk) is dict
                    and type(choices) is list and len(choices) == 1 and type(delta) is dict and len(delta) == 1
                    and type(calls) is list and len(calls) == 1 and type(call) is dict and type(function) is dict
                    and chunk.get("usage") is None and chunk.get("error") is None and "message" not in choice
                    and choice.get("finish_reason") is None and call.get("id") is None
                    and function.get("name") is None):
                cs = self._choices.get(number)
                slot = cs.by_index.get(index) if cs is not None else None
                if slot is not None and slot.nfrags and not slot.pending and slot.cumulative is None:
                    if not arguments:
                        cs.latest = slot
                        return
                    try:
                        data = arguments.encode("utf-8")
                    except UnicodeEncodeError:
                        pass
                    else:
                        cs.latest = slot
                        buf = slot.buf
                        slot.last_start = len(buf)
                        buf += data
                        slot.nfrags += 1
                        return
        _openai_chat.handle_chunk(self, self._state, chunk, offset)

    def _line(self, line: bytes, pos: int) -> None:
        if not line:
            if self._data:
                self._dispatch_event()
            else:
                self._event_name = None
            return
        if line[:5] == b"data:":
            if not self._data:
                self._data_offset = pos
            self._data.append(line[6:] if line[5:6] == b" " else line[5:])
            return
        if line[:1] == b":":
            return
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":  # "data" with no colon: an empty data line
            if not self._data:
                self._data_offset = pos
            self._data.append(b"")
        elif field == b"event":
            self._event_name = value.decode("utf-8", "replace")
        # id, retry and unknown fields carry nothing callstitch needs

    def _dispatch_event(self) -> None:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data.clear()
        event, self._event_name = self._event_name, None
        _dispatch.handle_event(self, self._state, event, data, self._data_offset)

    def _event(self, event: str | None, data: bytes, offset: int) -> None:
        """Handle one event from a framer other than SSE (NDJSON, AWS event stream)."""
        _dispatch.handle_event(self, self._state, event, data, offset)

    def _end_of_stream(self) -> None:
        """Dispatch what the stream left pending: the last event needs no closing blank line."""
        if not self._sse:
            data = _framing.finish(self, self._state)
            if data is None:
                _dispatch.close(self, self._state)
                return
            self._sse = True
            self._feed(data)
        if self._skip_lf:
            self._skip_lf = False
        if self._more:
            self._tail = b"".join([self._tail, *self._more])
            self._more = []
        if self._tail:
            tail, self._tail = self._tail, b""
            self._line(tail, self._offset)
            self._offset += len(tail)
        if self._data:
            self._dispatch_event()
        _dispatch.close(self, self._state)

    # ---------------------------------------------------------------- chunks and fragments

    def feed_chunk(self, obj: Any) -> list[ToolCall]:
        """Feed one parsed chunk: a dict, JSON text, or an SDK object with model_dump().

        Return the calls this chunk completed, as feed() does.
        """
        _dispatch.handle_object(self, self._state, obj)
        return self._handed_over()

    def add(self, index: int | None, *, id: str | int | None = None, name: str | None = None,
            arguments: Any = None, choice: int = 0) -> None:
        """Add one fragment of a call: the primitive the other ways in are built on."""
        if index is not None and type(index) is not int:
            raise TypeError(f"index must be an int or None, not {type(index).__name__}")
        if type(choice) is not int:
            raise TypeError(f"choice must be an int, not {type(choice).__name__}")
        if id is not None and type(id) is not str and type(id) is not int:
            raise TypeError(f"id must be a str, an int or None, not {type(id).__name__}")
        if name is not None and type(name) is not str:
            raise TypeError(f"name must be a str or None, not {type(name).__name__}")
        self._fragment(choice, index, id, name, arguments)

    def _fragment(self, choice: int, index: int | None, call_id: Any, name: str | None, arguments: Any) -> None:
        """Route one fragment to its slot (the quirk rules live here) and append its arguments."""
        if call_id is None and name is None and index is not None and type(arguments) is str:
            # The common continuation fragment: arguments for a call already known by its index.
            cs = self._choices.get(choice)
            slot = cs.by_index.get(index) if cs is not None else None
            if slot is not None and slot.nfrags and not slot.pending and slot.cumulative is None:
                cs.latest = slot
                if arguments:
                    try:
                        data = arguments.encode("utf-8")
                    except UnicodeEncodeError:
                        pass
                    else:
                        buf = slot.buf
                        slot.last_start = len(buf)
                        buf += data
                        slot.nfrags += 1
                        return
                else:
                    return
        quirks = 0
        if call_id is not None and type(call_id) is not str:
            call_id = str(call_id)
            quirks |= Q_INTEGER_ID
        if call_id == "":
            call_id = None
        if name == "":
            name = None
            quirks |= Q_EMPTY_NAME
        cs = self._choices.get(choice)
        if cs is None:
            cs = self._choices[choice] = _ChoiceState()
        if index is None:
            quirks |= Q_MISSING_INDEX
            slot = cs.latest
            if slot is None or (call_id is not None and slot.id is not None and call_id != slot.id) or (
                    name is not None and slot.name is not None and name != slot.name and slot.nfrags):
                slot = self._new_slot(cs, choice)
        else:
            slot = cs.by_index.get(index)
            if slot is None:
                slot = cs.by_index[index] = self._new_slot(cs, choice)
            elif call_id is not None and slot.id is not None and call_id != slot.id:
                if name is not None or _complete(slot):
                    slot = cs.by_index[index] = self._new_slot(cs, choice)
                    quirks |= Q_NEW_CALL_SAME_INDEX
                else:
                    quirks |= Q_CHANGING_ID
                    call_id = None
            elif name is not None and slot.name is not None and name != slot.name and slot.nfrags:
                slot = cs.by_index[index] = self._new_slot(cs, choice)
                quirks |= Q_NEW_CALL_SAME_INDEX
        cs.latest = slot
        if call_id is not None:
            if slot.id is None:
                slot.id = call_id
            elif slot.id == call_id:
                quirks |= Q_RESENT_ID
        if name is not None:
            if slot.name is None:
                slot.name = name
            elif slot.name == name:
                quirks |= Q_RESENT_NAME
            else:
                quirks |= Q_NAME_CHANGED
        slot.quirks |= quirks
        if arguments is None:
            return
        if type(arguments) is str:
            if not arguments:
                return
            if slot.pending:
                data, slot.pending, joined = encode_fragment(arguments, slot.pending)
                if joined:
                    slot.quirks |= Q_SPLIT_SURROGATE
            else:
                try:
                    data = arguments.encode("utf-8")
                except UnicodeEncodeError:
                    data, slot.pending, joined = encode_fragment(arguments, 0)
            self._append(slot, data)
        elif isinstance(arguments, (bytes, bytearray, memoryview)):
            self._append(slot, bytes(arguments))
        else:
            # Arguments sent as a JSON value instead of a string (Ollama, GLM, llama-server).
            slot.quirks |= Q_OBJECT_ARGUMENTS
            try:
                data = orjson.dumps(arguments)
            except TypeError as exc:
                self._state.error("unexpected shape", f"arguments are not JSON: {exc}", None)
                return
            self._append(slot, data)

    def _new_slot(self, cs: _ChoiceState, choice: int) -> _Slot:
        slot = _Slot(choice, len(self._slots), cs.count)
        cs.count += 1
        self._slots.append(slot)
        return slot

    def _append(self, slot: _Slot, data: bytes) -> None:
        """Append one fragment's bytes, tracking whether the fragments are cumulative."""
        n = len(data)
        if not n:
            return
        buf = slot.buf
        if slot.nfrags == 0:
            slot.cumulative = [n]
            buf += data
        elif slot.cumulative is not None:
            # Once two fragments have grown the text, one that repeats it all still fits cumulative
            # sending (the complete text resent at the end); a second fragment equal to the first does not.
            size = len(buf)
            if (n > size or (n == size and len(slot.cumulative) > 1)) and data.startswith(buf):
                slot.cumulative.append(n)
                buf[:] = data
            else:
                # Not cumulative after all: rebuild the text as sent, then append.
                if len(slot.cumulative) > 1:
                    buf[0:0] = b"".join(buf[:k] for k in slot.cumulative[:-1])
                slot.cumulative = None
                slot.last_start = len(buf)
                buf += data
        else:
            slot.last_start = len(buf)
            buf += data
        slot.nfrags += 1

    def _text(self, choice: int, which: int, text: str) -> None:
        """Append message text (content, reasoning or refusal) of a choice."""
        texts = self._texts.get(choice)
        if texts is None:
            texts = self._texts[choice] = [None, None, None, 0, 0, 0]
        buf = texts[which]
        if buf is None:
            buf = texts[which] = bytearray()
        pending = texts[3 + which]
        if pending:
            data, texts[3 + which], _ = encode_fragment(text, pending)
        else:
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data, texts[3 + which], _ = encode_fragment(text, 0)
        buf += data

    # ---------------------------------------------------------------- the end

    def finalize(self, strict: bool = False) -> Result:
        """Return the Result: every call parsed once; with strict=True raise the first error instead.

        The stream ends here: a second call returns the same Result.
        """
        if self._result is None:
            self._result = self._build()
        if strict:
            raise_first_error(self._result)
        return self._result

    def _build(self) -> Result:
        self._end_of_stream()
        calls = [(s.choice, s.seq, self._settle(s, True)) for s in self._slots]
        texts = {}
        for choice, t in self._texts.items():
            for which in range(3):
                if t[3 + which]:
                    t[which] += escape_surrogate(t[3 + which]).encode()
                    t[3 + which] = 0
            texts[choice] = (t[0], t[1], t[2])
        return build_result(calls, texts, self._state)

    def _settle(self, slot: _Slot, final: bool) -> ToolCall:
        """Return the slot's finished call, built once (again only if fragments came after it was built)."""
        if slot.pending:  # a high surrogate never joined: keep its escape text
            self._append(slot, escape_surrogate(slot.pending).encode())
            slot.pending = 0
        if slot.call is None or slot.call_nfrags != slot.nfrags:
            # At the end the buffer is handed over; before it, it may still grow: copy it.
            data = slot.buf if final else bytes(slot.buf)
            cumulative = slot.cumulative if final or slot.cumulative is None else list(slot.cumulative)
            slot.call = make_call(slot.choice, slot.position, slot.id, slot.name, data, cumulative,
                                  slot.last_start, slot.quirks)
            slot.call_nfrags = slot.nfrags
        return slot.call

    def _complete(self, choice: int | None, index: int | None) -> None:
        """Hand over the calls the protocol just closed: one (choice, index), a whole choice, or all."""
        if choice is None:
            slots = self._slots
        else:
            cs = self._choices.get(choice)
            if cs is None:
                return
            slot = cs.by_index.get(index) if index is not None else None
            slots = [slot] if slot is not None else [] if index is not None else [
                s for s in self._slots if s.choice == choice]
        for slot in slots:
            if slot.call is None:
                self._done.append(self._settle(slot, False))


def _complete(slot: _Slot) -> bool:
    """Tell whether a slot's arguments already form a complete JSON value."""
    return bool(slot.buf) and parses(slot.buf)

