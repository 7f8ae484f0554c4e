"""Gemini chunks of every shape: the compiled twin reads them in place, the twins agree on all of them."""

import json
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _formats import CALLS, build, function_call, gemini_chunk, gemini_sse, pa, vertex_args, vertex_open
from conftest import agree

from callstitch import Limits, _accumulator_c

CLOSE = {"functionCall": {}}
FINISH = gemini_chunk([{"text": ""}], finish="STOP", usage={"promptTokenCount": 3, "totalTokenCount": 9})


def body(*chunks):
    return gemini_sse(list(chunks))


def test_streamed_string_in_pieces_then_whole_calls(both):
    result = agree(both, body(
        gemini_chunk([{"text": "thinking…", "thought": True}]),
        gemini_chunk([vertex_open("search")]),
        gemini_chunk([vertex_args(pa("$.query", "caf", cont=True))]),
        gemini_chunk([vertex_args(pa("$.query", "é ☕", cont=True))]),
        gemini_chunk([{"functionCall": {"willContinue": True}}]),   # a bare marker: not a close
        gemini_chunk([vertex_args(pa("$.query", "!"))]),             # the last piece
        gemini_chunk([vertex_args(pa("$.limit", 5), pa("$.tags[1]", "b"), pa("$.opts.deep", None))]),
        gemini_chunk([CLOSE]),
        gemini_chunk([function_call("now", {"tz": "UTC"}, id="c2"), function_call("noop")]),
        FINISH), "gemini")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (None, "search", {"query": "café ☕!", "limit": 5, "tags": [None, "b"], "opts": {"deep": None}}),
        ("c2", "now", {"tz": "UTC"}), (None, "noop", {})]
    assert result.reasoning == "thinking…" and result.finish_reason == "STOP"
    assert result.usage == {"promptTokenCount": 3, "totalTokenCount": 9}


@pytest.mark.parametrize("fmt", ["gemini", "auto"])
def test_a_string_left_open_reads_as_truncated(both, fmt):
    result = agree(both, body(gemini_chunk([vertex_open("f")]),
                              gemini_chunk([vertex_args(pa("$.a", "par", cont=True))]),
                              gemini_chunk([vertex_args(pa("$.a", "tial", cont=True))])), fmt)
    assert result.tool_calls[0].error.kind == "truncated"
    assert result.tool_calls[0].raw_arguments == '{"a":"partial'


@pytest.mark.parametrize("part", [
    vertex_args(pa("$.a", 5, kind="stringValue", cont=True)),          # a stringValue that is no string
    vertex_args(pa("$.a[", "x", cont=True)),                            # a path that does not parse
    vertex_args(pa("a", "x", cont=True)),
    vertex_args(pa("$.a", "x", cont=True), pa("$.a[0]", 1)),            # an index into a string
    vertex_args({"jsonPath": 7, "stringValue": "x"}),
    vertex_args({"stringValue": "x"}),
    vertex_args("not an entry"),
    vertex_args({"jsonPath": "$.b"}),                                   # no value, no continuation
    vertex_args({"jsonPath": "$.b", "willContinue": True}),             # a bare continuation
    vertex_args({"jsonPath": "$.b", "structValue": {"x": [1]}, "numberValue": 2}),
    vertex_args({"jsonPath": "$['q']", "stringValue": "same path, other spelling", "willContinue": True}),
    {"functionCall": {"partialArgs": {"jsonPath": "$.a"}}},              # partialArgs not a list
    {"functionCall": {"partialArgs": None}},
    {"functionCall": {"args": {"late": True}}},
    {"functionCall": {"name": "", "partialArgs": [pa("$.e", "x")]}},    # an empty name
    {"functionCall": {"name": 5}},
    {"functionCall": {"name": "whole", "args": [1, 2]}},                # args not an object
    {"functionCall": {"name": "whole", "args": "{\"a\": 1}"}},          # args as text
    {"functionCall": {"name": "open2", "willContinue": True, "args": None}},
    {"functionCall": {"id": "x"}},
    {"functionCall": "call"},
    {"functionCall": None, "text": "t"},
    {"text": 5},
    {"text": "x", "thought": "yes"},
    None,
    "part",
])
@pytest.mark.parametrize("open_first", [True, False])
def test_odd_parts(both, part, open_first):
    chunks = [gemini_chunk([vertex_open("f")]), gemini_chunk([vertex_args(pa("$.q", "ab", cont=True))])] \
        if open_first else []
    chunks += [gemini_chunk([part]), gemini_chunk([vertex_args(pa("$.q", "cd", cont=True))]),
               gemini_chunk([part, vertex_args(pa("$.q", "ef"))]), gemini_chunk([CLOSE]), FINISH]
    agree(both, body(*chunks), "gemini")


