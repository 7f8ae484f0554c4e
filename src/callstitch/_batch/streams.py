"""Cut back-to-back responses (or one) where each ends and feed each to an Accumulator of its own."""

from __future__ import annotations

import os
import re
from typing import Any, Callable

from .._wire.framing import EVENTSTREAM, SSE
from . import settings
from .collect import Collector
from .containers import detect
from .reads import Reads
from .sources import Problem
from .split import Splitter
from .task import Task


CONTENT = re.compile(rb"[^ \t\r\n]")


def _split_spec(task: Task, reader: Any) -> tuple[str, str, bytes]:
    """Return (format, framing, bytes already read) for a body task."""
    if task.split is not None:
        fmt, framing = task.split.split("/")
        return fmt, framing, b""
    head = reader.read(settings.PROBE[-1])
    fmt, framing = detect(head, task.format)
    return fmt, framing, head


def read_body(task: Task, reader: Any, raw: Any, compression: str | None, out: Collector) -> None:
    """Back-to-back responses (or one): cut at each terminator, one Accumulator per response."""
    if task.start:
        raw.seek(task.start)
    reads = Reads(reader, task.start, task.end)
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
    lo = max(0, x - settings.LOOKBACK)
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


def _emit(out: Collector, stream: int, result: Any, acc_start: int, buf: Any, lo: int, c: int,
          splitter: Splitter, fmt: str) -> int:
    """Record one finished stream; return how many streams it was (an in-band error may end one early)."""
    if buf is not None and lo >= 0 and any(e.kind == "in-band error" for e in result.errors):
        inner = splitter.error_cuts(bytes(buf[lo:c]))
        if inner:  # the stream held two responses: one ended by an error, without [DONE]
            base = acc_start - lo
            emitted = 0
            p = 0
            for cut in inner + [c - lo]:
                m = CONTENT.search(buf, lo + p, lo + cut)
                if m is not None:
                    one = settings.Accumulator(format=fmt, limits=out.limits)
                    one.feed(buf[m.start():lo + cut])
                    out.result(stream + emitted, one.finalize(), base + m.start())
                    emitted += 1
                p = cut
            return emitted
    out.result(stream, result, acc_start)
    return 1


def _streams_halting(reads: Reads, head: bytes, start: int, splitter: Splitter, out: Collector) -> None:
    """OpenAI chat: each Accumulator stops itself right after its response's [DONE]: no second scan.

    The bytes come in blocks, read into one reused buffer (an accumulator keeps its own copy of
    any bytes it still needs, so the buffer is free again once a read is fed).
    """
    content = CONTENT.search
    stream = 0
    acc = None
    acc_start = 0
    base = start  # source offset of data[0]
    store = bytearray(settings.BLOCK)
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
                acc = settings.Accumulator(format="openai-chat", limits=out.limits)
                acc._halt_at_end()
                acc_start = base + p
            upto = min(n, p + settings.FEED)  # bounded pieces: what a feed copies stays small
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


def _streams(reads: Reads, head: bytes, start: int, splitter: Splitter, fmt: str, out: Collector) -> None:
    """Feed the bytes from reads (after head) to one Accumulator per response."""
    tail = b""
    base = start      # source offset of buf[0]
    acc = None
    acc_start = 0     # source offset of the stream's first byte
    stream = 0
    content = CONTENT.search
    scan = splitter.scan
    data = head or reads.read(settings.BLOCK)

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
                        one = settings.Accumulator(format=fmt, limits=out.limits)
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
                    acc = settings.Accumulator(format=fmt, limits=out.limits)
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
                    acc = settings.Accumulator(format=fmt, limits=out.limits)
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
            data = reads.read(max(settings.BLOCK, len(tail)))
        except Problem as exc:
            out.problem(stream if acc is not None else None, exc.position, exc.kind, exc.message)
            if acc is not None or content(tail):
                if acc is None:
                    acc = settings.Accumulator(format=fmt, limits=out.limits)
                    acc_start = base
                acc.feed(tail)
                finish(None, 0)
                acc = None
            break
    out.span = stream
