"""Each adapter's handle on hand-built events, and its per-stream State: the rules written once for both twins.

Twin parity cannot see a bug in an adapter both twins share, so these pin what the adapters do
with events that name a call no start announced, repeat what deltas already brought, or leave a
call open. Each event goes in both as a parsed chunk (feed_chunk: the general path) and as SSE
bytes (feed: where the compiled twin reads common events in place).
"""

from __future__ import annotations

import json

import pytest
from _formats import function_call, gemini_chunk, pa, vertex_args, vertex_open

from callstitch._formats import anthropic, bedrock, gemini, openai_responses, registry
from callstitch._formats.dispatch import handle_parsed
from callstitch._state import StreamState


def sse(events, named=False):
    """Return events as SSE bytes; named: with an "event:" line naming each by its type (Anthropic style)."""
    out = b""
    for e in events:
        head = f"event: {e['type']}\n".encode() if named else b""
        out += head + b"data: " + json.dumps(e).encode() + b"\n\n"
    return out


def both_ways(impl, fmt, events, named=False):
    """Return the result of events fed as chunks and as SSE bytes; the two must agree (but for error offsets)."""
    acc = impl.Accumulator(format=fmt)
    for e in events:
        acc.feed_chunk(e)
    by_chunks = acc.finalize()
    by_bytes = impl.reassemble(sse(events, named), format=fmt)
    assert _seen(by_bytes) == _seen(by_chunks)
    return by_chunks


def _seen(result):
    return (result.tool_calls, result.text, result.reasoning, result.complete, result.finish_reason,
            [(e.kind, e.detail) for e in result.errors])


def calls(result):
    return [(c.id, c.name, c.arguments) for c in result.tool_calls]


# ---------------------------------------------------------------- per-stream state


@pytest.mark.parametrize("name, cls", [("anthropic", anthropic.State), ("bedrock", bedrock.State),
                                       ("gemini", gemini.State), ("openai-responses", openai_responses.State)])
def test_each_stream_gets_its_format_s_own_state(name, cls):
    first, second = StreamState(name), StreamState(name)
    assert type(first.notes) is cls and first.notes is not second.notes
    assert not hasattr(first.notes, "__dict__")  # slots: a misspelt attribute fails at once


@pytest.mark.parametrize("name", ["openai-chat", "cohere", "ollama", "auto"])
def test_formats_that_remember_nothing_keep_no_state(name):
    assert StreamState(name).notes is None


def test_auto_detection_gives_the_stream_its_format_s_state():
    state = StreamState("auto")
    handle_parsed(None, state, None, {"type": "message_start", "message": {}}, 0)
    assert state.format == "anthropic" and type(state.notes) is anthropic.State


def test_states_come_from_the_adapters():
    assert registry.STATES == {name: entry.adapter.State for name, entry in registry.ENTRIES.items()
                               if hasattr(entry.adapter, "State")}


# ---------------------------------------------------------------- anthropic

def _start(index, id="toolu_1", name="f", input=None):
    return {"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {} if input is None else input}}


def _delta(index, text):
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}}


def test_anthropic_delta_of_a_block_never_started_is_no_call(impl):
    result = both_ways(impl, "anthropic", [_delta(3, '{"a": 1}'), {"type": "message_stop"}], named=True)
    assert calls(result) == [] and result.complete is True


def test_anthropic_unclosed_block_keeps_its_start_input(impl):
    result = both_ways(impl, "anthropic", [_start(0, input={"city": "Paris"})], named=True)
    assert calls(result) == [("toolu_1", "f", {"city": "Paris"})]


def test_anthropic_streamed_input_replaces_the_start_input(impl):
    events = [_start(0, input={"stale": True}), _delta(0, '{"fresh": '), _delta(0, "1}"),
              {"type": "content_block_stop", "index": 0}, {"type": "message_stop"}]
    assert calls(both_ways(impl, "anthropic", events, named=True)) == [("toolu_1", "f", {"fresh": 1})]


# ---------------------------------------------------------------- bedrock (its JSON form: one object per event)