@pytest.mark.parametrize("text", [
    b'{"candidates": [{"content": {"parts": []}}, {"content": {"parts": [{"text": "2nd"}]}, "index": 1}]}',
    b'{"candidates": [{"index": 3, "content": {"parts": [{"text": "three"}]}, "finishReason": "STOP"}]}',
    b'{"candidates": [{"index": true, "content": {"parts": [{"text": "t"}]}}]}',
    b'{"candidates": [{"index": null, "content": null}]}',
    b'{"candidates": [], "usageMetadata": {"totalTokenCount": 1}}',
    b'{"candidates": {"0": 1}}',
    b'{"candidates": [5]}',
    b'{"candidates": [{"content": {"parts": {"text": "x"}}}]}',
    b'{"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": 5}], "usageMetadata": null}',
    b'{"usageMetadata": "text"}',
    b'{"error": {"code": 500, "message": "internal"}}',
    b'{"candidates": [{"content": {"parts": [{"text": "a", "text": "b"}]}}]}',
    b'{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1, "a": 2}}}]}}]}',
    b'{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"n": 1.50, "m": -0,'
    b' "e": 1E2, "big": 123456789012345678901}}}]}}]}',
    b'{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f\\u00e9", "id": "i\\"d",'
    b' "args": {"s": "\\u00e9\\ud83d\\ude00\\/\\u001F\\b"}}}]}}]}',
    b'{"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [{"jsonPath": "$.q",'
    b' "stringValue": "\\ud83d", "willContinue": true}]}}]}}]}',
])
def test_odd_chunks(both, text):
    chunks = [gemini_chunk([vertex_open("f")]), gemini_chunk([vertex_args(pa("$.q", "ab", cont=True))]),
              text, gemini_chunk([vertex_args(pa("$.q", "cd", cont=True))]), gemini_chunk([CLOSE]), FINISH]
    agree(both, body(*chunks), "gemini")


def test_many_parts_and_entries(both):
    entries = [pa(f"$.k{i}", i) for i in range(20)]
    parts = [function_call(f"f{i}", {"i": i}) for i in range(20)]
    result = agree(both, body(gemini_chunk([vertex_open("v")]), gemini_chunk([vertex_args(*entries)]),
                              gemini_chunk([CLOSE]), gemini_chunk(parts), FINISH), "gemini")
    assert result.tool_calls[0].arguments == {f"k{i}": i for i in range(20)}
    assert [c.arguments for c in result.tool_calls[1:]] == [{"i": i} for i in range(20)]


def test_whole_calls_within_the_limits(both):
    chunk = gemini_chunk([function_call("a", {"x": "y" * 300}), function_call("b", {"z": 1})])
    result = agree(both, body(chunk, FINISH), "gemini", limits=Limits(call_bytes=100))
    assert [c.error.kind if c.error else None for c in result.tool_calls] == ["truncated", None]


@pytest.mark.parametrize("seed", range(30))
def test_mangled_gemini_streams(both, seed):
    rng = random.Random(seed)
    data = bytearray(build("gemini", CALLS) + body(gemini_chunk([vertex_open("v")]),
                                                   gemini_chunk([vertex_args(pa("$.q", "piece", cont=True))]),
                                                   gemini_chunk([vertex_args(pa("$.q", "more", cont=True))]),
                                                   gemini_chunk([CLOSE]), FINISH))
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(len(data))
        data[pos:pos + rng.randint(0, 3)] = bytes(rng.choice(b'{}[]",:\n\r 0aZ\\\xc3') for _ in range(rng.randint(0, 3)))
    agree(both, bytes(data), "gemini", seeds=range(2))


# ---------------------------------------------------------------- the compact re-encoding of parsed arguments

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(json_values, st.booleans(), st.booleans())
def test_compact_matches_orjson(value, ascii_only, spaced):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=1 if spaced else None).encode()
    try:
        got = _accumulator_c._compact(text)
    except ValueError:  # beyond the reader's limits (a huge exponent): such events go the general way
        return
    if got is not None:  # None: it leaves this one to orjson.dumps
        assert got == orjson.dumps(orjson.loads(text))


@pytest.mark.parametrize("text", [b'{"a": 1, "a": 2}', b'[1.5e0]', b'1e2', b'12345678901234567890', b'{"\\u0061": 1}',
                                  b'[0.000001]', b'[0.00001]', b'[0.1234567890123456]', b'[1234567890123456.5]'])
def test_compact_leaves_what_orjson_writes_otherwise(text):
    assert _accumulator_c._compact(text) is None


@pytest.mark.parametrize("text", [b'{"a":1}', b' [ -0 , "\\u00e9\\n\\u001f\\/" , {} ] ', b'"x"', b'true',
                                  b'[1.0, 12.340, -0.0, -0.000, 0.0001, 582.45, 100.50, 0.5, 12345678901234.5]'])
def test_compact_examples(text):
    want = orjson.dumps(orjson.loads(text))
    assert _accumulator_c._compact(text) in (want, None)
    if text.strip()[:1] in (b"{", b"["):
        assert _accumulator_c._compact(text) == want


def test_compact_fractions_match_orjson():
    # Decimal fractions as servers write them: the reader re-encodes those it can, exactly as orjson does.
    rng = random.Random(5)
    taken = 0
    for _ in range(20000):
        whole = str(rng.randint(0, 10 ** rng.randint(0, 16)))
        zeros = "0" * rng.randint(0, 6) if whole == "0" else ""
        text = (("-" if rng.random() < 0.3 else "") + whole + "." + zeros + str(rng.randint(0, 10 ** rng.randint(0, 9)))
                + "0" * rng.randint(0, 3)).encode()
        got = _accumulator_c._compact(b"[" + text + b"]")
        if got is not None:
            taken += 1
            assert got == orjson.dumps([orjson.loads(text)]), text
    assert taken > 10000  # most are re-encoded, not left to orjson
