"""Turn the accumulated state of a stream into a Result: parse each call's bytes once, with orjson."""

from __future__ import annotations

from typing import Any, Iterable

import orjson

from ._results import ArgumentsError, Choice, Result, ToolCall

# Quirk bits set by the accumulators (both twins use these numbers) and their public names.
Q_MISSING_INDEX = 1
Q_NEW_CALL_SAME_INDEX = 2
Q_CHANGING_ID = 4
Q_RESENT_ID = 8
Q_RESENT_NAME = 16
Q_EMPTY_NAME = 32
Q_INTEGER_ID = 64
Q_OBJECT_ARGUMENTS = 128
Q_SPLIT_SURROGATE = 256
Q_NAME_CHANGED = 512
# decided here, at the end
Q_CUMULATIVE = 1024
Q_REPEATED_ARGUMENTS = 2048

QUIRK_NAMES = {
    Q_MISSING_INDEX: "missing-index",
    Q_NEW_CALL_SAME_INDEX: "new-call-same-index",
    Q_CHANGING_ID: "changing-id",
    Q_RESENT_ID: "resent-id",
    Q_RESENT_NAME: "resent-name",
    Q_EMPTY_NAME: "empty-name",
    Q_INTEGER_ID: "integer-id",
    Q_OBJECT_ARGUMENTS: "object-arguments",
    Q_SPLIT_SURROGATE: "split-surrogate",
    Q_NAME_CHANGED: "name-changed",
    Q_CUMULATIVE: "cumulative-arguments",
    Q_REPEATED_ARGUMENTS: "repeated-arguments",
}


def quirk_names(bits: int) -> tuple[str, ...]:
    """Return the names of the quirks set in bits, in a fixed order."""
    return tuple(name for bit, name in QUIRK_NAMES.items() if bits & bit)


def parses(data: bytes | bytearray) -> bool:
    """Tell whether data is one complete JSON value."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    return True


def _byte_offset(text: str, char_pos: int) -> int:
    return len(text[:char_pos].encode("utf-8", "surrogatepass"))


def _classify(data: bytes, exc: orjson.JSONDecodeError, text: str) -> tuple[str, int]:
    """Return (kind, byte offset) for arguments that orjson rejected."""
    message = str(exc)
    if "after document" in message:
        return "trailing data", _byte_offset(text, exc.pos)
    offset = _byte_offset(text, exc.pos)
    if offset >= len(data.rstrip(b" \t\r\n")) or "end of" in message or "EOF" in message:
        return "truncated", len(data)
    return "malformed", offset


def parse_arguments(data: bytes, call_id: str | None, name: str | None) -> tuple[Any, str, ArgumentsError | None]:
    """Parse a call's argument bytes once; return (arguments, raw text, error)."""
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raw = data.decode("utf-8", "replace")
        return None, raw, ArgumentsError("malformed", "invalid UTF-8", call_id=call_id, name=name,
                                         offset=exc.start, raw=raw)
    if not data.strip(b" \t\r\n"):
        return {}, raw, None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        kind, offset = _classify(data, exc, raw)
        return None, raw, ArgumentsError(kind, str(exc).split(":")[0], call_id=call_id, name=name,
                                         offset=offset, raw=raw)
    if type(value) is not dict:
        return None, raw, ArgumentsError("not an object", f"got a JSON {type(value).__name__}", call_id=call_id,
                                         name=name, offset=0, raw=raw)
    return value, raw, None


def undo_repeats(data: bytes, cumulative: list[int] | None, last_start: int) -> tuple[bytes, int]:
    """Undo cumulative or resent arguments when (and only when) the text as sent does not parse.

    cumulative: the lengths of the fragments while every fragment began with the one before
    (the accumulator then keeps only the latest, from which all are rebuilt); None otherwise.
    Returns the bytes to parse and the quirk bits applied.
    """
    if cumulative is not None and len(cumulative) > 1:
        as_sent = b"".join(data[:n] for n in cumulative[:-1]) + data
        if parses(as_sent):
            return as_sent, 0
        return data, Q_CUMULATIVE
    if 0 < last_start < len(data) and not parses(data):
        head, tail = data[:last_start], data[last_start:]
        try:
            if orjson.loads(head) == orjson.loads(tail):
                return head, Q_REPEATED_ARGUMENTS
        except orjson.JSONDecodeError:
            pass
    return data, 0


def build_result(slots: Iterable[tuple], texts: dict, state: Any, strict: bool) -> Result:
    """Build the Result from the accumulator's slots and texts.

    slots: (choice, seq, index, id, name, bytes, cumulative, last_start, quirk bits) per call;
    texts: choice -> [content, reasoning, refusal] as bytes or None.
    """
    calls: list[ToolCall] = []
    for choice, _seq, index, call_id, name, data, cumulative, last_start, bits in sorted(
            slots, key=lambda s: (s[0], s[1])):
        data, more = undo_repeats(bytes(data), cumulative, last_start)
        arguments, raw, error = parse_arguments(data, call_id, name)
        calls.append(ToolCall(call_id, name, choice, index, arguments, raw, error, quirk_names(bits | more)))
    if strict:
        if state.errors:
            raise state.errors[0]
        for call in calls:
            if call.error is not None:
                raise call.error
    choice_ids = set(texts) | set(state.finish_reasons) | {c.choice for c in calls}
    choices = []
    for k in sorted(choice_ids):
        content, reasoning, refusal = texts.get(k, (None, None, None))
        choices.append(Choice(k, _decode(content), _decode(reasoning), _decode(refusal),
                              state.finish_reasons.get(k), [c for c in calls if c.choice == k]))
    return Result(calls, list(state.errors), state.complete, state.format, choices, state.usage)


def _decode(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "replace")
