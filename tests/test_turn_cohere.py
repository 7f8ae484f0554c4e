"""Cohere's whole turn: to_response() is the v2 chat response, to_message() the assistant message."""

import glob
import json
import os
import pickle

import cohere
import pydantic
import pytest

from _formats import CALLS, COHERE_USAGE, cohere_body, sse
from _servers import json_server
from _streams import assert_twins_give_the_same_turn, damaged, feed_split, random_cuts
from test_readme import _block, on_twin  # noqa: F401 - on_twin is a fixture

import callstitch

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
MESSAGE_START = {"id": "c0ffee00-0000-4000-8000-000000000001", "type": "message-start", "delta": {"message": {
    "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}}


def event(kind, **fields):
    return kind, {"type": kind, **fields}


def thinking_text_citations():
    """Return a stream with a thinking block, a text block with logprobs, and a citation."""
    ev = [("message-start", MESSAGE_START),
          event("content-start", index=0, delta={"message": {"content": {"type": "thinking", "thinking": ""}}}),
          event("content-delta", index=0, delta={"message": {"content": {"thinking": "The doc says "}}}),
          event("content-delta", index=0, delta={"message": {"content": {"thinking": "18°C ☕."}}}),
          event("content-end", index=0),
          event("content-start", index=1, delta={"message": {"content": {"type": "text", "text": ""}}}),
          event("content-delta", index=1, delta={"message": {"content": {"text": "It is "}}},
                logprobs={"token_ids": [1, 2], "text": "It is ", "logprobs": [-0.1, -0.2]}),
          event("content-delta", index=1, delta={"message": {"content": {"text": "18°C in 東京."}}}),
          event("citation-start", index=0, delta={"message": {"citations": {
              "start": 6, "end": 10, "text": "18°C", "sources": [{"type": "document", "id": "doc:0",
                                                                    "document": {"id": "doc:0", "t": "18"}}],
              "type": "TEXT_CONTENT", "content_index": 1}}}),
          event("citation-end", index=0),
          event("content-end", index=1),
          event("message-end", delta={"finish_reason": "COMPLETE", "usage": COHERE_USAGE, "new_field": 1})]
    return sse(ev)


def bodies():
    out = {os.path.basename(p)[:-4]: open(p, "rb").read()
           for p in sorted(glob.glob(os.path.join(CAPTURES, "cohere__*.sse")))}
    out["plan-text-calls"] = cohere_body(CALLS, text="Looking it up.", reasoning="I will call three tools.")
    out["interleaved"] = cohere_body(CALLS, interleave=True)
    out["error"] = cohere_body(CALLS[:1], error=True)
    out["thinking-text-citations"] = thinking_text_citations()
    return out


BODIES = bodies()


def turn(impl, body, **kw):
    result = impl.reassemble(body, format="cohere", **kw)
    return result, result.to_response(), result.to_message()


def test_a_capture_gives_the_v2_response():
    result, response, message = turn(callstitch, BODIES["cohere__vercel-ai__v2-parallel"])
    assert response == {
        "id": "2941521a-b87a-45f6-9b0d-235fd66c3025", "finish_reason": "TOOL_CALL",
        "message": {"role": "assistant",
                    "tool_calls": [{"id": "weather_e8p4pn45zt0t", "type": "function", "function": {
                        "name": "weather", "arguments": '{"location": "San Francisco"}'}},
                        {"id": "cityAttractions_pyxssbwnq9fq", "type": "function", "function": {
                            "name": "cityAttractions", "arguments": '{"city": "San Francisco"}'}}],
                    "tool_plan": "I will use the weather tool to find the weather in San Francisco and the "
                                 "cityAttractions tool to find attractions in San Francisco."},
        "usage": {"billed_units": {"input_tokens": 119, "output_tokens": 44},
                  "tokens": {"input_tokens": 1549, "output_tokens": 95}, "cached_tokens": 1504}}
    assert message == response["message"]


def test_blocks_citations_and_logprobs(impl):
    result, response, message = turn(impl, BODIES["thinking-text-citations"])
    assert response["message"]["content"] == [{"type": "thinking", "thinking": "The doc says 18°C ☕."},
                                              {"type": "text", "text": "It is 18°C in 東京."}]
    assert "tool_plan" not in response["message"]  # all the reasoning was the thinking block
    assert response["message"]["citations"][0]["text"] == "18°C"
    assert response["logprobs"] == [{"token_ids": [1, 2], "text": "It is ", "logprobs": [-0.1, -0.2]}]
    assert response["finish_reason"] == "COMPLETE" and response["new_field"] == 1
    assert response["id"] == MESSAGE_START["id"]
    assert result.reasoning == "The doc says 18°C ☕." and result.text == "It is 18°C in 東京."


def test_tool_plan_and_text_blocks_share_nothing(impl):
    _, response, _ = turn(impl, BODIES["plan-text-calls"])
    assert response["message"]["tool_plan"] == "I will call three tools."
    assert response["message"]["content"] == [{"type": "text", "text": "Looking it up."}]
    assert [c["function"]["arguments"] for c in response["message"]["tool_calls"]] == [c.arguments for c in CALLS]


@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_stream_validates_against_the_sdk_types(impl, name):
    result, response, message = turn(impl, BODIES[name])
    parsed = cohere.V2ChatResponse.model_validate(response)
    assert [c.function.arguments for c in parsed.message.tool_calls or ()] == \
        [c.raw_arguments for c in result.tool_calls]
    checked = pydantic.TypeAdapter(cohere.ChatMessageV2).validate_python(message)
    assert isinstance(checked, cohere.AssistantChatMessageV2)
    assert json.loads(json.dumps(response)) == response


def test_a_stream_cut_before_message_end_has_no_finish_reason(impl):
    body = BODIES["thinking-text-citations"]
    cut = body[:body.index(b"event: content-end\n", body.index(b"citation-end"))]  # inside the text block
    _, response, _ = turn(impl, cut)
    assert response["finish_reason"] is None and "usage" not in response
    assert response["message"]["content"][1] == {"type": "text", "text": "It is 18°C in 東京."}
    cohere.V2ChatResponse.model_validate(response)


def test_a_failed_stream_keeps_the_error(impl):
    _, response, _ = turn(impl, BODIES["error"])
    assert response["finish_reason"] == "ERROR" and response["error"] == "internal server error: model overloaded"


def test_a_cut_call_keeps_its_text_as_received(impl):
    body = cohere_body(CALLS[:1], cut=5)
    result, response, _ = turn(impl, body)
    assert response["finish_reason"] is None
    assert response["message"]["tool_calls"][0]["function"]["arguments"] == result.tool_calls[0].raw_arguments
    assert CALLS[0].arguments.startswith(result.tool_calls[0].raw_arguments)


@pytest.mark.parametrize("budget", [30, 300, 600, 2000])
def test_under_a_limit_the_blocks_hold_the_text_as_far_as_it_went(impl, budget):
    # The texts are cut at stream_bytes; the blocks, counted apart against the same number, stop
    # being listed when they reach it: what they hold is a beginning of each text, never more.
    body = BODIES["thinking-text-citations"]
    result, response, _ = turn(impl, body, limits=callstitch.Limits(stream_bytes=budget))
    blocks = response["message"].get("content", [])
    text, thinking = ("".join(b.get(field, "") for b in blocks) for field in ("text", "thinking"))
    assert (result.text or "").startswith(text) and (result.reasoning or "").startswith(thinking)
    if budget == 30:  # (the first block's event is over it: no block is listed)
        assert blocks == [] and result.text
    if budget >= 2000:
        assert (text, thinking) == (result.text, result.reasoning)


def test_the_turn_survives_pickling(impl):
    result = impl.reassemble(BODIES["thinking-text-citations"], format="cohere")
    assert pickle.loads(pickle.dumps(result)).to_response() == result.to_response()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_any_split_gives_the_same_turn(impl, name):
    body = BODIES[name]
    whole = impl.reassemble(body, format="cohere").to_response()
    for seed in range(5):
        assert feed_split(impl, body, random_cuts(len(body), seed)).to_response() == whole


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_twins_give_the_same_turn_on_mangled_streams(both, name):
    assert_twins_give_the_same_turn(both, damaged(BODIES[name], name), 'cohere')


def fake_cohere():
    """Serve /v2/chat on 127.0.0.1 with a fixed answer; yield (base_url, the request bodies received)."""
    return json_server({"id": "a1", "finish_reason": "COMPLETE", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "It is 18°C."}]}})


