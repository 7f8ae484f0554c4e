"""Vertex AI's streamed arguments (partialArgs), held by the adapter until the call closes, are bounded there.

Before: the pieces of a streamed string piled up in the call's builder whatever the limits (20 MB
held with Limits(call_bytes=10000)), and were cut only when the call was handed over. Now the
builder keeps no more than the accumulator's room for a call, and a call that goes past it is
cut as any call is; one that fits comes through whole, on either side of the limit.
"""

from __future__ import annotations

import tracemalloc

import orjson
import pytest

from callstitch import Limits
from _streams import dumps


def _event(obj: dict) -> bytes:
    return b"data: " + dumps(obj) + b"\r\n\r\n"


def _part(call: dict, text: str | None = None) -> bytes:
    parts = ([{"text": text}] if text else []) + [{"functionCall": call}]
    return _event({"candidates": [{"content": {"role": "model", "parts": parts}}]})


def vertex_call(pieces: list[str], text: str | None = None) -> bytes:
    """A streamed call: its name, the string at $.a in pieces, its close, then the finish."""
    out = [_part({"name": "f", "willContinue": True}, text)]
    out += [_part({"partialArgs": [{"jsonPath": "$.a", "stringValue": piece, "willContinue": True}],
                   "willContinue": True}) for piece in pieces]
    out.append(_part({"partialArgs": [{"jsonPath": "$.a", "stringValue": "", "willContinue": False}],
                      "willContinue": True}))
    out.append(_part({}))
    out.append(_event({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]}))
    return b"".join(out)


def _limit_errors(result) -> list[str]:
    return [e.detail for e in result.errors if e.kind == "limit"]


def test_a_streamed_call_past_the_limit_is_not_held(impl):
    acc = impl.Accumulator(format="gemini", limits=Limits(call_bytes=10_000))
    piece = vertex_call(["x" * 1000] * 3).split(b"\r\n\r\n")[1] + b"\r\n\r\n"
    tracemalloc.start()
    acc.feed(vertex_call([]).split(b"\r\n\r\n")[0] + b"\r\n\r\n")
    for _ in range(5_000):  # 5 MB of one string
        acc.feed(piece)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    result = acc.finalize()
    (call,) = result.tool_calls
    assert call.arguments is None and call.error.kind == "truncated"
    assert _limit_errors(result) == ["Limits.call_bytes (10000) exceeded by tool call None ('f'); the rest of its "
                                     "arguments is dropped"]
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("pieces", [["ab"] * 50, ["x" * 700, "y" * 300], ["é" * 40, "z"]])
def test_a_call_that_fits_is_whole_and_one_byte_less_cuts_it(both, pieces):
    body = vertex_call(pieces)
    size = len(orjson.dumps({"a": "".join(pieces)}))
    for impl in both:
        whole = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size))
        assert whole.tool_calls[0].arguments == {"a": "".join(pieces)} and not whole.errors
        cut = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size - 1))
        assert cut.tool_calls[0].arguments is None and cut.tool_calls[0].error.kind == "truncated"
        assert _limit_errors(cut)
        # cut, never altered: what it keeps is the start of the arguments' text
        assert orjson.dumps({"a": "".join(pieces)}).decode().startswith(cut.tool_calls[0].raw_arguments or "")
    results = [impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size - 1)) for impl in both]
    assert results[0] == results[1]


def test_the_stream_budget_left_bounds_a_streamed_call(both):
    text = "t" * 3000  # message text spends the stream's budget before the call starts
    body = vertex_call(["x" * 500] * 10, text=text)
    results = [impl.reassemble(body, format="gemini", limits=Limits(stream_bytes=5000)) for impl in both]
    assert results[0] == results[1]
    (call,) = results[0].tool_calls
    assert call.arguments is None and call.error.kind == "truncated"
    assert results[0].text == text
    assert any("Limits.stream_bytes (5000)" in detail for detail in _limit_errors(results[0]))


