"""Ollama's whole turn: to_response() is the /api/chat answer of stream false, to_message() its message."""

import json
import pickle

import ollama
import pytest

from _formats import CALLS, ollama_body, ollama_line, ndjson
from _servers import json_server
from _streams import assert_twins_give_the_same_turn, damaged, feed_split, random_cuts
from test_readme import _block, on_twin  # noqa: F401 - on_twin is a fixture

import callstitch

DONE = dict(done_reason="stop", total_duration=4883583458, load_duration=1334875, prompt_eval_count=212,
            prompt_eval_duration=342546000, eval_count=38, eval_duration=4535599000)


def bodies():
    """Return the Ollama streams the tests reassemble: every builder variant, and lines the fast path declines."""
    out = {}
    for ids in (False, True):
        for one_line in (False, True):
            out[f"calls-ids{ids}-one{one_line}"] = ollama_body(CALLS, with_ids=ids, one_line=one_line)
            out[f"all-ids{ids}-one{one_line}"] = ollama_body(CALLS, text="Let me look that up for you.",
                                                             reasoning="The user wants weather, stock, time.",
                                                             with_ids=ids, one_line=one_line)
    out["text-only"] = ollama_body(text="Bonjour ☕ 東京 😀 \"q\"\n")
    out["error"] = ollama_body(CALLS[:1], text="Hi", error=True)
    out["extras"] = ndjson([
        ollama_line({"content": "a", "images": None}, logprobs=[{"token": "a", "logprob": -0.5}]),
        ollama_line({"content": "b"}, logprobs=[{"token": "b", "logprob": -0.25, "top_logprobs": []}]),
        ollama_line({"tool_calls": [{"id": "call_1", "function": {"index": 0, "name": "f", "arguments": {},
                                                                  "extra_field": 1}, "kind": "x"}]}),
        ollama_line({"role": "assistant", "tool_name": "kept"}, done=True, remote_model="gpt-oss:120b",
                    unknown_field={"a": [1]}, **DONE),
    ])
    return out


BODIES = bodies()


def turn(impl, body, **kw):
    result = impl.reassemble(body, format="ollama", **kw)
    return result, result.to_response(), result.to_message()


def test_response_of_a_stream_with_thinking_text_and_calls(impl):
    _, response, message = turn(impl, BODIES["all-idsTrue-oneFalse"])
    assert response == {
        "model": "qwen3:8b", "created_at": "2025-06-01T10:00:00.123456Z",
        "message": {"role": "assistant", "content": "Let me look that up for you.",
                    "thinking": "The user wants weather, stock, time.",
                    "tool_calls": [{"id": c.id, "function": {"index": i, "name": c.name, "arguments": c.value}}
                                   for i, c in enumerate(CALLS)]},
        "done": True, **DONE}
    assert list(response)[:3] == ["model", "created_at", "message"]  # the last line's order, as the server writes
    assert message == response["message"]


@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_stream_validates_against_the_sdk_types(impl, name):
    result, response, message = turn(impl, BODIES[name])
    parsed = ollama.ChatResponse.model_validate(response)
    assert parsed.message.content == (result.text or "")
    assert [c.function.name for c in parsed.message.tool_calls or ()] == [c.name for c in result.tool_calls]
    assert [dict(c.function.arguments) for c in parsed.message.tool_calls or ()] == \
        [c.arguments for c in result.tool_calls]
    assert ollama.Message.model_validate(message).role == "assistant"
    assert json.loads(json.dumps(response)) == response  # plain JSON, as the server would send it


def test_fields_the_fast_path_does_not_read_are_carried(impl):
    _, response, message = turn(impl, BODIES["extras"])
    assert response["remote_model"] == "gpt-oss:120b" and response["unknown_field"] == {"a": [1]}
    assert response["logprobs"] == [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25,
                                                                      "top_logprobs": []}]
    assert response["message"] == {"role": "assistant", "content": "ab", "tool_name": "kept", "tool_calls": [
        {"id": "call_1", "function": {"index": 0, "extra_field": 1, "name": "f", "arguments": {}}, "kind": "x"}]}
    assert "tool_name" not in message and message["tool_calls"] == response["message"]["tool_calls"]


def test_a_stream_cut_before_its_last_line_is_not_done(impl):
    body = BODIES["all-idsTrue-oneFalse"]
    cut = body[:body.rindex(b"\n", 0, len(body) - 1) + 1]  # every line but the last
    _, response, _ = turn(impl, cut)
    assert response["done"] is False and "done_reason" not in response and "eval_count" not in response
    assert response["model"] == "qwen3:8b" and response["created_at"] == "2025-06-01T10:00:00.123456Z"
    assert response["message"]["content"] == "Let me look that up for you."
    assert [c["function"]["name"] for c in response["message"]["tool_calls"]] == [c.name for c in CALLS]
    ollama.ChatResponse.model_validate(response)


def test_an_in_band_error_leaves_the_turn_not_done(impl):
    result, response, _ = turn(impl, BODIES["error"])
    assert result.errors and response["done"] is False and "done_reason" not in response
    assert response["message"]["content"] == "Hi" and len(response["message"]["tool_calls"]) == 1


