"""Cut back-to-back responses (or one) where each ends and feed each to an Accumulator of its own."""

from __future__ import annotations

import os
import re
import stat
from typing import Any, Callable

from .._formats.recognition import only_keep_alives
from .._results import only_an_end
from .._wire.framing import EVENTSTREAM, SSE
from . import settings
from .collect import Collector
from .containers import detect_reading
from .reads import Reads
from .sources import Problem
from .split import Splitter, ValueEnd, _prelude_ok, by_cuts, line_cap_of
from .task import Task


CONTENT = re.compile(rb"[^ \t\r\n]")
# Of a file with no stream (empty, or only blank lines): the first bytes, for the library to say what it is.
BLANK_KEPT = 4096


def _split_spec(task: Task, reader: Any) -> tuple[str, str, bool, bytes]:
    """Return (format, framing, whether its responses are cut by the splitter, bytes already read) for a body task."""
    if task.split is not None:
        fmt, framing, by = task.split.split("/")
        return fmt, framing, by == "cuts", b""
    head, fmt, framing = detect_reading(reader.read(settings.PROBE[-1]), task.format, reader.read)
    return fmt, framing, by_cuts(fmt, framing, head), head


def read_body(task: Task, reader: Any, raw: Any, compression: str | None, out: Collector) -> None:
    """Back-to-back responses (or one): cut at each terminator, one Accumulator per response."""
    if task.start:
        raw.seek(task.start)
    reads = Reads(reader, task.start, task.end)
    fmt, framing, cut, head = _split_spec(task, reads)
    cap = line_cap_of(task.limits)
    make = lambda: Splitter(fmt, framing, glued=cut, line_cap=cap)  # noqa: E731
    start = task.start
    if start and not task.exact:
        start = first_cut(raw, start, make, framing)
    end = task.end
    if end is not None and not task.exact:
        f = open(task.source, "rb")
        try:
            end = first_cut(f, end, make, framing)
        finally:
            f.close()
        # Compared with the end's cut, not the range's end: a terminating event longer than
        # LOOKBACK across the end hides the cut before it from the next task, which then starts
        # further on; this task reads up to there (compared with the range's end, it read
        # nothing, and the responses in between were lost).
        if start >= end:
            return
    if end is not None:
        reads.limit = end
    if start:
        raw.seek(start)
        reads.position = start
    acc_format = fmt if fmt != "auto" else task.format
    splitter = make()
    if start:  # (a range task: its start is a cut, after a line break or, in a JSON array, a "]")
        splitter.at_line_start = _byte_before(raw, start) in (b"\n", b"\r")
    if cut:
        ends: Any = _Cuts(head, splitter, acc_format, out.limits)
    else:
        ends = _Halts(head, acc_format, out.limits)
    _streams(reads, start, ends, splitter, acc_format, out, not task.start and task.end is None,
             _rereader(raw) if compression is None else None)


# Reads the bytes [a, b) of a source again.
Reread = Callable[[int, int], bytes]


def _byte_before(raw: Any, start: int) -> bytes:
    """Return the byte of a plain file just before start (b"" where it cannot be read)."""
    try:
        return os.pread(raw.fileno(), 1, start - 1)
    except (AttributeError, OSError, ValueError):
        return b""


def _rereader(raw: Any) -> Reread | None:
    """Return how to read a plain file's bytes again (without moving its position), or None for a pipe."""
    try:
        fd = raw.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
    except (AttributeError, OSError, ValueError):
        return None
    return lambda a, b: os.pread(fd, b - a, a)


def first_cut(f: Any, x: int, make: Callable[[], Splitter], framing: str) -> int:
    """Return the first cut at or after x that a fresh scan from shortly before x finds."""
    size = os.fstat(f.fileno()).st_size
    if x <= 0:
        return 0
    if x >= size:
        return size
    lo = max(0, x - settings.LOOKBACK)
    f.seek(lo)
    splitter = make()
    step = 1 << 18  # the cut is usually within a response's length of x: read little at a time
    data = f.read(x - lo + step)
    if lo and framing != EVENTSTREAM:
        nl = data.find(b"\n")
        skip = nl + 1 if nl >= 0 else 0
        splitter.at_line_start = nl >= 0
        splitter.at_response_start = False  # (inside a response, perhaps inside a JSON body: no "{" there starts one)
        data = data[skip:]
        lo += skip
    base, tail = lo, b""
    while True:
        final = not data
        buf = tail + data if tail else data
        cuts, safe = splitter.scan(buf, 0, final)
        for c in cuts:
            if base + c >= x:
                return base + c
        if final:
            return size
        tail = buf[safe:]
        base += safe
        data = f.read(max(step, len(tail)))


