"""Define a task (one unit of work, cheap to pickle) and its Outcome (what it gives back)."""

from __future__ import annotations

from typing import NamedTuple

from .._limits import Limits


class Task(NamedTuple):
    """One unit of work; plain values, cheap to pickle."""

    source: str
    kind: str            # "body", "jsonl", "har", or "auto"/"auto-jsonl" (decided after opening)
    format: str          # the user's format ("auto" or a name)
    split: str | None    # body ranges: "fmt/framing/cuts" or ".../halts" (the splitter's, and how responses end)
    field: tuple[str, ...] | None
    start: int
    end: int | None      # None: to the end of the source
    size: int            # on-disk bytes this task covers (for the progress bar)
    limits: Limits | None = None  # the accumulators' limits (None: the defaults)
    planned: int | None = None    # the file's size when the work was planned (None: not a plain file)
    emit: str = "calls"           # what a record is: a call, a stream's turn, chat-messages (_batch/turns.py)
    request: tuple[str, ...] | None = None  # where a log line holds its request (--request-field)
    exact: bool = False           # start and end are where responses (lines) begin, found by the plan
    spill: str | None = None      # a directory where the records of a whole source may go past spill_bytes
    spill_bytes: int = 0          # (settings.SPILL_BYTES, as the parent had it)


class Spilled(NamedTuple):
    """The records of a task held in a file (Collector, past SPILL_BYTES), for the parent to copy out and delete."""

    path: str


class Outcome(NamedTuple):
    """What a task produced."""

    # whole JSON lines (first task of a source) or the file that holds them, or (streams, line ends, lines) of a range
    lines: bytes | Spilled | tuple
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
