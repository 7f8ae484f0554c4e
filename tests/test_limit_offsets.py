"""The errors of the limits say where: the byte offset of the event that went past the limit.

Each limit's error (call_bytes, stream_bytes, calls, choices) is checked in every wire format, on
the fast paths and the general one, with the body fed whole and in reads of many sizes: its offset
is that of the event whose handling crossed the limit (the event a prefix of the body first shows
the error with). A fragment added or a chunk fed as an object has no offset: None.
"""

from __future__ import annotations

import random
import re
import struct

import orjson
import pytest
from _formats import CALLS, VARIANTS, build, format_of
from _streams import chunk, finish, text_delta, tool_delta

from callstitch import Limits

CHAT_CALLS = b"".join(
    chunk([tool_delta(i, id=c.id, name=c.name, arguments="")]) + b"".join(
        chunk([tool_delta(i, arguments=piece)]) for piece in c.pieces())
    for i, c in enumerate(CALLS)) + chunk([finish()]) + b"data: [DONE]\n\n"

# Two choices with a call each (n=2): the second is over Limits(choices=1).
TWO_CHOICES = (chunk([tool_delta(0, id="call_a", name="f", arguments='{"a": 1}')])
               + chunk([tool_delta(0, id="call_b", name="g", arguments='{"b": 2}', choice=1)])
               + b"data: [DONE]\n\n")


def events(body: bytes, framing: str) -> list[tuple[int, int]]:
    """Return (offset, end) of each event of body: offset where the event's data starts, end past it."""
    out = []
    if framing == "ndjson":
        pos = 0
        for line in body.splitlines(keepends=True):
            if line.strip():
                out.append((pos, pos + len(line)))
            pos += len(line)
    elif framing == "eventstream":
        pos = 0
        while pos < len(body):
            total = struct.unpack(">I", body[pos:pos + 4])[0]
            out.append((pos, pos + total))
            pos += total
    else:
        pos = 0
        for blank in re.finditer(rb"\r?\n\r?\n", body):  # (LF, or CRLF as Gemini sends)
            data = body.find(b"data:", pos, blank.start())
            out.append((data if data >= 0 else pos, blank.end()))
            pos = blank.end()
    return out


def framing_of(variant: str) -> str:
    return {"ollama": "ndjson", "bedrock-eventstream": "eventstream"}.get(variant, "sse")


def limit_error(result, word: str):
    found = [e for e in result.errors if e.kind == "limit" and word in e.detail]
    return found[0] if found else None


def expected_offset(impl, fmt: str, body: bytes, framing: str, limits: Limits, word: str) -> int:
    """Return the offset of the first event that a prefix of the body shows the limit's error with."""
    for offset, end in events(body, framing):
        if limit_error(impl.reassemble(body[:end], format=fmt, limits=limits), word) is not None:
            return offset
    raise AssertionError(f"no prefix of the body goes past {limits}")


def check(impl, fmt: str, body: bytes, framing: str, limits: Limits, word: str) -> None:
    want = expected_offset(impl, fmt, body, framing, limits, word)
    rng = random.Random(len(body))
    for size in (None, 1, 7, 64, 1000):
        acc = impl.Accumulator(format=fmt, limits=limits)
        if size is None:
            acc.feed(body)
        else:
            pos = 0
            while pos < len(body):
                step = rng.randint(1, size)
                acc.feed(body[pos:pos + step])
                pos += step
        error = limit_error(acc.finalize(), word)
        assert error is not None and error.offset == want, (fmt, limits, size, error)
        assert f"at byte {want}" in str(error)


@pytest.mark.parametrize("limits, word", [(Limits(call_bytes=20), "call_bytes"),
                                          (Limits(stream_bytes=50), "stream_bytes"),
                                          (Limits(calls=1), "Limits.calls")])
def test_chat_limit_errors_name_the_event(impl, limits, word):
    check(impl, "openai-chat", CHAT_CALLS, "sse", limits, word)


def test_chat_choices_limit_error_names_the_event(impl):
    check(impl, "openai-chat", TWO_CHOICES, "sse", Limits(choices=1), "Limits.choices")


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("limits, word", [(Limits(call_bytes=20), "call_bytes"),
                                          (Limits(stream_bytes=50), "stream_bytes"),
                                          (Limits(calls=1), "Limits.calls")])
def test_every_format_limit_errors_name_the_event(impl, variant, limits, word):
    body = build(variant, CALLS, text="Let me look that up for you.")
    check(impl, format_of(variant), body, framing_of(variant), limits, word)


def test_a_chat_body_with_a_text_over_the_stream_budget_names_the_event(impl):
    body = (chunk([text_delta(content="Hello there, ")]) + chunk([text_delta(content="a long answer " * 10)])
            + b"data: [DONE]\n\n")
    check(impl, "openai-chat", body, "sse", Limits(stream_bytes=30), "stream_bytes")


def test_what_no_event_brought_has_no_offset(impl):
    acc = impl.Accumulator(limits=Limits(call_bytes=5, calls=1))
    acc.add(0, id="call_a", name="f", arguments='{"a": 12345}')
    acc.add(1, id="call_b", name="g", arguments="{}")
    errors = [e for e in acc.finalize().errors if e.kind == "limit"]
    assert len(errors) == 2 and all(e.offset is None for e in errors)
    # A chunk fed as an object after bytes: its error is not put at the last event's offset.
    acc = impl.Accumulator(format="openai-chat", limits=Limits(call_bytes=5))
    acc.feed(chunk([tool_delta(0, id="call_a", name="f", arguments="{")]))
    acc.feed_chunk({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": '"a": 12345}'}}]}}]})
    (error,) = [e for e in acc.finalize().errors if e.kind == "limit"]
    assert error.offset is None


def test_the_twins_agree_on_the_offsets(both):
    for variant in VARIANTS:
        body = build(variant, CALLS, text="Let me look that up for you.")
        for limits in (Limits(call_bytes=20), Limits(stream_bytes=50), Limits(calls=1)):
            got = [impl.reassemble(body, format=format_of(variant), limits=limits).errors for impl in both]
            assert got[0] == got[1], (variant, limits)


def test_a_limit_reached_as_the_stream_ends_has_no_offset(impl):
    # Found by review: Anthropic's close hands over a tool block whose input came whole in its
    # content_block_start and never got a content_block_stop; the limit reached there was put at
    # the last event's offset (an unrelated text delta), not at none.
    def event(name: str, obj: dict) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"
    body = (event("message_start", {"type": "message_start", "message": {
                "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude"}})
            + event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": "x" * 100}}})
            + event("content_block_start", {"type": "content_block_start", "index": 1,
                                            "content_block": {"type": "text", "text": ""}})
            + event("content_block_delta", {"type": "content_block_delta", "index": 1,
                                            "delta": {"type": "text_delta", "text": "hi"}}))
    for size in (None, 7):
        acc = impl.Accumulator(format="anthropic", limits=Limits(call_bytes=20))
        for start in range(0, len(body), size or len(body)):
            acc.feed(body[start:start + (size or len(body))])
        (error,) = [e for e in acc.finalize().errors if e.kind == "limit"]
        assert "call_bytes" in error.detail and error.offset is None, (size, error)