def test_values_set_twice_past_the_room_cut_the_call_all_the_same(both):
    # The room counts what came, not what the text keeps: a string set again and again at one
    # path goes past it though the text stays small. The call is then cut (never given whole with
    # the values after the room dropped), and the limit is said.
    entries = [_part({"partialArgs": [{"jsonPath": "$.a", "stringValue": ch * 1000}], "willContinue": True})
               for ch in "abcdefghijklmnopqrst"]
    body = b"".join([_part({"name": "f", "willContinue": True}), *entries, _part({}),
                     _event({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]})])
    results = [impl.reassemble(body, format="gemini", limits=Limits(call_bytes=10_000)) for impl in both]
    assert results[0] == results[1]
    (call,) = results[0].tool_calls
    assert call.arguments is None and call.error.kind == "truncated"
    # the value that went past (its key counts too)
    assert orjson.dumps({"a": "j" * 1000}).decode().startswith(call.raw_arguments)
    assert any("went past 10000 bytes" in detail for detail in _limit_errors(results[0]))
    unlimited = both[0].reassemble(body, format="gemini")
    assert unlimited.tool_calls[0].arguments == {"a": "t" * 1000}


def _indexed_call(path: str, value: str) -> bytes:
    """A streamed call with one value, at path, then its close and the finish."""
    return b"".join([_part({"name": "f", "willContinue": True}),
                     _part({"partialArgs": [{"jsonPath": path, "stringValue": value}], "willContinue": True}),
                     _part({}),
                     _event({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]})])


def test_an_index_far_past_a_lists_end_is_charged_not_allocated(both):
    # One 40-byte entry naming index 10**8 would have padded a list with 10**8 nulls (0.8 GB)
    # whatever the limits; the nulls are charged against the call's room first, as the text they make.
    body = _indexed_call("$.a[100000000]", "x")
    results = []
    for impl in both:
        tracemalloc.start()
        result = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=10_000))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1 << 20, peak
        results.append(result)
    assert results[0] == results[1]
    (call,) = results[0].tool_calls
    assert call.arguments is None and call.error.kind == "truncated"
    assert any("Limits.call_bytes (10000) exceeded" in detail for detail in _limit_errors(results[0]))
    # cut, never altered: it keeps the start of the text it would have had (nulls, as many as fit)
    assert ('{"a":[' + "null," * 3000).startswith(call.raw_arguments)
    default = [impl.reassemble(body, format="gemini") for impl in both]  # the default room: 64 MiB
    assert default[0] == default[1] and default[0].tool_calls[0].error.kind == "truncated"


def test_a_padded_list_that_fits_is_whole(both):
    body = _indexed_call("$.a[3]", "x")
    size = len(b'{"a":[null,null,null,"x"]}')
    for impl in both:  # the nulls are charged no more than the text they make
        whole = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size))
        assert whole.tool_calls[0].arguments == {"a": [None, None, None, "x"]} and not whole.errors
        cut = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size - 1))
        assert cut.tool_calls[0].error.kind == "truncated"


def test_a_long_list_built_in_order_fits_its_own_size(both):
    # Each element's own place is no padding: a list of one-digit numbers (two bytes each in the
    # text) fits a room of its text's size, and is cut one byte below it.
    entries = [_part({"partialArgs": [{"jsonPath": f"$.a[{k}]", "numberValue": k % 10}], "willContinue": True})
               for k in range(2000)]
    body = b"".join([_part({"name": "f", "willContinue": True}), *entries, _part({}),
                     _event({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]})])
    expected = {"a": [k % 10 for k in range(2000)]}
    size = len(orjson.dumps(expected))
    for impl in both:
        whole = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size))
        assert whole.tool_calls[0].arguments == expected and not whole.errors
        cut = impl.reassemble(body, format="gemini", limits=Limits(call_bytes=size - 1))
        assert cut.tool_calls[0].error.kind == "truncated"
