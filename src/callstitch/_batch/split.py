"""Find where one captured response ends and the next begins, in responses stored back to back.

A splitter looks for each format's terminator with one compiled regex over the whole buffer
(the search runs in C; Python only sees the few hits, about one per response), checks the
hit's context (an SSE ``data:``/``event:`` line or a top-level JSON ``"type"``), and cuts at
the end of the terminating event:

=================  =================================================================
openai-chat        ``data: [DONE]``
openai-responses   ``response.completed`` / ``.failed`` / ``.incomplete``
anthropic          ``message_stop``
cohere             ``message-end``
bedrock            ``messageStop``, and the ``metadata`` event that follows it
ollama             a line whose top-level ``"done"`` is true
gemini             the chunk with a ``finishReason`` (unless the next chunk carries the
                   same ``responseId``), and wherever a new ``responseId`` begins
openai-chat as     wherever a chunk with a new ``id`` begins (no ``[DONE]`` is written in
JSON lines         JSON lines): a line that opens with its ``"id"``, as the SDKs write chunks
a JSON array       its closing ``]`` (Gemini without ``alt=sse``, whatever the format):
                   a ``]`` at the start of a line, as Google writes it, or one followed
                   by a line break and the next body's ``[``
=================  =================================================================

``Splitter.scan(buf, pos, final)`` is all the machinery needs: it returns the cuts found in
``buf[pos:]`` and how far the bytes certainly belong to the stream in progress, so a caller
can feed those at once and keep only the rest (a few hundred bytes, or an unfinished
terminating event until it is known where its response ends) for the next read.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import Any, Iterator

import orjson

from .._formats.dispatch import decode_payload
from .._formats.registry import ADAPTERS, DEFAULT_FRAMING, DETECTION, TERMINATORS, WHOLE
from .._limits import Limits, as_numbers
from .._wire.framing import _IN_STRING, _STRUCTURE, EVENTSTREAM, JSONARRAY, JSONDOCS, NDJSON, SSE, choose, parse_headers

__all__ = ["Splitter", "HOLD", "by_cuts"]

# Bytes kept back at the end of a buffer with no hit, so a terminator cut by the read is seen whole.
HOLD = 256
# In a glued capture the next response's first data line comes this close after the terminating
# event's data line (its event or id line, a keep-alive between). Past it, the lines that follow
# with no blank line are the terminating event's own, however many: fed, not held (_unglued_end).
GLUE_GAP = 1 << 16
# Bytes kept back while a terminating event runs on to its blank line: one cut by the read is seen whole.
_BLANK_HELD = 3
# Splitter._running: the scan is in a response's last event, which runs on to its blank line. The
# response ends there (_CUT), or there unless Bedrock's metadata event follows (_CONFIRM: then at
# that one's end), or (a Gemini finish chunk with more lines in its event: no finish) goes on (_PASS).
_CUT, _CONFIRM, _PASS = 1, 2, 3

# A blank line ends an SSE event: a line end (CRLF, a CR with no LF after it, an LF), then an empty line's.
_SSE_END = re.compile(rb"(?:\r\n|\r(?!\n)|\n)(?:\r\n?|\n)")
_LINE_END = re.compile(rb"\r?\n|\r")
_CONTENT = re.compile(rb"[^ \t\r\n]")
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")  # how an SSE line may start
_BLANK_OR_COMMENT = re.compile(rb"(?:[ \t\r\n]+|:[^\r\n]*[\r\n])*")  # blank lines, SSE comments (keep-alives)
_TYPE_CONTEXT = re.compile(rb'(?:"type"\s*:\s*"|[\r\n]event:[ ]?)$')
_DONE_CONTEXT = re.compile(rb"[\r\n]data:[ \t]*$")
_BEDROCK_CONTEXT = re.compile(rb'(?:[\r\n]event:[ ]?|[\r\n](?:data:[ \t]*)?\{\s*")$')
_METADATA = re.compile(rb'(?:event:[ ]?metadata[\r\n]|(?:data:[ \t]*)?\{\s*"metadata")')
_ERROR_CONTEXT = re.compile(rb'[\r\n](?:event:[ ]?|data:[ \t]*\{\s*")$')
_DONE_LINE = re.compile(rb"data:[ \t]*\[DONE\]")
# A [DONE] line as the twins read one: nothing but blanks after it on its line (else a malformed chunk).
_DONE_ALONE = re.compile(rb"data:[ \t]*\[DONE\][ \t]*(?:\r\n|\r|\n|\Z)")
# A data line with something in it: after a terminator's, the next response's when a capture glued it on (_unglued_end).
_DATA_LINE = re.compile(rb"data:[ \t]*[^ \t\r\n]")
_EVENT_LINE = re.compile(rb"[\r\n](?:data|event|id|retry)?:")  # a line opening with an SSE field (ValueEnd.body_end)
# A data line with something in it after the first line of an event (a [DONE] line's: Splitter._confirm).
_LATER_DATA = re.compile(rb"[\r\n]data:[ \t]*[^ \t\r\n]")
# What follows a [DONE] line that runs straight into the next response (see _glued_done).
_INTO_NEXT = re.compile(rb"[ \t]*(?:\r\n|\r|\n)(?:event|data):")
# SSE formats with rules of their own below, where the terminating event is not the response's
# last (Bedrock's metadata event follows its messageStop) or is found by parsing its line (Gemini):
# every other SSE format's terminating event is its last, and a glued one is cut (_unglued_end).
_OWN_END_RULES = frozenset(("bedrock", "gemini"))
_STRING_TEXT = rb'"((?:[^"\\]|\\.)*)"'  # a JSON string, escapes and all (json.dumps writes \uXXXX for non-ASCII)
_RESPONSE_ID = re.compile(rb'"responseId"\s*:\s*' + _STRING_TEXT)
# An OpenAI chat chunk's own id, in JSON lines: the first key of a line's object, as the SDKs and
# json.dumps of a chunk write it (a call's "id" is never a line's first key). A line that puts
# another key first tells nothing: its response is then not cut from the next.
_CHUNK_ID_AT = re.compile(rb'\{\s*"id"\s*:\s*' + _STRING_TEXT)  # at a line's start (a buffer's first line)
_CHUNK_ID = re.compile(b"\n" + _CHUNK_ID_AT.pattern)  # … after a line break
# A JSON string holds no raw line break, so a "]" just after one, or one followed by a line break
# and a "[", is never inside a string: it closes an array, and at the start of a line (pretty-
# printed, every inner line is indented) or before another array, the outermost one.
_ARRAY_END = re.compile(rb"(?<=[\r\n])\]|\](?=[ \t\r\n]*[\r\n][ \t\r\n]*\[)")

# What ends one response of each format: the registry's terminators (OpenAI chat's is [DONE]).
_NEEDLES = TERMINATORS
# An in-band error event also ends an OpenAI-style response (with or without a [DONE] after it).
# Searching for it everywhere would double the cost of the scan, so it is looked for only inside
# a stream that turned out to hold an in-band error (see Splitter.error_cuts).
_OPENAI_ERROR = re.compile(rb'error(?=[\r\n]|"\s*:)')
_ES_STOP = re.compile(re.escape(b"\x0b:event-type\x07\x00\x0bmessageStop"))
_ES_PRELUDE = 12
_CONTEXT_WINDOW = 48

SPLITTABLE = _NEEDLES.keys()  # a live view: a format registered later is splittable too


def _next_hit(needles: tuple, found: list, buf: bytes, pos: int) -> re.Match | None:
    """Return the earliest match at or after pos of any needle; found keeps each needle's next (None: no more)."""
    m = None
    for i, rx in enumerate(needles):
        hit = found[i]
        if hit is False or hit is not None and hit.start() < pos:
            hit = found[i] = rx.search(buf, pos)
        if hit is not None and (m is None or hit.start() < m.start()):
            m = hit
    return m


