"""Run a batch in the parent: plan the tasks, run them, join their records in the order of the sources."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from array import array
from collections import Counter
from typing import Any, Callable, Iterator

import orjson

from .._formats.dispatch import check_format
from .._limits import Limits, as_numbers
from .._records import read_records
from . import settings
from .collect import SHRANK, shown
from .containers import CONTAINERS
from .plan import Plan
from .pool import outcomes
from .sources import Sources, source_names
from .task import Outcome, Spilled
from .turns import check_emit

__all__ = ["Batch", "Summary", "reassemble_many", "CONTAINERS"]


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

    def __init__(self, sources: Sources, *, format: str = "auto", field: str | None = None,
                 jobs: int | None = 1, container: str = "auto",
                 on_problem: Callable[..., None] | None = None,
                 on_progress: Callable[[Summary], None] | None = None, limits: Limits | None = None,
                 emit: str = "calls", request_field: str | None = None, written: str | None = None) -> None:
        """written: the file the output goes to (the command line's -o): a directory or glob holding it skips it."""
        check_format(format)
        check_emit(emit, request_field)
        if container not in CONTAINERS:
            raise ValueError(f"unknown container {container!r}; known: {', '.join(CONTAINERS)}")
        _check_arguments(jobs, field, request_field, limits)
        self._jobs = max(1, jobs or os.cpu_count() or 1)
        self._on_problem = on_problem
        self._on_progress = on_progress
        self.summary = Summary()
        self._bare = emit == "chat-messages"  # its lines carry no source and stream
        self._plan = Plan(source_names(sources), format,
                          tuple(field.split(".")) if field else None, container, limits, self.summary, emit,
                          tuple(request_field.split(".")) if request_field else None, written)

    def __iter__(self) -> Iterator[dict]:
        for chunk in self.chunks():
            yield from read_records(chunk)

    def chunks(self) -> Iterator[bytes]:
        """Yield the output, JSON lines in blocks, in the order of the sources."""
        # The records of a whole source past SPILL_BYTES wait in a file here, not in memory
        # (where no temporary directory can be made, in memory).
        try:
            self._plan.spill = tempfile.mkdtemp(prefix="callstitch-")
        except OSError:
            self._plan.spill = None
        try:
            yield from self._chunks()
        finally:  # (also when the consumer stops early: the files of tasks not read yet go too)
            if self._plan.spill is not None:
                shutil.rmtree(self._plan.spill, ignore_errors=True)

    def _chunks(self) -> Iterator[bytes]:
        s = self.summary
        base = 0
        prefix = b""
        shrank = False  # the source's shrinking is reported (by its first task that saw it)
        for source, o in outcomes(self._plan, self._jobs):
            source = shown(source)
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
            if isinstance(lines, Spilled):  # (a tuple too: asked first)
                yield from _spilled(lines.path)
            elif isinstance(lines, tuple):
                marks, ends, blob = lines
                if self._bare:
                    if blob:
                        yield blob
                elif marks:  # each line gets the source and its stream's number in the whole source
                    yield _prefixed(prefix, base, marks, ends, blob)
            elif lines:
                yield lines
            base += o.span
            if self._on_progress is not None:
                self._on_progress(s)


def _spilled(path: str) -> Iterator[bytes]:
    """Yield the records a task left in a file, in blocks of whole lines, and delete it."""
    try:
        with open(path, "rb") as f:
            rest = b""
            while True:
                block = f.read(settings.BLOCK)
                if not block:
                    break
                cut = block.rfind(b"\n") + 1
                if cut:
                    yield rest + block[:cut]
                    rest = block[cut:]
                else:
                    rest += block
            if rest:
                yield rest
    finally:
        os.unlink(path)


def _prefixed(prefix: bytes, base: int, marks: array, ends: array, blob: bytes) -> bytes:
    """Return a range task's lines, each with its source and its stream's number in the whole source."""
    view = memoryview(blob)  # slices of it are views: one copy of the lines in all, the join
    parts: list[bytes | memoryview] = []
    starts = itertools.chain((0,), ends)
    for n, a, b in zip(marks, starts, ends):
        parts += (prefix, b"%d," % (base + n), view[a + 1:b])
    return b"".join(parts)


def _without(o: Outcome, kind: str) -> Outcome:
    """Return o without its problems of one kind."""
    errors = {k: n for k, n in o.errors.items() if k != kind}
    return o._replace(errors=errors, problems=[p for p in o.problems if p[2] != kind])


def _check_arguments(jobs: Any, field: Any, request_field: Any, limits: Any) -> None:
    """Refuse wrong arguments where they are given (else each source reported an internal error, or iteration raised)."""
    if jobs is not None and (type(jobs) is not int or jobs < 0):
        raise (ValueError if type(jobs) is int else TypeError)(
            f"reassemble_many: jobs must be a number of processes (0 or None: one per core), not {jobs!r}")
    for name, value in (("field", field), ("request_field", request_field)):
        if value is not None and type(value) is not str:
            raise TypeError(f"reassemble_many: {name} must be a dotted path (str) or None, not {type(value).__name__}")
    as_numbers(limits)  # (a TypeError that names what it got, for anything but a Limits or None)


def reassemble_many(sources: Sources, *, format: str = "auto", field: str | None = None,
                    jobs: int | None = 1, container: str = "auto",
                    on_problem: Callable[..., None] | None = None, limits: Limits | None = None,
                    emit: str = "calls", request_field: str | None = None) -> Batch:
    """Reassemble the tool calls of many captured sources; iterate the result for one dict per call.

    ``sources``: files, directories (walked recursively), glob patterns, or "-" for standard
    input, each a str or a pathlib.Path (one alone, or an iterable of them); compressed files
    (gzip, zstandard, bzip2, xz) are read decompressed. A source is one response, several back
    to back (cut at each terminator), a JSONL log whose lines hold a response at ``field`` (a
    dotted path), or a HAR file. ``jobs`` worker processes (None: one
    per core; at most four per core, and no more than there are tasks) do the work; the records
    come in the same order whatever their number.
    Each record: ``source``, ``stream``, ``choice``, ``index``, ``id``, ``name``, ``arguments``,
    ``error``, ``quirks`` (and ``raw_arguments`` when the arguments did not parse). Problems
    go to ``on_problem(source, unit, number, offset, kind, message)``; ``.summary`` counts all.
    ``limits`` (a callstitch.Limits) bound each stream's accumulator.
    ``emit="turns"`` gives one record per stream instead: ``source``, ``stream``, ``format``,
    ``complete``, ``response`` (Result.to_response()), ``errors`` (texts), and ``request`` when
    ``request_field`` names where a log line holds it. ``emit="chat-messages"`` (needs
    ``request_field``) gives one OpenAI fine-tuning line per choice of each clean chat stream:
    ``{"messages": [...request messages, the assistant message], "tools": [...]}``.
    """
    return Batch(sources, format=format, field=field, jobs=jobs, container=container, on_problem=on_problem,
                 limits=limits, emit=emit, request_field=request_field)
