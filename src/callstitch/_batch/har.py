"""Read a HAR export: the event-stream responses of its entries."""

from __future__ import annotations

import base64
from typing import Any

import orjson

from .._formats.dispatch import decode_payload
from .._wire.framing import BOM
from . import settings
from .collect import Collector
from .containers import get
from .reads import Reads
from .sources import Problem
from .task import Task


_STREAM_MIME = ("event-stream", "ndjson", "eventstream", "jsonl", "x-amz-json")


def read_har(task: Task, reader: Any, out: Collector) -> None:
    """A HAR export: the event-stream responses of log.entries[].response.content."""
    out.unit = "entry"
    reads = Reads(reader, 0, None)
    chunks = []
    while True:
        data = reads.read(settings.BLOCK)
        if not data:
            break
        chunks.append(data)
    data = b"".join(chunks)
    del chunks
    out.nbytes += len(data)
    try:
        har = decode_payload(data[len(BOM):] if data.startswith(BOM) else data)  # (a lone surrogate escape too)
    except orjson.JSONDecodeError as exc:
        raise Problem("not JSON", f"not a HAR file: {exc}") from None
    del data
    entries = get(har, ("log", "entries"))
    if type(entries) is not list:
        raise Problem("not JSON", "not a HAR file: no log.entries")
    fmt = task.format
    for i, entry in enumerate(entries):
        content = get(entry, ("response", "content"))
        if type(content) is not dict:
            continue
        mime = str(content.get("mimeType") or "").lower()
        if not any(m in mime for m in _STREAM_MIME):
            continue
        text = content.get("text")
        if type(text) is not str:
            continue
        if content.get("encoding") == "base64":
            try:
                body = base64.b64decode(text, validate=False)
            except ValueError as exc:
                out.problem(i, None, "not JSON", f"content.text is not base64 ({exc})")
                continue
        else:
            body = text.encode("utf-8", "surrogatepass")
        out.nbytes += len(body)
        acc = settings.Accumulator(fmt, out.limits)
        acc.feed(body)
        out.result(i, acc.finalize(), 0)
    out.span = len(entries)