def _line_start(buf: bytes, pos: int, floor: int) -> int:
    """Return where the line holding pos starts (not before floor); the LF of a CRLF is its line's."""
    if pos > floor and buf[pos - 1] == 0x0D and buf[pos:pos + 1] == b"\n":
        pos -= 1  # (else a read held back from there starts between the CR and the LF: _event_start)
    return max(buf.rfind(b"\n", floor, pos), buf.rfind(b"\r", floor, pos)) + 1 or floor


def _within_cap(buf: bytes, start: int, end: int, cap: int) -> bool:
    """Tell whether buf[start:end] lies in the first cap bytes of its line (buf's start counts as a line's)."""
    lo = end - cap - 1  # the line must start after a line break here or later
    return lo < 0 or buf.rfind(b"\n", lo, start) >= 0 or buf.rfind(b"\r", lo, start) >= 0


_BLANK_SPAN = 4096  # the first window _blank_line looks in: most events are shorter


def _blank_line(buf: bytes, pos: int) -> re.Match | None:
    """Return the first blank line at or after pos, as _SSE_END.search does, at bytes.find's speed over many lines.

    Every match holds LF LF, LF CR or CR CR at its start or one byte on, so none starts
    before the first of those less one byte.
    """
    n = len(buf)
    lo, span = pos, _BLANK_SPAN
    while True:
        # Looked for window after window, each growing fourfold, each pair only before the first
        # one found: a pair absent from the capture (CR ones from an LF capture, LF LF from a CRLF
        # one) must not send every call over the rest of the read (quadratic: 3.6 MB/s on a 4 MB
        # read of small LF responses, 8 MB/s on Gemini's CRLF ones).
        hi = min(n, lo + span)
        first, end = -1, hi + 1  # (a pair may start at the window's last byte)
        for pair in (b"\n\n", b"\n\r", b"\r\r"):
            at = buf.find(pair, lo, end)
            if at >= 0:
                first, end = at, at + 1
        if first >= 0:
            return _SSE_END.search(buf, max(pos, first - 1))
        if hi >= n:
            return None
        lo, span = hi, span * 4


def _unglued_end(buf: bytes, start: int, end: int, complete: bool = True) -> int | None:
    """Return where the terminating event in buf[start:end] ends, when a capture glued the next response on.

    Written without the blank line after each response, captures put back to back run a
    response's last event into the next one's first: a second data line follows the
    terminator's (in one response never valid: the event's data would be two JSON texts, or
    "[DONE]" and one). The cut then goes right after the terminator's data line; else it stays
    at end. An event line alone after the data line is no sign of it: some servers write an
    event's data line before its event line. Nor is a data line more than GLUE_GAP bytes after the
    terminator's line (its data line, once passed): the event then runs on to its blank line.

    complete: end is the event's end (its blank line, or the input's). Else buf[start:end] is the
    event so far, and the answer is end once no glued data line can come any more (the event
    runs on), or None while the next read may bring one.
    """
    p = start
    cut = -1  # just after the terminator's data line, once it is passed
    mark = start  # a glued data line starts within GLUE_GAP of here: the terminator's line, then its data line
    while p < end:
        if p - mark > GLUE_GAP:
            return end
        e = _LINE_END.search(buf, p, end)
        if e is not None and not complete and e.end() == end and buf[end - 1] == 0x0D:
            e = None  # a CR the read ends with may be the first half of a CRLF
        if e is None:  # the last line, still arriving unless complete
            if complete:
                return end
            head = buf[p:min(end, p + 7)]  # enough to tell a glued data line (_DATA_LINE) from any other
            if cut >= 0 and head[:1] == b"{":
                return cut  # a JSON body glued on: a response of its own (_lone_values)
            if b"data:".startswith(head[:5]):
                if cut < 0:
                    return None  # the terminator's data line
                if _DATA_LINE.match(head):
                    return cut
                if len(head) < 7:
                    return None  # it may yet be a glued data line
            return end if end - mark > GLUE_GAP else None
        if e.start() == p:
            return end  # the blank line that ends the event
        if cut >= 0:
            if _DATA_LINE.match(buf, p) or buf[p] == 0x7B:  # (or a JSON body glued on, a response of its own)
                return cut
        elif buf.startswith(b"data:", p):
            cut = mark = e.end()
        p = e.end()
    return end if complete else None


def _opens_event(buf: bytes, line_start: int, floor: int) -> bool:
    """Tell whether the data line at line_start is its SSE event's first: no data line since the blank line before it.

    A [DONE] line right after another data line is part of that event (its data is then no
    terminator, and both twins read on): the splitter must not cut there either. Before floor
    nothing is seen: a line there counts as an event's first.
    """
    p = line_start
    while p > floor:
        end = p - 1  # the line break before p (CRLF: its LF)
        if end > floor and buf[end] == 0x0A and buf[end - 1] == 0x0D:
            end -= 1
        start = _line_start(buf, end, floor)
        if start == end:
            return True  # a blank line: an event ends there
        if buf.startswith(b"data", start):
            return False
        p = start  # an event, id or retry field, or a comment: look further back
    return True


