"""Input nested far deeper than any real stream is reported, never raised: a few kilobytes once crashed a call.

A hostile-input review found two: a Vertex AI partialArgs path thousands of keys deep made
reassemble() raise RecursionError (the arguments were written back recursively), and a client
tool's input cut inside hundreds of nested arrays made to_response() raise it (the complete part
of the input was read recursively). Both are bodies of 1-10 KB.
"""

from __future__ import annotations

import json

import pytest

from _streams import dumps


def _gemini_deep_path(depth: int) -> bytes:
    def event(obj: dict) -> bytes:
        return b"data: " + dumps(obj) + b"\r\n\r\n"
    path = "$" + ".ab" * depth
    return b"".join([
        event({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "f",
                                                                                      "willContinue": True}}]}}]}),
        event({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"partialArgs": [
            {"jsonPath": path, "stringValue": "x"}]}}]}}]}),
        event({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {}}]},
                               "finishReason": "STOP"}]})])


@pytest.mark.parametrize("depth", [300, 1000, 3000])
def test_a_vertex_path_thousands_of_keys_deep_is_no_crash(both, depth):
    body = _gemini_deep_path(depth)
    results = [impl.reassemble(body, format="gemini") for impl in both]
    # (compared by their text: == on objects 1,000 levels deep would itself recurse too deep)
    calls = [[(c.id, c.name, c.raw_arguments, str(c.error)) for c in result.tool_calls] for result in results]
    assert calls[0] == calls[1]
    (call,) = results[0].tool_calls
    assert call.raw_arguments == '{"ab":' * depth + '"x"' + "}" * depth
    if depth <= 1000:  # as deep as JSON parsers read: the call is whole
        assert call.error is None
    else:  # deeper: its text is kept, and does not parse
        assert call.arguments is None and call.error.kind == "malformed"
    assert [type(result.to_response()) for result in results] == [dict, dict]


def _anthropic_cut_deep(depth: int) -> bytes:
    partial = '{"a":' + "[" * depth
    events = [("message_start", {"type": "message_start", "message": {
        "id": "m", "type": "message", "role": "assistant", "content": []}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "t", "name": "f", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta", "partial_json": partial}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0})]
    return b"".join(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode() for name, obj in events)


def _bedrock_cut_deep(depth: int) -> bytes:
    partial = '{"a":' + "[" * depth
    events = [{"messageStart": {"role": "assistant"}},
              {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t", "name": "f"}}}},
              {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": partial}}}},
              {"contentBlockStop": {"contentBlockIndex": 0}}]
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


@pytest.mark.parametrize("fmt, build", [("anthropic", _anthropic_cut_deep), ("bedrock", _bedrock_cut_deep)])
def test_a_tool_input_cut_inside_hundreds_of_arrays_gives_its_turn_back(both, fmt, build):
    for depth in (10, 600, 5000):
        body = build(depth)
        results = [impl.reassemble(body, format=fmt) for impl in both]
        assert results[0] == results[1]
        assert results[0].tool_calls[0].arguments is None  # (its text does not parse: the stream cut it)
        responses = [result.to_response() for result in results]  # raised RecursionError at 600 before
        assert responses[0] == responses[1]
        messages = [result.to_message() for result in results]
        assert messages[0] == messages[1]
