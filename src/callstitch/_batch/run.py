"""Batch reprocessing: the tool calls of many captured responses, on every core, in bounded memory.

The work is cut into tasks: a whole source, or a byte range of a large plain file (back-to-back
responses or a JSONL log), cut where one response ends. A task runs in a worker process (or in
this one with ``jobs=1``), reads its bytes in blocks, finds the response boundaries with C-level
searches (``_split``), feeds each response's slice, uncopied, to its own Accumulator and hands
back its records already serialised as JSON lines. The parent only joins those lines, in task
order, so ``jobs=N`` writes exactly what ``jobs=1`` writes.

A record's ``stream`` numbers the responses of its source from 0: the position in a
back-to-back file, the 0-based line of a JSONL log, the entry of a HAR file. A range task does
not know how many responses come before it, so it returns each call's line without its source
and stream, and the parent puts them in front.
"""

from __future__ import annotations

import base64
import io
import itertools
import os
import re
import stat
from array import array
from collections import Counter, deque
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import orjson

from .._formats import ollama as _ollama
from .._accumulator import Accumulator
from .._formats.dispatch import check_format
from .._wire.framing import EVENTSTREAM, SSE, choose
from .._limits import Limits, as_numbers, line_dropped
from .._records import call_line, read_records
from .sources import (DECOMPRESSION_ERRORS, STDIN, Problem, expand, inner_name, open_source,
                      sniff_compression)
from .split import SPLITTABLE, Splitter, _prelude_ok

__all__ = ["Batch", "Summary", "reassemble_many", "CONTAINERS"]

BLOCK = 4 << 20          # one read
FEED = 1 << 18           # one feed of a read, when accumulators stop at their own terminator
# A large plain file is cut into tasks of this many bytes, the last few smaller (so workers end
# together), whatever the number of workers, so -j N writes what -j 1 writes. (The variable is
# for tests and tuning. The records do not depend on it: a terminating event longer than
# LOOKBACK across a task boundary only moves that boundary to the next response's end.)
RANGE = int(os.environ.get("CALLSTITCH_RANGE_BYTES", 64 << 20))
LOOKBACK = 256 << 10     # a range task starts scanning this far before its start
PROBE = (4096, 65536, 1 << 20)  # how much of the first response format detection looks at
MAX_PROBLEMS = 50        # problems a task describes one by one (the rest are counted)
BIG_LINE = 1 << 16       # a record line longer than this is kept as it is, not copied
CONTAINERS = ("auto", "body", "jsonl", "har")

_CONTENT = re.compile(rb"[^ \t\r\n]")
_HAR_HEAD = re.compile(rb'\s*\{\s*"log"\s*:')
# How a response body starts and a JSON lines log never does: an SSE field or comment line, or
# an AWS event-stream prelude (checked by its CRC: a log's damaged first line may hold zero bytes
# too). (Ollama's NDJSON body starts like a log: "{".)
_BODY_HEAD = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*(?:data|event|id|retry)?:")
_STREAM_MIME = ("event-stream", "ndjson", "eventstream", "jsonl", "x-amz-json")


class Task(NamedTuple):
    """One unit of work; plain values, cheap to pickle."""

    source: str
    kind: str            # "body", "jsonl", "har", or "auto"/"auto-jsonl" (decided after opening)
    format: str          # the user's format ("auto" or a name)
    split: str | None    # body ranges: the format and framing the splitter uses ("fmt/framing")
    field: tuple[str, ...] | None
    start: int
    end: int | None      # None: to the end of the source
    size: int            # on-disk bytes this task covers (for the progress bar)
    limits: Limits | None = None  # the accumulators' limits (None: the defaults)
    planned: int | None = None    # the file's size when the work was planned (None: not a plain file)


class Outcome(NamedTuple):
    """What a task produced."""

    lines: bytes | tuple  # whole JSON lines (first task of a source), or (streams, line ends, lines) of a range
    span: int             # how many stream numbers the task used
    streams: int
    calls: int
    errors: dict          # kind -> count
    quirks: dict          # name -> count
    problems: list        # (stream | None, byte offset | None, kind, message)
    more_problems: int
    incomplete: int
    nbytes: int           # bytes reassembled (decompressed)
    size: int
    unit: str             # "stream", "line" or "entry"