def _glued_done(head: bytes) -> bool:
    """Tell whether an OpenAI chat capture glues responses together: a [DONE] line straight before the next one's.

    Its first two [DONE]s tell (a capture is written one way throughout): found with bytes.find,
    which stops there, where a search of the whole head would cost a third of reading it.
    """
    at = -1
    for _ in range(2):
        at = head.find(b"[DONE]", at + 1)
        if at < 0:
            return False
        if _INTO_NEXT.match(head, at + 6):
            return True
    return False


def by_cuts(fmt: str, framing: str, head: bytes) -> bool:
    """Tell whether a source's responses are cut by the splitter, not by each Accumulator halting at its end.

    Both twins halt right after an OpenAI chat [DONE] event, which saves the splitter's scan; a
    capture that glues each [DONE] line to the next response's first line (no blank line between)
    is cut by the splitter, which tells where such a response ends (_unglued_end). Decided
    by the source's first bytes, so every range task of a source feeds the same way.
    """
    return not (fmt == "openai-chat" and framing == SSE and not _glued_done(head))


def _data_payload(line: bytes) -> bytes:
    line = line.strip(b" \t\r\n")
    if line.startswith(b"data:"):
        line = line[5:]
    return line


class Splitter:
    """Cut a buffer of back-to-back responses of one format and framing into streams."""

    def __init__(self, format: str, framing: str, *, errors: bool = False, glued: bool = True,
                 line_cap: int = 1 << 62) -> None:
        """errors: cut at OpenAI chat's in-band error events too; glued: the capture may glue responses
        (by_cuts: else OpenAI chat's responses end where the Accumulator halts, which this then tells);
        line_cap: Limits.event_bytes of the accumulators fed (line_cap_of)."""
        self.format = format
        needle = _NEEDLES.get(format)
        self._needle = needle
        self._needles: tuple = (needle,)
        if errors and format == "openai-chat":
            self._needles = (needle, _OPENAI_ERROR)
        self._glued = glued
        self._set_framing(framing)
        self._id: bytes | None = None
        self._id_cut = -1
        self._id_cache: list | None = None  # [upto, from, ids of buf[from:upto], next to look at]: _new_id
        # 0, or _CUT, _CONFIRM, _PASS (above): what comes until that blank line is fed, not held.
        self._running = 0
        # The bytes of the running terminating event fed so far (None: a Bedrock metadata event,
        # which counts whatever its length): past the line cap it makes no cut (_over_cap).
        self._run_bytes: int | None = None
        # Whether the next buffer scanned starts a line (the input's start, or just after a line
        # break): a JSON array's cut falls just after a "]", inside a line, and a "]" there closes
        # no array (_scan_array). A range task that starts at such a cut says so (streams.read_body).
        self.at_line_start = True
        # A line or event longer than this is not held whole to be looked into (SSE, NDJSON): the
        # accumulators drop it as it streams past (Limits.event_bytes), and so the splitter lets it
        # go too, so that its memory is bounded by the limits as theirs is. A terminator inside such
        # a line or event makes no cut: the accumulators never see it either.
        self._line_cap = line_cap + HOLD
        self._mid_line = False  # the last scan let part of such a line go: its rest is not looked into
        # Whether the scan stands where a response may begin (the input's start, or a cut), and
        # where the JSON body being passed ends, when one came there instead of events (SSE only:
        # _lone_values). A range task's first_cut, which starts to look inside a response, says False.
        self.at_response_start = True
        self._value: ValueEnd | None = None
        # JSON documents back to back (JSONDOCS): where the scan stands in them, from the source's start.
        self._document = ValueEnd()
        self._documents = 0   # documents begun so far
        self._closed = False  # a document closed, and no line break has come since

    def _set_framing(self, framing: str) -> None:
        """Scan by this framing's rules from now on (a source of documents may go on in another: _between)."""
        self.framing = framing
        self._unglue = self._glued and framing == SSE and self.format not in _OWN_END_RULES
        # Responses told apart by an id their every chunk carries: Gemini's responseId, an OpenAI
        # chat chunk's id in JSON lines (_new_id); the id of the one in progress.
        self._by_id = self.format == "gemini" or (self.format == "openai-chat" and framing == NDJSON)
        # JSON lines of a format whose response may come whole (not streamed), one a line: each such
        # line is a response of its own (_whole_lines); how to tell one, or None.
        self._whole = (WHOLE.get(self.format, _any_whole if self.format == "auto" else None)
                       if framing == NDJSON else None)
        self._whole_seen = False  # a line that is a whole response has come in this source
        adapter = ADAPTERS.get(self.format)
        self._event = (lambda obj: adapter.claims(None, obj)) if adapter is not None else _any_event

    def error_cuts(self, segment: bytes) -> list[int]:
        """Return the cuts inside one stream's bytes that an in-band error event makes (OpenAI style).

        Called only for a stream whose result holds an in-band error: a response that a server
        ended with an error and no [DONE] then runs into the next one.
        """
        if self.format != "openai-chat" or self.framing == EVENTSTREAM:
            return []
        cuts, _ = Splitter(self.format, self.framing, errors=True, glued=self._glued).scan(segment, 0, True)
        return [c for c in cuts if _CONTENT.search(segment, c) is not None]

    def scan(self, buf: bytes, pos: int, final: bool) -> tuple[list[int], int]:
        """Return (cuts, safe): the cuts in buf[pos:], and the end of the bytes that may be fed now.

        Every byte before ``safe`` belongs to the streams the cuts delimit (the last one still
        open); bytes from ``safe`` on must be scanned again with what the next read brings.
        With ``final`` the buffer is the end of the input, and ``safe`` is its length.
        """
        self._id_cache = None  # (positions in the last buf)
        if self.framing == EVENTSTREAM:
            return self._scan_eventstream(buf, pos, final)
        if self.framing == JSONARRAY:
            return self._scan_array(buf, pos, final)
        if self.framing == JSONDOCS:
            return self._scan_documents(buf, pos, final)
        if self._needle is None:
            if self._whole is None or not self.at_response_start:
                return [], len(buf)
            cuts: list[int] = []
            pos, told = self._whole_lines(buf, pos, final, cuts)  # (a source whose format is not known yet)
            return cuts, (len(buf) if told else pos)
        cuts = []
        n = len(buf)
        if self._running:
            e = self._event_end(buf, pos, final)
            if e is None:
                safe = n if final else max(pos, n - _BLANK_HELD)
                if self._run_bytes is not None:
                    self._run_bytes += safe - pos
                return cuts, safe
            end = e.end()
            if self._run_bytes is not None and self._run_bytes + end - pos > self._line_cap:
                self._running = _PASS  # the event turned out over the cap: the accumulators drop it
            if self._running == _CONFIRM:
                verdict = self._confirm(buf, pos, end, final)
                if verdict is None:
                    if self._run_bytes is not None:
                        self._run_bytes += e.start() - pos
                    return cuts, e.start()
                end = verdict[1]
                if end < 0:  # the metadata event runs on in turn
                    self._running, self._run_bytes = _CUT, None
                    return cuts, n - _BLANK_HELD
            if self._running != _PASS and (end < n or not final):
                cuts.append(end)
                self.at_response_start = True
            self._running = 0
            pos = end
        if self._mid_line:  # the rest of an over-long line: no cut inside it, none looked for
            e = _LINE_END.search(buf, pos)
            if e is None:
                return cuts, n
            self._mid_line = False
            pos = e.start()
        gemini = self.format == "gemini"
        by_id = self._by_id
        self._id_cut = -1  # where this scan last cut for a new id (a position in this buf)
        needles = self._needles
        found: list = [False] * len(needles)  # the next hit of each needle (None: no more)
        # Where the lines looked back on start: pos after a cut, never after a hit turned down (that
        # is inside a line, and a line start looked for from there would be no line's start).
        floor = pos
        while True:
            if self.at_response_start and self._whole is not None:
                pos, told = self._whole_lines(buf, pos, final, cuts)
                if not told:
                    return cuts, pos  # (the line that tells is not all here yet)
                floor = pos
            if self.at_response_start or self._value is not None:
                went = self._lone_values(buf, pos, final, cuts)
                if went < 0:
                    return cuts, n
                pos = floor = went
            m = _next_hit(needles, found, buf, pos)
            if m is None:
                # Keep the last line back (a terminator may be cut by the read): the next
                # scan then starts at a line start, where the context checks hold.
                safe = n if final else _line_start(buf, max(pos, n - HOLD), floor)
                open_line = False
                if n - safe > self._line_cap:  # (one line: no line end after n - HOLD, or safe would be past it)
                    last = max(buf.rfind(b"\n", safe), buf.rfind(b"\r", safe))
                    # Still open: let it all go, and skip its rest in the next scans; else it ended
                    # within the last HOLD bytes, and the lines after it are held as any are.
                    safe, open_line = (n, True) if last < 0 else (last + 1, False)
                if by_id:  # (up to where it is let go: a new id may open the long line, or a line after it)
                    cut = self._new_id(buf, pos, safe)
                    if cut is not None:
                        cuts.append(cut)
                        pos = floor = self._id_cut = cut
                        self.at_response_start = True
                        continue
                self._mid_line = open_line
                return cuts, safe
            hit = m.start()
            if not self._context_ok(buf, hit, floor):
                pos = m.end()
                continue
            line_start = _line_start(buf, hit, floor)
            if by_id:  # (before the hit's end is looked for: a new response may start before the hit)
                cut = self._new_id(buf, pos, line_start)
                if cut is not None:
                    cuts.append(cut)
                    pos = floor = self._id_cut = cut
                    self.at_response_start = True
                    continue
            e = self._event_end(buf, m.end(), final)
            if e is None and not final:
                # Whatever follows the terminator with no blank line must not all be held: once it
                # is known where the response ends (or that it does not), it is fed as it comes.
                glued = _unglued_end(buf, line_start, n, False) if self._unglue else None
                if glued is not None and glued < n:  # (a glued cut has a data line after it: never at n)
                    end = glued
                else:
                    # (The cap is checked before the modes that run on unheld, which would cut
                    # at the blank line an event past the cap that a whole read drops: _over_cap.)
                    if gemini and self.framing == SSE and _chunk_then_more(buf, line_start, n):
                        self._running = _PASS
                    elif n - line_start > self._line_cap:
                        pos = m.end()  # its event is over the accumulators' limit: they drop it, terminator and all
                        continue
                    elif glued == n:
                        self._running = _CUT  # no glued response can follow: the blank line ends it
                    elif self.format == "bedrock" and self.framing == SSE:
                        self._running = _CONFIRM
                    else:
                        return cuts, line_start  # (unended: a glued capture's, GLUE_GAP past its data line at most)
                    safe = max(m.end(), n - _BLANK_HELD)
                    self._run_bytes = safe - line_start
                    return cuts, safe
            else:
                end = n if e is None else e.end()
                # Glued needs a second "data:" in the event: counted in one pass at C speed first (the
                # terminating event can be long, a Responses one repeats the whole output).
                if self._unglue and buf.count(b"data:", line_start, end) > 1:
                    end = _unglued_end(buf, line_start, end) or end  # (None only for an event still arriving)
            if self._over_cap(buf, line_start, end):
                pos = m.end()  # as above, though this read holds it whole: the same cut whatever the reads
                continue
            verdict = self._confirm(buf, line_start, end, final)
            if verdict is None and n - line_start > self._line_cap and not gemini:
                # What would tell runs on past the accumulators' limit (they drop it): decided on what came.
                verdict = self._confirm(buf, line_start, end, True)
            if verdict is None:  # more bytes are needed to decide
                return cuts, line_start
            ok, end = verdict
            if end < 0:  # Bedrock's metadata event, the response's too, runs on to its blank line
                self._running, self._run_bytes = _CUT, None
                return cuts, n - _BLANK_HELD
            pos = floor = end
            if ok and (end < n or not final):
                cuts.append(end)
                self._id = None
                self.at_response_start = True

    def _over_cap(self, buf: bytes, line_start: int, end: int) -> bool:
        """Tell whether a terminating event read whole (from its hit's line to end) is past the line cap.

        A read that ends inside such an event lets it go, terminator and all (scan): a read
        that holds it whole must drop it too, or the cut would depend on where the reads fall.
        A Gemini chunk with more lines in its event is no finish whatever its length (_confirm).
        """
        if end - line_start <= self._line_cap:
            return False
        return not (self.format == "gemini" and self.framing == SSE and _chunk_then_more(buf, line_start, end))

    def _lone_values(self, buf: bytes, pos: int, final: bool, cuts: list[int]) -> int:
        """Cut after each JSON body that comes where a response begins; return where the events begin, or -1.

        Over SSE a server that fails sends a JSON body instead of a stream (an error; compact or
        pretty-printed), and a log may hold a response not streamed: either is a response of its
        own, ending where its value closes. Read on as events, it took the next response in too,
        and gave it the error. -1: nothing but that value and blanks in buf (all may be fed).
        """
        if self.framing != SSE:
            self.at_response_start = False
            return pos
        n = len(buf)
        while True:
            if self._value is None:
                m = _CONTENT.search(buf, pos)
                if m is None:
                    return -1  # (blanks: the next content may still begin a value)
                at = m.start()
                if buf[at] != 0x7B:  # (what comes before it on its line is blank: as _Halts.feed tells one)
                    self.at_response_start = False
                    return pos  # events: the scan goes on by the framing's rules
                self._value = ValueEnd()
                pos = at
            end = self._value.body_end(buf, pos, n)
            if end < 0:
                return -1
            self._value = None
            if end < n or not final:
                cuts.append(end)
            pos = end

    def _whole_lines(self, buf: bytes, pos: int, final: bool, cuts: list[int]) -> tuple[int, bool]:
        """Cut after each line that is a whole response (one not streamed) where a response begins.

        Return (where it stopped, whether that is told): told, the first line that is no whole
        response begins there (events: the scan goes on by the framing's rules), or nothing does;
        else the line there runs past buf, and more bytes are needed to tell. A line is parsed
        once, whole (orjson's speed); only one that does not parse is read value by value, for
        several responses glued on it ("{...}{...}": bodies joined with no line end).
        """
        n = len(buf)
        line: tuple[int, int] | None = None  # where the line being read ends, and the next begins (once a line)
        glued = False  # pos is inside that line, just after a value glued to the next
        while True:
            m = _CONTENT.search(buf, pos)
            if m is None:
                return pos, True  # (blanks: still where a response begins)
            at = m.start()
            if not glued:
                line = _line_end(buf, at, min(n, at + self._line_cap))
                if line is None or (line[1] == n and buf[n - 1] == 0x0D and not final):
                    if not final and n - at <= self._line_cap:
                        return pos, False  # its end (or a CR that may be half a CRLF) decides
                    if line is None and n - at > self._line_cap:
                        return self._no_whole_line(at)  # longer than the accumulators take: they drop it
            eol, end = line if line is not None else (n, n)
            obj = _payload(buf[at:eol]) if not glued and buf[at] == 0x7B else _NOT_JSON
            glued = False
            if obj is _NOT_JSON and buf[at] == 0x7B:  # several values on the line? the first alone
                close = ValueEnd().end(buf, at, eol)
                after = _CONTENT.search(buf, close, eol) if close > 0 else None
                if close > 0 and (after is None or buf[after.start()] == 0x7B):
                    obj = _payload(buf[at:close])
                    if after is not None:  # (else the line's last value: the line end is its end)
                        end, glued = close, True
            # An error body is a response of its own (a server sends it instead of any); so is, in
            # a source whose responses come whole, a line that is no event of the format (one that
            # does not parse, say): the next response begins after it, whatever it was.
            if type(obj) is dict and (obj.get("error") is not None or obj.get("type") == "error"):
                pass
            elif obj is _NOT_JSON or not self._whole(obj):  # type: ignore[misc]
                if not self._whole_seen or (obj is not _NOT_JSON and self._event(obj)):
                    return self._no_whole_line(at)
            else:
                self._whole_seen = True
            if end < n or not final:
                cuts.append(end)
            pos = end

    def _no_whole_line(self, at: int) -> tuple[int, bool]:
        """The line at `at` is no whole response: events begin there, read by the framing's rules."""
        self.at_response_start = False
        return at, True

    def _event_end(self, buf: bytes, pos: int, final: bool) -> re.Match | None:
        """Return the first event end at or after pos: a blank line over SSE, a line end over NDJSON.

        None also while a CR that ends a read not the last may be the first half of a CRLF: the
        event then ends one byte on, where both twins halt (they wait for that byte too).
        """
        e = _blank_line(buf, pos) if self.framing == SSE else _LINE_END.search(buf, pos)
        if e is not None and not final and e.end() == len(buf) and buf[-1] == 0x0D:
            return None
        return e

    # -- context and confirmation --------------------------------------------------------------

    def _context_ok(self, buf: bytes, hit: int, floor: int) -> bool:
        fmt = self.format
        if fmt in ("ollama", "gemini"):
            return True  # confirmed by parsing the line
        lo = max(floor, hit - _CONTEXT_WINDOW)
        before = buf[lo:hit]
        if lo == floor:
            before = b"\n" + before  # floor is always a line start (or a cut)
        if fmt == "openai-chat":
            if buf[hit] != 0x5B:  # not "[": an error event ("event: error", or data {"error": ...})
                return _ERROR_CONTEXT.search(before) is not None
            return _DONE_CONTEXT.search(before) is not None and _opens_event(buf, _line_start(buf, hit, floor), floor)
        if fmt == "bedrock":
            return _BEDROCK_CONTEXT.search(before) is not None
        return _TYPE_CONTEXT.search(before) is not None

    def _confirm(self, buf: bytes, line_start: int, end: int, final: bool) -> tuple[bool, int] | None:
        fmt = self.format
        if fmt == "ollama":
            obj = _parse_line(buf[line_start:end])
            return (type(obj) is dict and obj.get("done") is True), end
        if fmt == "gemini":
            if _chunk_then_more(buf, line_start, end):
                return False, end  # (told without parsing it all: a failed parse costs ten times the event's size)
            obj = _parse_line(buf[line_start:end])
            if type(obj) is not dict or not _gemini_finished(obj):
                return False, end
            # A chunk after the finish that carries the same responseId still belongs to it.
            told, following = self._id_after(buf, end, final)
            if not told:
                return None
            same = obj.get("responseId")
            if same is not None and following is not None and following == same.encode("utf-8", "replace"):
                return False, end
            return True, end
        if fmt == "openai-chat" and _DONE_LINE.match(buf, line_start) is not None:
            if _DONE_ALONE.match(buf, line_start) is None:
                return False, end  # "[DONE]" and more on its line: the twins read a malformed chunk, no end
            if not self._unglue and _LATER_DATA.search(buf, line_start, end) is not None:
                return False, end  # another data line in its event: its data is no "[DONE]" (not glued: no cut)
        elif fmt == "openai-chat":
            # An error event: a [DONE] right after it still belongs to this response.
            nxt = _CONTENT.search(buf, end)
            if nxt is None:
                return (True, end) if final else None
            if len(buf) - nxt.start() < 16 and not final:
                return None
            if _DONE_LINE.match(buf, nxt.start()):
                e2 = self._event_end(buf, nxt.start(), final)
                if e2 is None and not final:
                    return None
                return True, (e2.end() if e2 else len(buf))
            return True, end
        if fmt == "bedrock":
            at = _BLANK_OR_COMMENT.match(buf, end).end()  # type: ignore[union-attr]  # (a keep-alive may come first)
            if at == len(buf) or buf[at] == 0x3A:  # (":": a keep-alive the read cut, with no line end yet)
                return (True, end) if final else None
            if len(buf) - at < 32 and not final:
                return None
            if _METADATA.match(buf, at):
                e2 = self._event_end(buf, at, final)
                if e2 is None:
                    if final:
                        return True, len(buf)
                    # -1: over SSE it ends at the next blank line, which a later read brings (Splitter._running)
                    return (True, -1) if self.framing == SSE else None
                return True, e2.end()
            return True, end
        return True, end

    def _id_after(self, buf: bytes, end: int, final: bool) -> tuple[bool, bytes | None]:
        """Return (whether buf tells, the responseId of the Gemini chunk after the event ending at end, or None).

        Looked for as _ids does, in the first line cap of its line's bytes, and only in a chunk that
        starts within the cap of end (blank lines past it say nothing): bytes every read holds.
        """
        cap = self._line_cap
        n = len(buf)
        nxt = _CONTENT.search(buf, end, end + cap)
        if nxt is None:
            return final or n >= end + cap, None
        stop = _line_start(buf, nxt.start(), end) + cap
        e2 = self._event_end(buf, nxt.start(), final)
        if e2 is not None:
            stop = min(stop, e2.end())
        elif not final and n < stop:
            return False, None
        m = _RESPONSE_ID.search(buf, nxt.start(), stop)
        return True, (None if m is None else m.group(1))

    def _new_id(self, buf: bytes, pos: int, upto: int) -> int | None:
        """Return where a chunk with a new id (Gemini's responseId, a chat chunk's) starts in buf[pos:upto], if any.

        Called again from each cut it returns, up to the same upto: the ids of buf[pos:upto] are
        found once a scan (_id_cache), so many small responses in one read cost their length, not
        their number times the read's.
        """
        if upto <= pos:
            return None
        cache = self._id_cache
        if cache is None or cache[0] != upto or cache[1] > pos:
            unchanged = self._id is not None and self._all_current(buf, pos, upto)
            found = [] if unchanged else list(self._ids(buf, pos, upto))
            cache = self._id_cache = [upto, pos, found, 0]
        ids = cache[2]
        for i in range(cache[3], len(ids)):
            at, value = ids[i]
            if at < pos:
                continue
            if self._id is None:
                self._id = value
            elif value != self._id:
                start = _event_start(buf, at, pos, self.framing)
                if start == pos == self._id_cut:  # the cut just made is this id's: it is the current one now
                    self._id = value
                    continue
                cache[3] = i  # (asked again from that cut, this id is the first looked at)
                # The id is the current one from its cut on, even if no call from the cut looks at it
                # again (the scan may hold the line that carries it back for the next read).
                self._id = value
                # (at pos itself when the scan resumed there: the bytes before went to the response before)
                return start
        cache[3] = len(ids)
        return None

    def _ids(self, buf: bytes, pos: int, upto: int) -> Iterator[tuple[int, bytes]]:
        """Yield (where, id) for each id in buf[pos:upto]; pos is a line start (or a cut, which is one).

        A Gemini id is its key and value as written, which _all_current counts. Only an id in the
        first line cap of its line's bytes counts: past them a read lets the line go unlooked at
        (scan), and a read that holds it whole must not cut there either.
        """
        cap = self._line_cap
        if self.format == "gemini":
            for m in _RESPONSE_ID.finditer(buf, pos, upto):
                if _within_cap(buf, m.start(), m.end(), cap):
                    yield m.start(), m.group(0)
            return
        first = _CHUNK_ID_AT.match(buf, pos, upto)
        if first is not None and first.end() - pos <= cap:
            yield pos, first.group(1)
        for m in _CHUNK_ID.finditer(buf, pos, upto):
            if m.end() - m.start() - 1 <= cap:
                yield m.start() + 1, m.group(1)  # (the line starts after the LF)

    def _all_current(self, buf: bytes, pos: int, upto: int) -> bool:
        """Tell, with counts made in C, that every id in buf[pos:upto] is the current one (False: look one by one)."""
        current = self._id
        assert current is not None
        if self.format == "gemini":
            return buf.count(b'"responseId"', pos, upto) == buf.count(current, pos, upto)
        line = b'\n{"id":"%s"' % current  # every line that opens an object opens with it, written compact
        return (buf.count(b"\n{", pos, upto) == buf.count(line, pos, upto)
                and (buf[pos:pos + 1] != b"{" or buf.startswith(line[1:], pos)))

    # -- one JSON array per response ---------------------------------------------------------

    def _scan_array(self, buf: bytes, pos: int, final: bool) -> tuple[list[int], int]:
        """Cut just after each array's closing bracket; scan calls start at a line start or a cut."""
        n = len(buf)
        cuts = [m.end() for m in _ARRAY_END.finditer(buf, pos) if m.end() < n or not final]
        if pos == 0 and self.at_line_start and buf[:1] == b"]" and (not cuts or cuts[0] != 1) and (n > 1 or not final):
            cuts.insert(0, 1)  # a line starts at the buffer's start
        if final:
            return cuts, n
        safe = _line_start(buf, max(pos, n - HOLD), pos)
        last = buf.rstrip(b" \t\r\n")
        if last.endswith(b"]") and len(last) - 1 >= pos:
            # A bracket the next read may show to be the end (a "[" may follow): scan its line again.
            safe = min(safe, _line_start(buf, len(last) - 1, pos))
        if cuts:
            safe = max(safe, cuts[-1])
        if safe > pos:
            self.at_line_start = buf[safe - 1] in b"\r\n"
        return cuts, safe

    def _scan_documents(self, buf: bytes, pos: int, final: bool) -> tuple[list[int], int]:
        """Cut where each pretty-printed JSON document after the first begins: each is one response.

        A document begins at a line that is a "{" (or "[") alone, outside any document: the depth
        is carried from scan to scan, from the source's start (a source of documents is one task,
        never cut into byte ranges: plan), so no "}" or "{" inside one is taken for an end or a
        start, however it is laid out. What else comes between documents (a stray "}", junk) stays
        with the one before it, as one Accumulator reads it; SSE or JSON lines after them are cut
        off and scanned by their own framing's rules (_between).
        """
        cuts: list[int] = []
        n = len(buf)
        document = self._document
        while True:
            if not document.depth:
                went = self._between(buf, pos, final, cuts)
                if isinstance(went, tuple):
                    return went
                if went < 0:
                    break
                pos = went
                document.depth = 1
                continue
            pos = document.end(buf, pos, n)
            if pos < 0:
                break
            self._closed = True  # (until a line break: a "{" glued on is the next document)
        if n:
            self.at_line_start = buf[n - 1] in b"\r\n"
        return cuts, n

    def _between(self, buf: bytes, pos: int, final: bool, cuts: list[int]) -> int | tuple[list[int], int]:
        """Read on outside any document, from pos; return where the next one's "{" ends, or the scan's result.

        -1: nothing more in buf (all of it may be fed). A tuple: what scan returns, when the rest is
        framed otherwise, or when more bytes are needed to tell (safe is then pos: only blanks
        were passed). Each document but the first is cut at its line's start.
        """
        while True:
            m = _CONTENT.search(buf, pos)
            if m is None:
                if self._closed and (buf.find(b"\n", pos) >= 0 or buf.find(b"\r", pos) >= 0):
                    self._closed = False
                return -1
            at = m.start()
            brk = max(buf.rfind(b"\n", pos, at), buf.rfind(b"\r", pos, at))
            glued = self._closed and brk < 0 and buf[at] in b"{["  # right after a document, on its line
            self._closed = False
            if glued:  # a document glued onto the one before (bodies joined with no line end between)
                cuts.append(at)
                self._documents += 1
                return at + 1
            if brk >= 0:
                line_start, own_line = brk + 1, True
            else:
                line_start, own_line = pos, (self.at_line_start if pos == 0 else buf[pos - 1] in b"\r\n")
            line = _line_at(buf, at, final)
            one_line = line is not None and own_line and line[0][:1] in b"{[" and line[0] not in (b"{", b"[")
            following: bytes | None = b""  # the next line with content: b"" for none in the input
            if one_line:
                # One line of JSON: a document of its own (a compact error body among pretty ones)
                # when a pretty-printed one, or nothing, follows it; else JSON lines begin.
                m = _CONTENT.search(buf, line[1])  # type: ignore[index]  # (one_line: a line)
                nxt = _line_at(buf, m.start(), final) if m is not None else (b"", 0) if final else None
                following = None if nxt is None else nxt[0]
            if line is None or following is None:
                self.at_line_start = self.at_line_start if pos == 0 else buf[pos - 1] in b"\r\n"
                return cuts, pos  # (the line, or the one after it, may go on in the next read)
            text, after = line
            if own_line and (text in (b"{", b"[") or (one_line and following in (b"", b"{", b"["))):
                if self._documents:  # a document begins
                    cuts.append(line_start)
                self._documents += 1
                return at + 1
            if own_line and (text[:1] in b"{[" or text.startswith(_SSE_FIELDS)):
                # SSE or JSON lines: no more documents; the rest is cut by its own framing's rules
                fallback = DEFAULT_FRAMING.get(self.format, SSE)
                kind = choose(buf[line_start:], True, otherwise=fallback) or fallback  # (told: final)
                if self._documents:
                    cuts.append(line_start)
                self._set_framing(NDJSON if kind == JSONDOCS else kind)
                self.at_line_start = True
                more, safe = self.scan(buf, line_start, final)
                return cuts + more, safe
            pos = after  # anything else: the document before keeps it
            if pos >= len(buf):
                return -1

    # -- the binary AWS event stream ---------------------------------------------------------

    def _scan_eventstream(self, buf: bytes, pos: int, final: bool) -> tuple[list[int], int]:
        cuts: list[int] = []
        n = len(buf)
        while True:
            m = _ES_STOP.search(buf, pos)
            if m is None:
                return cuts, (n if final else max(pos, n - HOLD))
            start = _message_start(buf, m.start(), pos)
            if start is None:
                pos = m.end()
                continue
            total = struct.unpack_from(">I", buf, start)[0]
            end = start + total
            if end > n:
                return (cuts, start) if not final else (cuts, n)
            # The metadata event that follows messageStop belongs to the same response: its headers,
            # which say so, must all be in the read (a read may end inside them).
            if not final and (n - end < _ES_PRELUDE or _headers_cut(buf, end)):
                return cuts, start
            nxt = _message_at(buf, end)
            if nxt is not None:
                total2, headers = nxt
                if headers.get(":event-type") == "metadata":
                    if end + total2 > n and not final:
                        return cuts, start
                    end = min(n, end + total2)
            if end < n or not final:  # (a response that ends where the read ends is cut there too)
                cuts.append(end)
            pos = end


