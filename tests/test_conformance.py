"""Recorded real provider streams (tests/fixtures/captures, see SOURCES.md there) through both twins."""

import glob
import json
import os
import random

import pytest

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
FORMATS = {"openai-chat": "openai-chat", "openai-responses": "openai-responses", "anthropic-messages": "anthropic",
           "gemini": "gemini", "bedrock-converse": "bedrock", "cohere-v2": "cohere"}


def captures():
    for path in sorted(glob.glob(os.path.join(HERE, "*.expected.json"))):
        expected = json.load(open(path, encoding="utf-8"))
        if expected["format"] in FORMATS:
            yield pytest.param(path[: -len(".expected.json")], expected, id=os.path.basename(path).split(".")[0])


def pieces(body, seed):
    rng = random.Random(seed)
    i = 0
    while i < len(body):
        n = rng.randint(1, 64)
        yield body[i:i + n]
        i += n


def check(result, expected):
    want = [c for c in expected["tool_calls"] if c.get("block_type") != "server_tool_use"]
    assert [c.name for c in result.tool_calls] == [c["name"] for c in want]
    for got, w in zip(result.tool_calls, want):
        if w.get("id") is not None:
            assert got.id == w["id"]
        if expected.get("complete") is False:
            assert got.arguments is None and got.error is not None
        else:
            assert got.arguments == w["arguments"], got.error
    if expected.get("stream_error"):
        assert result.errors
    else:
        assert not result.errors, result.errors


@pytest.mark.parametrize("stem,expected", list(captures()))
def body_of(stem):
    """The bytes as the provider sent them: the raw AWS event stream or JSON array where there is one."""
    for raw in (".eventstream", ".json"):
        if os.path.exists(stem + raw):
            return open(stem + raw, "rb").read()
    return open(stem + ".sse", "rb").read()


@pytest.mark.parametrize("stem,expected", list(captures()))
@pytest.mark.parametrize("how", ["named", "auto", "sse-form"])
def test_capture_format(impl, stem, expected, how):
    body = body_of(stem) if how != "sse-form" else open(stem + ".sse", "rb").read()
    result = impl.reassemble(body, format="auto" if how == "auto" else FORMATS[expected["format"]])
    check(result, expected)
    assert result.format == FORMATS[expected["format"]]


@pytest.mark.parametrize("stem,expected", list(captures()))
def test_capture(impl, stem, expected):
    body = body_of(stem)
    fmt = FORMATS[expected["format"]]
    whole = impl.reassemble(body, format=fmt)
    check(whole, expected)
    for seed in range(3):
        acc = impl.Accumulator(format=fmt)
        for piece in pieces(body, seed):
            acc.feed(piece)
        assert acc.finalize() == whole


@pytest.mark.parametrize("stem,expected", list(captures()))
@pytest.mark.parametrize("fmt", ["named", "auto"])
def test_capture_twins_agree(both, stem, expected, fmt):
    body = body_of(stem)
    name = "auto" if fmt == "auto" else FORMATS[expected["format"]]
    c, py = (i.reassemble(body, format=name) for i in both)
    assert c == py
    for seed in range(3):
        fed = []
        for i in both:
            acc = i.Accumulator(format=name)
            for piece in pieces(body, seed):
                acc.feed(piece)
            fed.append(acc.finalize())
        assert fed[0] == fed[1] == c
