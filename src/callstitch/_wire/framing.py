"""Framings other than SSE: NDJSON, the AWS event stream, JSON arrays and documents, and telling which one a body uses.

SSE, by far the most common, is framed by the accumulator twins themselves (it is on the hot
path); the compiled twin frames NDJSON, the event stream and JSON values (a JSON array, Gemini's
``streamGenerateContent`` without ``alt=sse``, or pretty-printed documents) in place as well. The framers here serve the
pure-Python twin and hand each event back to its ``event``; they are what the compiled twin's
framing must match byte for byte, and the event stream's messages and errors are written once,
in the helpers below EventStreamFramer, for both.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import TYPE_CHECKING, Any

from .._limits import event_unreadable, line_dropped

if TYPE_CHECKING:  # for annotations only: importing them here would be a cycle
    from .._state import StreamState
    from .._formats.sink import EventSink

SSE, NDJSON, EVENTSTREAM, JSONARRAY = "sse", "ndjson", "eventstream", "json-array"
# One or more JSON documents that span lines, back to back (a pretty-printed error body or
# non-streamed response): each one event, framed as a JSON array's elements are (JSONArrayFramer).
JSONDOCS = "json-documents"
JSON_VALUES = (JSONARRAY, JSONDOCS)  # the framings of JSONArrayFramer

BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, which a body or a log may start with
_PRELUDE = 12          # total length, headers length, prelude CRC
_PRELUDE_FIELDS = struct.Struct(">III")
_CRC = struct.Struct(">I")
_MIN_MESSAGE = 16      # prelude and message CRC
_WHITESPACE = b" \t\r\n"


def feed_type_error(data: Any) -> TypeError:
    """Return the TypeError for feed() given what is not bytes or str (a parsed chunk, a number)."""
    return TypeError(f"feed() takes bytes or str as read from the network, not {type(data).__name__}; "
                     "for a parsed chunk use feed_chunk()")


def fed_view(data: Any) -> memoryview:
    """Return a view of what feed() was given as raw bytes; TypeError for anything not bytes-like.

    Written once for both twins: an int, say, must not become that many NUL bytes.
    """
    try:
        return memoryview(data)
    except TypeError:
        raise feed_type_error(data) from None


def _prelude_ok(head: bytes) -> bool:
    total, headers = struct.unpack_from(">II", head)
    return (_MIN_MESSAGE <= total and headers <= total - _MIN_MESSAGE
            and zlib.crc32(head[:8]) == struct.unpack_from(">I", head, 8)[0])


# First bytes after which choose() may still need more (whitespace, a BOM's first byte) or tells
# the framing ("{", "[", a zero byte): after any other, a body has its format's own, whatever follows.
UNTOLD_AFTER = frozenset(b" \t\r\n\xef[{\x00")


def choose(head: bytes | bytearray, final: bool = False, otherwise: str = SSE, blanks: int = 1 << 62) -> str | None:
    """Return the framing of a body from its first bytes, or None while more are needed.

    otherwise: the framing when they do not tell (the stream's format's own: StreamState.fallback),
    also when more than blanks blank bytes come first (Limits.event_bytes: none are held past it).
    """
    if head[:1] == b"\x00":
        # An event-stream message starts with its length: a zero byte for any message under 16 MiB,
        # and no text framing starts with one. A damaged first prelude is the framer's to report.
        return EVENTSTREAM
    if len(head) < 3 and BOM.startswith(head) and not final:
        return None  # a BOM may be arriving a byte at a time: its end will tell
    text = head[3:] if head.startswith(BOM) else head
    return _by_first(text, final, otherwise, blanks)


def _by_first(text: bytes | bytearray, final: bool, otherwise: str, blanks: int) -> str | None:
    """Return the framing its first byte past blanks tells (choose, past a BOM); None while only blanks came."""
    rest = text.lstrip(_WHITESPACE)
    used = len(text) - len(rest)
    if used > blanks:
        return otherwise
    if not rest:
        return None if not final else otherwise
    first = rest[:1]
    if first == b"{":
        return _after_brace(rest[1:], final, otherwise, blanks - used)
    return JSONARRAY if first == b"[" else otherwise


def _after_brace(text: bytes | bytearray, final: bool, otherwise: str, blanks: int) -> str | None:
    """Return the framing a first "{" opens, by what follows it on its line; None while only spaces came.

    A token: JSON lines. The line's end: a pretty-printed JSON document (an error body, a
    non-streamed response), which is no JSON lines: read whole, as one event (JSONDOCS).
    """
    rest = text.lstrip(b" \t")
    if len(text) - len(rest) > blanks:
        return otherwise
    if not rest:
        return None if not final else otherwise
    return JSONDOCS if rest[:1] in (b"\r", b"\n") else NDJSON


class NDJSONFramer:
    """One JSON document per line (Ollama's native API, gateway logs)."""

    def __init__(self, acc: EventSink, state: StreamState) -> None:
        self._acc = acc
        self._state = state
        # The start of a line still arriving, in the pieces it came in: joined once, when the line
        # ends, so a long line costs its length, not its length times the number of reads.
        self._held: list[bytes] = []
        self._held_size = 0
        self._offset = 0
        self._started = False
        self._skipping = False  # dropping the rest of an over-long line

    def feed(self, data: bytes) -> None:
        """Take more bytes; hand over every complete line."""
        if not self._started:
            data = b"".join([*self._held, data])
            self._held, self._held_size = [], 0
            if len(data) < 3 and BOM.startswith(data):
                self._hold(data)
                return
            self._started = True
            if data.startswith(BOM):
                data = data[3:]
                self._offset = 3
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                self._offset += len(data)
                return
            self._skipping = False
            self._offset += end + 1
            data = data[end + 1:]
        end = data.find(b"\n")
        if end < 0:
            if data:
                self._hold(data)
            return
        if self._held:
            self._held.append(data[:end])
            line = b"".join(self._held)
            self._held, self._held_size = [], 0
            self._line(line, self._offset)
            self._offset += len(line) + 1
            data = data[end + 1:]
        lines = data.split(b"\n")
        tail = lines.pop()
        pos = self._offset
        for line in lines:
            self._line(line, pos)
            pos += len(line) + 1
        self._offset = pos
        if tail:
            self._hold(tail)

    def _hold(self, piece: bytes) -> None:
        """Keep a piece of the line still arriving; a line over Limits.event_bytes is dropped as it arrives."""
        self._held.append(piece)
        self._held_size += len(piece)
        if self._held_size > self._state.event_limit:
            line_dropped(self._state, self._state.event_limit, self._offset)
            self._acc.cut_open()
            self._offset += self._held_size
            self._held, self._held_size = [], 0
            self._skipping = True

    def _line(self, line: bytes, pos: int) -> None:
        if len(line) > self._state.event_limit:
            line_dropped(self._state, self._state.event_limit, pos)
            self._acc.cut_open()
        elif line.strip(_WHITESPACE):
            self._acc.event(None, line, pos)

    def end(self) -> None:
        """Hand over a last line that had no line end."""
        tail = b"".join(self._held)
        self._held, self._held_size = [], 0
        self._line(tail, self._offset)
        self._offset += len(tail)


_SIGNIFICANT = re.compile(rb"[^ \t\r\n,]")    # outside an element: whitespace and commas separate
_STRUCTURE = re.compile(rb'["{}\[\]]')        # inside an object or array
_IN_STRING = re.compile(rb'["\\]')
_SCALAR_END = re.compile(rb'[ \t\r\n,\[\]{}"]')


def element_dropped(state: StreamState, limit: int, offset: int, in_array: bool) -> None:
    """Record that a JSON value over Limits.event_bytes was dropped: an array's element, or a whole document."""
    line_dropped(state, limit, offset, "JSON array element" if in_array else "JSON document")


class JSONArrayFramer:
    """One JSON array whose elements arrive one by one (Gemini's streamGenerateContent without alt=sse).

    Google writes it pretty-printed: ``[{`` … ``}`` then ``\r\n,\r\n{`` … and ``\r\n]`` at the end.
    Each element is handed over as one event as soon as its last byte arrives; whitespace and
    commas between elements are separators, whatever their layout. The closing ``]`` is the
    stream's terminator; an element the stream leaves unfinished is handed over as it is (and
    reported as malformed). An element over Limits.event_bytes is dropped as it arrives, never held.
    Values outside any array are elements too: JSON documents back to back (JSONDOCS) are framed
    here, each one event.
    """

    def __init__(self, acc: EventSink, state: StreamState) -> None:
        self._acc = acc
        self._state = state
        self._offset = 0          # stream offset of the next byte fed
        self._started = False     # the BOM check is done
        self._head = b""          # a possible BOM, split across reads
        self._open = False        # inside the array: "[" seen, "]" not yet
        self._element: bytearray | None = None  # the element being received (None outside one)
        self._start = 0           # its stream offset
        self._size = 0            # its size so far (kept or not)
        self._dropping = False    # it went over Limits.event_bytes: its bytes are not kept
        self._depth = 0           # open objects and arrays inside it
        self._in_string = False
        self._escape = False      # the last byte fed was a backslash inside a string
        self._scalar = False      # it is a bare number, literal or junk, ended by a separator

    def feed(self, data: bytes) -> None:
        """Take more bytes; hand over every complete element."""
        if not self._started:
            data = self._head + data
            if len(data) < 3 and BOM.startswith(data):
                self._head = data
                return
            self._started = True
            self._head = b""
            if data.startswith(BOM):
                data = data[3:]
                self._offset = 3
        pos, n = 0, len(data)
        while pos < n:
            if self._element is None:
                pos = self._between(data, pos)
            else:
                pos = self._inside(data, pos)
        self._offset += n

    def _between(self, data: bytes, pos: int) -> int:
        """Read separators, "[" and "]" up to the next element's first byte; return where to go on."""
        m = _SIGNIFICANT.search(data, pos)
        if m is None:
            return len(data)
        pos = m.start()
        byte = data[pos]
        if byte == 0x5B and not self._open:  # "[": the array opens (again, for arrays back to back)
            self._open = True
            return pos + 1
        if byte == 0x5D and self._open:  # "]": the array ends, and with it the stream
            self._open = False
            state = self._state
            state.complete = True
            state.ended = True
            self._acc.complete(None, None)
            return pos + 1
        self._element = bytearray()
        self._start = self._offset + pos
        self._size = 0
        self._dropping = False
        self._in_string = byte == 0x22
        self._scalar = byte not in (0x7B, 0x5B, 0x22)
        self._depth = 1 if byte in (0x7B, 0x5B) else 0
        self._take(data, pos, pos + 1)
        return pos + 1

    def _inside(self, data: bytes, pos: int) -> int:
        """Read on inside the element being received; hand it over when its last byte comes."""
        n = len(data)
        while pos < n:
            if self._escape:
                self._escape = False
                self._take(data, pos, pos + 1)
                pos += 1
                continue
            if self._scalar:
                m = _SCALAR_END.search(data, pos)
                end = n if m is None else m.start()
                self._take(data, pos, end)
                if m is None:
                    return n
                self._finish()
                return end
            m = (_IN_STRING if self._in_string else _STRUCTURE).search(data, pos)
            if m is None:
                self._take(data, pos, n)
                return n
            end = m.end()
            self._take(data, pos, end)
            pos = end
            byte = data[end - 1]
            if self._in_string:
                if byte == 0x5C:  # a backslash: the next byte is escaped, even in the next read
                    self._escape = True
                    continue
                self._in_string = False
            elif byte == 0x22:
                self._in_string = True
                continue
            elif byte in (0x7B, 0x5B):
                self._depth += 1
                continue
            else:
                self._depth -= 1
            if self._depth <= 0 and not self._in_string:
                self._finish()
                return pos
        return pos

    def _take(self, data: bytes, start: int, end: int) -> None:
        """Keep data[start:end] as part of the element, within Limits.event_bytes."""
        self._size += end - start
        if self._dropping:
            return
        limit = self._state.event_limit
        if self._size > limit:
            element_dropped(self._state, limit, self._start, self._open)
            self._acc.cut_open()
            self._dropping = True
            self._element = bytearray()
            return
        element = self._element
        assert element is not None  # (taken only inside an element)
        element += data[start:end]

    def _finish(self) -> None:
        element, self._element = self._element, None
        self._in_string = self._escape = self._scalar = False
        self._depth = 0
        if not self._dropping and element:
            self._acc.event(None, bytes(element), self._start)
        self._dropping = False

    def end(self) -> None:
        """Hand over an element the stream left unfinished: it is reported as malformed, never lost."""
        if self._element is not None:
            self._finish()


class EventStreamFramer:
    """The AWS event stream (Bedrock): length-prefixed binary messages with headers and CRCs.

    A message whose CRC does not match is reported and skipped; when the prelude itself is
    damaged, the framer searches forward for the next valid prelude, so one bad message never
    costs the rest of the stream.
    """

    def __init__(self, acc: EventSink, state: StreamState) -> None:
        self._acc = acc
        self._state = state
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._skipped_from: int | None = None  # where bytes began to be skipped after a damaged prelude
        self._drop = 0  # bytes still to drop of a message over Limits.event_bytes
        self._headers: dict[bytes, dict] = {}  # header blocks already read

    def feed(self, data: bytes) -> None:
        """Take more bytes; hand over every complete message."""
        if self._drop:
            if len(data) <= self._drop:
                self._drop -= len(data)
                self._offset += len(data)
                return
            self._offset += self._drop
            data = data[self._drop:]
            self._drop = 0
        buf = self._buf
        buf += data
        pos = 0
        size = len(buf)
        view = memoryview(buf)  # CRCs and slices without copies; released before buf is cut
        try:
            while size - pos >= _PRELUDE:
                total, headers_len, prelude_crc = _PRELUDE_FIELDS.unpack_from(buf, pos)
                # While skipping damaged bytes, a prelude must also pass _resync's test (a zero first
                # byte), wherever a read happened to end: how the bytes were cut must not matter.
                if not (_MIN_MESSAGE <= total and headers_len <= total - _MIN_MESSAGE
                        and zlib.crc32(view[pos:pos + 8]) == prelude_crc) or (
                        self._skipped_from is not None and buf[pos] != 0):
                    if self._skipped_from is None:
                        self._skipped_from = self._offset + pos
                    pos = self._resync(buf, pos + 1)
                    continue
                self._report_skipped(self._offset + pos)
                if total > self._state.event_limit:
                    # A message over Limits.event_bytes is dropped as it arrives, never held.
                    line_dropped(self._state, self._state.event_limit, self._offset + pos, "message")
                    self._acc.cut_open()
                    if size - pos < total:
                        self._drop = total - (size - pos)
                        pos = size
                        break
                    pos += total
                    continue
                if size - pos < total:
                    break
                end = pos + total - 4
                if zlib.crc32(view[pos:end]) != _CRC.unpack_from(buf, end)[0]:
                    crc_mismatch(self._acc, self._state, self._offset + pos)
                else:
                    start = pos + _PRELUDE
                    self._message(bytes(view[start:start + headers_len]), bytes(view[start + headers_len:end]),
                                  self._offset + pos)
                pos += total
        finally:
            view.release()
        del buf[:pos]
        self._offset += pos

    def _resync(self, buf: bytearray, pos: int) -> int:
        """Return the position of the next valid prelude after pos (or where one may still start)."""
        while len(buf) - pos >= _PRELUDE:
            if buf[pos] == 0 and _prelude_ok(bytes(buf[pos:pos + _PRELUDE])):
                return pos
            pos += 1
        return pos

    def _message(self, raw: bytes, payload: bytes, offset: int) -> None:
        headers = read_headers(self._acc, self._state, self._headers, raw, offset)
        if headers is None:
            return
        kind = headers.get(":message-type", "event")
        if kind == "event":
            self._acc.event(headers.get(":event-type"), payload, offset)
        else:
            not_an_event(self._state, headers, kind, payload, offset)

    def _report_skipped(self, upto: int) -> None:
        if self._skipped_from is not None:
            skipped(self._acc, self._state, self._skipped_from, upto)
            self._skipped_from = None

    def end(self) -> None:
        """Report bytes left over that never made a whole message."""
        if self._skipped_from is not None:
            self._offset += len(self._buf)
            del self._buf[:]
            self._report_skipped(self._offset)
        if self._drop:
            self._drop = 0
        if self._buf:
            ends_inside(self._acc, self._state, bytes(self._buf), self._offset)
            self._offset += len(self._buf)
            del self._buf[:]


# What an event-stream framer does with a message or a problem, written once for the framer above
# and the compiled twin's own.

def read_headers(acc: EventSink, state: StreamState, cache: dict, raw: bytes, offset: int) -> dict | None:
    """Return a message's headers, read once per distinct block (a stream repeats a few); None if unreadable."""
    headers = cache.get(raw)
    if headers is None:
        try:
            headers = parse_headers(raw)
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            event_unreadable(acc, state, f"event-stream headers unreadable ({exc})", offset)
            return None
        if len(cache) < 64:
            cache[raw] = headers
    return headers


def not_an_event(state: StreamState, headers: dict, kind: str, payload: bytes, offset: int) -> None:
    """Record an exception (or other non-event) message as an in-band error."""
    name = headers.get(":exception-type") or headers.get(":error-code") or kind
    detail = headers.get(":error-message") or payload.decode("utf-8", "replace")
    state.error("in-band error", f"{name}: {detail}", offset, payload)


def crc_mismatch(acc: EventSink, state: StreamState, offset: int) -> None:
    """Record a message whose CRC does not match (it is skipped, and cuts what is open)."""
    event_unreadable(acc, state, "event-stream message CRC mismatch; message skipped", offset)


def skipped(acc: EventSink, state: StreamState, start: int, upto: int) -> None:
    """Record the bytes skipped after a damaged prelude, up to the next good one (they cut what is open)."""
    event_unreadable(acc, state, f"event-stream prelude damaged; skipped {upto - start} bytes", start)


def ends_inside(acc: EventSink, state: StreamState, left: bytes, offset: int) -> None:
    """Record bytes at the end of the stream that never made a whole message (they cut what is open)."""
    event_unreadable(acc, state, f"event stream ends inside a message ({len(left)} bytes)", offset, left[:200])


_FIXED = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


def parse_headers(data: bytes) -> dict[str, Any]:
    """Return an event-stream message's headers as a dict (strings decoded, other values raw)."""
    headers: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        name_len = data[pos]
        name = data[pos + 1:pos + 1 + name_len].decode("utf-8")
        pos += 1 + name_len
        kind = data[pos]
        pos += 1
        if kind in (0, 1):
            value: Any = kind == 0
        elif kind in (6, 7):
            (size,) = struct.unpack_from(">H", data, pos)
            raw = data[pos + 2:pos + 2 + size]
            if len(raw) != size:
                raise ValueError("header value cut short")
            value = raw.decode("utf-8") if kind == 7 else raw
            pos += 2 + size
        elif kind in _FIXED:
            value = data[pos:pos + _FIXED[kind]]
            if len(value) != _FIXED[kind]:
                raise ValueError("header value cut short")
            pos += _FIXED[kind]
        else:
            raise ValueError(f"unknown header type {kind}")
        headers[name] = value
    return headers


def make_framer(kind: str, acc: EventSink, state: StreamState) -> Any:
    """Return the framer object for a framing other than SSE."""
    if kind in JSON_VALUES:
        return JSONArrayFramer(acc, state)
    return NDJSONFramer(acc, state) if kind == NDJSON else EventStreamFramer(acc, state)


def route(acc: EventSink, state: StreamState, data: bytes, own: tuple = (SSE,)) -> bytes | None:
    """Feed bytes that the twin does not frame itself; return them when it does after all.

    own: the framings the twin frames in place (SSE for both; the compiled twin all three).
    Called only while the framing is unknown or is not one of those.
    """
    if state.framing is None:
        if state.head:
            kind = _hold_or_choose(state, data)
            if kind is None:
                return None
            head, state.head = bytes(state.head), b""
        else:  # the first read: most bodies tell at once, and a large read is not copied to be looked at
            kind = choose(data, otherwise=state.fallback, blanks=state.event_limit)
            if kind is None:
                state.head = bytearray(data)
                state.brace = b"{" in data
                return None
            head = data
        state.framing = kind
        if kind in own:
            return head
        data = head
    elif state.framing in own:
        return data
    if state.framer is None:
        state.framer = make_framer(state.framing, acc, state)
    state.framer.feed(data)
    return None


def _hold_or_choose(state: StreamState, data: bytes) -> str | None:
    """Add data to the bytes held while the framing is unknown; return the framing once they tell, else None.

    What is held is a BOM and blanks, and perhaps a first "{" with spaces after it (state.brace: its
    line's end tells, _after_brace): past a BOM's three bytes only the new data can tell, so it
    alone is looked at (a body opening with megabytes of blank lines, fed a byte at a time, looked
    at the whole held head at every read: quadratic). Blanks longer than Limits.event_bytes are not
    held on: the framing is then the format's own, whatever comes next.
    """
    held = state.head
    if len(held) < 3:  # a BOM may still be arriving: the whole head, a few bytes, tells
        head = bytearray(held)
        head += data
        state.head = head
        kind = choose(head, otherwise=state.fallback, blanks=state.event_limit)
        state.brace = kind is None and b"{" in head
        return kind
    # The blanks held: all of it but a BOM and a "{" whose line has not ended yet (state.brace).
    blanks = len(held) - (3 if held.startswith(BOM) else 0) - state.brace
    held += data  # (a bytearray: it grows in place)
    room = state.event_limit - blanks
    if state.brace:
        return _after_brace(data, False, state.fallback, room)
    kind = _by_first(data, False, state.fallback, room)
    state.brace = kind is None and b"{" in data
    return kind


def finish(acc: EventSink, state: StreamState, own: tuple = (SSE,)) -> bytes | None:
    """At the end of the stream: settle the framing and flush the framer; return bytes still due to the twin."""
    if state.framing is None:
        head, state.head = bytes(state.head), b""
        state.framing = choose(head, final=True, otherwise=state.fallback, blanks=state.event_limit) or state.fallback
        if state.framing in own:
            return head
        state.framer = make_framer(state.framing, acc, state)
        state.framer.feed(head)
    if state.framer is not None:
        state.framer.end()
    return None