def _emit(out: Collector, stream: int, result: Any, acc_start: int, buf: Any, lo: int, c: int,
          splitter: Splitter, fmt: str, follows: bool, reread: Reread | None = None) -> int:
    """Record one finished stream; return how many streams it was (an in-band error may end one early).

    The stream is buf[lo:c], or from an earlier read when lo < 0: its bytes are then read again
    (reread) to be cut, if they can be (a plain file) and are no more than REREAD_BYTES (the
    memory it takes). follows: a response comes before this one in its source (in an earlier
    range, perhaps).
    """
    if (buf is not None and (lo >= 0 or (reread is not None and c - lo <= settings.REREAD_BYTES))
            and any(e.kind == "in-band error" for e in result.errors)):
        segment = bytes(buf[lo:c]) if lo >= 0 else reread(acc_start, acc_start - lo + c)  # type: ignore[misc]
        inner = splitter.error_cuts(segment)
        if inner:  # the stream held two responses: one ended by an error, without [DONE]
            emitted = 0
            p = 0
            for cut in inner + [len(segment)]:
                m = CONTENT.search(segment, p, cut)
                if m is not None:
                    one = settings.Accumulator(fmt, out.limits)
                    if splitter.framing == SSE:
                        read_as_sse(one, segment, m.start())
                    one.feed(segment[m.start():cut])
                    out.result(stream + emitted, one.finalize(), acc_start + m.start())
                    emitted += 1
                p = cut
            return emitted
    if follows and only_keep_alives(result):
        return 0  # keep-alives after a file's last response (in an earlier range, perhaps): no stream of its own
    if follows and only_an_end(result):
        return 0  # the response before sent its terminator twice (some proxies do): no response of its own
    out.result(stream, result, acc_start)
    return 1


class _Cuts:
    """Responses end where the splitter cuts: a block is scanned before it is fed.

    What the scan cannot tell yet (a terminator the read may have cut) is kept back, unfed, and
    scanned again in front of the next read.
    """

    def __init__(self, head: bytes, splitter: Splitter, fmt: str, limits: Any) -> None:
        self._head = head
        self._tail = b""
        self._splitter = splitter
        self._scan = splitter.scan
        self._cuts: list[int] = []
        self._next = 0  # the first cut of the block not passed yet
        self._fmt = fmt
        self._limits = limits

    def read(self, reads: Reads) -> tuple[bytes, int]:
        """Return the next block (what was kept back, then new bytes) and how many bytes are new."""
        if self._head:
            data, self._head = self._head, b""
        else:
            data = reads.read(max(settings.BLOCK, len(self._tail)))
        return (self._tail + data if self._tail else data), len(data)

    def scan(self, buf: bytes, final: bool) -> int:
        """Find the block's cuts; return where what may be fed now ends (the rest is kept back)."""
        self._cuts, safe = self._scan(buf, 0, final)
        self._next = 0
        self._tail = buf[safe:]
        return safe

    def rest(self) -> bytes:
        """Return the bytes kept back, never fed."""
        return self._tail

    def start(self) -> Any:
        return settings.Accumulator(self._fmt, self._limits)

    def feed(self, acc: Any, mv: memoryview, p: int, safe: int, fresh: bool) -> tuple[int, bool]:
        """Feed acc from p up to its response's cut, or to safe; return (where it stopped, whether it ended)."""
        if fresh and self._splitter.framing == SSE:
            read_as_sse(acc, mv, p)
        cuts = self._cuts
        i = self._next
        # Cuts before p are passed; a new response (fresh) starting right at a cut is not ended by it.
        while i < len(cuts) and (cuts[i] < p or fresh and cuts[i] == p):
            i += 1
        if i < len(cuts):
            self._next = i + 1
            c = cuts[i]
            if c > p:
                acc.feed(mv[p:c])
            return c, True
        self._next = i
        if safe > p:
            acc.feed(mv[p:safe])
        return safe, False


def read_as_sse(acc: Any, mv: Any, p: int) -> None:
    """Frame a response of an SSE source as SSE when it starts with a zero byte that opens no event-stream message.

    Junk glued before its events would make it an AWS event stream by its first byte: its events
    would be lost in the binary framer, and an OpenAI chat response, which ends where its
    Accumulator halts at [DONE], would never end (every later response of the source lost with
    it). A response that starts with a whole event-stream prelude (lengths and their CRC) is one,
    and stays one (a Bedrock capture may hold both framings).
    """
    if p < len(mv) and mv[p] == 0:
        head = bytes(mv[p:p + 12])
        if len(head) < 12 or not _prelude_ok(head, 0):
            acc._read_as(SSE)


