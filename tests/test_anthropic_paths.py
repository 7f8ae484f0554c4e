"""Anthropic events other than deltas, read in place by the compiled twin: the twins agree on every shape."""

import json

import pytest

from conftest import agree


def event(obj, name=None):
    data = obj if isinstance(obj, bytes) else json.dumps(obj, ensure_ascii=False).encode()
    name = name or (obj.get("type") if isinstance(obj, dict) else "x")
    return b"event: " + name.encode() + b"\ndata: " + data + b"\n\n"


START = {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 1}}}
TOOL = {"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}


def delta(index, text):
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


END = [{"type": "content_block_stop", "index": 1},
       {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
       {"type": "message_stop"}]


def test_a_whole_message(both):
    events = [START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}},
              {"type": "content_block_stop", "index": 0}, TOOL, delta(1, '{"city": '), delta(1, '"Paris"}'), *END]
    result = agree(both, b"".join(map(event, events)), "anthropic")
    assert result.text == "Hi there" and result.finish_reason == "tool_use"
    assert result.usage == {"input_tokens": 10, "output_tokens": 20}
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("toolu_1", "get_weather", {"city": "Paris"})]


@pytest.mark.parametrize("odd", [
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t2", "name": "f",
                                                                  "input": {"preset": [1, "é"]}}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": 5, "name": None}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "s", "name": "w"}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": 5}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "thinking", "thinking": "hm"}},
    {"type": "content_block_start", "index": 2, "content_block": {"type": 7}},
    {"type": "content_block_start", "index": 2, "content_block": "block"},
    {"type": "content_block_start", "index": "2", "content_block": {"type": "tool_use"}},
    {"type": "content_block_start", "index": 2.0, "content_block": {"type": "tool_use"}},
    {"type": "content_block_stop", "index": 2},
    {"type": "content_block_stop", "index": None},
    {"type": "content_block_stop"},
    {"type": "message_delta", "delta": {"stop_reason": None}, "usage": {"output_tokens": None}},
    {"type": "message_delta", "delta": "stop", "usage": 5},
    {"type": "message_delta", "delta": [1]},
    {"type": "message_start", "message": {"usage": None}},
    {"type": "message_start", "message": "m"},
    {"type": "message_stop", "extra": [1, 2]},
    {"type": "unknown_event"},
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    b'{"type": "content_block_st\\u006fp", "index": 1}',
    b'{"type": "content_block_start", "index": 2, "content_block": {"type": "tool_\\u0075se", "name": "f"}}',
    b'{"type": "content_block_stop", "index": 1, "index": 2}',
])
def test_odd_events(both, odd):
    events = [START, TOOL, delta(1, '{"a": 1'), odd, delta(1, "}"), odd, delta(2, '{"b": 2}'), *END]
    agree(both, b"".join(event(e, "x" if isinstance(e, bytes) else None) for e in events), "anthropic")


def test_event_names_change_and_repeat(both):
    events = [event(START), event(TOOL, "content_block_start"), event(delta(1, '{"a"'), "content_block_delta"),
              event(delta(1, ': 1}'), "content_block_deltb"), event(delta(1, ""), "content_block_delta"),
              event({"type": "error", "error": {"message": "boom"}}, "error"), *map(event, END)]
    result = agree(both, b"".join(events), "anthropic")
    assert [e.kind for e in result.errors] == ["in-band error"]