class ValueEnd:
    """Find where a JSON value (an object or array) ends, in the bytes it comes in, read by read.

    Only its structure is followed: the depth, and whether a string is open (or a backslash in
    one ended the last read), so no brace inside a string is taken for an end.
    """

    __slots__ = ("depth", "in_string", "escape", "line_start")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.line_start = False  # (body_end) the bytes read so far end with a line end

    def body_end(self, buf: bytes | memoryview, pos: int, n: int) -> int:
        """Read a JSON body among SSE responses on; return where it ends, or -1 while it goes on.

        It ends just past the byte that closes it, or, cut short (a truncated error body), where
        a line opens with an SSE field: the events that follow are the next response's, whatever
        the body left open (no JSON text has a line break inside a string, nor a line opening so).
        """
        if self.line_start and pos < n and bytes(buf[pos:pos + 6]).startswith(_SSE_FIELDS):
            return pos
        m = _EVENT_LINE.search(buf, pos, n)
        stop = n if m is None else m.start() + 1
        end = self.end(buf, pos, stop)
        if end >= 0:
            return end
        if m is not None:
            return stop
        self.line_start = n > pos and buf[n - 1] in b"\r\n"
        return -1

    def end(self, buf: bytes | memoryview, pos: int, n: int) -> int:
        """Read buf[pos:n] on; return just past the byte that closes the value (depth 0 again), or -1."""
        if self.escape and pos < n:
            self.escape = False
            pos += 1
        depth, in_string = self.depth, self.in_string
        while True:
            m = (_IN_STRING if in_string else _STRUCTURE).search(buf, pos, n)
            if m is None:
                self.depth, self.in_string = depth, in_string
                return -1
            pos = m.end()
            byte = buf[pos - 1]
            if in_string:
                if byte == 0x5C:  # a backslash: the next byte is escaped, even in the next read
                    if pos == n:
                        self.depth, self.in_string, self.escape = depth, in_string, True
                        return -1
                    pos += 1
                else:
                    in_string = False
            elif byte == 0x22:
                in_string = True
            elif byte in (0x7B, 0x5B):
                depth += 1
            else:
                depth -= 1
                if not depth:
                    self.depth, self.in_string = 0, False
                    return pos


