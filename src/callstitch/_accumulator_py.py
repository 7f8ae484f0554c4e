"""The pure-Python twin of the accumulator: SSE framing, slots, and the append path.

The compiled twin (_accumulator_c.pyx) does exactly what this module does; tests run every
behaviour against both and require identical results. Everything that is not on the hot path
(chunk adapters, finalize, result types) is shared and lives in other modules.
"""

from __future__ import annotations

from typing import Any

from orjson import JSONDecodeError as _JSONDecodeError

from ._formats import dispatch as _dispatch
from ._wire import framing as _framing
from ._formats import openai_chat as _openai_chat
from ._formats import gemini as _gemini
from ._finalize import (Q_CHANGING_ID, Q_EMPTY_NAME, Q_INTEGER_ID, Q_MISSING_INDEX, Q_NAME_CHANGED,
                        Q_NEW_CALL_SAME_INDEX, Q_RESENT_ID, Q_RESENT_NAME, build_result, make_call, parses,
                        raise_first_error)
from ._limits import (CUT_CALL_BYTES, CUT_EVENT_BYTES, CUT_STREAM_BYTES, Limits, as_numbers, call_cut, event_dropped, line_dropped,
                      stream_full, too_many)
from ._formats.recognition import unrecognised
from ._results import Result, ToolCall
from ._state import StreamState, finalized
from ._exactjson import loads_exact, long_digit_run
from ._text import argument_bytes, compact_json, encode_fragment, escape_surrogate

__all__ = ["Accumulator"]

_BOM = b"\xef\xbb\xbf"
_WINDOW = 65536  # the most bytes of one read framed at once


