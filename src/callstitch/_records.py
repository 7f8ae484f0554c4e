"""Turn a finished call into JSON that every output path can write, whatever its arguments hold.

orjson writes almost every record; what it refuses — a lone UTF-16 surrogate in an id or a name,
an integer beyond 64 bits, a value nested deeper than its 254 levels — goes to the standard
library; what neither can write (nested deeper than MAX_DEPTH, a value holding itself) is written
with ``arguments`` null, the text as received in ``raw_arguments`` and why in ``reason``. The CLI
and batch records, the Parquet writer, callstitch.spark and the example gateway all write calls
through here, so one deep call never stops a run and every path writes it the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import orjson

from ._exactjson import long_digit_run

__all__ = ["MAX_DEPTH", "Unwritable", "nesting", "to_json", "arguments_json", "record_json", "call_line", "raw_text",
           "read_record", "read_records",
           "utf8_text", "past_int64"]

# Arguments nested deeper than this are written as their raw text. A fixed figure, not the
# interpreter's stack, decides, so that every path and every worker writes the same call the same
# way; 500 levels leave the standard library's encoder room below Python's recursion limit.
MAX_DEPTH = 500


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1  # what an int64 column holds (Parquet's, Spark's bigint)


def past_int64(choice: int, index: int) -> dict[str, int]:
    """Return a call's numbers that an int64 column cannot hold, by name ("choice", "index"); for most calls, none.

    A choice number is kept as sent, any integer (the JSON lines hold it); such a column writes it as null.
    """
    if _INT64_MIN <= choice <= _INT64_MAX and _INT64_MIN <= index <= _INT64_MAX:
        return {}
    return {what: value for what, value in (("choice", choice), ("index", index))
            if not _INT64_MIN <= value <= _INT64_MAX}


class Unwritable(ValueError):
    """A value no JSON writer here can write: nested deeper than MAX_DEPTH, holding itself, not JSON."""


def nesting(value: Any, stop: int = MAX_DEPTH) -> int:
    """Return how deeply the dicts and lists in value nest (0 for a scalar), counting no further than stop + 1.

    Iterative, so that no depth of input can exhaust the stack; a value holding itself counts as
    deeper than stop.
    """
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest > stop:
                return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def to_json(value: Any, limit: int = MAX_DEPTH) -> bytes:
    """Return value as compact JSON (UTF-8); raise Unwritable when it cannot be written.

    orjson first; then the standard library, for integers beyond 64 bits, lone surrogates
    (written as their \\u escape, which JSON allows) and values orjson does not know (written as
    their str(), as the CLI always has). Containers nested deeper than limit are Unwritable.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        pass
    depth = nesting(value, limit)
    if depth > limit:
        raise Unwritable(f"nested deeper than {limit} levels")
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
        # A lone surrogate (only ever inside a string) cannot be UTF-8: Python's escape for it,
        # backslash-u and four hex digits, is JSON's.
        return text.encode("utf-8", "backslashreplace")
    except RecursionError:
        raise Unwritable(f"nested {depth} levels deep, more than the stack allows here") from None
    except Exception as exc:  # noqa: BLE001 - circular, NaN, a 5,000-digit integer, a failing __str__
        raise Unwritable(f"not writable as JSON ({type(exc).__name__}: {exc})") from None


def arguments_json(arguments: Any) -> tuple[bytes | None, str | None]:
    """Return (the arguments as compact JSON, None), or (None, why they cannot be written)."""
    try:
        return to_json(arguments), None
    except Unwritable as exc:
        return None, f"arguments {exc}: kept as raw_arguments only"


def raw_text(call: Any) -> str | None:
    """Return call.raw_arguments, or None when even the text cannot be read (a writer must not fail on it)."""
    try:
        return call.raw_arguments
    except Exception:  # noqa: BLE001 - the record is still written, with its reason
        return None


def record_json(record: dict, call: Any) -> tuple[bytes, str | None]:
    """Return record (a dict with the call's "arguments") as compact JSON, and why its arguments were left out.

    When the arguments cannot be written, the record is written with "arguments" null, the
    call's "raw_arguments" and a "reason"; the reason is returned too (None when nothing was
    left out), for the caller to report.
    """
    try:
        return orjson.dumps(record), None
    except orjson.JSONEncodeError:
        pass
    # Decided on the arguments alone, as callstitch.spark decides for its arguments column.
    _, reason = arguments_json(record.get("arguments"))
    if reason is not None:
        raw = raw_text(call)
        if raw is None:
            reason += " (and the raw text could not be read)"
        record = dict(record, arguments=None, raw_arguments=raw, reason=reason)
    try:
        return to_json(record, MAX_DEPTH + 1), reason
    except Unwritable as exc:  # a field beside the arguments no writer takes (a hand-made ToolCall's)
        plain = {key: value if _plain(value) else None for key, value in record.items()}
        return to_json(plain), reason or f"{exc}: the fields that could not be written are null"


def _plain(value: Any) -> bool:
    return type(value) in (str, bool, type(None)) or (type(value) is int and -(1 << 63) <= value < (1 << 64))


def call_line(call: Any) -> tuple[bytes, str | None]:
    """Return the call's record (ToolCall.to_dict()) as one JSON line, and why its arguments were left out."""
    line, reason = record_json(call.to_dict(), call)
    return line + b"\n", reason


def read_record(line: bytes) -> dict:
    """Return the record of one JSON line written here, exactly as it was written.

    orjson, except for a line that may hold an integer beyond 64 bits or holds a lone surrogate's
    escape (which orjson refuses): the standard library reads those.
    """
    if not long_digit_run(line):
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


def read_records(chunk: bytes) -> Iterator[dict]:
    """Yield the record of each JSON line of chunk, as read_record does, looking for long digit runs once."""
    if long_digit_run(chunk):
        for line in chunk.splitlines():
            yield read_record(line)
        return
    loads = orjson.loads
    for line in chunk.splitlines():
        try:
            yield loads(line)
        except orjson.JSONDecodeError:  # a lone surrogate's escape
            yield json.loads(line)


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(value: Any) -> Any:
    """Return a string (or a list of them) with each lone surrogate replaced by U+FFFD, for UTF-8 columns.

    The fallback JSON parser lets a lone surrogate through into an id or a name; Arrow's and
    Parquet's strings are UTF-8, which cannot hold one.
    """
    if type(value) is str:
        return _SURROGATE.sub("\ufffd", value)
    if type(value) is list:
        return [utf8_text(v) for v in value]
    return value
