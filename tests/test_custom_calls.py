"""OpenAI custom (free-form) tool calls: kept with their name, id and input text, never parsed. Both twins.

A custom call's input is any text (code, a patch, a grammar's sentence), not JSON: `arguments` and
`raw_arguments` are that text as sent, `kind` is "custom". Chat streams send it as
`tool_calls[].custom.{name,input}`; the Responses API as a `custom_tool_call` item with
`response.custom_tool_call_input.delta` / `.done` events. Before, chat gave a call with name None
and arguments {} (its input lost) and Responses dropped the call.
"""

import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import callstitch
from _streams import DONE, chunk, chunk_obj, feed_pieces

openai = pytest.importorskip("openai")
pydantic = pytest.importorskip("pydantic")

from openai._models import construct_type  # noqa: E402
from openai.types import responses as rtypes  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

# Free-form input: code with quotes and newlines, non-ASCII, and text that happens to be JSON.
PATCH = '*** Begin Patch\n*** Update File: a.py\n-print("old")\n+print("new — café 😀")\n*** End Patch\n'
NUMBER = "42"
SPLIT = 7


def feed_split(impl, body, cuts, format="openai-chat"):
    acc = impl.Accumulator(format=format)
    feed_pieces(acc, body, cuts)
    return acc.finalize()


def bytewise(impl, body, format="openai-chat"):
    return feed_split(impl, body, range(1, len(body)), format)


def _pieces(text, size=SPLIT):
    return [text[k:k + size] for k in range(0, len(text), size)]


def _chat_choices():
    """A chat stream: a custom call (apply_patch), a function call, a custom call whose input is "42"."""
    out = [[{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]]
    out.append([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_p1", "type": "custom", "custom": {"name": "apply_patch", "input": ""}}]}}])
    for piece in _pieces(PATCH):
        out.append([{"index": 0, "delta": {"tool_calls": [{"index": 0, "custom": {"input": piece}}]}}])
    out.append([{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_w2", "type": "function",
                                                       "function": {"name": "get_weather", "arguments": ""}}]}}])
    for piece in ('{"city":', ' "Paris"}'):
        out.append([{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": piece}}]}}])
    out.append([{"index": 0, "delta": {"tool_calls": [
        {"index": 2, "id": "call_n3", "type": "custom", "custom": {"name": "calc", "input": NUMBER}}]}}])
    out.append([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}])
    return out


def _chat_body():
    return b"".join(chunk(c) for c in _chat_choices()) + DONE


def _check_chat(result):
    assert result.errors == []
    calls = [(c.kind, c.id, c.name, c.arguments, c.raw_arguments, c.error) for c in result.tool_calls]
    assert calls == [("custom", "call_p1", "apply_patch", PATCH, PATCH, None),
                     ("function", "call_w2", "get_weather", {"city": "Paris"}, '{"city": "Paris"}', None),
                     ("custom", "call_n3", "calc", NUMBER, NUMBER, None)]


def test_chat_custom_calls_kept_as_text(impl):
    body = _chat_body()
    for fmt in ("openai-chat", "auto"):
        _check_chat(impl.reassemble(body, format=fmt))
    _check_chat(bytewise(impl, body))


def test_chat_custom_calls_handed_over_by_feed(impl):
    acc = impl.Accumulator(format="openai-chat")
    body = _chat_body()
    handed = []
    for k in range(0, len(body), 50):
        handed += acc.feed(body[k:k + 50])
    assert [(c.kind, c.name) for c in handed] == [("custom", "apply_patch"), ("function", "get_weather"),
                                                  ("custom", "calc")]
    _check_chat(acc.finalize())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_chat_custom_calls_any_split(impl, data):
    body = _chat_body()
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=40))))
    _check_chat(feed_split(impl, body, cuts))


def test_chat_custom_calls_via_feed_chunk(impl):
    for way in ("dict", "json", "sdk"):
        acc = impl.Accumulator(format="openai-chat")
        for choices in _chat_choices():
            obj = chunk_obj(choices)
            if way == "json":
                obj = json.dumps(obj)
            elif way == "sdk":  # what openai.Stream yields: the SDK's chunk, custom fields kept as extras
                obj = construct_type(type_=ChatCompletionChunk, value=obj)
            acc.feed_chunk(obj)
        _check_chat(acc.finalize())


