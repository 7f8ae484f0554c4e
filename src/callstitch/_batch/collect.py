"""Collect one task's records, already serialised as JSON lines, and its counts and problems."""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from typing import Any

import orjson

from .._limits import Limits
from .._records import call_line
from . import settings
from .sources import STDIN
from .task import Outcome


class Collector:
    """Gathers one task's records and counts."""

    def __init__(self, source: str, absolute: bool, limits: Limits | None = None) -> None:
        self.limits = limits  # for every accumulator the task makes
        self.prefix = (b'{"source":' + orjson.dumps(shown(source)) + b',"stream":') if absolute else None
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
        if len(self.problems) < settings.MAX_PROBLEMS:
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
                if len(line) > settings.BIG_LINE:  # a view, not a copy: a call's line may be as large as the call
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


def shown(source: str) -> str:
    """Return the name a source goes by in records and reports."""
    return "<stdin>" if source == STDIN else source