class _Halts:
    """Responses end where each Accumulator stops itself, right after its terminator: no second scan.

    The bytes are read into one reused buffer (an accumulator keeps its own copy of any bytes it
    still needs, so the buffer is free again once a read is fed), never memory-mapped: a file
    truncated while mapped kills the process with SIGBUS at the next access; compressed blocks
    are decoded straight into it (README, Batch, has the figures). Used for OpenAI chat's SSE,
    where both twins halt right after [DONE] (unless the capture glues responses: split.by_cuts).

    A response that opens with a "{" instead of an event is one JSON body (an error body a
    server sent instead of a stream, or a response not streamed; compact or pretty-printed), and
    ends where that value closes: an accumulator framing it as JSON never halts, and read on, it
    took the next response in too, reading its events as JSON (a "malformed chunk" each) and
    giving it the error.
    """

    def __init__(self, head: bytes, fmt: str, limits: Any) -> None:
        self._head = memoryview(head) if head else None
        self._store = bytearray(settings.BLOCK)
        self._fmt = fmt
        self._limits = limits
        self._value: ValueEnd | None = None  # where the JSON body being fed ends, for a response that is one

    def read(self, reads: Reads) -> tuple[memoryview, int]:
        """Return the next block and its length."""
        view = self._head
        if view is not None:
            self._head = None
        else:
            view = reads.read_into(self._store)
        return view, len(view)

    def scan(self, buf: memoryview, final: bool) -> int:
        return len(buf)  # every byte may be fed: the accumulator finds where its response ends

    def rest(self) -> bytes:
        return b""

    def start(self) -> Any:
        acc = settings.Accumulator(self._fmt, self._limits)
        acc.halt_at_end()
        return acc

    def feed(self, acc: Any, mv: memoryview, p: int, safe: int, fresh: bool) -> tuple[int, bool]:
        """Feed acc a piece from p; return (where it stopped, whether its response ended)."""
        if fresh:
            read_as_sse(acc, mv, p)
            self._value = ValueEnd() if mv[p] == 0x7B else None
        upto = min(safe, p + settings.FEED)  # bounded pieces: what a feed copies stays small
        if self._value is not None:
            end = self._value.body_end(mv, p, upto)
            if end >= 0:
                acc.feed(mv[p:end])
                self._value = None
                return end, True
        acc.feed(mv[p:upto])
        used = acc.halted()
        if used < 0:
            return upto, False  # the response goes on
        return p + used, True


def _streams(reads: Reads, start: int, ends: Any, splitter: Splitter, fmt: str, out: Collector,
             whole: bool = False, reread: Reread | None = None) -> None:
    """Feed the bytes from reads to one Accumulator per response, each ended where ends finds its end.

    whole: the bytes are a whole source (no byte range of one), so one that held no stream is reported.
    reread: how to read a stream's bytes again once they are past (a plain file's), for _emit.
    """
    content = CONTENT.search
    blank = bytearray()  # the first blank bytes, while no response has begun
    stream = 0
    acc: Any = None  # the Accumulator of the response being fed
    acc_start = 0     # source offset of the response's first byte
    base = start      # source offset of buf[0]
    while True:
        try:
            buf, got = ends.read(reads)
        except Problem as exc:
            out.problem(stream if acc is not None else None, exc.position, exc.kind, exc.message)
            rest = ends.rest()
            if acc is not None or content(rest):
                if acc is None:
                    acc = ends.start()
                    acc_start = base
                acc.feed(rest)
                stream += _emit(out, stream, acc.finalize(), acc_start, None, -1, 0, splitter, fmt,
                                bool(stream or start))
            break
        out.nbytes += got
        safe = ends.scan(buf, not got)
        mv = memoryview(buf)
        p = 0
        while True:
            fresh = acc is None
            if fresh:
                m = content(buf, p, safe)
                if m is None:
                    if not stream and len(blank) < BLANK_KEPT:
                        blank += buf[p:min(safe, p + BLANK_KEPT - len(blank))]
                    break  # only blank lines are left
                p = m.start()
                acc = ends.start()
                acc_start = base + p
            p, ended = ends.feed(acc, mv, p, safe, fresh)
            if ended:
                stream += _emit(out, stream, acc.finalize(), acc_start, buf, acc_start - base, p, splitter, fmt,
                                bool(stream or start), reread)
                acc = None
            elif p >= safe:
                break  # the response goes on in the next read
        mv.release()
        if not got:
            if acc is not None:
                stream += _emit(out, stream, acc.finalize(), acc_start, buf, acc_start - base, len(buf), splitter,
                                fmt, bool(stream or start), reread)
            break
        base += safe
    if whole and not stream and not out.errors:
        _no_stream(out, ends, blank)
    out.span = stream


def _no_stream(out: Collector, ends: Any, blank: bytearray) -> None:
    """Report a source that held no stream (empty, or only blank lines) in the library's words for such a body."""
    acc = ends.start()
    if blank:
        acc.feed(blank)
    for error in acc.finalize().errors:  # "not a stream": the source, not a stream of it
        out.problem(None, error.offset, error.kind, error.detail)
