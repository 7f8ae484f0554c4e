"""Tell whether a growing JSON text has become one complete value, reading each byte once.

The slot rules ask whether a call's arguments are complete each time a fragment with another id
comes to its index (_slots._find_slot): a server that sends a fresh id with every fragment
(Kimi, LM Studio) asks it per fragment. Parsing the whole text each time made such a call of n
bytes cost n squared (a 4 MB call: 37 s); this reader carries its place from one ask to the next.
"""

from __future__ import annotations

import re

from ._finalize import parses

_STRUCTURE = re.compile(rb'["{}\[\]]')  # what changes the depth outside strings
_IN_STRING = re.compile(rb'["\\]')      # what ends a string, or escapes the next byte
_WHITESPACE = b" \t\r\n"


class JsonEnd:
    """Where a text that begins with an object or an array stands: depth, inside a string, closed.

    For any other text (a scalar, or nothing yet but whitespace) it knows nothing, and ask()
    parses the whole text as before: arguments are objects.
    """

    __slots__ = ("started", "pos", "depth", "in_string", "escaped", "closed", "verdict")

    def __init__(self) -> None:
        self.started = False     # the text's first byte but whitespace came, an object's or array's
        self.pos = 0             # bytes read so far
        self.depth = 0           # objects and arrays open
        self.in_string = False
        self.escaped = False     # the last byte read was a backslash inside a string
        self.closed = -1         # where the outermost value closed; -2: text after it, never complete
        self.verdict: bool | None = None  # whether the text up to the close parses (asked once)

    def ask(self, buf: bytes | bytearray) -> bool:
        """Tell whether buf, the text read before and what was appended since, is one complete JSON value."""
        if not self.started:
            rest = buf[self.pos:].lstrip(_WHITESPACE)
            if not rest:
                self.pos = len(buf)  # whitespace so far
                return False
            if rest[:1] not in (b"{", b"["):
                return parses(buf)  # a scalar: read whole, as before
            self.started = True
            self.pos = len(buf) - len(rest)
        self._read(buf)
        if self.closed < 0:
            return False
        if self.verdict is None:
            self.verdict = parses(buf[:self.closed])  # once: what follows the close is whitespace only
        return self.verdict

    def read_more(self, data: bytes | bytearray) -> None:
        """Read data, which follows all the text read so far, for its structure only: it is not in a buffer."""
        if self.closed == -2:
            return
        if not self.started:
            rest = bytes(data).lstrip(_WHITESPACE)
            if not rest:
                return
            if rest[:1] not in (b"{", b"["):
                self.closed = -2  # a scalar: not followed (arguments are objects)
                return
            self.started = True
            data = rest
        self.pos = 0  # positions from here on are in data, which is all read
        self._read(data)

    def _read(self, buf: bytes | bytearray) -> None:
        """Read what was appended to buf since the last ask."""
        i, n = self.pos, len(buf)
        self.pos = n
        if self.closed != -1:
            if self.closed >= 0 and buf[i:n].strip(_WHITESPACE):
                self.closed = -2  # more than whitespace after the value: not one value
            return
        depth, in_string, escaped = self.depth, self.in_string, self.escaped
        while i < n:
            if in_string:
                if escaped:
                    escaped = False
                    i += 1
                    continue
                found = _IN_STRING.search(buf, i)
                if found is None:
                    break
                i = found.end()
                if buf[found.start()] == 0x5C:  # a backslash: the next byte is escaped
                    escaped = True
                else:
                    in_string = False
                continue
            found = _STRUCTURE.search(buf, i)
            if found is None:
                break
            i = found.end()
            byte = buf[found.start()]
            if byte == 0x22:  # a quote
                in_string = True
            elif byte == 0x7B or byte == 0x5B:  # { [
                depth += 1
            else:
                depth -= 1
                if depth <= 0:
                    # The outermost value closed here (or a stray closer: then it cannot parse).
                    self.closed = i
                    if buf[i:n].strip(_WHITESPACE):
                        self.closed = -2
                    break
        self.depth, self.in_string, self.escaped = depth, in_string, escaped


class CutText:
    """Where the text of a call cut at a size limit stands as sent: the pieces past the cut are read, not kept.

    A cut call keeps a prefix of its text, which never parses; yet a fragment with another id under
    its index must start a new call exactly where, uncut, the text would have been complete
    (_slots._complete asks complete()). Pieces may each repeat the whole text so far (cumulative
    sending, as _slots._append tells it): then the latest piece is the whole text, read whole, and
    complete() is exact. Else each piece continues the text, and is read for its structure only:
    complete() says whether it closed, and cannot tell a text that closes but does not parse.
    """

    __slots__ = ("end", "whole", "pieces", "done", "joined")

    def __init__(self, kept: bytes | bytearray, pieces: int, lengths: list[int] | None = None) -> None:
        """kept: the text the call keeps; pieces: how many pieces it was sent in, all cumulative so far, else -1.

        lengths: the length of each of those pieces (each a prefix of kept), when pieces > 0.
        """
        self.end: JsonEnd | None = JsonEnd()
        self.done = self.end.ask(kept)
        self.pieces = pieces
        # the length and hash of the whole text so far, while a piece may yet repeat it whole
        self.whole = (len(kept), hash(bytes(kept))) if pieces >= 0 else None
        # While the pieces repeat the text, the text as sent should one not: every piece joined
        # (what _append rebuilds then), read for its structure as they come.
        self.joined: JsonEnd | None = None
        if pieces >= 0:
            self.joined = JsonEnd()
            for length in lengths or ():
                self.joined.read_more(kept[:length])

    def read(self, data: bytes) -> None:
        """Read a piece the limit dropped."""
        if self.whole is not None:
            size, digest = self.whole
            n = len(data)
            # (as _append: longer and starting with the text so far; as long, after two pieces)
            if (n > size or (n == size and self.pieces > 1)) and hash(data[:size]) == digest:
                self.whole = (n, hash(data))
                self.pieces += 1
                self.end = JsonEnd()
                self.done = self.end.ask(data)  # the whole text: as exact as uncut
                self.joined.read_more(data)  # type: ignore[union-attr]  # (set while whole is)
                return
            # Not cumulative after all: the text as sent is every piece joined, this one too.
            self.whole = None
            self.end, self.joined = self.joined, None
        if self.end is not None:
            self.end.read_more(data)

    def complete(self) -> bool:
        """Tell whether the text as sent is complete (a text closed in dropped bytes is taken to parse)."""
        end = self.end
        if end is None:
            return False
        if self.whole is not None:
            return self.done
        return end.closed >= 0 and end.verdict is not False
