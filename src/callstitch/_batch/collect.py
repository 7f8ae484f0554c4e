"""Collect one task's records, already serialised as JSON lines, and its counts and problems."""

from __future__ import annotations

import itertools
import tempfile
from array import array
from collections import Counter
from typing import Any

import orjson

from .._limits import Limits, call_named
from .._records import call_line
from . import settings
from .sources import STDIN
from .task import Outcome, Spilled
from .turns import chat_message_lines, turn_line


SHRANK = "file shrank"  # a source that got shorter while it was read (worker.py)
# The kinds of problem that say the rest of a source was not read (sources.py, reads.py, worker.py, pool.py).
LOSSES = frozenset(("corrupt archive", "unreadable", SHRANK, "worker died", "internal error"))


class Collector:
    """Gathers one task's records and counts."""

    def __init__(self, source: str, absolute: bool, limits: Limits | None = None, emit: str = "calls",
                 spill: str | None = None, spill_bytes: int = 0) -> None:
        self.limits = limits  # for every accumulator the task makes
        self.emit = emit      # a record per call, per stream's turn, or chat-messages lines (_batch/turns.py)
        self.absolute = absolute  # the task starts at the source's start: its lines get their prefix here
        # Fine-tuning lines (chat-messages) are the messages alone: no source, no stream.
        self.bare = emit == "chat-messages"
        self.prefix = (b'{"source":' + orjson.dumps(shown(source)) + b',"stream":') if absolute and not self.bare \
            else None
        self.parts: list = []
        self.held = 0  # bytes in parts, of a whole source's task: past spill_bytes they go to a file in spill
        self.spill = spill if absolute else None
        self.spill_bytes = spill_bytes
        self.spilled: Any = None  # that file, once opened
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
        """Count a problem; describe it too while the task has described fewer than MAX_PROBLEMS.

        A problem of the source itself (LOSSES: the rest of it could not be read, or no stream was
        in it) is always described, past the cap too: it says what was lost.
        """
        self.errors[kind] += 1
        if len(self.problems) < settings.MAX_PROBLEMS or stream is None or kind in LOSSES:
            self.problems.append((stream, offset, kind, message))
        else:
            self.more += 1

    def result(self, stream: int, result: Any, offset: int | None, request: Any = None) -> None:
        """Take one finished stream's Result (request: its log's).

        offset: where its bytes start in the source; None for a body that is no run of the
        source's bytes (a log line's, JSON-escaped there): its errors then say where in the body.
        """
        self.streams += 1
        if not result.complete:
            self.incomplete += 1
        for err in result.errors:
            if err.offset is None:
                self.problem(stream, None, err.kind, err.detail)
            elif offset is None:
                self.problem(stream, None, err.kind, f"{err.detail} (at byte {err.offset} of the logged body)")
            else:
                self.problem(stream, offset + err.offset, err.kind, err.detail)
        calls = result.tool_calls
        if self.emit != "calls":
            self._turn(stream, result, request)
        elif calls:
            self._add(stream, self._call_lines(stream, calls))
        self.calls += len(calls)
        for call in calls:
            if call.error is not None:
                self.problem(stream, None, "arguments " + call.error.kind, str(call.error))
            if call.quirks:
                self.quirks.update(call.quirks)

    def _turn(self, stream: int, result: Any, request: Any) -> None:
        """Add a stream's turn record, or its chat-messages lines."""
        def problem(kind: str, message: str) -> None:
            self.problem(stream, None, kind, message)

        if self.emit == "turns":
            self._add(stream, [turn_line(result, request, problem)])
        else:
            self._add(stream, chat_message_lines(result, request, problem))

    def _call_lines(self, stream: int, calls: list) -> list[bytes]:
        """Return a record line per call."""
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
                                 f"{call_named(call.id, call.name)}: {reason}")
        return lines

    def _add(self, stream: int, lines: list[bytes]) -> None:
        """Add a stream's lines, each with its source and stream (here, or for a range task by the parent)."""
        parts = self.parts
        if self.prefix is not None:
            head = self.prefix + str(stream).encode() + b","
            for line in lines:
                if len(line) > settings.BIG_LINE:  # a view, not a copy: a call's line may be as large as the call
                    parts += (head, memoryview(line)[1:])
                else:  # a compact copy: orjson's buffer behind a small line is several times its size
                    parts.append(head + line[1:])
        else:
            parts.extend(lines)
            if not self.absolute:
                self.marks.extend([stream] * len(lines))
        if self.spill is not None:
            self.held += sum(map(len, lines)) + len(self.prefix or b"") * len(lines)  # (a prefix each, about)
            if self.held > self.spill_bytes:
                self._spill()

    def _spill(self) -> None:
        """Move the records held to the task's file: a whole source (a large gzip, a pipe) is not held in memory."""
        if self.spilled is None:
            self.spilled = tempfile.NamedTemporaryFile(dir=self.spill, prefix="records-", delete=False)
        self.spilled.writelines(self.parts)
        self.parts = []
        self.held = 0

    def outcome(self, size: int) -> Outcome:
        lines: bytes | Spilled | tuple
        if self.spilled is not None:
            self._spill()
            self.spilled.close()
            lines = Spilled(self.spilled.name)
        elif self.absolute:
            lines = b"".join(self.parts)
        else:  # flat arrays and one blob: what a worker sends back pickles as fast as a copy
            lines = (self.marks, array("q", itertools.accumulate(map(len, self.parts))), b"".join(self.parts))
        return Outcome(lines, self.span, self.streams, self.calls, dict(self.errors), dict(self.quirks),
                       self.problems, self.more, self.incomplete, self.nbytes, size, self.unit)


def shown(source: str) -> str:
    """Return the name a source goes by in records and reports: valid UTF-8, as JSON needs.

    A file name that is not UTF-8 comes from the file system with its bytes as lone surrogates
    (os.fsdecode); they are shown as escapes (b"a\xff" as "a\\xff"), where JSON refused them.
    """
    if source == STDIN:
        return "<stdin>"
    if source.isascii():
        return source
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return source.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate no file system gave (a str made so)
            return source.encode("utf-8", "backslashreplace").decode("utf-8")
    return source
