"""Read a JSON lines log: one captured response per line, its body at --field."""

from __future__ import annotations

import os
from typing import Any

import orjson

from .._formats.dispatch import decode_payload
from .._limits import as_numbers, line_dropped
from .._wire.framing import BOM
from . import settings
from .collect import Collector
from .containers import body_path, get
from .reads import Reads
from .sources import Problem
from .streams import CONTENT
from .task import Task


def read_log(task: Task, reader: Any, raw: Any, compression: str | None, out: Collector) -> None:
    """A log with one captured response per line; the body at --field (a string or a list of chunks)."""
    out.unit = "line"
    start = task.start
    if start:
        if not task.exact:
            start = next_line(raw, start)
            if task.end is not None and start >= task.end:
                return
        raw.seek(start)
    end = task.end
    if end is not None and not task.exact:
        end = next_line(raw, end)
        raw.seek(start)
    reads = Reads(reader, start, end)
    lines = _Lines(task, start, out)
    while True:
        try:
            data = reads.read(settings.BLOCK)
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

    def __init__(self, task: Task, start: int, out: Collector) -> None:
        self.field = task.field or ()
        self.request = task.request  # where the line holds its request, for a turn record (--request-field)
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
            if CONTENT.search(line):
                _log_line(line, self.number, self.offset, self.field, self.format, self.out, self.request)
        self.offset += self.held + newline
        self.number += 1
        self.pieces = []
        self.held = 0
        self.dropped = False


class _Report:
    """What the limits' messages are recorded on: a stream of a task's collector."""

    def __init__(self, out: Collector, stream: int) -> None:
        self.out = out
        self.stream = stream

    def error(self, kind: str, message: str, offset: int | None) -> None:
        self.out.problem(self.stream, offset, kind, message)


def _log_line(line: bytes, line_no: int, offset: int, field: tuple[str, ...], fmt: str, out: Collector,
              request_at: tuple[str, ...] | None = None) -> None:
    if not offset and line.startswith(BOM):
        line = line[len(BOM):]  # (a log written by a tool that marks UTF-8)
    try:
        # A body given as chunk objects holds its arguments as values: integers exact, and a lone
        # surrogate escape (arguments cut by UTF-16 units) read as an event's payload is.
        obj = decode_payload(line)
    except orjson.JSONDecodeError as exc:
        out.problem(line_no, offset, "not JSON", f"the line is not JSON ({exc})")
        return
    body = get(obj, field) if field else obj
    if body is None:
        if out.hint is None and type(obj) is dict:  # worked out once: a wrong --field fails every line
            path = body_path(obj)
            out.hint = f" (a body is at {path!r}: --field {path}?)" if path else ""
        out.problem(line_no, offset, "no body", f"the line has no {'.'.join(field)!r}{out.hint or ''}")
        return
    acc = settings.Accumulator(fmt, out.limits)
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
    request = get(obj, request_at) if request_at else None
    out.result(line_no, acc.finalize(), None, request)


def next_line(f: Any, x: int) -> int:
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