class _Collector:
    """Gathers one task's records and counts."""

    def __init__(self, source: str, absolute: bool, limits: Limits | None = None) -> None:
        self.limits = limits  # for every accumulator the task makes
        self.prefix = (b'{"source":' + orjson.dumps(_shown(source)) + b',"stream":') if absolute else None
        self.parts: list = []
        self.marks = array("q")  # without a prefix: the stream of each line in parts
        self.span = 0
        self.streams = 0
        self.calls = 0
        self.errors: Counter = Counter()
        self.quirks: Counter = Counter()
        self.problems: list = []
        self.more = 0
        self.incomplete = 0
        self.nbytes = 0
        self.unit = "stream"
        self.hint: str | None = None  # where a log line's body seems to be, once a --field missed it

    def problem(self, stream: int | None, offset: int | None, kind: str, message: str) -> None:
        self.errors[kind] += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((stream, offset, kind, message))
        else:
            self.more += 1

    def result(self, stream: int, result: Any, offset: int | None) -> None:
        """Take one finished stream's Result (offset: where its bytes start in the source)."""
        self.streams += 1
        if not result.complete:
            self.incomplete += 1
        for err in result.errors:
            at = None if err.offset is None or offset is None else offset + err.offset
            self.problem(stream, at, err.kind, err.detail)
        calls = result.tool_calls
        if not calls:
            return
        self.calls += len(calls)
        parts = self.parts
        dumps = orjson.dumps
        try:
            lines = [dumps(call.to_dict(), option=orjson.OPT_APPEND_NEWLINE) for call in calls]
        except orjson.JSONEncodeError:  # a lone surrogate, arguments nested too deep: the careful writer
            lines = []
            for call in calls:
                line, reason = call_line(call)
                lines.append(line)
                if reason is not None:
                    self.problem(stream, None, "arguments not written",
                                 f"tool call {call.id!r} ({call.name!r}): {reason}")
        if self.prefix is not None:
            head = self.prefix + str(stream).encode() + b","
            for line in lines:
                if len(line) > BIG_LINE:  # a view, not a copy: a call's line may be as large as the call
                    parts += (head, memoryview(line)[1:])
                else:  # a compact copy: orjson's buffer behind a small line is several times its size
                    parts.append(head + line[1:])
        else:
            parts.extend(lines)
            self.marks.extend([stream] * len(lines))
        for call in calls:
            if call.error is not None:
                self.problem(stream, None, "arguments " + call.error.kind, str(call.error))
            if call.quirks:
                self.quirks.update(call.quirks)

    def outcome(self, size: int) -> Outcome:
        if self.prefix is not None:
            lines = b"".join(self.parts)
        else:  # flat arrays and one blob: what a worker sends back pickles as fast as a copy
            lines = (self.marks, array("q", itertools.accumulate(map(len, self.parts))), b"".join(self.parts))
        return Outcome(lines, self.span, self.streams, self.calls, dict(self.errors), dict(self.quirks),
                       self.problems, self.more, self.incomplete, self.nbytes, size, self.unit)


