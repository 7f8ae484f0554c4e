"""Batch reprocessing: the tool calls of many captured responses, on every core, in bounded memory.

The work is cut into tasks (``plan``): a whole source, or a byte range of a large plain file
(back-to-back responses or a JSONL log), cut where one response ends. A task (``task``,
``worker``) runs in a worker process (``pool``) or in this one with ``jobs=1``: it opens its
source (``sources``), tells what it holds (``containers``), reads its bytes in blocks
(``reads``), finds the response boundaries with C-level searches (``split``), feeds each
response's slice, uncopied, to its own Accumulator (``streams``, ``jsonl``, ``har``) and hands
back its records already serialised as JSON lines (``collect``). The parent (``run``) only joins
those lines, in task order, so ``jobs=N`` writes exactly what ``jobs=1`` writes. Sizes, and the
Accumulator a batch makes, are in ``settings``.

A record's ``stream`` numbers the responses of its source from 0: the position in a
back-to-back file, the 0-based line of a JSONL log, the entry of a HAR file. A range task does
not know how many responses come before it, so it returns each call's line without its source
and stream, and the parent puts them in front.
"""

from .run import CONTAINERS, Batch, Summary, reassemble_many

__all__ = ["Batch", "Summary", "reassemble_many", "CONTAINERS"]