def line_cap_of(limits: Limits | None) -> int:
    """Return Limits.event_bytes as a number (no limit: a number no line reaches)."""
    return as_numbers(limits)[4]


def _line_at(buf: bytes, at: int, final: bool) -> tuple[bytes, int] | None:
    """Return the line from at (without its line end and trailing blanks) and where the next starts.

    None while a later read may still bring its end (a CR the read ends with may be half a CRLF).
    """
    e = _LINE_END.search(buf, at)
    if e is None or (e.end() == len(buf) and buf[-1] == 0x0D):
        if not final:
            return None
        return buf[at:].rstrip(b" \t\r\n"), len(buf)
    return buf[at:e.start()].rstrip(b" \t"), e.end()


def _event_start(buf: bytes, pos: int, floor: int, framing: str) -> int:
    """Return where the event (SSE) or line holding the byte at pos starts, at floor at the earliest."""
    if framing == SSE:
        start = floor
        for blank in (b"\n\n", b"\r\r", b"\r\n\r\n"):  # an event ends at a blank line, in any line end
            at = buf.rfind(blank, floor, pos)
            if at >= 0:
                start = max(start, at + len(blank))
        if start == floor:  # no event starts with a line end: one read may begin inside the blank line another holds whole
            while start < pos and buf[start] in b"\r\n":
                start += 1
        return start
    return _line_start(buf, pos, floor)