def test_a_call_limit_gives_only_the_calls_kept(impl):
    result, response, _ = turn(impl, BODIES["calls-idsTrue-oneTrue"], limits=callstitch.Limits(calls=2))
    assert [c["id"] for c in response["message"]["tool_calls"]] == [c.id for c in result.tool_calls]
    assert len(result.tool_calls) == 2


def test_the_turn_survives_pickling(impl):
    result = impl.reassemble(BODIES["extras"], format="ollama")
    assert pickle.loads(pickle.dumps(result)).to_response() == result.to_response()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_any_split_gives_the_same_turn(impl, name):
    body = BODIES[name]
    whole = impl.reassemble(body, format="ollama").to_response()
    for seed in range(5):
        assert feed_split(impl, body, random_cuts(len(body), seed)).to_response() == whole


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_twins_give_the_same_turn_on_mangled_streams(both, name):
    assert_twins_give_the_same_turn(both, damaged(BODIES[name], name, step=7), 'ollama')


def fake_ollama():
    """Serve /api/chat on 127.0.0.1 with a fixed answer; yield (host, the request bodies received)."""
    return json_server({"model": "qwen3:8b", "created_at": "2025-06-01T10:00:05Z", "done": True,
                        "message": {"role": "assistant", "content": "It is 18°C."}})


def test_to_message_goes_back_through_the_sdk_as_history(impl):
    result, _, message = turn(impl, BODIES["all-idsTrue-oneFalse"])
    with fake_ollama() as (host, received):
        history = [{"role": "user", "content": "Weather in Paris?"}, message,
                   {"role": "tool", "content": "18°C", "tool_name": "get_weather"}]
        reply = ollama.Client(host=host).chat(model="qwen3:8b", messages=history, stream=False)
    assert reply.message.content == "It is 18°C."
    sent = received[0]["messages"][1]
    # The SDK sends the fields its Message type has: role, content, thinking, the calls' names and
    # arguments (its ToolCall type has no id, nor function.index).
    assert sent == {"role": "assistant", "content": result.text, "thinking": result.reasoning,
                    "tool_calls": [{"function": {"name": c.name, "arguments": c.arguments}}
                                   for c in result.tool_calls]}


def test_the_readme_example_runs(on_twin):
    body = BODIES["all-idsTrue-oneFalse"]
    with fake_ollama() as (host, received):
        names = {"callstitch": callstitch, "ollama_ndjson_stream": body, "client": ollama.Client(host=host),
                 "messages": [{"role": "user", "content": "Weather in Paris?"}]}
        exec(_block("ollama_ndjson_stream"), names)
    assert [m["role"] for m in received[0]["messages"]] == ["user", "assistant", "tool"]
    assert received[0]["messages"][1]["content"] == "Let me look that up for you."


@pytest.mark.parametrize("limits", [dict(event_bytes=120), dict(event_bytes=200), dict(stream_bytes=20),
                                    dict(call_bytes=10), dict(calls=1), dict(errors=1)], ids=str)
def test_the_twins_give_the_same_turn_under_limits(both, limits):
    c, py = both
    for body in BODIES.values():
        rc = c.reassemble(body, format="ollama", limits=callstitch.Limits(**limits))
        rp = py.reassemble(body, format="ollama", limits=callstitch.Limits(**limits))
        assert rc.to_response() == rp.to_response() and rc.to_message() == rp.to_message()


def _ollama_calls_body(*calls: dict) -> bytes:
    lines = [{"model": "qwen3:8b", "created_at": "2025-01-01T00:00:00Z",
              "message": {"role": "assistant", "content": "", "tool_calls": list(calls)}, "done": False},
             {"model": "qwen3:8b", "created_at": "2025-01-01T00:00:01Z",
              "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"}]
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_call_cut_by_a_limit_gives_an_object_never_null(both):
    # Found by review: a call that Limits.stream_bytes cut had "arguments": null in to_response()
    # and to_message(), which no Ollama response has there (ollama.ChatResponse refuses it). A cut
    # call now holds the part of its arguments that came whole ({} when none did).
    arguments = {"city": "Paris", "days": 3, "units": "metric"}
    body = _ollama_calls_body({"function": {"index": 0, "name": "get_weather", "arguments": arguments}})
    for budget in [None] + list(range(0, 80, 3)):
        limits = callstitch.Limits(stream_bytes=budget) if budget is not None else None
        seen = []
        for impl in both:
            result = impl.reassemble(body, format="ollama", limits=limits)
            response = result.to_response()
            ollama.ChatResponse.model_validate(response)
            ollama.Message.model_validate(result.to_message())
            got = response["message"]["tool_calls"][0]["function"]["arguments"]
            assert type(got) is dict and got.items() <= arguments.items(), (impl.name, budget, got)
            assert budget is not None or got == arguments
            seen.append(response)
        assert seen[0] == seen[1], budget


def test_arguments_that_are_no_object_stay_as_sent(impl):
    body = _ollama_calls_body({"function": {"index": 0, "name": "bad", "arguments": [1, 2]}})
    result = impl.reassemble(body, format="ollama")
    assert result.tool_calls[0].error is not None  # reported
    assert result.to_response()["message"]["tool_calls"][0]["function"]["arguments"] == [1, 2]