@pytest.mark.parametrize("name", ["cohere__vercel-ai__v2-parallel", "thinking-text-citations"])
def test_to_message_goes_back_through_the_sdk_as_history(impl, name):
    result, _, message = turn(impl, BODIES[name])
    history = [{"role": "user", "content": "Weather in Paris?"}, message]
    history += [{"role": "tool", "tool_call_id": c.id, "content": [{"type": "document", "document": {
        "data": "18°C"}}]} for c in result.tool_calls]
    with fake_cohere() as (url, received):
        reply = cohere.ClientV2(base_url=url, api_key="test-key").chat(model="command-a-03-2025", messages=history)
    assert reply.message.content[0].text == "It is 18°C."
    assert received[0]["messages"][1] == message  # sent as given, every field


def test_the_readme_example_runs(on_twin):
    with fake_cohere() as (url, received):
        names = {"callstitch": callstitch, "cohere_sse_stream": BODIES["cohere__vercel-ai__v2-parallel"],
                 "client": cohere.ClientV2(base_url=url, api_key="test-key"),
                 "messages": [{"role": "user", "content": "Weather in San Francisco?"}]}
        exec(_block("cohere_sse_stream"), names)
    assert [m["role"] for m in received[0]["messages"]] == ["user", "assistant", "tool", "tool"]
    assert received[0]["messages"][1]["tool_plan"].startswith("I will use the weather tool")


