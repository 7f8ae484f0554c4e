"""The pure-Python twin of the accumulator: SSE framing and the inline chat chunk.

The compiled twin (_accumulator_c.pyx) does exactly what this module does; tests run every
behaviour against both and require identical results. The slot rules (_slots.py) are one
definition that both derive from; everything else that is not on the hot path (adapters,
finalize, result types) is shared and lives in other modules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from orjson import JSONDecodeError as _JSONDecodeError
from orjson import loads as _loads

from ._formats import dispatch as _dispatch
from ._wire import framing as _framing
from ._wire.framing import BOM
from ._formats import openai_chat as _openai_chat
from ._limits import Limits, as_numbers, event_dropped, line_dropped
from ._pure import python_source
from ._results import ToolCall
from ._state import StreamState, finalized
from ._exactjson import loads_exact, long_digit_run

if TYPE_CHECKING:
    from ._slots import SlotBook
else:
    SlotBook = python_source("_slots").SlotBook  # the slot rules as Python, even where they are compiled too

__all__ = ["Accumulator"]

_WINDOW = 65536  # the most bytes of one read framed at once
_NO_HEAD = ()  # no layout learnt yet: bytes.startswith(()) is False, whatever the bytes
_LAYOUT_TRIES = 4  # layouts learnt in a row that no chunk reused: then none more (a stream that varies)
_STRING_BODY = re.compile(rb'(?:[^"\\]|\\.)*')  # a JSON string's text up to its closing quote


class Accumulator(SlotBook):
    """Reassemble the tool calls of one streamed response.

    Feed it the raw response bytes as they arrive (``feed``), parsed chunks (``feed_chunk``) or
    fragments (``add``), then call ``finalize`` once for the Result.
    """

    def __init__(self, format: str = "auto", limits: Limits | None = None) -> None:
        self._start(StreamState(_dispatch.check_format(format)), as_numbers(limits))
        self._sse = self._state.framing == _framing.SSE
        # SSE framing state
        self._tail = b""          # an incomplete line carried to the next feed
        # Later reads that continue the tail line, not yet joined to it: one buffer, not a list of
        # reads (a line fed two bytes at a time held ~20x its size as bytes objects).
        self._more = bytearray()
        self._offset = 0          # stream offset of the first byte of _tail
        self._started = False     # the BOM check is done
        self._skip_lf = False     # the last feed ended in CR: a leading LF belongs to it
        self._data: list[bytes] = []
        self._data_size = 0       # the event's data so far, lines joined, against Limits.event_bytes
        self._data_offset = 0
        self._skipping = False    # dropping the rest of an over-long line
        self._dropping = False    # dropping the rest of an event that went over the limit
        self._event_name: str | None = None
        self._halting = False     # stop right after the stream's terminator (batch reprocessing)
        self._halted_at = -1      # where in the last fed data that happened
        self._halt_lf = False     # ended at a CR that ended the read: halted() waits to see if an LF follows
        self._fed_from = 0        # the stream offset the data fed last starts at
        # The layout of the last chunk read inline, for the next ones (_learn_layout, _same_layout)
        self._layout: tuple | None = None
        self._layout_head: bytes | tuple[()] = _NO_HEAD
        self._layout_tries = _LAYOUT_TRIES

    # ---------------------------------------------------------------- framing

    def feed(self, data: bytes | bytearray | memoryview | str) -> list[ToolCall]:
        """Feed raw response bytes, split anywhere (mid-line, mid-CRLF, mid-character).

        Return the calls this data completed (closed by the protocol), each handed over once.
        """
        if self._result is not None:
            raise finalized("feed")
        self._feed(data)
        return self._handed_over() if self._done else []  # most reads complete no call: no call to ask

    def halt_at_end(self) -> None:
        """Stop consuming right after the stream's terminator; halted() then says where it was (Halting, in sink.py)."""
        self._halting = True
        if self._state.ended and self._halted_at < 0:
            self._halted_at = 0

    def halted(self) -> int:
        """Return how many bytes of the last fed data belonged to this stream, once it ended; else -1."""
        return self._halted_at

    def _handed_over(self) -> list[ToolCall]:
        if not self._done:
            return []
        done, self._done = self._done, []
        return done

    def _feed(self, data: bytes | bytearray | memoryview | str) -> None:
        if type(data) is not bytes:  # the common read, told by one test
            # A lone surrogate in a str (text decoded with errors="surrogatepass", say) is no
            # character UTF-8 can hold: its bytes make the event they are in malformed, reported
            # where it is, as any bytes that are not UTF-8 do, and the stream goes on.
            data = (data.encode("utf-8", "surrogatepass") if isinstance(data, str)
                    else bytes(_framing.fed_view(data)))
        if not data or self._halted_at >= 0:
            return
        if self._halt_lf:  # the stream ended at a CR that ended the last read: an LF next is its too
            self._halt_after_cr(0, data[:1])
            return
        fed = len(data)
        self._fed = True
        if not self._sse:
            state = self._state
            if (state.framing is not None or state.head or state.fallback != _framing.SSE
                    or data[0] in _framing.UNTOLD_AFTER):
                routed = _framing.route(self, self._state, data)
                if routed is None:
                    return
                data = routed
            else:  # what route() decides for a first byte that tells nothing, without the call: most streams are SSE
                state.framing = _framing.SSE
            self._sse = True
        if self._halting:
            # Where the fed data begins, as a stream offset (for a halt at the terminator); data may
            # start with bytes held from before it (route's head), so count back from its end.
            self._fed_from = self._offset + len(self._tail) + len(self._more) - (fed - len(data))
        if len(data) <= _WINDOW:
            self._feed_sse(data)
            return
        # A huge read is framed a window at a time: one split of it all would make a list of every
        # event in it at once, which runs slower per byte as the read grows (out of the CPU caches).
        for start in range(0, len(data), _WINDOW):
            stop = start + _WINDOW
            self._feed_sse(data[start:stop])
            if self._halt_lf and stop < len(data):  # a halt after a CR that ends a window: the next byte is here
                self._halt_after_cr(self._offset - self._fed_from, data[stop:stop + 1])
            if self._halted_at >= 0:
                return

    def _feed_sse(self, data: bytes) -> None:
        """Frame SSE bytes that continue the stream: whole events are handled, the rest is kept."""
        if not self._started:
            head = self._tail + data
            if len(head) < 3 and BOM.startswith(head):
                self._tail = head
                return
            self._started = True
            if head.startswith(BOM):
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
            self._more += data  # a long line still growing: join it once, when it ends
            if len(self._tail) + len(self._more) > self._max_event:
                self._drop_tail()
            return
        if self._more:
            self._tail += self._more
            self._more = bytearray()
        buf = self._tail + data if self._tail else data
        if b"\r" in buf or len(buf) > self._max_event:
            self._feed_lines(buf)
            return
        self._feed_events(buf)

    def _feed_events(self, buf: bytes) -> None:
        """Frame LF-only SSE text that begins where the stream stands: one-line chat events read inline."""
        # Split where a blank line is followed by a data line: most events are one "data:" line, so
        # most pieces are an event's payload itself (the split took its "data: "), handled inline.
        pieces = buf.split(b"\n\ndata: ")
        last = pieces.pop()
        rest = b"data: " + last if pieces else last
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
            # When the LFs are exactly the separators (and rest's own), no piece holds a line break:
            # then every piece is a whole one-line event.
            single_lines = buf.count(b"\n") == 2 * len(pieces) + rest.count(b"\n")
            first = pieces[0]  # text as it stands: no "data: " was split off it
            if inline and first[:6] == b"data: " and (single_lines or first.find(b"\n") < 0):
                chunk(first[6:], pos, runs)
            else:
                stop = self._lines(first, pos)
                if stop >= 0:
                    return self._halt(stop)
                self._line(b"", pos + len(first) + 1)
                inline = (state.format == "openai-chat" and not self._data and self._event_name is None
                          and not self._dropping)
            pos += len(first) + 2
            if self._halting and state.ended:
                return self._halt(pos)
            head = self._layout_head if runs is False else _NO_HEAD
            halting = self._halting
            for piece in pieces[1:]:
                if inline and (single_lines or piece.find(b"\n") < 0):
                    if not (piece.startswith(head) and self._same_layout(piece)):
                        chunk(piece, pos, runs)
                        head = self._layout_head if runs is False else _NO_HEAD
                else:
                    stop = self._lines(b"data: " + piece, pos)
                    if stop >= 0:
                        return self._halt(stop)
                    self._line(b"", pos + len(piece) + 7)
                    inline = (state.format == "openai-chat" and not self._data and self._event_name is None
                              and not self._dropping)
                pos += len(piece) + 8
                if halting and state.ended:
                    return self._halt(pos)
        self._take_rest(rest, pos, inline, runs)

    def _take_rest(self, rest: bytes, pos: int, inline: bool, runs: bool | None) -> None:
        """Frame the end of a read, after its last split: a whole one-line event inline, else lines and a tail."""
        state = self._state
        # Most network reads end where an event ends, and many hold just that one event: a last
        # one-line event is read inline as the ones before it are, not line by line.
        if inline and rest[-2:] == b"\n\n" and rest[:6] == b"data: " and rest.find(b"\n") == len(rest) - 2:
            payload = rest[6:-2]
            if payload[:1] == b"{":
                if not (runs is False and payload.startswith(self._layout_head) and self._same_layout(payload)):
                    self._chunk(payload, pos, runs)
            else:  # [DONE] or other text: what the event's dispatch would do with it
                self._event_at = pos
                _dispatch.handle_event(self, state, None, payload, pos)
            self._tail = b""
            self._offset = pos + len(rest)
            if self._halting and state.ended:
                self._halt(self._offset)
            return
        # Complete lines after the last blank line are taken now, so no line is read twice.
        end = rest.rfind(b"\n")
        if end >= 0:
            stop = self._lines(rest[:end], pos)
            if stop >= 0:
                return self._halt(stop)
            pos += end + 1
            rest = rest[end + 1:]
        self._tail = rest
        self._offset = pos

    def _halt(self, pos: int, lf_may_follow: bool = False) -> None:
        """Stop at stream offset pos, just past the terminator: the rest of the read is not this stream's.

        lf_may_follow: pos is just past a CR that ended the read; the next read's first byte, if an LF,
        is this stream's too (the line end is CRLF), so halted() waits for it (_feed).
        """
        if lf_may_follow:
            self._halt_lf = True
        else:
            self._halted_at = pos - self._fed_from
        self._tail = b""
        self._offset = pos

    def _halt_after_cr(self, used: int, next_byte: bytes) -> None:
        """Settle a halt that waited after a CR: used bytes of the fed data were the stream's, and an LF next."""
        self._halt_lf = self._skip_lf = False
        self._halted_at = used + (next_byte == b"\n")

    def _lines(self, text: bytes, pos: int) -> int:
        """Frame LF-ended lines from stream offset pos; return where the stream ended when halting, else -1.

        A batch job halts right after the terminator: the lines after it (a keep-alive, the next
        response's first event) are not this stream's, so none is read once it has ended.
        """
        halting, state = self._halting, self._state
        for line in text.split(b"\n"):
            self._line(line, pos)
            pos += len(line) + 1
            if halting and state.ended:
                return pos
        return -1

    def _feed_lines(self, buf: bytes) -> None:
        """Frame line by line: any line end (CR, LF, CRLF), each line's length checked."""
        lines = buf.splitlines(True)
        tail = lines.pop() if lines[-1][-1:] not in (b"\n", b"\r") else b""
        if buf.endswith(b"\r"):
            self._skip_lf = True
        pos = self._offset
        end = pos + len(buf) - len(tail)  # where the last whole line ends
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
                return self._halt(pos, self._skip_lf and pos == end)
        self._offset = pos
        self._tail = tail
        if len(tail) > limit:
            self._drop_tail()

    def _drop_tail(self) -> None:
        """Drop the line being received: it is over Limits.event_bytes; skip to its end."""
        line_dropped(self._state, self._max_event, self._offset)
        self._offset += len(self._tail) + len(self._more)
        self._tail = b""
        self._more = bytearray()
        self._skipping = True
        self._drop_event()

    def _drop_event(self) -> None:
        """Forget the event being received; ignore its lines up to the blank line that ends it."""
        self._data.clear()
        self._data_size = 0
        self._dropping = True
        self.cut_open()

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
        """Apply one event's chunk: the commonest shapes inline, every other through the general adapter.

        The twin of the compiled fast path. The inline part takes a chunk that continues the
        arguments of a call already seen, making of it the one fragment the general adapter
        (_openai_chat) would, and a chunk that only ends its choice (_ends_choice); the adapter
        takes everything else.
        """
        self._event_at = offset
        if not self._state.recognised:  # until an event of the format has come, every event goes the general way
            _dispatch.handle_event(self, self._state, None, payload, offset, long_run)
            return
        try:
            # loads_exact's test written out: no long digit run in the read (long_run False), no call to it
            chunk = _loads(payload) if long_run is False else loads_exact(payload, long_run)
        except _JSONDecodeError:
            _dispatch.handle_event(self, self._state, None, payload, offset)
            return
        try:
            choices = chunk["choices"]
            choice = choices[0]
            delta = choice["delta"]
            number = choice["index"]
        except (KeyError, IndexError, TypeError):
            pass  # not a shape read inline
        else:
            if type(delta) is dict:
                # Tested, not caught: an exception costs as much as a chunk's parse (~0.5 us).
                calls = delta.get("tool_calls")
                if calls is not None:
                    if self._continues_call(payload, long_run, chunk, choices, choice, delta, number, calls):
                        return
                elif not delta and self._ends_choice(chunk, choices, choice, number):
                    return
        self._state.event_size = len(payload)
        _openai_chat.handle_chunk(self, self._state, chunk, offset)

    def _continues_call(self, payload: bytes, long_run: bool | None, chunk: dict, choices: Any, choice: Any,
                        delta: dict, number: Any, calls: Any) -> bool:
        """Take a chunk that continues a known call's arguments as the adapter would (one fragment); else False."""
        try:
            call = calls[0]
            function = call["function"]
            arguments = function["arguments"]
            index = call["index"]
        except (KeyError, IndexError, TypeError):
            return False
        # The subscripts succeed only on dicts (chunk, choice, call, function) and on lists (choices,
        # calls: a string there would have failed one step later), so those types need no check of their own.
        if not (type(arguments) is str and type(index) is int and type(number) is int and len(choices) == 1
                and len(delta) == 1 and len(calls) == 1 and chunk.get("usage") is None
                and chunk.get("error") is None and "message" not in choice
                and choice.get("finish_reason") is None and call.get("id") is None
                and function.get("name") is None
                and _openai_chat.nothing_for_the_turn(self._state.turn, chunk, choice, call, function)):
            return False
        cs = self._choices.get(number)
        slot = cs.by_index.get(index) if cs is not None else None
        if slot is None or not slot.nfrags:
            return False
        # All the adapter would do with it: one fragment of a call it has seen.
        self.fragment(number, index, None, None, arguments)
        if arguments and long_run is False and self._layout_tries:
            self._learn_layout(payload, number, index)
        return True

    def _ends_choice(self, chunk: dict, choices: Any, choice: Any, number: Any) -> bool:
        """Take a chunk that only ends its choice (delta empty) as the adapter would; else False.

        Its finish reason is recorded and the choice's calls handed over: all the general adapter
        does with such a chunk of one choice, once the turn needs nothing of it.
        """
        reason = choice.get("finish_reason")
        turn = self._state.turn
        if not (type(reason) is str and type(number) is int and len(choices) == 1 and turn is not None
                and chunk.get("usage") is None and chunk.get("error") is None and "message" not in choice
                and _openai_chat.nothing_for_the_turn(turn, chunk, choice)):
            return False
        self.choice_finished(number, reason)
        self.complete(number, None)
        return True

    def _learn_layout(self, payload: bytes, number: int, index: int) -> None:
        """Note the bytes of a chunk the inline path just took, but for its arguments' (and obfuscation's) text.

        A later chunk of exactly those bytes around other text parses as this one with that text in
        its place (the probe below makes sure the places are those two values), so the inline path
        would take it the same way: _same_layout then takes it without parsing all of it.
        """
        self._layout_tries -= 1
        at = payload.find(b'"arguments":"')
        if at < 0:
            return
        start = at + 13
        close = _STRING_BODY.match(payload, start).end()  # type: ignore[union-attr]  # (it matches "" too)
        if payload[close:close + 1] != b'"':
            return
        mid = None
        end = payload[close:]
        other = end.rfind(b'"obfuscation":"')  # OpenAI's random padding: other text in every chunk
        if other >= 0:
            second = close + other + 15
            after = _STRING_BODY.match(payload, second).end()  # type: ignore[union-attr]
            if payload[after:after + 1] != b'"':
                return
            mid, end = payload[close:second], payload[after:]
        probe = _loads(payload[:start] + (mid or b"") + end)  # both texts empty
        expected = _loads(payload)
        expected["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] = ""
        if mid is not None:
            expected["obfuscation"] = ""
        if probe == expected:
            # where the arguments' text starts (at its quote), the bytes between the two texts and
            # after them, how many of those follow the last text's closing quote, the choice, the call
            self._layout = (start - 1, mid, end, len(end) - 1, self._choices[number], index)
            self._layout_head = payload[:start]

    def _same_layout(self, payload: bytes) -> bool:
        """Take a chunk laid out as the last learnt one (its head is checked): what the inline path does with it."""
        start, mid, end, after, cs, index = self._layout  # type: ignore[misc]  # (asked once one is learnt)
        if not payload.endswith(end):
            return False
        stop = len(payload) - after  # just past the last text's closing quote
        try:
            if mid is None:
                text = _loads(payload[start:stop])
            else:
                close = payload.find(mid, start + 1) + 1  # just past the arguments' closing quote
                if not close:
                    return False
                text = _loads(payload[start:close])
                _loads(payload[close + len(mid) - 2:stop])  # the obfuscation: a string too, or no layout
        except _JSONDecodeError:
            return False  # (a slice of a head and an end that overlap is no string either)
        slot = cs.by_index.get(index)
        if slot is None or not slot.nfrags:
            return False
        if text:
            try:
                data = text.encode()
            except UnicodeEncodeError:  # a lone surrogate: the general path keeps its escape
                return False
            if not self._extend(slot, data):
                return False
        cs.latest = slot
        self._layout_tries = _LAYOUT_TRIES
        return True

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
        self._event_at = self._data_offset
        _dispatch.handle_event(self, self._state, event, data, self._data_offset)

    def event(self, event: str | None, data: bytes, offset: int) -> None:
        """Handle one event from a framer other than SSE (NDJSON, AWS event stream)."""
        self._event_at = offset
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
            self._tail += self._more
            self._more = bytearray()
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
        self._event_at = -1
        _dispatch.handle_object(self, self._state, obj)
        return self._handed_over()


