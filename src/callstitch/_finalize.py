"""Turn the accumulated state of a stream into a Result: parse each call's bytes once, with orjson."""

from __future__ import annotations

from typing import Any

import orjson

from ._exactjson import REFUSED, exact, long_digit_run, loads_exact, past_double
from ._limits import cut_detail
from ._results import ArgumentsError, Choice, Result, ToolCall
from ._state import RawJSON

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
    if not bits:
        return ()
    return tuple(name for bit, name in QUIRK_NAMES.items() if bits & bit)


def parses(data: bytes | bytearray) -> bool:
    """Tell whether data is one complete JSON value."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        try:
            return past_double(data, exc) is not REFUSED
        except orjson.JSONDecodeError:
            return False
    return True


def _byte_offset(text: str, char_pos: int) -> int:
    return len(text[:char_pos].encode("utf-8", "surrogatepass"))


def _classify(data: bytes | bytearray, exc: orjson.JSONDecodeError, text: str) -> tuple[str, int]:
    """Return (kind, byte offset) for arguments that orjson rejected."""
    message = str(exc)
    if "after document" in message:
        return "trailing data", _byte_offset(text, exc.pos)
    offset = _byte_offset(text, exc.pos)
    if offset >= len(data.rstrip(b" \t\r\n")) or "end of" in message or "EOF" in message:
        return "truncated", len(data)
    return "malformed", offset


def parse_arguments(data: bytes | bytearray, call_id: str | None, name: str | None,
                    long_run: bool | None = None) -> tuple[Any, ArgumentsError | None, bool]:
    """Parse a call's argument bytes once; return (arguments, error, whether the text parsed as JSON).

    Integers beyond 64 bits come out exact; long_run: as loads_exact takes it.
    """
    if not data or (data[0] in b" \t\r\n" and not data.strip(b" \t\r\n")):
        return {}, None, True
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as refused:
        try:
            value = past_double(data, refused)
        except orjson.JSONDecodeError as exc:
            return _unparsed(data, exc, call_id, name)
        if value is REFUSED:
            return _unparsed(data, refused, call_id, name)
        long_run = False  # read exactly already
    if long_run or (long_run is None and long_digit_run(data)):  # loads_exact's test written out: a call less
        value = exact(data, value)
    if type(value) is not dict:
        return None, _not_an_object(value, data, call_id, name), True
    return value, None, True


def _unparsed(data: bytes | bytearray, exc: orjson.JSONDecodeError, call_id: str | None,
              name: str | None) -> tuple[None, ArgumentsError, bool]:
    """Return parse_arguments' answer for argument bytes that are no JSON: the error says what and where."""
    try:
        raw = data.decode("utf-8")
    except UnicodeDecodeError as bad:
        return None, ArgumentsError("malformed", "invalid UTF-8", call_id=call_id, name=name, offset=bad.start,
                                    raw=data), False
    kind, offset = _classify(data, exc, raw)
    return None, ArgumentsError(kind, str(exc).split(":")[0], call_id=call_id, name=name, offset=offset,
                                raw=raw), False


def _not_an_object(value: Any, data: bytes | bytearray, call_id: str | None, name: str | None) -> ArgumentsError:
    return ArgumentsError("not an object", f"got a JSON {type(value).__name__}", call_id=call_id, name=name, offset=0,
                          raw=data)


def settle_arguments(data: bytes | bytearray, cumulative: list[int] | None, last_start: int, call_id: str | None,
                     name: str | None,
                     long_run: bool | None = None) -> tuple[bytes | bytearray, Any, ArgumentsError | None, int]:
    """Parse a call's arguments, undoing cumulative or resent arguments only when the text as sent fails.

    cumulative: the lengths of the fragments while every fragment began with the one before
    (the accumulator then keeps only the latest, from which all are rebuilt); None otherwise.
    Returns the text taken, the arguments, the error and the quirk bits applied. long_run: whether
    data holds a long digit run (loads_exact), when the caller knows; a text rebuilt from it is looked at here.
    """
    if cumulative is not None and len(cumulative) > 1:
        as_sent = b"".join(data[:n] for n in cumulative[:-1]) + data
        value, error, parsed = parse_arguments(as_sent, call_id, name)
        if parsed:
            return as_sent, value, error, 0
        value, error, _ = parse_arguments(data, call_id, name, long_run)
        return data, value, error, Q_CUMULATIVE
    value, error, parsed = parse_arguments(data, call_id, name, long_run)
    if not parsed and 0 < last_start < len(data):
        head, tail = data[:last_start], data[last_start:]
        part_run = None if long_run else long_run  # no run in data: none in its parts either
        try:
            same = loads_exact(head, part_run) == loads_exact(tail, part_run)
        except orjson.JSONDecodeError:
            same = False
        if same:
            value, error, _ = parse_arguments(head, call_id, name, part_run)
            return head, value, error, Q_REPEATED_ARGUMENTS
    return data, value, error, 0


