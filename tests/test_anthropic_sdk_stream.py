"""The Anthropic SDK's messages.stream(), fed event by event, from a real HTTP server on 127.0.0.1. Both twins.

Besides the raw events, the SDK's MessageStream yields events of its own (text, input_json,
thinking, signature, citation) that repeat what the raw ones carry. They are skipped without
error: the calls and the message are those of the raw bytes, and strict=True does not raise.
"""

import pytest

import _formats as F
from _servers import fake_server

anthropic = pytest.importorskip("anthropic")

_CITATION = {"type": "char_location", "cited_text": "Paris is sunny", "document_index": 0,
             "document_title": "Forecast", "start_char_index": 0, "end_char_index": 14}


def _body():
    """A Messages stream with thinking (and its signature), text with a citation, and three tool calls."""
    body = F.anthropic_body(F.CALLS, text="Let me check the weather for you.", reasoning="The user wants weather.")
    stop = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
    assert body.count(stop) == 1  # the text block's stop: its citation goes just before it
    citation = F.sse([("content_block_delta", {"type": "content_block_delta", "index": 1,
                                               "delta": {"type": "citations_delta", "citation": _CITATION}})])
    return body.replace(stop, citation + stop)


@pytest.fixture()
def server():
    with fake_server(_body()) as fake:  # answers POST /v1/messages with the stream, as the API would
        yield fake.url


def _stream(impl, base_url, format):
    """Feed every event the SDK's messages.stream() yields; return the Result and the event types seen."""
    client = anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0)
    acc = impl.Accumulator(format=format)
    seen = []
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024,
                                messages=[{"role": "user", "content": "Weather in Paris?"}]) as stream:
        for event in stream:
            seen.append(event.type)
            acc.feed_chunk(event)
    return acc, seen


@pytest.mark.parametrize("format", ["anthropic", "auto"])
def test_messages_stream_events_give_the_raw_result(impl, server, format):
    acc, seen = _stream(impl, server, format)
    # The SDK's own events were all there (otherwise the test proves nothing).
    assert {"text", "thinking", "signature", "input_json", "citation"} <= set(seen)
    result = acc.finalize(strict=True)  # no error to raise
    raw = impl.reassemble(_body(), format="anthropic")
    assert raw.errors == [] and result.errors == []
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [(c.id, c.name, c.value) for c in F.CALLS]
    assert result.tool_calls == raw.tool_calls
    assert (result.text, result.reasoning, result.finish_reason, result.complete) == (
        raw.text, raw.reasoning, raw.finish_reason, raw.complete)
    assert result.format == "anthropic"


def test_derived_event_types_skipped_as_dicts(impl):
    """The same events as plain dicts (a log of model_dump()s): skipped too, raw events still read."""
    acc = impl.Accumulator(format="anthropic")
    for obj in ({"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
                {"type": "text", "text": "Hi", "snapshot": "Hi"},
                {"type": "thinking", "thinking": "hm", "snapshot": "hm"},
                {"type": "signature", "signature": "EqQB"},
                {"type": "citation", "citation": _CITATION, "snapshot": [_CITATION]},
                {"type": "input_json", "partial_json": '{"a"', "snapshot": {}},
                {"type": "compaction", "content": None, "encrypted_content": None},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_stop"}):
        acc.feed_chunk(obj)
    result = acc.finalize(strict=True)
    assert (result.text, result.reasoning, result.tool_calls, result.errors) == ("Hi", None, [], [])


def test_unknown_event_type_still_reported(impl):
    result = impl.reassemble(F.sse([("x", {"type": "message_start", "message": {}}), ("x", {"type": "no_such"})]),
                             format="anthropic")
    assert [e.kind for e in result.errors] == ["unexpected shape"]