def _chunk_then_more(buf: bytes, line_start: int, n: int) -> bool:
    """Tell whether the Gemini chunk line at line_start is whole JSON and more than whitespace follows it in buf[:n].

    Its SSE event then holds more lines: parsed with them (_confirm) it is no JSON, so no finish.
    """
    e = _LINE_END.search(buf, line_start, n)
    if e is None or e.end() == n or _CONTENT.search(buf, e.end(), n) is None:
        return False  # (a CR at the end may be half a CRLF; more may come)
    return _parse_line(buf[line_start:e.start()]) is not None


def _line_end(buf: bytes, pos: int, stop: int) -> tuple[int, int] | None:
    """Return where the first line end in buf[pos:stop] starts and ends (CR, LF or CRLF), or None.

    Two byte searches (memchr), not _LINE_END's alternation, which steps byte by byte: a log of
    whole responses is looked through line by line (_whole_lines).
    """
    lf = buf.find(b"\n", pos, stop)
    cr = buf.find(b"\r", pos, lf if lf >= 0 else stop)
    if cr < 0:
        return (lf, lf + 1) if lf >= 0 else None
    return cr, cr + 2 if buf[cr + 1:cr + 2] == b"\n" else cr + 1


_NOT_JSON = object()


def _payload(text: bytes) -> Any:
    """Return the JSON value of an event's text as the accumulators read it (lone surrogates, big numbers), or _NOT_JSON."""
    try:
        return decode_payload(text)
    except (orjson.JSONDecodeError, ValueError, RecursionError):
        return _NOT_JSON