def test_custom_call_record_and_pickle(impl):
    result = impl.reassemble(_chat_body(), format="openai-chat")
    custom, function, _ = result.tool_calls
    assert custom.to_dict() == {"choice": 0, "index": 0, "id": "call_p1", "name": "apply_patch", "kind": "custom",
                                "arguments": PATCH, "error": None, "quirks": []}
    assert function.to_dict()["kind"] == "function"
    for call in result.tool_calls:
        again = pickle.loads(pickle.dumps(call))
        assert again == call and again.kind == call.kind


def test_custom_call_cut_by_a_limit(impl):
    result = impl.reassemble(_chat_body(), format="openai-chat", limits=callstitch.Limits(call_bytes=20))
    custom = result.tool_calls[0]
    assert (custom.kind, custom.name, custom.arguments, custom.error.kind) == ("custom", "apply_patch", None,
                                                                              "truncated")
    assert PATCH.startswith(custom.raw_arguments)
    assert any(e.kind == "limit" for e in result.errors)


def test_chat_custom_bad_shapes_reported(impl):
    body = b"".join([
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "custom", "custom": "x"}]}}]),
        chunk([{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "c2", "type": "custom",
                                                      "custom": {"name": 5, "input": {"a": 1}}}]}}]),
        DONE])
    result = impl.reassemble(body, format="openai-chat")
    assert [e.kind for e in result.errors] == ["unexpected shape"] * 3
    # The first item may have held a piece (its custom is no object): c2, which starts after it
    # without a name (5 is none), may have had its start there, and its input is no string: cut.
    (call,) = result.tool_calls
    assert (call.kind, call.id, call.name, call.arguments, call.error.kind) == ("custom", "c2", None, None, "truncated")


# ---------------------------------------------------------------- the Responses API


def _responses_events():
    item = {"id": "ctc_1", "type": "custom_tool_call", "status": "in_progress", "call_id": "call_x9",
            "name": "apply_patch", "input": ""}
    ev = [{"type": "response.created", "sequence_number": 0,
           "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}},
          {"type": "response.output_item.added", "output_index": 0, "sequence_number": 1, "item": item}]
    for k, piece in enumerate(_pieces(PATCH)):
        ev.append({"type": "response.custom_tool_call_input.delta", "item_id": "ctc_1", "output_index": 0,
                   "sequence_number": 2 + k, "delta": piece})
    n = len(ev)
    ev.append({"type": "response.custom_tool_call_input.done", "item_id": "ctc_1", "output_index": 0,
               "sequence_number": n, "input": PATCH})
    ev.append({"type": "response.output_item.done", "output_index": 0, "sequence_number": n + 1,
               "item": dict(item, status="completed", input=PATCH)})
    # A custom call whose input arrives whole, in its done item only.
    whole = {"id": "ctc_2", "type": "custom_tool_call", "call_id": "call_y8", "name": "calc", "input": NUMBER}
    ev.append({"type": "response.output_item.added", "output_index": 1, "sequence_number": n + 2,
               "item": dict(whole, input="")})
    ev.append({"type": "response.output_item.done", "output_index": 1, "sequence_number": n + 3, "item": whole})
    ev.append({"type": "response.completed", "sequence_number": n + 4,
               "response": {"id": "resp_1", "object": "response", "status": "completed", "output": [],
                            "usage": {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}}})
    return ev


def _responses_body():
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
                    for e in _responses_events())


def _check_responses(result):
    assert result.errors == []
    assert [(c.kind, c.id, c.name, c.arguments, c.raw_arguments) for c in result.tool_calls] == [
        ("custom", "call_x9", "apply_patch", PATCH, PATCH), ("custom", "call_y8", "calc", NUMBER, NUMBER)]
    assert result.complete


def test_responses_custom_calls_kept(impl):
    body = _responses_body()
    for fmt in ("openai-responses", "auto"):
        _check_responses(impl.reassemble(body, format=fmt))
    _check_responses(bytewise(impl, body, "openai-responses"))
    _check_responses(bytewise(impl, body, "auto"))


def test_responses_custom_call_handed_over_when_done(impl):
    acc = impl.Accumulator(format="openai-responses")
    handed = []
    for event in _responses_events():
        got = acc.feed(b"event: " + event["type"].encode() + b"\ndata: " + json.dumps(event).encode() + b"\n\n")
        handed.append([(c.name, c.arguments) for c in got])
    assert [h for h in handed if h] == [[("apply_patch", PATCH)], [("calc", NUMBER)]]
    # handed over by the input's done event, before the item's
    assert handed.index([("apply_patch", PATCH)]) == len(_pieces(PATCH)) + 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_responses_custom_calls_any_split(impl, data):
    body = _responses_body()
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=40))))
    _check_responses(feed_split(impl, body, cuts, "openai-responses"))