@pytest.mark.parametrize("limits", [dict(event_bytes=120), dict(event_bytes=200), dict(stream_bytes=20),
                                    dict(call_bytes=10), dict(calls=1), dict(errors=1)], ids=str)
def test_the_twins_give_the_same_turn_under_limits(both, limits):
    c, py = both
    for body in BODIES.values():
        rc = c.reassemble(body, format="cohere", limits=callstitch.Limits(**limits))
        rp = py.reassemble(body, format="cohere", limits=callstitch.Limits(**limits))
        assert rc.to_response() == rp.to_response() and rc.to_message() == rp.to_message()


def test_text_a_block_or_the_message_starts_with_is_kept(both):
    # Found by review: text in content-start, thinking there, and a tool plan in message-start were
    # dropped from the result's texts and the blocks (Cohere sends "" there today; an Anthropic
    # block's start text was kept). Each is now the first piece of its text.
    start = {**MESSAGE_START, "delta": {"message": {**MESSAGE_START["delta"]["message"], "tool_plan": "I will "}}}
    body = sse([("message-start", start),
                event("tool-plan-delta", delta={"message": {"tool_plan": "look."}}),
                event("content-start", index=0, delta={"message": {"content": {"type": "thinking", "thinking": "Hm"}}}),
                event("content-delta", index=0, delta={"message": {"content": {"thinking": "m."}}}),
                event("content-end", index=0),
                event("content-start", index=1, delta={"message": {"content": {"type": "text", "text": "Hel"}}}),
                event("content-delta", index=1, delta={"message": {"content": {"text": "lo!"}}}),
                event("content-end", index=1),
                event("message-end", delta={"finish_reason": "COMPLETE", "usage": COHERE_USAGE})])
    seen = []
    for impl in both:
        result, response, message = turn(impl, body)
        assert result.text == "Hello!"
        assert response["message"]["content"] == [{"type": "thinking", "thinking": "Hmm."},
                                                  {"type": "text", "text": "Hello!"}]
        assert response["message"]["tool_plan"] == "I will look."
        seen.append(response)
    assert seen[0] == seen[1]