def _any_event(obj: Any) -> bool:
    """Tell whether a JSON value is an event (or a whole response) of any format."""
    return any(claims(None, obj) for _, claims in DETECTION)


def _any_whole(obj: Any) -> bool:
    """Tell whether a JSON value is a whole response of any format (a source whose format is not known yet)."""
    return any(whole(obj) for whole in WHOLE.values())


def _parse_line(line: bytes):
    try:
        return orjson.loads(_data_payload(line))
    except orjson.JSONDecodeError:
        return None


def _gemini_finished(obj: dict) -> bool:
    candidates = obj.get("candidates")
    if type(candidates) is not list:
        return False
    return any(type(c) is dict and isinstance(c.get("finishReason"), str) for c in candidates)


def _prelude_ok(buf: bytes, p: int) -> bool:
    total, headers = struct.unpack_from(">II", buf, p)
    return 16 <= total and headers <= total - 16 and zlib.crc32(buf[p:p + 8]) == struct.unpack_from(">I", buf, p + 8)[0]


def _message_start(buf: bytes, hit: int, floor: int) -> int | None:
    """Return the start of the event-stream message whose headers hold the byte at hit."""
    p = hit - _ES_PRELUDE
    lowest = max(floor, hit - 1024)
    while p >= lowest:
        if buf[p] == 0 and _prelude_ok(buf, p):
            headers_len = struct.unpack_from(">I", buf, p + 4)[0]
            if hit < p + _ES_PRELUDE + headers_len:
                return p
        p -= 1
    return None


def _headers_cut(buf: bytes, p: int) -> bool:
    """Tell whether the event-stream message at p has a sound prelude and headers that run past buf's end."""
    return _prelude_ok(buf, p) and p + _ES_PRELUDE + struct.unpack_from(">I", buf, p + 4)[0] > len(buf)


def _message_at(buf: bytes, p: int) -> tuple[int, dict] | None:
    if len(buf) - p < _ES_PRELUDE or not _prelude_ok(buf, p):
        return None
    total, headers_len = struct.unpack_from(">II", buf, p)
    raw = buf[p + _ES_PRELUDE:p + _ES_PRELUDE + headers_len]
    try:
        return total, parse_headers(raw)
    except (ValueError, struct.error, UnicodeDecodeError, IndexError):
        return total, {}