def test_responses_custom_calls_as_sdk_events(impl):
    adapter = pydantic.TypeAdapter(rtypes.ResponseStreamEvent)
    acc = impl.Accumulator(format="openai-responses")
    for event in _responses_events():
        if "custom" in event["type"] or "output_item" in event["type"]:
            obj = adapter.validate_python(event)  # the custom call's events, checked by the SDK's own models
        else:  # the envelope events here lack fields the SDK requires: built as openai.Stream builds them
            obj = construct_type(type_=rtypes.ResponseStreamEvent, value=event)
        assert not isinstance(obj, dict)
        acc.feed_chunk(obj)
    _check_responses(acc.finalize())


def test_custom_calls_twins_agree(both):
    for body, fmt in ((_chat_body(), "openai-chat"), (_responses_body(), "openai-responses")):
        c, py = (twin.reassemble(body, format=fmt) for twin in both)
        assert c == py
        assert [call.kind for call in c.tool_calls] == [call.kind for call in py.tool_calls]


# ---------------------------------------------------------------- Toolset

CHAT_TOOLS = [{"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch",
                                            "format": {"type": "grammar",
                                                       "grammar": {"syntax": "lark", "definition": "start: /.+/"}}}},
              {"type": "function", "function": {"name": "get_weather", "parameters": {
                  "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
              {"type": "custom", "custom": {"name": "calc"}}]
RESPONSES_TOOLS = [{"type": "custom", "name": "apply_patch", "description": "Apply a patch",
                    "format": {"type": "text"}},
                   {"type": "function", "name": "get_weather", "parameters": {
                       "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
                   {"type": "custom", "name": "calc"}]


@pytest.mark.parametrize("tools", [CHAT_TOOLS, RESPONSES_TOOLS], ids=["chat", "responses"])
def test_toolset_accepts_custom_calls(impl, tools):
    pytest.importorskip("jsonschema_rs")
    toolset = callstitch.Toolset(tools)
    assert toolset.names == ("apply_patch", "get_weather", "calc")
    assert toolset.schema("apply_patch") is None
    verdicts = toolset.check_all(impl.reassemble(_chat_body(), format="openai-chat"))
    assert [(v.ok, v.arguments, v.problems) for v in verdicts] == [(True, PATCH, ()), (True, {"city": "Paris"}, ()),
                                                                   (True, NUMBER, ())]


def test_toolset_refuses_the_wrong_kind(impl):
    pytest.importorskip("jsonschema_rs")
    toolset = callstitch.Toolset(CHAT_TOOLS)
    function_to_custom = callstitch.ToolCall("c1", "apply_patch", 0, 0, {"patch": "x"}, '{"patch": "x"}')
    verdict = toolset.check(function_to_custom)
    assert not verdict.ok and [p.kind for p in verdict.problems] == ["wrong kind"]
    assert "custom tool" in verdict.retry_message and "apply_patch" in verdict.retry_message
    custom_to_function = callstitch.ToolCall("c2", "get_weather", 0, 1, "Paris", "Paris", kind="custom")
    verdict = toolset.check(custom_to_function)
    assert not verdict.ok and [p.kind for p in verdict.problems] == ["wrong kind"]
    assert "function tool" in verdict.retry_message
    # A custom call cut by a limit never validates.
    cut = impl.reassemble(_chat_body(), format="openai-chat", limits=callstitch.Limits(call_bytes=20)).tool_calls[0]
    verdict = toolset.check(cut)
    assert not verdict.ok and [p.kind for p in verdict.problems] == ["truncated"]
    assert verdict.arguments is None and "incomplete" in verdict.retry_message


def test_toolset_custom_tool_needs_a_name():
    with pytest.raises(ValueError, match=r"tools\[0\]\.custom: a custom tool needs a non-empty string name"):
        callstitch.Toolset([{"type": "custom", "custom": {"description": "no name"}}])
    with pytest.raises(ValueError, match=r"tools\[0\]: a custom tool needs a non-empty string name"):
        callstitch.Toolset([{"type": "custom", "name": ""}])