def range_bounds(size: int) -> list[tuple[int, int]]:
    """Return the (start, end) of the range tasks of a file: RANGE bytes each, then shrinking.

    The last 4 * RANGE bytes go in steps of a quarter of what is left (at least RANGE / 8), so
    the last tasks are short and no worker is left alone with a long one at the end.
    """
    bounds = []
    start = 0
    while start < size:
        left = size - start
        step = RANGE if left > 4 * RANGE else max(RANGE // 8, left // 4, 1)
        bounds.append((start, min(size, start + step)))
        start += step
    return bounds


def _shown(source: str) -> str:
    """Return the name a source goes by in records and reports."""
    return "<stdin>" if source == STDIN else source


# -- format detection --------------------------------------------------------------------------

def detect(head: bytes, format: str) -> tuple[str, str]:
    """Return (format, framing) of a body from its first bytes (the first response decides)."""
    framing = choose(head, final=True) or "sse"
    if format != "auto":
        return format, framing
    for size in PROBE:
        acc = Accumulator(format="auto")
        acc.feed(head[:size])
        found = acc.finalize().format
        if found != "auto" or size >= len(head):
            return found, framing
    return "auto", framing


# -- the workers' side -------------------------------------------------------------------------

def run_task(task: Task) -> Outcome:
    """Do one task (in a worker process or in this one) and return its Outcome."""
    out = _Collector(task.source, absolute=task.start == 0, limits=task.limits)
    try:
        reader, compression, raw = open_source(task.source)
    except Problem as exc:
        out.problem(None, exc.position, exc.kind, exc.message)
        return out.outcome(task.size)
    try:
        kind = task.kind
        if kind.startswith("auto"):
            head = _peek(reader)
            if task.field is None and head.lstrip()[:1] == b"{":
                head = _peek_line(reader, head)  # enough to tell a log from an NDJSON body
            reader = _Prefixed(head, reader)
            kind = _container(kind, head, task.field)
            if kind == "body" and task.field is None:
                _refuse_log(head)
        if kind == "har":
            _har(task, reader, out)
        elif kind == "jsonl":
            _jsonl(task, reader, raw, compression, out)
        else:
            _body(task, reader, raw, compression, out)
    except Problem as exc:
        out.problem(None, exc.position, exc.kind, exc.message)
    finally:
        _check_shrunk(task, raw, out)
        try:
            reader.close()
            if raw is not reader:
                raw.close()
        except Exception:  # noqa: BLE001 - a failed close must not hide the outcome
            pass
    return out.outcome(task.size)


SHRANK = "file shrank"


def _check_shrunk(task: Task, raw: Any, out: _Collector) -> None:
    """Report a file that got shorter while this task read it (log rotation by copytruncate, say)."""
    if task.planned is None:
        return
    try:
        now = os.fstat(raw.fileno()).st_size
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    end = task.planned if task.end is None else task.end
    if now < end:
        out.problem(None, now, SHRANK, f"file shrank from {task.planned} to {now} bytes while it was read "
                                       "(truncated in place, as log rotation by copytruncate does); what lay "
                                       f"past byte {now} and was not read yet is lost")


def _container(kind: str, head: bytes, field: tuple[str, ...] | None) -> str:
    """Return what a file left to its first bytes holds ("auto", or "auto-jsonl" with a --field)."""
    if _HAR_HEAD.match(head):
        return "har"
    if (kind == "auto-jsonl" and not _BODY_HEAD.match(head) and not _prelude(head)
            and not _ollama_body(head, field)):
        return "jsonl"  # with a --field, a log: unless the file plainly is a response body
    return "body"


def _prelude(head: bytes) -> bool:
    """Tell whether a file starts with an AWS event-stream message prelude (lengths and their CRC)."""
    return len(head) >= 12 and head[0] == 0 and _prelude_ok(head, 0)


def _ollama_body(head: bytes, field: tuple[str, ...] | None) -> bool:
    """Tell whether a file starts with a line of Ollama's stream that has no --field: a body, not a log."""
    line = head.split(b"\n", 1)[0]
    try:
        first = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return _ollama.claims(None, first) and _get(first, field or ()) is None


def _peek(reader: Any) -> bytes:
    try:
        return reader.read(4096)
    except DECOMPRESSION_ERRORS as exc:
        raise Problem("corrupt archive", f"cannot decompress: {exc}", 0) from None


def _peek_line(reader: Any, head: bytes) -> bytes:
    """Return head and what follows it up to the end of the first line (at most PROBE[-1] bytes)."""
    parts = [head]
    size = len(head)
    while b"\n" not in parts[-1] and size < PROBE[-1]:
        more = _Reads(reader, size, None).read(65536)
        if not more:
            break
        parts.append(more)
        size += len(more)
    return b"".join(parts)


def _refuse_log(head: bytes) -> None:
    """Raise a Problem if a file read as a body is plainly a JSON lines log (its body at some path)."""
    try:
        first = orjson.loads(head.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return
    if type(first) is not dict or _holds_body(first):
        return  # a line of a stream (Ollama's, a chunk per line): a body indeed
    path = _body_path(first)
    if path is not None:
        raise Problem("looks like a log", f"looks like a log (JSON lines, a captured response in each), not a "
                                          f"response body: read it with --field {path} (from Python: field="
                                          f"{path!r}); the file was not read", 0)


def _holds_body(value: Any) -> bool:
    """Tell whether value is a body of a known format: its text, a list of its chunks, or one chunk."""
    acc = Accumulator(format="auto")
    try:
        if type(value) is str:
            acc.feed(value[:PROBE[0]].encode("utf-8", "surrogatepass"))
        elif type(value) is list and value and type(value[0]) is dict:
            acc.feed_chunk(value[0])
        elif type(value) is dict:
            acc.feed_chunk(value)
        else:
            return False
    except (TypeError, ValueError):
        return False
    return acc.finalize().format != "auto"


def _body_path(obj: dict, depth: int = 6) -> str | None:
    """Return the shallowest dotted path in a log line that holds a body, or None."""
    queue: deque = deque(((str(k),), v) for k, v in obj.items())
    while queue:
        path, value = queue.popleft()
        if _holds_body(value):
            return ".".join(path)
        if len(path) < depth:
            if type(value) is dict:
                queue.extend(((*path, str(k)), v) for k, v in value.items())
            elif type(value) is list:
                queue.extend(((*path, str(i)), v) for i, v in enumerate(value[:4]))
    return None


class _Prefixed:
    """A reader that gives back bytes already read first."""

    def __init__(self, head: bytes, reader: Any) -> None:
        self._head = head
        self._reader = reader

    def read(self, n: int) -> bytes:
        if self._head:
            head, self._head = self._head[:n], self._head[n:]
            if len(head) < n:  # filled up: format detection needs what it asks for, not just the peek
                return head + self._reader.read(n - len(head))
            return head
        return self._reader.read(n)

    def readinto(self, view: Any) -> int:
        """Fill view straight from the reader once the head is given back (no copy in between)."""
        if self._head:
            data = self.read(len(view))
            view[:len(data)] = data
            return len(data)
        readinto = getattr(self._reader, "readinto", None)
        if readinto is None:
            data = self._reader.read(len(view))
            view[:len(data)] = data
            return len(data)
        return readinto(view) or 0

    def close(self) -> None:
        self._reader.close()


class _Reads:
    """Reads of a task's bytes: up to a limit, with decompression errors turned into Problems."""

    def __init__(self, reader: Any, position: int, limit: int | None) -> None:
        self.reader = reader
        self.position = position
        self.limit = limit

    def read(self, n: int) -> bytes:
        if self.limit is not None:
            n = min(n, self.limit - self.position)
            if n <= 0:
                return b""
        try:
            data = self.reader.read(n)
        except DECOMPRESSION_ERRORS as exc:
            raise Problem("corrupt archive", f"cannot decompress: {exc}", self.position) from None
        self.position += len(data)
        return data

    def read_into(self, buf: bytearray) -> memoryview:
        """Fill buf from the reader (no new allocation per read); return the filled part."""
        n = len(buf)
        if self.limit is not None:
            n = min(n, self.limit - self.position)
            if n <= 0:
                return memoryview(buf)[:0]
        readinto = getattr(self.reader, "readinto", None)
        if readinto is None:
            data = self.read(n)
            buf[:len(data)] = data
            return memoryview(buf)[:len(data)]
        view = memoryview(buf)[:n]
        try:
            got = readinto(view) or 0
        except DECOMPRESSION_ERRORS as exc:
            raise Problem("corrupt archive", f"cannot decompress: {exc}", self.position) from None
        finally:
            view.release()
        self.position += got
        return memoryview(buf)[:got]


def _split_spec(task: Task, reader: Any) -> tuple[str, str, bytes]:
    """Return (format, framing, bytes already read) for a body task."""
    if task.split is not None:
        fmt, framing = task.split.split("/")
        return fmt, framing, b""
    head = reader.read(PROBE[-1])
    fmt, framing = detect(head, task.format)
    return fmt, framing, head


def _body(task: Task, reader: Any, raw: Any, compression: str | None, out: _Collector) -> None:
    """Back-to-back responses (or one): cut at each terminator, one Accumulator per response."""
    if task.start:
        raw.seek(task.start)
    reads = _Reads(reader, task.start, task.end)
    fmt, framing, head = _split_spec(task, reads)
    make = lambda: Splitter(fmt, framing)  # noqa: E731
    start = task.start
    if start:
        start = _first_cut(raw, start, make, framing)
    end = task.end
    if end is not None:
        f = open(task.source, "rb")
        try:
            end = _first_cut(f, end, make, framing)
        finally:
            f.close()
        # Compared with the end's cut, not the range's end: a terminating event longer than
        # LOOKBACK across the end hides the cut before it from the next task, which then starts
        # further on; this task reads up to there (compared with the range's end, it read
        # nothing, and the responses in between were lost).
        if start >= end:
            return
        reads.limit = end
    if start:
        raw.seek(start)
        reads.position = start
    acc_format = fmt if fmt != "auto" else task.format
    if acc_format == "openai-chat" and framing == SSE:
        # Read into one reused buffer, never memory-mapped: a file truncated while mapped kills the
        # process with SIGBUS at the next access. (The copy costs ~0.1 CPU s a GB: README, Batch.)
        _streams_halting(reads, head, start, make(), out)
    else:
        _streams(reads, head, start, make(), acc_format, out)


def _first_cut(f: Any, x: int, make: Callable[[], Splitter], framing: str) -> int:
    """Return the first cut at or after x that a fresh scan from shortly before x finds."""
    size = os.fstat(f.fileno()).st_size
    if x <= 0:
        return 0
    if x >= size:
        return size
    lo = max(0, x - LOOKBACK)
    f.seek(lo)
    splitter = make()
    step = 1 << 18  # the cut is usually within a response's length of x: read little at a time
    data = f.read(x - lo + step)
    if lo and framing != EVENTSTREAM:
        nl = data.find(b"\n")
        skip = nl + 1 if nl >= 0 else 0
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


def _emit(out: _Collector, stream: int, result: Any, acc_start: int, buf: Any, lo: int, c: int,
          splitter: Splitter, fmt: str) -> int:
    """Record one finished stream; return how many streams it was (an in-band error may end one early)."""
    if buf is not None and lo >= 0 and any(e.kind == "in-band error" for e in result.errors):
        inner = splitter.error_cuts(bytes(buf[lo:c]))
        if inner:  # the stream held two responses: one ended by an error, without [DONE]
            base = acc_start - lo
            emitted = 0
            p = 0
            for cut in inner + [c - lo]:
                m = _CONTENT.search(buf, lo + p, lo + cut)
                if m is not None:
                    one = Accumulator(format=fmt, limits=out.limits)
                    one.feed(buf[m.start():lo + cut])
                    out.result(stream + emitted, one.finalize(), base + m.start())
                    emitted += 1
                p = cut
            return emitted
    out.result(stream, result, acc_start)
    return 1


def _streams_halting(reads: _Reads, head: bytes, start: int, splitter: Splitter, out: _Collector) -> None:
    """OpenAI chat: each Accumulator stops itself right after its response's [DONE]: no second scan.

    The bytes come in blocks, read into one reused buffer (an accumulator keeps its own copy of
    any bytes it still needs, so the buffer is free again once a read is fed).
    """
    content = _CONTENT.search
    stream = 0
    acc = None
    acc_start = 0
    base = start  # source offset of data[0]
    store = bytearray(BLOCK)
    view = memoryview(head) if head else None
    while True:
        if view is None:
            try:
                view = reads.read_into(store)
            except Problem as exc:
                out.problem(stream if acc is not None else None, exc.position, exc.kind, exc.message)
                break
        n = len(view)
        if not n:
            view.release()
            break
        out.nbytes += n
        p = 0
        while p < n:
            if acc is None:
                m = content(view, p)
                if m is None:
                    break  # only blank lines are left in this read
                p = m.start()
                acc = Accumulator(format="openai-chat", limits=out.limits)
                acc._halt_at_end()
                acc_start = base + p
            upto = min(n, p + FEED)  # bounded pieces: what a feed copies stays small
            acc.feed(view[p:upto])
            used = acc._halted()
            if used < 0:
                p = upto  # the response goes on
                continue
            stream += _emit(out, stream, acc.finalize(), acc_start, view, acc_start - base, p + used, splitter,
                            "openai-chat")
            acc = None
            p += used
        view.release()
        view = None
        base += n
    if acc is not None:
        stream += _emit(out, stream, acc.finalize(), acc_start, None, -1, 0, splitter, "openai-chat")
    out.span = stream


def _streams(reads: _Reads, head: bytes, start: int, splitter: Splitter, fmt: str, out: _Collector) -> None:
    """Feed the bytes from reads (after head) to one Accumulator per response."""
    tail = b""
    base = start      # source offset of buf[0]
    acc = None
    acc_start = 0     # source offset of the stream's first byte
    stream = 0
    content = _CONTENT.search
    scan = splitter.scan
    data = head or reads.read(BLOCK)

    def finish(buf: bytes | None, c: int) -> None:
        nonlocal stream
        result = acc.finalize()
        lo = acc_start - base
        if buf is not None and lo >= 0 and any(e.kind == "in-band error" for e in result.errors):
            inner = splitter.error_cuts(bytes(buf[lo:c]))
            if inner:  # the stream held two responses: one ended by an error, without [DONE]
                p = 0
                for cut in inner + [c - lo]:
                    m = content(buf, lo + p, lo + cut)
                    if m is not None:
                        one = Accumulator(format=fmt, limits=out.limits)
                        one.feed(buf[m.start():lo + cut])
                        out.result(stream, one.finalize(), base + m.start())
                        stream += 1
                    p = cut
                return
        out.result(stream, result, acc_start)
        stream += 1

    while True:
        final = not data
        buf = tail + data if tail else data
        out.nbytes += len(data)
        cuts, safe = scan(buf, 0, final)
        mv = memoryview(buf)
        p = 0
        for c in cuts:
            if acc is None:
                m = content(buf, p, c)
                if m is not None:
                    acc = Accumulator(format=fmt, limits=out.limits)
                    acc_start = base + m.start()
                    acc.feed(mv[m.start():c])
            elif c > p:
                acc.feed(mv[p:c])
            if acc is not None:
                finish(buf, c)
                acc = None
            p = c
        if safe > p:
            if acc is None:
                m = content(buf, p, safe)
                if m is not None:
                    acc = Accumulator(format=fmt, limits=out.limits)
                    acc_start = base + m.start()
                    acc.feed(mv[m.start():safe])
            else:
                acc.feed(mv[p:safe])
        mv.release()
        if final:
            if acc is not None:
                finish(buf, len(buf))
                acc = None
            break
        tail = buf[safe:]
        base += safe
        try:
            data = reads.read(max(BLOCK, len(tail)))
        except Problem as exc:
            out.problem(stream if acc is not None else None, exc.position, exc.kind, exc.message)
            if acc is not None or content(tail):
                if acc is None:
                    acc = Accumulator(format=fmt, limits=out.limits)
                    acc_start = base
                acc.feed(tail)
                finish(None, 0)
                acc = None
            break
    out.span = stream


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if type(obj) is dict:
            obj = obj.get(key)
        elif type(obj) is list and key.lstrip("-").isdigit():
            i = int(key)
            obj = obj[i] if -len(obj) <= i < len(obj) else None
        else:
            return None
        if obj is None:
            return None
    return obj


def _jsonl(task: Task, reader: Any, raw: Any, compression: str | None, out: _Collector) -> None:
    """A log with one captured response per line; the body at --field (a string or a list of chunks)."""
    out.unit = "line"
    start = task.start
    if start:
        start = _next_line(raw, start)
        if task.end is not None and start >= task.end:
            return
        raw.seek(start)
    end = task.end
    if end is not None:
        end = _next_line(raw, end)
        raw.seek(start)
    reads = _Reads(reader, start, end)
    lines = _Lines(task, start, out)
    while True:
        try:
            data = reads.read(BLOCK)
        except Problem as exc:
            out.problem(lines.number, exc.position, exc.kind, exc.message)
            data = b""
        out.nbytes += len(data)
        if not data:
            break
        lines.take(data)
    lines.end()
    out.span = lines.number


class _Lines:
    """Cut a log into lines as its blocks come, each line handed to _log_line once whole.

    A line that spans blocks is held as a list of pieces, joined once (no copy per block), and
    dropped as soon as it passes Limits.event_bytes: its later pieces are not kept at all.
    """

    def __init__(self, task: Task, start: int, out: _Collector) -> None:
        self.field = task.field or ()
        self.format = task.format
        self.limit = as_numbers(task.limits)[4]
        self.out = out
        self.number = 0          # the line in progress
        self.offset = start      # where it starts
        self.pieces: list = []   # its bytes so far
        self.held = 0            # how many
        self.dropped = False     # it went past the limit

    def take(self, data: bytes) -> None:
        """Take the next block."""
        first = data.find(b"\n")
        if first < 0:
            self._grow(data)
            return
        self._grow(data[:first])
        self._finish(1)
        last = data.rfind(b"\n")
        if last > first:
            for line in data[first + 1:last].split(b"\n"):
                self._grow(line)
                self._finish(1)
        if last + 1 < len(data):
            self._grow(data[last + 1:])

    def end(self) -> None:
        """Finish the last line (one without a newline)."""
        if self.pieces or self.dropped:
            self._finish(0)

    def _grow(self, piece: bytes) -> None:
        if self.dropped or not piece:
            self.held += len(piece)
            return
        self.held += len(piece)
        if self.held > self.limit:
            self.dropped = True
            self.pieces = []
            line_dropped(_Report(self.out, self.number), self.limit, self.offset, "log line")
            return
        self.pieces.append(piece)

    def _finish(self, newline: int) -> None:
        if not self.dropped and self.pieces:
            line = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
            if _CONTENT.search(line):
                _log_line(line, self.number, self.offset, self.field, self.format, self.out)
        self.offset += self.held + newline
        self.number += 1
        self.pieces = []
        self.held = 0
        self.dropped = False


class _Report:
    """What the limits' messages are recorded on: a stream of a task's collector."""

    def __init__(self, out: _Collector, stream: int) -> None:
        self.out = out
        self.stream = stream

    def error(self, kind: str, message: str, offset: int | None) -> None:
        self.out.problem(self.stream, offset, kind, message)


def _log_line(line: bytes, line_no: int, offset: int, field: tuple[str, ...], fmt: str, out: _Collector) -> None:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        out.problem(line_no, offset, "not JSON", f"the line is not JSON ({exc})")
        return
    body = _get(obj, field) if field else obj
    if body is None:
        if out.hint is None and type(obj) is dict:  # worked out once: a wrong --field fails every line
            path = _body_path(obj)
            out.hint = f" (a body is at {path!r}: --field {path}?)" if path else ""
        out.problem(line_no, offset, "no body", f"the line has no {'.'.join(field)!r}{out.hint or ''}")
        return
    acc = Accumulator(format=fmt, limits=out.limits)
    try:
        if type(body) is str:
            acc.feed(body.encode("utf-8", "surrogatepass"))
        elif type(body) is list:
            for chunk in body:
                acc.feed_chunk(chunk)
        elif type(body) is dict:
            acc.feed_chunk(body)
        else:
            out.problem(line_no, offset, "no body", f"{'.'.join(field)!r} is a {type(body).__name__}, "
                                                    "not a body or a list of chunks")
            return
    except (TypeError, ValueError) as exc:
        out.problem(line_no, offset, "unexpected shape", str(exc))
        return
    out.result(line_no, acc.finalize(), None)


def _next_line(f: Any, x: int) -> int:
    """Return the start of the first line that begins at or after x."""
    size = os.fstat(f.fileno()).st_size
    if x <= 0 or x >= size:
        return min(max(x, 0), size)
    pos = x - 1
    f.seek(pos)
    while True:
        data = f.read(1 << 16)
        if not data:
            return size
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(data)


def _har(task: Task, reader: Any, out: _Collector) -> None:
    """A HAR export: the event-stream responses of log.entries[].response.content."""
    out.unit = "entry"
    reads = _Reads(reader, 0, None)
    chunks = []
    while True:
        data = reads.read(BLOCK)
        if not data:
            break
        chunks.append(data)
    data = b"".join(chunks)
    del chunks
    out.nbytes += len(data)
    try:
        har = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise Problem("not JSON", f"not a HAR file: {exc}") from None
    del data
    entries = _get(har, ("log", "entries"))
    if type(entries) is not list:
        raise Problem("not JSON", "not a HAR file: no log.entries")
    fmt = task.format
    for i, entry in enumerate(entries):
        content = _get(entry, ("response", "content"))
        if type(content) is not dict:
            continue
        mime = str(content.get("mimeType") or "").lower()
        if not any(m in mime for m in _STREAM_MIME):
            continue
        text = content.get("text")
        if type(text) is not str:
            continue
        if content.get("encoding") == "base64":
            try:
                body = base64.b64decode(text, validate=False)
            except ValueError as exc:
                out.problem(i, None, "not JSON", f"content.text is not base64 ({exc})")
                continue
        else:
            body = text.encode("utf-8", "surrogatepass")
        out.nbytes += len(body)
        acc = Accumulator(format=fmt, limits=out.limits)
        acc.feed(body)
        out.result(i, acc.finalize(), 0)
    out.span = len(entries)


# -- the parent's side -------------------------------------------------------------------------

class Summary:
    """Counts over a whole batch."""

    def __init__(self) -> None:
        self.sources = 0
        self.streams = 0
        self.calls = 0
        self.errors: Counter = Counter()
        self.quirks: Counter = Counter()
        self.incomplete = 0
        self.bytes = 0        # bytes reassembled (decompressed)
        self.bytes_read = 0   # bytes read from disk (as stored)
        self.bytes_known = 0  # bytes of the sources met so far (for progress)

    @property
    def failed(self) -> bool:
        """Tell whether any input, stream or call had an error."""
        return bool(self.errors)


class Batch:
    """An ordered run over many sources; iterate for records (dicts), or ``chunks()`` for JSON lines.

    ``summary`` holds the counts once the iteration is done; ``on_problem(source, unit, number,
    offset, kind, message)`` is called for each problem, in order.
    """

    def __init__(self, sources: Iterable[str] | str, *, format: str = "auto", field: str | None = None,
                 jobs: int | None = 1, container: str = "auto",
                 on_problem: Callable[..., None] | None = None,
                 on_progress: Callable[[Summary], None] | None = None, limits: Limits | None = None) -> None:
        check_format(format)
        self._limits = limits
        if container not in CONTAINERS:
            raise ValueError(f"unknown container {container!r}; known: {', '.join(CONTAINERS)}")
        self._sources = [sources] if isinstance(sources, str) else list(sources)
        self._format = format
        self._field = tuple(field.split(".")) if field else None
        self._jobs = max(1, jobs or os.cpu_count() or 1)
        self._container = container
        self._on_problem = on_problem
        self._on_progress = on_progress
        self.summary = Summary()

    def __iter__(self) -> Iterator[dict]:
        for chunk in self.chunks():
            yield from read_records(chunk)

    # planning

    def _kind(self, path: str) -> str:
        if self._container != "auto":
            return self._container
        if inner_name(path).lower().endswith(".har"):
            return "har"
        return "auto-jsonl" if self._field is not None else "auto"

    def _plan(self) -> Iterator[tuple[str, Any]]:
        for path, problem in expand(self._sources):
            self.summary.sources += 1
            if problem is not None:
                yield "problem", (path, problem)
                continue
            kind = self._kind(path)
            if path == STDIN:
                yield "local", Task(path, kind, self._format, None, self._field, 0, None, 0, limits=self._limits)
                continue
            try:
                st = os.stat(path)
            except OSError as exc:
                yield "problem", (path, Problem("unreadable", exc.strerror or str(exc)))
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device named explicitly: this process reads it
                yield "local", Task(path, kind, self._format, None, self._field, 0, None, 0, limits=self._limits)
                continue
            size = st.st_size
            self.summary.bytes_known += size
            if size <= RANGE or kind == "har":
                yield "task", Task(path, kind, self._format, None, self._field, 0, None, size, limits=self._limits,
                                   planned=size)
                continue
            yield from self._ranges(path, kind, size)

    def _ranges(self, path: str, kind: str, size: int) -> Iterator[tuple[str, Any]]:
        """Cut a large plain file into range tasks (a compressed one stays whole)."""
        whole = ("task", Task(path, kind, self._format, None, self._field, 0, None, size, limits=self._limits,
                              planned=size))
        try:
            with open(path, "rb") as f:
                head = f.read(PROBE[-1])
        except OSError:
            yield whole  # the worker reports it
            return
        if sniff_compression(head) is not None:
            yield whole
            return
        if kind.startswith("auto"):
            kind = _container(kind, head, self._field)
            if kind == "har":
                yield whole
                return
        split = None
        if kind == "body":
            fmt, framing = detect(head, self._format)
            if fmt not in SPLITTABLE:
                yield whole
                return
            split = f"{fmt}/{framing}"
        for start, end in range_bounds(size):
            yield "task", Task(path, kind, self._format, split, self._field, start,
                               None if end >= size else end, end - start, limits=self._limits, planned=size)

    # running

    def _outcomes(self) -> Iterator[tuple[str, Outcome]]:
        plan = self._plan()
        ahead = []
        if self._jobs > 1:  # a pool only pays when there are two tasks or more
            for what, item in plan:
                ahead.append((what, item))
                if sum(w == "task" for w, _ in ahead) >= 2:
                    break
        if self._jobs == 1 or sum(w == "task" for w, _ in ahead) < 2:
            for what, item in itertools.chain(ahead, plan):
                yield self._resolve(what, item)
            return
        plan = itertools.chain(ahead, plan)
        inflight = self._jobs * 3
        workers = _Workers(self._jobs)
        pending: deque = deque()
        try:
            for what, item in plan:
                pending.append(("future", workers.submit(item)) if what == "task" else (what, item))
                while len(pending) >= inflight:
                    yield self._resolve(*pending.popleft(), workers)
            while pending:
                yield self._resolve(*pending.popleft(), workers)
        finally:
            workers.close()

    def _resolve(self, what: str, item: Any, workers: _Workers | None = None) -> tuple[str, Outcome]:
        if what == "future":
            return item[0].source, workers.result(item)  # type: ignore[union-attr]
        if what in ("task", "local"):
            return item.source, run_safely(item)
        path, problem = item
        return path, Outcome(b"", 0, 0, 0, {problem.kind: 1}, {}, [(None, problem.position, problem.kind,
                                                                    problem.message)], 0, 0, 0, 0, "stream")

    def chunks(self) -> Iterator[bytes]:
        """Yield the output, JSON lines in blocks, in the order of the sources."""
        s = self.summary
        base = 0
        prefix = b""
        shrank = False  # the source's shrinking is reported (by its first task that saw it)
        for source, o in self._outcomes():
            source = _shown(source)
            lines = o.lines
            if type(lines) is not tuple:  # the first (or only) task of a source
                base = 0
                prefix = b'{"source":' + orjson.dumps(source) + b',"stream":'
                shrank = False
            if SHRANK in o.errors:
                if shrank:  # every later range task sees it too: once is enough
                    o = _without(o, SHRANK)
                shrank = True
            s.streams += o.streams
            s.calls += o.calls
            s.errors.update(o.errors)
            s.quirks.update(o.quirks)
            s.incomplete += o.incomplete
            s.bytes += o.nbytes
            s.bytes_read += o.size
            if self._on_problem is not None:
                for stream, offset, kind, message in o.problems:
                    self._on_problem(source, o.unit, None if stream is None else base + stream, offset, kind, message)
                if o.more_problems:
                    self._on_problem(source, o.unit, None, None, "more",
                                     f"{o.more_problems} more problems not shown")
            if type(lines) is tuple:
                marks, ends, blob = lines
                if marks:  # each line gets the source and its stream's number in the whole source
                    yield _prefixed(prefix, base, marks, ends, blob)
            elif lines:
                yield lines
            base += o.span
            if self._on_progress is not None:
                self._on_progress(s)


def _prefixed(prefix: bytes, base: int, marks: array, ends: array, blob: bytes) -> bytes:
    """Return a range task's lines, each with its source and its stream's number in the whole source."""
    view = memoryview(blob)  # slices of it are views: one copy of the lines in all, the join
    parts = []
    starts = itertools.chain((0,), ends)
    for n, a, b in zip(marks, starts, ends):
        parts += (prefix, b"%d," % (base + n), view[a + 1:b])
    return b"".join(parts)


def _without(o: Outcome, kind: str) -> Outcome:
    """Return o without its problems of one kind."""
    errors = {k: n for k, n in o.errors.items() if k != kind}
    return o._replace(errors=errors, problems=[p for p in o.problems if p[2] != kind])


def reassemble_many(sources: Iterable[str] | str, *, format: str = "auto", field: str | None = None,
                    jobs: int | None = 1, container: str = "auto",
                    on_problem: Callable[..., None] | None = None, limits: Limits | None = None) -> Batch:
    """Reassemble the tool calls of many captured sources; iterate the result for one dict per call.

    ``sources``: files, directories (walked recursively), glob patterns, or "-" for standard
    input; compressed files (gzip, zstandard, bzip2, xz) are read decompressed. A source is one
    response, several back to back (cut at each terminator), a JSONL log whose lines hold a
    response at ``field`` (a dotted path), or a HAR file. ``jobs`` worker processes (None: one
    per core) do the work; the records come in the same order whatever their number.
    Each record: ``source``, ``stream``, ``choice``, ``index``, ``id``, ``name``, ``arguments``,
    ``error``, ``quirks`` (and ``raw_arguments`` when the arguments did not parse). Problems
    go to ``on_problem(source, unit, number, offset, kind, message)``; ``.summary`` counts all.
    ``limits`` (a callstitch.Limits) bound each stream's accumulator.
    """
    return Batch(sources, format=format, field=field, jobs=jobs, container=container, on_problem=on_problem,
                 limits=limits)


# -- worker processes ---------------------------------------------------------------------------

def run_safely(task: Task) -> Outcome:
    """Run one task; an exception it raises (a bug, MemoryError) is reported as the task's problem."""
    try:
        return run_task(task)
    except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the batch
        return _failed(task, "internal error", f"{type(exc).__name__}: {exc}; what {_bytes_of(task)} hold is not "
                                               "in the output (please report this)")


def _bytes_of(task: Task) -> str:
    if task.start == 0 and task.end is None:
        return "the file's bytes"
    return f"bytes {task.start}-{'end' if task.end is None else task.end}"


def _failed(task: Task, kind: str, message: str) -> Outcome:
    """Return the Outcome of a task that produced nothing but one problem."""
    out = _Collector(task.source, absolute=task.start == 0)
    out.problem(None, task.start or None, kind, message)
    return out.outcome(task.size)


class _Workers:
    """A process pool that outlives its workers.

    When a worker dies (the OOM killer, kill -9) the pool breaks and every task it still held
    fails. The pool is then rebuilt for the tasks to come, and each failed task is run again
    alone in a process of its own, where a death can only be its own: it is reported with the
    task's source and byte range, and the batch goes on.
    """

    def __init__(self, jobs: int) -> None:
        # Imported here: it brings in multiprocessing, which nothing else needs (20 ms at every start).
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        self._executor = ProcessPoolExecutor
        self._broken_error = BrokenProcessPool
        self._jobs = jobs
        self._pool = self._executor(jobs, mp_context=_pool_context())
        self._reported: set = set()  # the pools whose break is already reported

    def submit(self, task: Task) -> tuple[Task, Any, Any]:
        """Start a task; return what result() takes."""
        try:
            return task, self._pool.submit(run_safely, task), self._pool
        except self._broken_error:  # broken by a death not yet seen through a result
            self._rebuild(self._pool)
            return task, self._pool.submit(run_safely, task), self._pool

    def result(self, entry: tuple[Task, Any, Any]) -> Outcome:
        """Return a task's Outcome, running it again alone if its pool broke."""
        task, future, pool = entry
        try:
            return future.result()
        except self._broken_error:
            first = pool not in self._reported
            self._reported.add(pool)
            self._rebuild(pool)
            outcome = _alone(task)
            if first:  # said once per break, with the first task that was held
                outcome = _with_problem(outcome, "worker died", "a worker process died (killed, or out of memory) "
                                        "while it held this task or another; the pool was rebuilt and its tasks "
                                        "were run again, each alone")
            return outcome
        except Exception as exc:  # noqa: BLE001 - e.g. an Outcome that could not be sent back
            return _failed(task, "internal error", f"{type(exc).__name__}: {exc}; what {_bytes_of(task)} hold "
                                                   "is not in the output")

    def _rebuild(self, pool: Any) -> None:
        if pool is self._pool:
            pool.shutdown(wait=False, cancel_futures=True)
            # The context is chosen again: this process now runs the old pool's threads.
            self._pool = self._executor(self._jobs, mp_context=_pool_context())

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _alone(task: Task) -> Outcome:
    """Run one task in a process of its own: if that process dies too, the task is what killed it."""
    context = _pool_context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_run_and_send, args=(task, send), daemon=True)
    process.start()
    send.close()
    try:
        outcome = receive.recv()  # before join(): a large Outcome fills the pipe until it is read
    except (EOFError, OSError):
        outcome = None
    finally:
        receive.close()
    process.join()
    if outcome is not None:
        return outcome
    return _failed(task, "worker died", f"the worker process reading {_bytes_of(task)} {_death(process.exitcode)}, "
                                        "in the pool and again alone; what those bytes hold is not in the output")


def _run_and_send(task: Task, send: Any) -> None:
    send.send(run_safely(task))
    send.close()


def _death(code: int | None) -> str:
    """Describe how a process ended, from its exit code."""
    if code is None or code >= 0:
        return f"exited with status {code}"
    import signal
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    why = " (out of memory, or kill -9)" if name == "SIGKILL" else ""
    return f"was killed by {name}{why}"


def _with_problem(o: Outcome, kind: str, message: str) -> Outcome:
    """Return o with one more problem, at no stream."""
    errors = dict(o.errors)
    errors[kind] = errors.get(kind, 0) + 1
    return o._replace(errors=errors, problems=[(None, None, kind, message)] + list(o.problems))


def _pool_context() -> Any:
    """Return how to start the worker processes: the platform's way, but never fork beside other threads.

    fork is the quickest start and is safe while this process runs one thread; a fork taken while
    other threads hold locks can hang the child, so then the workers come from a fork server.
    """
    import multiprocessing
    context = multiprocessing.get_context()
    if (context.get_start_method() == "fork" and _thread_count() > 1
            and "forkserver" in multiprocessing.get_all_start_methods()):
        context = multiprocessing.get_context("forkserver")
    return context


def _thread_count() -> int:
    """Return how many threads this process runs, those of C libraries (pyarrow's pool, say) included."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc: the threads Python started are what can be seen
        import threading
        return threading.active_count()