class _Slot:
    """One call being received: id, name and its argument bytes."""

    __slots__ = ("choice", "seq", "position", "id", "name", "buf", "last_start", "nfrags", "cumulative",
                 "pending", "quirks", "call", "call_nfrags", "over", "shared", "parsed", "custom", "late")

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
        self.over = 0  # the limit (a CUT_* code) its arguments reached: the rest is dropped
        self.shared = False  # a call handed over holds buf: copy it before it changes (_unshare)
        self.parsed: Any = None  # the arguments as a value, when the call arrived whole with them parsed
        self.custom = False  # an OpenAI custom tool call: its input text is the arguments, never parsed
        self.late = False  # first seen after a dropped event (Limits.event_bytes), which may have held its start


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

    def __init__(self, format: str = "auto", limits: Limits | None = None) -> None:
        self._state = StreamState(_dispatch.check_format(format))
        (self._max_call, self._max_stream, self._max_calls, self._max_choices,
         self._max_event, self._state.error_limit) = as_numbers(limits)
        self._state.event_limit = self._max_event
        self._kept = 0            # argument and text bytes held, against Limits.stream_bytes
        self._full = False        # Limits.stream_bytes was reached
        # An event was dropped (Limits.event_bytes): no text is kept after it, nor a call that starts without its name.
        self._dropped = False
        self._capped: set[str] = set()  # the limits on calls and choices already reported
        self._nchoices = 0        # choices met, by their calls or their texts, against Limits.choices
        self._slots: list[_Slot] = []
        self._choices: dict[int, _ChoiceState] = {}
        self._texts: dict[int, list] = {}
        self._sse = self._state.framing == _framing.SSE
        self._result: Result | None = None
        self._done: list[ToolCall] = []  # calls completed since feed last returned
        self._wholes = 0          # calls that arrived whole: each is keyed -1, -2, … (no protocol index is)
        # SSE framing state
        self._tail = b""          # an incomplete line carried to the next feed
        self._more: list[bytes] = []  # later reads that continue the tail line, not yet joined
        self._offset = 0          # stream offset of the first byte of _tail
        self._started = False     # the BOM check is done
        self._skip_lf = False     # the last feed ended in CR: a leading LF belongs to it
        self._data: list[bytes] = []
        self._data_size = 0       # the event's data so far, lines joined, against Limits.event_bytes
        self._data_offset = 0
        self._more_size = 0
        self._skipping = False    # dropping the rest of an over-long line
        self._dropping = False    # dropping the rest of an event that went over the limit
        self._event_name: str | None = None
        self._halting = False     # stop right after the stream's terminator (batch reprocessing)
        self._halted_at = -1      # where in the last fed data that happened
        self._fed_len = 0         # the length of the data fed last
        self._fed_from = 0        # the stream offset the data fed last starts at

    # ---------------------------------------------------------------- framing

    def feed(self, data: bytes | bytearray | memoryview | str) -> list[ToolCall]:
        """Feed raw response bytes, split anywhere (mid-line, mid-CRLF, mid-character).

        Return the calls this data completed (closed by the protocol), each handed over once.
        """
        if self._result is not None:
            raise finalized("feed")
        self._feed(data)
        return self._handed_over()

    def halt_at_end(self) -> None:
        """Stop consuming right after the stream's terminator; halted() then says where it was."""
        self._halting = True

    def halted(self) -> int:
        """Return how many bytes of the last fed data belonged to this stream, once it ended; else -1."""
        return self._halted_at

    def _handed_over(self) -> list[ToolCall]:
        if not self._done:
            return []
        done, self._done = self._done, []
        return done

    def _feed(self, data: bytes | bytearray | memoryview | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif not isinstance(data, bytes):
            data = bytes(_framing.fed_view(data))
        if not data or self._halted_at >= 0:
            return
        self._fed_len = len(data)
        if not self._sse:
            data = _framing.route(self, self._state, data)
            if data is None:
                return
            self._sse = True
        # Where the fed data begins, as a stream offset (for a halt at the terminator); data may
        # start with bytes held from before it (route's head), so count back from its end.
        self._fed_from = self._offset + len(self._tail) + self._more_size - (self._fed_len - len(data))
        if len(data) <= _WINDOW:
            self._feed_sse(data)
            return
        # A huge read is framed a window at a time: one split of it all would make a list of every
        # event in it at once, which runs slower per byte as the read grows (out of the CPU caches).
        for start in range(0, len(data), _WINDOW):
            self._feed_sse(data[start:start + _WINDOW])
            if self._halted_at >= 0:
                return

    def _feed_sse(self, data: bytes) -> None:
        """Frame SSE bytes that continue the stream: whole events are handled, the rest is kept."""
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
        if self._skipping:
            data = self._skip_dropped_line(data)
            if not data:
                return
        if self._tail and b"\n" not in data and b"\r" not in data:
            self._more.append(data)  # a long line still growing: join it once, when it ends
            self._more_size += len(data)
            if len(self._tail) + self._more_size > self._max_event:
                self._drop_tail()
            return
        if self._more:
            self._tail = b"".join([self._tail, *self._more])
            self._more = []
            self._more_size = 0
        buf = self._tail + data if self._tail else data
        if b"\r" in buf or len(buf) > self._max_event:
            self._feed_lines(buf)
            return
        # Split where a blank line is followed by a data line: most events are one "data:" line, so
        # most pieces are an event's payload itself (the split took its "data: "), handled inline.
        pieces = buf.split(b"\n\ndata: ")
        last = pieces.pop()
        rest = b"data: " + last if pieces else last
        # When the LFs are exactly the separators (and rest's own), no piece holds a line break:
        # then every piece is a whole one-line event.
        single_lines = buf.count(b"\n") == 2 * len(pieces) + rest.count(b"\n")
        pos = self._offset
        state = self._state
        chunk = self._chunk
        # Inline only while no event is half read and the format is chat (auto may learn it on the way).
        inline = (state.format == "openai-chat" and not self._data and self._event_name is None
                  and not self._dropping)
        # A chat read is looked at once for a long digit run, not chunk by chunk: without one in buf,
        # no chunk of it has one (None: each chunk inlined is looked at).
        runs = False if state.format == "openai-chat" and not long_digit_run(buf) else None
        if pieces:
            first = pieces[0]  # text as it stands: no "data: " was split off it
            if inline and first[:6] == b"data: " and (single_lines or first.find(b"\n") < 0):
                chunk(first[6:], pos, runs)
            else:
                self._lines(first, pos)
                self._line(b"", pos + len(first) + 1)
                inline = (state.format == "openai-chat" and not self._data and self._event_name is None
                          and not self._dropping)
            pos += len(first) + 2
            if self._halting and state.ended:
                return self._halt(pos)
            for piece in pieces[1:]:
                if inline and (single_lines or piece.find(b"\n") < 0):
                    chunk(piece, pos, runs)
                else:
                    self._lines(b"data: " + piece, pos)
                    self._line(b"", pos + len(piece) + 7)
                    inline = (state.format == "openai-chat" and not self._data and self._event_name is None
                              and not self._dropping)
                pos += len(piece) + 8
                if self._halting and state.ended:
                    return self._halt(pos)
        # Complete lines after the last blank line are taken now, so no line is read twice.
        end = rest.rfind(b"\n")
        if end >= 0:
            self._lines(rest[:end], pos)
            pos += end + 1
            rest = rest[end + 1:]
            if self._halting and state.ended:
                return self._halt(pos)
        self._tail = rest
        self._offset = pos

    def _halt(self, pos: int) -> None:
        """Stop at stream offset pos, just past the terminator: the rest of the read is not this stream's."""
        self._halted_at = pos - self._fed_from
        self._tail = b""
        self._offset = pos

    def _lines(self, text: bytes, pos: int) -> None:
        for line in text.split(b"\n"):
            self._line(line, pos)
            pos += len(line) + 1

    def _feed_lines(self, buf: bytes) -> None:
        """Frame line by line: any line end (CR, LF, CRLF), each line's length checked."""
        lines = buf.splitlines(True)
        tail = lines.pop() if lines[-1][-1:] not in (b"\n", b"\r") else b""
        if buf.endswith(b"\r"):
            self._skip_lf = True
        pos = self._offset
        limit = self._max_event
        state = self._state
        for line in lines:
            n = len(line)
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
            if len(line) > limit:
                line_dropped(state, limit, pos)
                self._drop_event()
            else:
                self._line(line, pos)
            pos += n
            if self._halting and state.ended:
                return self._halt(pos)
        self._offset = pos
        self._tail = tail
        if len(tail) > limit:
            self._drop_tail()

    def _drop_tail(self) -> None:
        """Drop the line being received: it is over Limits.event_bytes; skip to its end."""
        line_dropped(self._state, self._max_event, self._offset)
        self._offset += len(self._tail) + self._more_size
        self._tail = b""
        self._more = []
        self._more_size = 0
        self._skipping = True
        self._drop_event()

    def _drop_event(self) -> None:
        """Forget the event being received; ignore its lines up to the blank line that ends it."""
        self._data.clear()
        self._data_size = 0
        self._dropping = True
        self.cut_open()

    def cut_open(self) -> None:
        """Cut every call still open and every text: the event just dropped may have held a piece of them."""
        for slot in self._slots:
            if not slot.over:
                # A call built whole already stays whole, unless a piece of it comes after all
                # (_append); one built broken (at [DONE], say) may have had its rest in the event.
                slot.over = CUT_EVENT_BYTES
                if slot.call is not None and slot.call.error is not None:
                    slot.call_nfrags = -1
                slot.pending = 0  # a surrogate pending at the cut is cut with it
        for choice, call_id, name in _gemini.take_open(self._state):  # Vertex AI calls built from partialArgs
            self._wholes -= 1
            slot = self._route(choice, self._wholes, call_id, name)
            if slot is not None:
                slot.over = CUT_EVENT_BYTES
        self._dropped = True
        for texts in self._texts.values():
            texts[3:] = [0, 0, 0, True, True, True]

    def _skip_dropped_line(self, data: bytes) -> bytes:
        """Return what follows the end of the line being skipped (nothing while it goes on)."""
        ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
        if not ends:
            self._offset += len(data)
            return b""
        end = min(ends) + 1
        if data[end - 1:end] == b"\r":
            if end == len(data):
                self._skip_lf = True
            elif data[end:end + 1] == b"\n":
                end += 1
        self._skipping = False
        self._offset += end
        return data[end:]

    def _chunk(self, payload: bytes, offset: int, long_run: bool | None) -> None:
        """Apply one event's chunk: the commonest shape inline, every other through the general adapter.

        The twin of the compiled fast path. The inline part takes only a chunk that continues one
        known call's arguments with plain text; the general adapter (_openai_chat) would do the
        same with it, and takes everything else.
        """
        if not self._state.recognised:  # until an event of the format has come, every event goes the general way
            _dispatch.handle_event(self, self._state, None, payload, offset)
            return
        try:
            chunk = loads_exact(payload, long_run)
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
            # The subscripts above succeed only on dicts (chunk, choice, delta, call, function) and on
            # lists (choices, calls: a string there would have failed one step later), so those
            # types need no check of their own.
            if (type(arguments) is str and type(index) is int and type(number) is int and len(choices) == 1
                    and len(delta) == 1 and len(calls) == 1 and chunk.get("usage") is None
                    and chunk.get("error") is None and "message" not in choice
                    and choice.get("finish_reason") is None and call.get("id") is None
                    and function.get("name") is None
                    and _openai_chat.nothing_for_the_turn(self._state.turn, chunk, choice, call, function)):
                cs = self._choices.get(number)
                slot = cs.by_index.get(index) if cs is not None else None
                if (slot is not None and slot.nfrags and not slot.pending and slot.cumulative is None
                        and not slot.over and not slot.shared):
                    if not arguments:
                        cs.latest = slot
                        return
                    try:
                        data = arguments.encode("utf-8")
                    except UnicodeEncodeError:
                        pass
                    else:
                        buf = slot.buf
                        n = len(data)
                        size = len(buf)
                        kept = self._kept + n
                        if size + n <= self._max_call and kept <= self._max_stream:
                            cs.latest = slot
                            self._kept = kept
                            slot.last_start = size
                            buf += data
                            slot.nfrags += 1
                            return
        _openai_chat.handle_chunk(self, self._state, chunk, offset)

    def _line(self, line: bytes, pos: int) -> None:
        if not line:
            if self._dropping:
                self._dropping = False
                self._event_name = None
            elif self._data:
                self._dispatch_event()
            else:
                self._event_name = None
            return
        if self._dropping:
            return
        if line[:5] == b"data:":
            self._data_line(line[6:] if line[5:6] == b" " else line[5:], pos)
            return
        if line[:1] == b":":
            return
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":  # "data" with no colon: an empty data line
            self._data_line(b"", pos)
        elif field == b"event":
            self._event_name = value.decode("utf-8", "replace")
        elif field != b"id" and field != b"retry":
            self._state.note_stray(line, pos)  # no SSE field: noted, for the error if no event comes
        # id, retry and unknown fields carry nothing callstitch needs

    def _data_line(self, value: bytes, pos: int) -> None:
        """Add one data line to the event being received, within Limits.event_bytes."""
        size = self._data_size + len(value) + (1 if self._data else 0)
        if size > self._max_event:
            event_dropped(self._state, self._max_event, self._data_offset if self._data else pos)
            self._drop_event()
            return
        if not self._data:
            self._data_offset = pos
        self._data.append(value)
        self._data_size = size

    def _dispatch_event(self) -> None:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        self._data.clear()
        self._data_size = 0
        event, self._event_name = self._event_name, None
        _dispatch.handle_event(self, self._state, event, data, self._data_offset)

    def event(self, event: str | None, data: bytes, offset: int) -> None:
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
        if self._result is not None:
            raise finalized("feed_chunk")
        _dispatch.handle_object(self, self._state, obj)
        return self._handed_over()

    def add(self, index: int | None, *, id: str | int | None = None, name: str | None = None,
            arguments: Any = None, choice: int = 0) -> None:
        """Add one fragment of a call: the primitive the other ways in are built on."""
        if self._result is not None:
            raise finalized("add")
        if index is not None and type(index) is not int:
            raise TypeError(f"index must be an int or None, not {type(index).__name__}")
        if type(choice) is not int:
            raise TypeError(f"choice must be an int, not {type(choice).__name__}")
        if id is not None and type(id) is not str and type(id) is not int:
            raise TypeError(f"id must be a str, an int or None, not {type(id).__name__}")
        if name is not None and type(name) is not str:
            raise TypeError(f"name must be a str or None, not {type(name).__name__}")
        self.fragment(choice, index, id, name, arguments)

    def fragment(self, choice: int, index: int | None, call_id: Any, name: str | None, arguments: Any) -> None:
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
                        self._append(slot, data)
                        return
                else:
                    return
        slot = self._route(choice, index, call_id, name)
        if slot is None:
            return  # over a limit: recorded, and the fragment dropped
        if arguments is None or (type(arguments) is str and not arguments):
            return
        data, slot.pending, bits, problem = argument_bytes(arguments, slot.pending)
        slot.quirks |= bits
        if problem is not None:
            self._state.error("unexpected shape", problem, None)
            return
        self._append(slot, data)

    def custom_fragment(self, choice: int, index: int | None, call_id: Any, name: str | None, text: Any) -> None:
        """Route one fragment of a custom (free-form) tool call; its input text is appended as sent."""
        slot = self._route(choice, index, call_id, name)
        if slot is None:
            return  # over a limit: recorded, and the fragment dropped
        slot.custom = True
        if text:
            data, slot.pending, bits, _ = argument_bytes(text, slot.pending)  # text: always a str
            slot.quirks |= bits
            self._append(slot, data)

    def whole(self, choice: int, call_id: Any, name: str | None, arguments: Any) -> None:
        """Take a call that arrived whole (Ollama, Gemini), a call of its own, and hand it over.

        arguments: text, or a JSON value already parsed, which the call keeps instead of parsing
        its compact JSON again.
        """
        self._wholes -= 1
        key = self._wholes
        if arguments is None or isinstance(arguments, (str, bytes, bytearray, memoryview)):
            self.fragment(choice, key, call_id, name, arguments)
        else:
            slot = self._route(choice, key, call_id, name)
            if slot is None:
                return  # over a limit: recorded, and the call dropped
            try:
                data = compact_json(arguments)
            except TypeError as exc:
                self._state.error("unexpected shape", f"arguments are not JSON: {exc}", None)
            else:
                self._append(slot, data)
                if slot.nfrags == 1:
                    slot.parsed = arguments
        self.complete(choice, key)

    def _route(self, choice: int, index: int | None, call_id: Any, name: str | None) -> _Slot | None:
        """Find or start the slot a fragment belongs to, and take its id and name (the quirk rules).

        None when a limit on calls or choices keeps a new one from starting.
        """
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
            if not self._choice_fits(choice):
                return None
            cs = self._choices[choice] = _ChoiceState()
        if index is None:
            quirks |= Q_MISSING_INDEX
            slot = cs.latest
            if slot is None or (call_id is not None and slot.id is not None and call_id != slot.id) or (
                    name is not None and slot.name is not None and name != slot.name and slot.nfrags):
                slot = self._new_slot(cs, choice, name)
                if slot is None:
                    return _refused(cs, None)
        else:
            slot = cs.by_index.get(index)
            if slot is None:
                slot = self._new_slot(cs, choice, name)
                if slot is None:
                    return _refused(cs, None)
                cs.by_index[index] = slot
            elif call_id is not None and slot.id is not None and call_id != slot.id:
                if name is not None or _complete(slot):
                    slot = self._new_slot(cs, choice, name)
                    if slot is None:
                        return _refused(cs, index)
                    cs.by_index[index] = slot
                    quirks |= Q_NEW_CALL_SAME_INDEX
                else:
                    quirks |= Q_CHANGING_ID
                    call_id = None
            elif name is not None and slot.name is not None and name != slot.name and slot.nfrags:
                slot = self._new_slot(cs, choice, name)
                if slot is None:
                    return _refused(cs, index)
                cs.by_index[index] = slot
                quirks |= Q_NEW_CALL_SAME_INDEX
        cs.latest = slot
        if call_id is not None:
            if slot.id is None:
                slot.id = call_id
                slot.call_nfrags = -1  # a call built already is built again, with it
            elif slot.id == call_id:
                quirks |= Q_RESENT_ID
        if name is not None:
            if slot.name is None:
                slot.name = name
                slot.call_nfrags = -1  # a call built already is built again, with it
            elif slot.name == name:
                quirks |= Q_RESENT_NAME
            else:
                quirks |= Q_NAME_CHANGED
        slot.quirks |= quirks
        return slot

    def _new_slot(self, cs: _ChoiceState, choice: int, name: str | None) -> _Slot | None:
        if len(self._slots) >= self._max_calls:
            self._cap("calls")
            return None
        slot = _Slot(choice, len(self._slots), cs.count)
        if self._dropped:
            if name is None:
                # A call starting without its name after a dropped event: its start was in it. Keep none of it.
                slot.over = CUT_EVENT_BYTES
            else:
                slot.late = True
        cs.count += 1
        self._slots.append(slot)
        return slot

    def _append(self, slot: _Slot, data: bytes) -> None:
        """Append one fragment's bytes, tracking whether the fragments are cumulative, within the limits."""
        n = len(data)
        if not n:
            return
        if slot.over:
            slot.call_nfrags = -1  # a piece past the cut: a call built before it is built again, as cut
            return
        if slot.shared:
            _unshare(slot)
        buf = slot.buf
        size = len(buf)
        cumulative = slot.cumulative
        # Once two fragments have grown the text, one that repeats it all still fits cumulative
        # sending (the complete text resent at the end); a second fragment equal to the first does not.
        continues = slot.nfrags == 0 or (cumulative is not None and (
            n > size or (n == size and len(cumulative) > 1)) and data.startswith(buf))
        if continues:
            grow = n - size
        elif cumulative is not None and len(cumulative) > 1:
            prefix = b"".join(buf[:k] for k in cumulative[:-1])  # the text as sent, rebuilt
            grow = len(prefix) + n
        else:
            prefix = b""
            grow = n
        if size + grow > self._max_call:
            self._cut(slot, CUT_CALL_BYTES)
            return
        if self._kept + grow > self._max_stream:
            self._cut(slot, CUT_STREAM_BYTES)
            return
        self._kept += grow
        if continues:
            if slot.nfrags == 0:
                slot.cumulative = [n]
                buf += data
            else:
                cumulative.append(n)
                buf[:] = data
        else:
            if prefix:
                buf[0:0] = prefix
            slot.cumulative = None
            slot.last_start = len(buf)
            buf += data
        slot.nfrags += 1

    def _cut(self, slot: _Slot, limit: int) -> None:
        """Cut a call at a limit (a CUT_* code): nothing more of it is kept, and it reads as truncated."""
        slot.over = limit
        slot.call_nfrags = -1  # a call built already (handed over whole) is built again, as cut
        if limit == CUT_CALL_BYTES:
            call_cut(self._state, self._max_call, slot.id, slot.name)
        else:
            self._budget_spent()

    def _budget_spent(self) -> None:
        if not self._full:
            self._full = True
            stream_full(self._state, self._max_stream)

    def _choice_fits(self, choice: int) -> bool:
        """Tell whether a choice new to the calls or the texts fits Limits.choices, both counted together."""
        if choice in self._choices or choice in self._texts:
            return True
        if self._nchoices >= self._max_choices:
            self._cap("choices")
            return False
        self._nchoices += 1
        return True

    def _cap(self, name: str) -> None:
        """Record, once, that a stream has more calls or choices than its limits allow."""
        if name not in self._capped:
            self._capped.add(name)
            too_many(self._state, name, self._max_calls if name == "calls" else self._max_choices)

    def text_piece(self, choice: int, which: int, text: str) -> None:
        """Append message text (content, reasoning or refusal) of a choice."""
        texts = self._texts.get(choice)
        if texts is None:
            if not self._choice_fits(choice):
                return
            # content, reasoning, refusal; a high surrogate pending in each; whether each was cut
            cut = self._dropped
            texts = self._texts[choice] = [None, None, None, 0, 0, 0, cut, cut, cut]
        if texts[6 + which]:
            return  # cut at Limits.stream_bytes or event_bytes: text after the cut would leave a hole
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
        if self._kept + len(data) > self._max_stream:
            texts[6 + which] = True
            texts[3 + which] = 0  # a surrogate pending at the cut is cut with it
            self._budget_spent()
            return
        self._kept += len(data)
        buf += data

    def text_length(self, choice: int, which: int) -> int:
        """Return how many bytes of a choice's text are kept so far: where its next piece will start."""
        texts = self._texts.get(choice)
        if texts is None or texts[which] is None:
            return 0
        return len(texts[which])

    # ---------------------------------------------------------------- the end

    def finalize(self, strict: bool = False) -> Result:
        """Return the Result: every call parsed once; with strict=True raise the first error instead.

        The stream ends here: a second call returns the same Result, and feed(), feed_chunk() or
        add() after it raise RuntimeError.
        """
        if self._result is None:
            self._result = self._build()
        if strict:
            raise_first_error(self._result)
        return self._result

    def _build(self) -> Result:
        self._end_of_stream()
        if not self._state.recognised:
            unrecognised(self._state, bool(self._slots or self._texts), self._fed_len > 0)
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
        """Return the slot's finished call, built once (again only if fragments, an id or a name came after it)."""
        if slot.pending:  # a high surrogate never joined: keep its escape text
            self._append(slot, escape_surrogate(slot.pending).encode())
            slot.pending = 0
        if slot.call is None or slot.call_nfrags != slot.nfrags:
            # Built again when a later fragment brought arguments, an id or a name (_route), even with no
            # arguments kept (an empty piece, or one a limit cut). The call takes the buffer itself, not a copy (a call can
            # be as big as Limits.call_bytes); before the end it may still grow: then it is copied first.
            cumulative = slot.cumulative if final or slot.cumulative is None else list(slot.cumulative)
            slot.call = make_call(slot.choice, slot.position, slot.id, slot.name, slot.buf, cumulative,
                                  slot.last_start, slot.quirks, slot.over, slot.parsed if slot.nfrags == 1 else None,
                                  slot.custom, None, slot.late)
            slot.call_nfrags = slot.nfrags
            slot.shared = not final
        return slot.call

    def complete(self, choice: int | None, index: int | None) -> None:
        """Hand over the calls the protocol just closed: one (choice, index), a whole choice, or all."""
        if choice is None:
            slots = self._slots
        else:
            cs = self._choices.get(choice)
            if cs is None:
                return
            if index is not None:
                found = cs.by_index.get(index)
                slots = [found] if found is not None else []
            else:
                slots = [s for s in self._slots if s.choice == choice]
        for slot in slots:
            if slot.call is None:
                self._done.append(self._settle(slot, False))


def _unshare(slot: _Slot) -> None:
    """Give the slot a buffer of its own before it changes: the call handed over keeps the one it has."""
    slot.buf = bytearray(slot.buf)
    slot.shared = False


def _refused(cs: _ChoiceState, index: int | None) -> None:
    """Forget the call a refused new one would have replaced: no fragment meant for the new one goes to it."""
    cs.latest = None
    if index is not None:
        del cs.by_index[index]


def _complete(slot: _Slot) -> bool:
    """Tell whether a slot's arguments already form a complete JSON value."""
    return bool(slot.buf) and parses(slot.buf)

