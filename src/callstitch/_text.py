"""UTF-8 encoding of decoded JSON strings that may hold lone UTF-16 surrogates.

A server that cuts its output by UTF-16 units and escapes non-ASCII can end one fragment with
``\\ud83d`` and start the next with ``\\ude00``. Each piece alone holds a lone surrogate, which
UTF-8 cannot carry; joined they are one character. These helpers do the joining. They run only
off the hot path: when a fragment does not encode as plain UTF-8, or a surrogate is pending.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ._finalize import Q_OBJECT_ARGUMENTS, Q_SPLIT_SURROGATE

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogate(unit: int) -> str:
    """Return the JSON escape text for one UTF-16 unit that has no partner."""
    return "\\u%04x" % unit


def encode_fragment(text: str, pending: int) -> tuple[bytes, int, bool]:
    """Encode text as UTF-8 after a pending high surrogate; return (bytes, new pending, joined a pair).

    A high surrogate at the very end is held back as the new pending unit; any other lone
    surrogate is kept as its escape text, so nothing received is lost.
    """
    head = ""
    joined = False
    if pending:
        if text and 0xDC00 <= ord(text[0]) <= 0xDFFF:
            head = chr(0x10000 + ((pending - 0xD800) << 10) + (ord(text[0]) - 0xDC00))
            text = text[1:]
            joined = True
        else:
            head = escape_surrogate(pending)
    new_pending = 0
    if text and 0xD800 <= ord(text[-1]) <= 0xDBFF:
        new_pending = ord(text[-1])
        text = text[:-1]
    # Adjacent high+low units inside one piece are a character; join them before escaping the rest.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    text = _LONE_SURROGATE.sub(lambda m: escape_surrogate(ord(m.group())), text)
    return (head + text).encode("utf-8"), new_pending, joined


def argument_bytes(arguments: Any, pending: int) -> tuple[bytes, int, int, str | None]:
    """Turn one fragment's arguments, of any type, into bytes to append.

    Returns (bytes, new pending surrogate, quirk bits, problem); problem names why nothing could
    be appended. The twins' fast paths take plain strings themselves; everything else comes here.
    """
    if type(arguments) is str:
        if pending:
            data, pending, joined = encode_fragment(arguments, pending)
            return data, pending, Q_SPLIT_SURROGATE if joined else 0, None
        try:
            return arguments.encode("utf-8"), 0, 0, None
        except UnicodeEncodeError:
            data, pending, _ = encode_fragment(arguments, 0)
            return data, pending, 0, None
    if isinstance(arguments, (bytes, bytearray, memoryview)):
        return bytes(arguments), pending, 0, None
    # Arguments sent as a JSON value instead of a string (Ollama, GLM, llama-server).
    try:
        return compact_json(arguments), pending, Q_OBJECT_ARGUMENTS, None
    except TypeError as exc:
        return b"", pending, Q_OBJECT_ARGUMENTS, f"arguments are not JSON: {exc}"


def compact_json(value: Any) -> bytes:
    """Return value as orjson writes it, also when it is nested deeper than orjson writes (254 levels).

    The arguments of a call that came whole were parsed from JSON nested up to 1,024 levels;
    their text must come back from any of them, in both twins alike.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        # Too deep, an integer beyond 64 bits or a lone surrogate (read exactly by _exactjson, as
        # the escape "\ud800" in the JSON text): written here instead.
        if not any(reason in str(exc) for reason in ("Recursion limit", "64-bit", "surrogates")):
            raise
    return _compact_deep(value)


_LONE = re.compile("([\ud800-\udfff])")  # (a pair is one character in a str: only lone units match)


def _string(text: str) -> bytes:
    """Write a JSON string as orjson does; a lone surrogate in it as its escape (which orjson refuses to write)."""
    try:
        return orjson.dumps(text)
    except orjson.JSONEncodeError:
        pieces = _LONE.split(text)  # (odd places: the lone units)
        return b'"' + b"".join(escape_surrogate(ord(piece)).encode() if k % 2 else orjson.dumps(piece)[1:-1]
                               for k, piece in enumerate(pieces)) + b'"'


def json_size(value: Any) -> int:
    """Return the length of value's JSON text (of its repr, for a value JSON cannot write): a field's size."""
    try:
        return len(compact_json(value))
    except (TypeError, ValueError):  # (orjson's errors are both; a key that is no string, say)
        return len(repr(value))


_END = object()


def _compact_deep(value: Any) -> bytes:
    """Write value as orjson would, with no depth or integer limit: containers here, without recursion."""
    out = bytearray()
    open_items: list[list[Any]] = []  # per open container: [its items' iterator, whether a dict, items written]

    def start(item: Any) -> None:
        if isinstance(item, dict):
            out.extend(b"{")
            open_items.append([iter(item.items()), True, 0])
        elif isinstance(item, (list, tuple)):
            out.extend(b"[")
            open_items.append([iter(item), False, 0])
        elif type(item) is int:
            try:
                out.extend(str(item).encode())  # as orjson writes an int, also one beyond 64 bits
            except ValueError as exc:  # more digits than str() writes (sys.get_int_max_str_digits())
                raise TypeError(str(exc)) from None
        elif type(item) is str:
            out.extend(_string(item))
        else:
            out.extend(orjson.dumps(item))

    start(value)
    while open_items:
        top = open_items[-1]
        item: Any = next(top[0], _END)
        if item is _END:
            open_items.pop()
            out.extend(b"}" if top[1] else b"]")
            continue
        if top[2]:
            out.extend(b",")
        top[2] += 1
        if top[1]:
            key, item = item
            if type(key) is not str:
                raise TypeError("Dict key must be str")
            out.extend(_string(key))
            out.extend(b":")
        start(item)
    return bytes(out)
