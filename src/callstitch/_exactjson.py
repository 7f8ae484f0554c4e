"""Read JSON with orjson, keeping integers beyond 64 bits exact (orjson reads them as floats, silently).

orjson reads 100000000000000000000000000000 as 1e+29 without a word. Such an integer has at least
LONG_RUN digits in a row, which almost no text has: the text is looked at for such a run (in C
passes over the bytes), and only a text that has one is read again by the standard library,
which keeps every integer exact. Digits inside a string count too: that costs the second reading,
never a different value.

orjson also refuses an integer of more than ~309 digits ("number is infinity when parsed as
double"): it is JSON all the same, so past_double reads such a text with the standard library.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

__all__ = ["LONG_RUN", "long_digit_run", "loads_exact", "exact", "past_double", "read_standard", "REFUSED"]

# The fewest digits in a row of an integer orjson cannot hold: -2**63-1 is -9223372036854775809 (19
# digits), 2**64 is 18446744073709551616 (20). The compiled twin's scan (_c/digits.h) uses it too.
LONG_RUN = 19
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_RUN = b"0" * LONG_RUN


def long_digit_run(data: bytes | bytearray | memoryview | str) -> bool:
    """Tell whether data holds LONG_RUN or more ASCII digits in a row, anywhere (a string's digits too)."""
    if type(data) is str:
        data = data.encode("utf-8", "surrogatepass")
    elif type(data) is memoryview:
        data = data.tobytes()
    # Every digit mapped to "0", everything else to " ", then one substring search: a regular
    # expression costs several times orjson's whole parse.
    return _RUN in data.translate(_DIGITS_ONLY)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):  # orjson's refusal of a fraction or exponent beyond a double, kept
        raise ValueError("number is infinity when parsed as double")
    return value


def read_standard(data: bytes | bytearray | memoryview | str) -> Any:
    """Read JSON with the standard library, as orjson would read it but for its own limits: integers exact.

    NaN and Infinity (no JSON) and a number with a fraction or exponent beyond a double are refused
    (ValueError), as orjson refuses them; so is an integer of more digits than int() converts
    (sys.get_int_max_str_digits()), and a text nested deeper than STANDARD_DEPTH.
    """
    if not isinstance(data, str):
        # Strict UTF-8, as orjson reads: the standard library would take UTF-16 and surrogates as bytes.
        data = bytes(data).decode("utf-8")
    if not _shallow(data):
        raise ValueError(f"nested deeper than {STANDARD_DEPTH} levels")
    return json.loads(data, parse_constant=_reject_constant, parse_float=_finite)


# The deepest text the standard library is given. It reads nesting by recursion, under the
# interpreter's recursion limit, which counts the caller's frames too: a text near that limit
# would read or not by how deep the caller stands (the twins stand at different depths). Half the
# default limit leaves room for any sane caller, and the answer is the same from everywhere.
STANDARD_DEPTH = 500
# A string (skipped whole; one left open runs to the end, so no later quote scans the rest again) or a bracket
_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


def _shallow(data: bytes | bytearray | str) -> bool:
    """Tell whether data nests at most STANDARD_DEPTH deep (at C speed when it has no more brackets than that)."""
    text = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if text.count(b"[") + text.count(b"{") <= STANDARD_DEPTH:
        return True
    depth = 0
    for token in _NESTING.finditer(text):
        byte = token.group()[0]
        if byte == 0x5B or byte == 0x7B:  # [ {
            depth += 1
            if depth > STANDARD_DEPTH:
                return False
        elif byte == 0x5D or byte == 0x7D:  # ] }
            depth -= 1
    return True


REFUSED = object()  # past_double's answer when orjson's refusal stands


def past_double(data: bytes | bytearray | memoryview | str, exc: orjson.JSONDecodeError) -> Any:
    """Return text orjson refused (exc) only for an integer beyond a double, read exactly; else REFUSED.

    Raises a JSONDecodeError of its own when the text is no JSON past the integer either: that error
    says what is wrong (cut short, say). exc is never raised here: raised from this frame, which
    holds it, it would make a reference cycle per refused event, left to the garbage collector.
    """
    if not str(exc).startswith("number is infinity") or not long_digit_run(data):
        return REFUSED
    try:
        value = read_standard(data)
        if b"\\u" in (data.encode() if isinstance(data, str) else bytes(data)):
            json.dumps(value, ensure_ascii=False).encode()  # a lone surrogate: orjson refuses it, so do we
    except json.JSONDecodeError as other:
        raise orjson.JSONDecodeError(other.msg, other.doc, other.pos) from None
    except (RecursionError, ValueError):  # (UnicodeEncodeError is a ValueError)
        return REFUSED
    return value


def exact(data: bytes | bytearray | memoryview | str, value: Any) -> Any:
    """Return JSON text orjson has read as value read again by the standard library, every integer exact.

    The standard library agrees with orjson on everything else orjson accepts. value (orjson's
    reading) is returned when it cannot: nested deeper than its recursion allows, or an integer of
    more digits than int() converts (sys.get_int_max_str_digits()).
    """
    try:
        return read_standard(data)
    except (RecursionError, ValueError):
        return value


def loads_exact(data: bytes | bytearray | memoryview | str, long_run: bool | None = None) -> Any:
    """Parse JSON as orjson.loads does (and raise what it raises), integers beyond 64 bits exact (past_double too).

    long_run: whether data holds a run of LONG_RUN digits, when the caller knows (the compiled
    twin looks in C); None to look here.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        value = past_double(data, exc)
        if value is REFUSED:
            raise
        return value
    if long_run or (long_run is None and long_digit_run(data)):
        return exact(data, value)
    return value
