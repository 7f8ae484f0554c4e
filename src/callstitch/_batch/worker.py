"""Do one task, in a worker process or in this one: open its source, read what it holds, return its Outcome."""

from __future__ import annotations

import io
import os
from typing import Any

from .collect import SHRANK, Collector
from .containers import container, refuse_log
from .har import read_har
from .jsonl import read_log
from .reads import Prefixed, peek, peek_line
from .sources import Problem, open_source
from .streams import read_body
from .task import Outcome, Task


def run_task(task: Task) -> Outcome:
    """Do one task (in a worker process or in this one) and return its Outcome."""
    out = Collector(task.source, absolute=task.start == 0, limits=task.limits, emit=task.emit, spill=task.spill,
                    spill_bytes=task.spill_bytes)
    try:
        reader, compression, raw = open_source(task.source)
    except Problem as exc:
        out.problem(None, exc.position, exc.kind, exc.message)
        return out.outcome(task.size)
    try:
        kind = task.kind
        if kind.startswith("auto"):
            head, damage = peek(reader), None
            if task.field is None and head.lstrip()[:1] == b"{":
                head, damage = peek_line(reader, head)  # enough to tell a log from an NDJSON body
            reader = Prefixed(head, reader, damage)  # type: ignore[assignment]  # (a reader like the file)
            kind = container(kind, head, task.field)
            if kind == "body" and task.field is None:
                refuse_log(head)
        if kind == "har":
            read_har(task, reader, out)
        elif kind == "jsonl":
            read_log(task, reader, raw, compression, out)
        else:
            read_body(task, reader, raw, compression, out)
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


def _check_shrunk(task: Task, raw: Any, out: Collector) -> None:
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


def run_safely(task: Task) -> Outcome:
    """Run one task; an exception it raises (a bug, MemoryError) is reported as the task's problem."""
    try:
        return run_task(task)
    except Exception as exc:  # noqa: BLE001 - one task's failure must not stop the batch
        return failed(task, "internal error", f"{type(exc).__name__}: {exc}; what {bytes_of(task)} hold is not "
                                               "in the output (please report this)")


def bytes_of(task: Task) -> str:
    if task.start == 0 and task.end is None:
        return "the file's bytes"
    return f"bytes {task.start}-{'end' if task.end is None else task.end}"


def failed(task: Task, kind: str, message: str) -> Outcome:
    """Return the Outcome of a task that produced nothing but one problem."""
    out = Collector(task.source, absolute=task.start == 0, emit=task.emit)
    out.problem(None, task.start or None, kind, message)
    return out.outcome(task.size)