def make_call(choice: int, index: int, call_id: str | None, name: str | None, data: bytes | bytearray,
              cumulative: list[int] | None, last_start: int, bits: int, cut: int = 0,
              parsed: Any = None, custom: bool = False, long_run: bool | None = None, late: int = 0) -> ToolCall:
    """Build one finished ToolCall from a slot's state: its arguments parsed once.

    cut: 0, or the limit (a _limits.CUT_* code) the arguments went past, the rest dropped; they
    are then reported as truncated whatever the kept part looks like. parsed: the arguments as a
    value, when the call arrived whole with them already parsed (data is then their compact JSON).
    custom: an OpenAI custom tool call, whose input text is its arguments, as sent. long_run:
    whether data holds a run of digits an integer beyond 64 bits needs (loads_exact), when the
    caller has looked (the compiled twin, in C); None to look when parsing. late: 0, or the CUT_*
    code of an event lost (over Limits.event_bytes, unreadable) before the call was first seen;
    when its arguments do not parse, or none came (that event may have held them all: a call may
    get its name after its first pieces), it reads as truncated, saying so, rather than as
    malformed or as taking none.
    """
    if custom:
        return _custom_call(choice, index, call_id, name, data, cumulative, bits, cut, late)
    if parsed is not None and not cut:
        if type(parsed) is dict:
            return ToolCall(call_id, name, choice, index, parsed, data, None, quirk_names(bits))
        return ToolCall(call_id, name, choice, index, None, data, _not_an_object(parsed, data, call_id, name),
                        quirk_names(bits))
    if not cut:
        settled, arguments, error, more = settle_arguments(data, cumulative, last_start, call_id, name, long_run)
        if not late or (error is None and data):
            return ToolCall(call_id, name, choice, index, arguments, settled, error, quirk_names(bits | more))
    if cumulative is not None and len(cumulative) > 1:
        data = b"".join(data[:n] for n in cumulative[:-1]) + data  # what was sent before the cut, as sent
    error = ArgumentsError("truncated", cut_detail(cut, late, none_came=not data), call_id=call_id, name=name,
                           offset=len(data), raw=data)
    return ToolCall(call_id, name, choice, index, None, data, error, quirk_names(bits))


def _custom_call(choice: int, index: int, call_id: str | None, name: str | None, data: bytes | bytearray,
                 cumulative: list[int] | None, bits: int, cut: int, late: int) -> ToolCall:
    """Build a custom (free-form) call: its input is any text, kept exactly as sent, never parsed (late: see make_call)."""
    if cumulative is not None and len(cumulative) > 1:
        # The slot keeps only the latest of fragments that each began with the one before: no
        # JSON tells cumulative sending apart here, so the text is the fragments as sent.
        data = b"".join(data[:n] for n in cumulative[:-1]) + data
    text = bytes(data).decode("utf-8", "replace")
    if cut or (late and not data):  # a late call that got no input: the dropped event may have held it all
        error = ArgumentsError("truncated", cut_detail(cut, late, "input", none_came=not data), call_id=call_id,
                               name=name, offset=len(data), raw=data)
        return ToolCall(call_id, name, choice, index, None, text, error, quirk_names(bits), "custom")
    return ToolCall(call_id, name, choice, index, text, text, None, quirk_names(bits), "custom")


def build_result(calls: list[tuple], texts: dict, state: Any) -> Result:
    """Build the Result from the accumulator's finished calls and texts.

    calls: (choice, seq, ToolCall) per call, in order of first appearance (seq);
    texts: choice -> [content, reasoning, refusal] as bytes or None, or None for a choice with no text.
    """
    reasons = state.finish_reasons
    if _only_first_choice(texts, reasons, calls):
        return one_choice_result([call for _choice, _seq, call in calls], texts.get(0), state)
    by_choice: dict[int, list] = {}
    for choice, _seq, call in calls:  # already in order of first appearance
        group = by_choice.get(choice)
        if group is None:
            by_choice[choice] = [call]
        else:
            group.append(call)
    numbers = by_choice.keys() | texts.keys() | reasons.keys()
    if len(numbers) > 1:
        numbers = sorted(numbers)
    ordered: list[ToolCall] = []
    choices = []
    for k in numbers:
        group = by_choice.get(k, [])
        ordered += group
        content, reasoning, refusal = texts.get(k) or _NO_TEXT
        choices.append(Choice(k, _decode(content), _decode(reasoning), _decode(refusal), reasons.get(k), group))
    return Result(ordered, state.result_errors(), state.complete, state.format, choices, _usage(state),
                  state.turn)


def one_choice_result(calls: list[ToolCall], texts: tuple | None, state: Any) -> Result:
    """Build the Result of a stream that spoke only of choice 0, the common case: no grouping, no sorting.

    calls: its finished calls in order; texts: its (content, reasoning, refusal) as bytes or None, or None.
    """
    usage = _usage(state)
    reasons = state.finish_reasons
    if texts is None:
        if not calls and not reasons:
            return Result([], state.result_errors(), state.complete, state.format, [], usage, state.turn)
        choice = Choice(0, None, None, None, reasons.get(0), calls)
    else:
        content, reasoning, refusal = texts
        choice = Choice(0, _decode(content), _decode(reasoning), _decode(refusal), reasons.get(0), calls)
    return Result(list(calls), state.result_errors(), state.complete, state.format, [choice], usage,
                  state.turn)


_NO_TEXT = (None, None, None)


def _only_first_choice(texts: dict, reasons: dict, calls: list[tuple]) -> bool:
    """Tell whether choice 0 (the integer) is the only choice the stream spoke of (texts, reasons, calls)."""
    for keys in (texts, reasons):
        for key in keys:
            if type(key) is not int or key:
                return False
    for choice, _seq, _call in calls:
        if type(choice) is not int or choice:
            return False
    return True


def _usage(state: Any) -> Any:
    """Return the usage as sent (kept as JSON text by the compiled path until now)."""
    usage = state.usage
    if type(usage) is RawJSON:
        usage = orjson.loads(memoryview(usage))  # orjson takes no bytes subclass
    return usage


def _decode(data: bytes | bytearray | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def raise_first_error(result: Result) -> None:
    """Raise the first stream error, else the first call's arguments error (finalize(strict=True))."""
    if result.errors:
        raise result.errors[0]
    for call in result.tool_calls:
        if call.error is not None:
            raise call.error
