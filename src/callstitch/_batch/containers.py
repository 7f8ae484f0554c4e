"""Tell what a source holds (a response body, a JSON lines log, a HAR file) and a body's format."""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Callable

import orjson

from .._formats import ollama as _ollama
from .._formats.registry import DEFAULT_FRAMING
from .._wire.framing import NDJSON, choose
from . import settings
from .sources import Problem
from .split import ValueEnd, _prelude_ok

CONTAINERS = ("auto", "body", "jsonl", "har")
_HAR_HEAD = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"log"\s*:')  # (a BOM first: Windows tools write one)
# How a response body starts and a JSON lines log never does: an SSE field or comment line, or
# an AWS event-stream prelude (checked by its CRC: a log's damaged first line may hold zero bytes
# too). (Ollama's NDJSON body starts like a log: "{".)
_BODY_HEAD = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*(?:data|event|id|retry)?:")


def detect(head: bytes, format: str) -> tuple[str, str]:
    """Return (format, framing) of a body from its first bytes (the first response decides)."""
    framing = choose(head, final=True, otherwise=DEFAULT_FRAMING[format]) or DEFAULT_FRAMING[format]
    if format != "auto":
        return format, framing
    if framing == NDJSON:
        # Bodies joined with no line end between ("{...}{...}"): the first body alone tells, as
        # the first line would (glued onto it, the second made the line no JSON value).
        first = ValueEnd().end(head, len(head) - len(head.lstrip()), len(head))
        if 0 < first and head[first:first + 1] == b"{":
            head = head[:first]
    for size in settings.PROBE + ((len(head),) if len(head) > settings.PROBE[-1] else ()):
        acc = settings.Accumulator(format="auto")
        acc.feed(head[:size])
        found = acc.finalize().format
        if found != "auto" or size >= len(head):
            return found, framing
    return "auto", framing


def detect_reading(head: bytes, format: str, read: Callable[[int], bytes]) -> tuple[bytes, str, str]:
    """Return (head, format, framing) as detect does; a head it cannot tell is read on, up to PROBE_MORE bytes.

    A first event longer than the last probe (a Gemini chunk with an image in it) tells nothing
    until it ends: without its format a file of such responses was read as one stream.
    """
    fmt, framing = detect(head, format)
    if fmt == "auto" and len(head) >= settings.PROBE[-1]:
        parts = [head]
        size = len(head)
        while size < settings.PROBE_MORE:
            more = read(settings.PROBE_MORE - size)
            if not more:
                break
            parts.append(more)
            size += len(more)
        if len(parts) > 1:
            head = b"".join(parts)
            fmt, framing = detect(head, format)
    return head, fmt, framing


def container(kind: str, head: bytes, field: tuple[str, ...] | None) -> str:
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
    return _ollama.claims(None, first) and get(first, field or ()) is None


def refuse_log(head: bytes) -> None:
    """Raise a Problem if a file read as a body is plainly a JSON lines log (its body at some path)."""
    try:
        first = orjson.loads(head.split(b"\n", 1)[0])
    except orjson.JSONDecodeError:
        return
    if type(first) is not dict or _holds_body(first):
        return  # a line of a stream (Ollama's, a chunk per line): a body indeed
    path = body_path(first)
    if path is not None:
        raise Problem("looks like a log", f"looks like a log (JSON lines, a captured response in each), not a "
                                          f"response body: read it with --field {path} (from Python: field="
                                          f"{path!r}); the file was not read", 0)


def _holds_body(value: Any) -> bool:
    """Tell whether value is a body of a known format: its text, a list of its chunks, or one chunk."""
    acc = settings.Accumulator(format="auto")
    try:
        if type(value) is str:
            acc.feed(value[:settings.PROBE[0]].encode("utf-8", "surrogatepass"))
        elif type(value) is list and value and type(value[0]) is dict:
            acc.feed_chunk(value[0])
        elif type(value) is dict:
            acc.feed_chunk(value)
        else:
            return False
    except (TypeError, ValueError):
        return False
    return acc.finalize().format != "auto"


def body_path(obj: dict, depth: int = 6) -> str | None:
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


def get(obj: Any, path: tuple[str, ...]) -> Any:
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
