"""The complete part of a JSON text that was cut short, read the way the Anthropic SDK reads a tool's partial input.

The SDK (anthropic.lib.streaming) parses a tool block's input with jiter in partial mode after
every input_json_delta, so a stream cut inside the input leaves the values that were complete:
a string or literal still arriving is left out (with its key), and so is a number that does not
read whole yet ("1.", "2e"); a number that does ("1000", which might have gone on) is kept, as
jiter keeps it. Open arrays and objects are closed. complete_part() gives the same value; it
never invents one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from .._exactjson import loads_exact

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WS = " \t\n\r"
_LITERALS = {"true": True, "false": False, "null": None}


class _Cut(Exception):
    """The text ended (or went wrong) inside a value; partial is what of it was complete, or None."""

    def __init__(self, partial: Any = None) -> None:
        self.partial = partial


def keep_input_piece(acc: Any, block: Any, text: str) -> None:
    """Keep a piece of a tool input the turn holds as sent (block.pieces), within Limits.stream_bytes.

    A piece that does not fit cuts the input there: the pieces become a tuple, which keeps nothing
    more, and the input reads as far as it came whole (complete_part), never with a hole.
    """
    pieces = block.pieces
    if type(pieces) is tuple:
        return
    if not acc.spend(len(text)):
        block.pieces = tuple(pieces or ())
        return
    if pieces is None:
        block.pieces = [text]
    else:
        pieces.append(text)  # in place: a new list per piece would cost n squared


def object_so_far(text: str, otherwise: Any) -> Any:
    """Return the object a tool input's text holds: parsed, or the complete part of a cut one; else otherwise."""
    if not text.strip():
        return otherwise
    try:
        value = loads_exact(text)  # integers beyond 64 bits exact, as the calls' arguments
    except orjson.JSONDecodeError:
        value = complete_part(text)
    return value if type(value) is dict else otherwise


def complete_part(text: str) -> Any:
    """Return the value of text's complete part; None when not even the start of a value came whole.

    None too for a text nested deeper than this reader recurses (some 450 levels; a whole input
    nested that deep would not parse either): the turn then shows the input as none came.
    """
    try:
        return _value(text, _skip(text, 0))[0]
    except _Cut as cut:
        return cut.partial
    except RecursionError:
        return None


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


def _value(s: str, i: int) -> tuple[Any, int]:
    if i >= len(s):
        raise _Cut()
    c = s[i]
    if c == "{":
        return _object(s, i + 1)
    if c == "[":
        return _array(s, i + 1)
    if c == '"':
        return _string(s, i)
    for word, value in _LITERALS.items():
        if s.startswith(word, i):
            return value, i + len(word)
    match = _NUMBER.match(s, i)
    if match is None or (match.end() < len(s) and s[match.end()] in ".eE+-"):
        raise _Cut()  # a number still arriving ("1.", "-", "2e"), a literal cut short, or no value at all
    number = match.group()
    return (float(number) if any(ch in number for ch in ".eE") else int(number)), match.end()


def _string(s: str, i: int) -> tuple[str, int]:
    j = i + 1
    n = len(s)
    while j < n:
        c = s[j]
        if c == '"':
            try:
                return json.loads(s[i:j + 1]), j + 1
            except ValueError:
                raise _Cut() from None
        j += 2 if c == "\\" else 1
    raise _Cut()


def _object(s: str, i: int) -> tuple[dict, int]:
    obj: dict = {}
    i = _skip(s, i)
    if i < len(s) and s[i] == "}":
        return obj, i + 1
    while True:
        if i >= len(s) or s[i] != '"':
            raise _Cut(obj)
        try:
            key, i = _string(s, i)
        except _Cut:
            raise _Cut(obj) from None
        i = _skip(s, i)
        if i >= len(s) or s[i] != ":":
            raise _Cut(obj)
        try:
            obj[key], i = _value(s, _skip(s, i + 1))
        except _Cut as cut:
            if cut.partial is not None:
                obj[key] = cut.partial
            raise _Cut(obj) from None
        i = _skip(s, i)
        if i >= len(s):
            raise _Cut(obj)
        if s[i] == "}":
            return obj, i + 1
        if s[i] != ",":
            raise _Cut(obj)
        i = _skip(s, i + 1)


def _array(s: str, i: int) -> tuple[list, int]:
    items: list = []
    i = _skip(s, i)
    if i < len(s) and s[i] == "]":
        return items, i + 1
    while True:
        try:
            value, i = _value(s, i)
        except _Cut as cut:
            if cut.partial is not None:
                items.append(cut.partial)
            raise _Cut(items) from None
        items.append(value)
        i = _skip(s, i)
        if i >= len(s):
            raise _Cut(items)
        if s[i] == "]":
            return items, i + 1
        if s[i] != ",":
            raise _Cut(items)
        i = _skip(s, i + 1)
