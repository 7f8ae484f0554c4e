"""Plan the work: a task per source, or range tasks cut from a large plain file."""

from __future__ import annotations

import os
import stat
from typing import Any, Callable, Iterator

from .._limits import Limits
from .._wire.framing import JSONDOCS
from . import settings
from .containers import container, detect_reading
from .sources import STDIN, Problem, expand, inner_name, sniff_compression
from .jsonl import next_line
from .split import SPLITTABLE, Splitter, by_cuts, line_cap_of
from .streams import first_cut
from .task import Task


def range_bounds(size: int) -> list[tuple[int, int]]:
    """Return the (start, end) of the range tasks of a file: RANGE bytes each, then shrinking.

    The last 4 * RANGE bytes go in steps of a quarter of what is left (at least RANGE / 8), so
    the last tasks are short and no worker is left alone with a long one at the end.
    """
    bounds = []
    start = 0
    while start < size:
        left = size - start
        step = settings.RANGE if left > 4 * settings.RANGE else max(settings.RANGE // 8, left // 4, 1)
        bounds.append((start, min(size, start + step)))
        start += step
    return bounds


class Plan:
    """The tasks of a batch, in the order of the sources, planned as they are met.

    Iterating yields ("task", Task) for a worker, ("local", Task) for a source this process
    must read itself (standard input, a FIFO), or ("problem", (path, Problem)); it counts the
    sources and their known bytes on ``summary`` as it goes.
    """

    def __init__(self, sources: list[str], format: str, field: tuple[str, ...] | None, container: str,
                 limits: Limits | None, summary: Any, emit: str = "calls",
                 request: tuple[str, ...] | None = None, written: str | None = None) -> None:
        self._written = written  # the run's output file: never an input (sources.expand)
        self._emit = emit
        self._request = request
        self._sources = sources
        self._format = format
        self._field = field
        self._container = container
        self._limits = limits
        self.spill: str | None = None  # where a task may put the records of a whole source (Batch.chunks sets it)
        self._summary = summary

    def _kind(self, path: str) -> str:
        if self._container != "auto":
            return self._container
        if inner_name(path).lower().endswith(".har"):
            return "har"
        return "auto-jsonl" if self._field is not None else "auto"

    def _task(self, path: str, kind: str, size: int, planned: int | None, split: str | None = None,
              start: int = 0, end: int | None = None, exact: bool = False) -> Task:
        return Task(path, kind, self._format, split, self._field, start, end, size, limits=self._limits,
                    planned=planned, emit=self._emit, request=self._request, exact=exact, spill=self.spill,
                    spill_bytes=settings.SPILL_BYTES)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for path, problem in expand(self._sources, self._written):
            self._summary.sources += 1
            if problem is not None:
                yield "problem", (path, problem)
                continue
            kind = self._kind(path)
            if path == STDIN:
                yield "local", self._task(path, kind, 0, None)
                continue
            try:
                st = os.stat(path)
            except OSError as exc:
                yield "problem", (path, Problem("unreadable", exc.strerror or str(exc)))
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device named explicitly: this process reads it
                yield "local", self._task(path, kind, 0, None)
                continue
            size = st.st_size
            self._summary.bytes_known += size
            if size <= settings.RANGE or kind == "har":
                yield "task", self._task(path, kind, size, size)
                continue
            yield from self._ranges(path, kind, size)

    def _ranges(self, path: str, kind: str, size: int) -> Iterator[tuple[str, Any]]:
        """Cut a large plain file into range tasks (a compressed one stays whole)."""
        whole = ("task", self._task(path, kind, size, size))
        try:
            with open(path, "rb") as f:
                head = f.read(settings.PROBE[-1])
                compressed = sniff_compression(head) is not None
                if not compressed and kind.startswith("auto"):
                    kind = container(kind, head, self._field)
                if not compressed and kind == "body":
                    head, fmt, framing = detect_reading(head, self._format, f.read)
        except OSError:
            yield whole  # the worker reports it
            return
        if compressed or kind == "har":
            yield whole
            return
        split = None
        if kind == "body":
            if fmt not in SPLITTABLE or framing == JSONDOCS:  # (documents are cut by depth from the start)
                yield whole
                return
            glued = by_cuts(fmt, framing, head)
            split = f"{fmt}/{framing}/{'cuts' if glued else 'halts'}"
            cap = line_cap_of(self._limits)
            locate: Callable[[Any, int], int] = lambda f, x: first_cut(  # noqa: E731
                f, x, lambda: Splitter(fmt, framing, glued=glued, line_cap=cap), framing)
        elif kind == "jsonl":
            locate = next_line
        else:
            for start, end in range_bounds(size):
                yield "task", self._task(path, kind, end - start, size, split, start, None if end >= size else end)
            return
        for start, cut in _cut_bounds(path, size, locate):
            end = size if cut is None else cut
            yield "task", self._task(path, kind, end - start, size, split, start, cut, exact=True)


def _cut_bounds(path: str, size: int, locate: Callable[[Any, int], int]) -> Iterator[tuple[int, int | None]]:
    """Yield the (start, end) of a file's range tasks, each where a response (or line) begins; end None: to the end.

    Each range's end is moved to the first cut at or after it (locate), found here, once: a task
    whose whole range lies inside one response joins the task before. Each worker finding its own
    cuts scanned a long stretch without a cut once per range in it: quadratic in its length.
    """
    start = 0
    try:
        with open(path, "rb") as f:
            for _, bound in range_bounds(size)[:-1]:
                if bound <= start:
                    continue  # inside the response the last cut ended
                cut = locate(f, bound)
                if cut >= size:
                    break
                yield start, cut
                start = cut
    except OSError:
        pass  # the task from here to the end reads it, and reports what went wrong
    yield start, None
