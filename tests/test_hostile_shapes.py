"""Shapes no real stream has, found by a hostile-input review: reported or read in bounds, never raised.

Nesting far deeper than any real stream: a Vertex AI partialArgs path thousands of keys deep
made reassemble() raise RecursionError (the arguments were written back recursively), and a
client tool's input cut inside hundreds of nested arrays made to_response() raise it (the
complete part of the input was read recursively); both bodies of 1-10 KB. Cohere blocks left
open: each held the whole text that came after it, a thousand of them 955 MB from 1 MB.
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


def test_cohere_blocks_left_open_do_not_each_hold_the_text(both):
    # 1,000 content-starts with no content-end, then 1 MB of text: each block held the whole text
    # to the end (955 MB at to_response()); a block that starts ends the open one of its text.
    def event(obj: dict) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()
    body = b"".join([event({"type": "message-start", "id": "x", "delta": {"message": {"role": "assistant"}}}),
                     *[event({"type": "content-start", "index": 0, "delta": {"message": {"content": {
                         "type": "text"}}}})] * 1000,
                     event({"type": "content-delta", "index": 0, "delta": {"message": {"content": {
                         "text": "t" * 1_000_000}}}}),
                     *[event({"type": "content-end", "index": 0})] * 2000,  # more ends than blocks: ignored
                     event({"type": "message-end", "delta": {"finish_reason": "COMPLETE"}})])
    responses = [impl.reassemble(body, format="cohere").to_response() for impl in both]
    assert responses[0] == responses[1]
    content = responses[0]["message"]["content"]
    assert len(content) == 1000 and "".join(block["text"] for block in content) == "t" * 1_000_000


def test_merged_fields_grow_in_place_without_touching_the_events(both):
    # Anthropic's usage and Bedrock's unknown delta members were copied whole on every event (a
    # stream sending one new key per event: n squared). Now they are merged into a copy of their
    # own: the result is the same, and the events fed as objects are left as they were.
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                  "usage": {"input_tokens": 5}}}
    deltas = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {f"k{k}": k}}
              for k in range(300)]
    for impl in both:
        acc = impl.Accumulator(format="anthropic")
        for event in [start, *deltas, {"type": "message_stop"}]:
            acc.feed_chunk(event)
        usage = acc.finalize().usage
        assert usage == {"input_tokens": 5, **{f"k{k}": k for k in range(300)}}
        assert start["message"]["usage"] == {"input_tokens": 5} and deltas[0]["usage"] == {"k0": 0}
    pieces = [{"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"image": {f"k{k}": k}}}} for k in range(300)]
    body = b"".join(json.dumps(e).encode() + b"\n" for e in [{"messageStart": {"role": "assistant"}}, *pieces,
                                                          {"messageStop": {"stopReason": "end_turn"}}])
    responses = [impl.reassemble(body, format="bedrock").to_response() for impl in both]
    assert responses[0] == responses[1]
    (block,) = responses[0]["output"]["message"]["content"]
    assert block == {"image": {f"k{k}": k for k in range(300)}}


def test_calls_are_given_to_blocks_by_id_in_order():
    # (shared by the Anthropic and Bedrock turns: a lookup per block, not a walk of every call)
    from types import SimpleNamespace as Call

    from callstitch._turns.calls import CallsById
    calls = [Call(id="a", choice=0, n=1), Call(id=None, choice=0, n=2), Call(id="a", choice=0, n=3),
             Call(id="b", choice=1, n=4)]
    free = CallsById(Call(tool_calls=calls))
    assert [getattr(free.take(i), "n", None) for i in ("a", None, "a", "a", "b", ["x"], 7)] == [
        1, 2, 3, None, None, None, None]


def test_thousands_of_blocks_whose_ids_match_no_call_give_the_turn_back(both):
    # Integer ids read as no call's (the calls' ids are strings): each block walked every call.
    def event(obj: dict) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()
    blocks = []
    for k in range(3000):
        blocks += [event({"type": "content_block_start", "index": k, "content_block": {
            "type": "tool_use", "id": k, "name": "f", "input": {"k": k}}}),
            event({"type": "content_block_stop", "index": k})]
    body = b"".join([event({"type": "message_start", "message": {"id": "m", "type": "message",
                                                                 "role": "assistant", "content": []}}),
                     *blocks, event({"type": "message_stop"})])
    responses = [impl.reassemble(body, format="anthropic").to_response() for impl in both]
    assert responses[0] == responses[1]
    assert [block["input"] for block in responses[0]["content"]] == [{"k": k} for k in range(3000)]


def test_a_finish_repeated_hands_each_call_over_once_in_order(both):
    # A stream repeating its finish walked every call each time (4,096 calls, 100,000 finishes:
    # 10 s on the pure twin); now a finish walks only the calls still open, of its choice.
    def chunk(choice: int, delta: dict, finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"choices": [{"index": choice, "delta": delta,
                                                    "finish_reason": finish}]}).encode() + b"\n\n"
    calls = [chunk(k % 2, {"tool_calls": [{"index": k, "id": f"c{k}", "type": "function",
                                           "function": {"name": "f", "arguments": "{}"}}]}) for k in range(200)]
    finishes = [chunk(k % 3, {}, "tool_calls") for k in range(3000)]
    for impl in both:
        acc = impl.Accumulator(format="openai-chat")
        handed = [call.id for part in (*calls, *finishes) for call in acc.feed(part)]
        assert handed == [f"c{k}" for k in range(0, 200, 2)] + [f"c{k}" for k in range(1, 200, 2)]
        assert [c.id for c in acc.finalize().tool_calls] == [f"c{k}" for k in range(0, 200, 2)] + [
            f"c{k}" for k in range(1, 200, 2)]


def test_thousands_of_parts_on_one_item_give_each_its_text(both):
    # Each part added walked every part of every item to end the open one (n squared); now the
    # one open part of its text.
    def event(obj: dict) -> bytes:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n".encode()
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    events = [event({"type": "response.output_item.added", "output_index": 0, "item": item})]
    for k in range(3000):
        events += [event({"type": "response.content_part.added", "output_index": 0, "content_index": k,
                          "item_id": "msg_1", "part": {"type": "output_text", "text": ""}}),
                   event({"type": "response.output_text.delta", "output_index": 0, "content_index": k,
                          "item_id": "msg_1", "delta": f"p{k};"})]
    body = b"".join(events)
    responses = [impl.reassemble(body, format="openai-responses").to_response() for impl in both]
    assert responses[0] == responses[1]
    (message,) = responses[0]["output"]
    assert [part["text"] for part in message["content"]] == [f"p{k};" for k in range(3000)]