def _bedrock(events):
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_bedrock_tool_delta_of_a_text_block_is_ignored(impl):
    body = _bedrock([
        {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"x": 1}'}}}},
        {"contentBlockStart": {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t1", "name": "g"}}}},
        {"contentBlockDelta": {"contentBlockIndex": 1, "delta": {"toolUse": {"input": '{"y": 2}'}}}},
        {"contentBlockStop": {"contentBlockIndex": 1}},
        {"messageStop": {"stopReason": "tool_use"}}])
    result = impl.reassemble(body, format="bedrock")
    assert calls(result) == [("t1", "g", {"y": 2})]
    assert result.finish_reason == "tool_use"


# ---------------------------------------------------------------- gemini


def test_gemini_open_call_is_per_choice_and_closed_by_the_finish(impl):
    events = [gemini_chunk([vertex_open("f", id="c1")]),
              gemini_chunk([vertex_args(pa("$.a", "x"))]),
              gemini_chunk([function_call("g", {"b": 2})]),   # a named call closes the open one first
              gemini_chunk(None, finish="STOP")]
    result = both_ways(impl, "gemini", events)
    assert calls(result) == [("c1", "f", {"a": "x"}), (None, "g", {"b": 2})]
    assert result.complete is True


def test_gemini_partial_args_with_no_open_call_are_reported(impl):
    result = both_ways(impl, "gemini", [gemini_chunk([vertex_args(pa("$.a", "x"))]), gemini_chunk(None, finish="STOP")])
    assert calls(result) == []
    assert [(e.kind, e.detail) for e in result.errors] == [("unexpected shape", "functionCall arguments with no call open")]


# ---------------------------------------------------------------- openai-responses


def _item(kind, item_id="fc_1", **fields):
    return {"type": kind, "item": {"type": "function_call", "id": item_id, "call_id": "call_1", "name": "f", **fields}}


def test_responses_delta_of_an_unknown_item_is_no_call(impl):
    events = [{"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": '{"a": 1}'},
              {"type": "response.completed", "response": {"status": "completed"}}]
    result = both_ways(impl, "openai-responses", events)
    assert calls(result) == [] and result.complete is True


def test_responses_item_done_arguments_count_only_without_deltas(impl):
    events = [_item("response.output_item.added", arguments=""),
              {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a": 1}'},
              _item("response.output_item.done", arguments='{"a": 1}'),
              _item("response.output_item.added", item_id="fc_2", arguments=""),
              _item("response.output_item.done", item_id="fc_2", arguments='{"b": 2}'),
              {"type": "response.completed", "response": {"status": "completed"}}]
    result = both_ways(impl, "openai-responses", events)
    assert [c.arguments for c in result.tool_calls] == [{"a": 1}, {"b": 2}]


# ---------------------------------------------------------------- cohere, ollama, openai-chat


def test_cohere_tool_call_end_completes_only_its_index(impl):
    def start(i, name):
        return {"type": "tool-call-start", "index": i,
                "delta": {"message": {"tool_calls": {"id": f"c{i}", "type": "function",
                                                     "function": {"name": name, "arguments": ""}}}}}

    def piece(i, text):
        return {"type": "tool-call-delta", "index": i, "delta": {"message": {"tool_calls": {"function": {
            "arguments": text}}}}}

    events = [start(0, "f"), start(1, "g"), piece(0, "{}"), {"type": "tool-call-end", "index": 0},
              piece(1, '{"k": '), piece(1, "true}"), {"type": "tool-call-end", "index": 1},
              {"type": "message-end", "delta": {"finish_reason": "TOOL_CALL"}}]
    result = both_ways(impl, "cohere", events)
    assert calls(result) == [("c0", "f", {}), ("c1", "g", {"k": True})]
    assert result.finish_reason == "TOOL_CALL"


def test_ollama_whole_calls_and_texts(impl):
    lines = [{"model": "m", "done": False, "message": {"role": "assistant", "content": "Hi", "thinking": "hmm"}},
             {"model": "m", "done": False, "message": {"role": "assistant", "content": "", "tool_calls": [
                 {"function": {"name": "f", "arguments": {"a": [1, 2]}}}, {"id": "x", "function": {"name": "g"}}]}},
             {"model": "m", "done": True, "done_reason": "stop", "eval_count": 3}]
    result = impl.reassemble(b"".join(json.dumps(x).encode() + b"\n" for x in lines), format="ollama")
    assert calls(result) == [(None, "f", {"a": [1, 2]}), ("x", "g", {})]
    assert (result.text, result.reasoning, result.usage) == ("Hi", "hmm", {"eval_count": 3})


def test_openai_chat_text_fields_go_to_their_texts(impl):
    events = [{"choices": [{"index": 0, "delta": {"content": "a", "reasoning_content": "r1"}}]},
              {"choices": [{"index": 0, "delta": {"reasoning": "r2", "refusal": "no"}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    result = both_ways(impl, "openai-chat", events)
    assert (result.text, result.reasoning, result.refusal) == ("a", "r1r2", "no")
