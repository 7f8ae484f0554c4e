"""The OpenAI chat turn: to_response() is the chat.completion, to_message() the assistant message (issue 20).

Checked against openai-python itself: its ChatCompletionStreamState rebuilds the final completion
from the same chunks, its ChatCompletion model validates ours, its request param types take our
message, and its client sends the message back to a local server unchanged.
"""

from __future__ import annotations

import glob
import json
import os
import pickle

import pytest
from openai import OpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionAssistantMessageParam, ChatCompletionChunk
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from _servers import ServerThread
from _streams import DONE, chunk_obj, choice_obj, dumps, feed_split, random_cuts

from callstitch import Limits

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
CHAT = sorted(p for p in glob.glob(os.path.join(CAPTURES, "*.sse"))
              if json.load(open(p[:-4] + ".expected.json")).get("format") == "openai-chat")
MESSAGE_PARAM = TypeAdapter(ChatCompletionAssistantMessageParam)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def chunks_of(body: bytes) -> list[dict]:
    """Return the JSON chunks of an SSE body (a plain reader: data lines joined, [DONE] left out)."""
    out = []
    for block in body.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        lines = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
        data = "\n".join(lines)
        if data.strip() and data.strip() != "[DONE]":
            out.append(json.loads(data))
    return out


def sse(*chunks: dict, done: bool = True) -> bytes:
    return b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + (DONE if done else b"")


def first_keep(values):
    """The first value of a key over chunks, objects gaining the keys later ones add (ChatTurn's rule)."""
    held = None
    for value in values:
        if value is None:
            continue
        if held is None:
            held = json.loads(json.dumps(value))
        elif isinstance(held, dict) and isinstance(value, dict):
            for k, v in value.items():
                merged = first_keep([held.get(k), v])
                if merged is not None:
                    held[k] = merged
    return held


def sdk_expected(chunks: list[dict]) -> dict:
    """Return the SDK's final completion from the chunks, with the differences the README lists applied."""
    state = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    want = state.get_final_completion().model_dump(mode="json", exclude_unset=True)
    for choice in want["choices"]:
        index = choice["index"]
        message = choice["message"]
        sent_delta_keys = {k for c in chunks for ch in c.get("choices") or [] if ch.get("index") == index
                           for k in (ch.get("delta") or {})}
        # ParsedChatCompletion's own fields, not the API's: parsed content and parsed arguments.
        message.pop("parsed", None)
        # Filled in as null by the SDK's parse step although the stream never sent them.
        for key in ("annotations", "audio", "function_call", "tool_calls"):
            if key not in sent_delta_keys and message.get(key) is None:
                message.pop(key, None)
        # The role is always "assistant" (the SDK has none when no chunk sent one).
        message["role"] = "assistant"
        for call in message.get("tool_calls") or []:
            call.pop("index", None)  # the stream's addressing; a chat.completion's calls have none
            call["function"].pop("parsed_arguments", None)
        # logprobs is null when no chunk sent any (the SDK leaves it out when no chunk had the key).
        choice.setdefault("logprobs", None)
        # A choice's extras of later chunks are kept (vLLM's stop_reason comes last); the SDK keeps the first chunk's.
        for key in {k for c in chunks for ch in c.get("choices") or [] if ch.get("index") == index for k in ch}:
            if key not in ("index", "delta", "message", "finish_reason", "logprobs"):
                value = first_keep(ch.get(key) for c in chunks for ch in c.get("choices") or []
                                   if ch.get("index") == index)
                if value is not None:
                    choice[key] = value
    # Top-level extras of later chunks are kept (x_groq.usage comes in the last one); the SDK keeps the first's.
    for key in {k for c in chunks for k in c} - {"id", "object", "created", "model", "system_fingerprint",
                                                 "service_tier", "choices", "usage", "error", "obfuscation"}:
        value = first_keep(c.get(key) for c in chunks)
        if value is not None:
            want[key] = value
    return want


def clean(path):
    body = read(path)
    chunks = chunks_of(body)
    return body, chunks


# ---------------------------------------------------------------- the captures, against the SDK

SDK_READABLE = [p for p in CHAT if "inband-error" not in p and "tool-call-no-index" not in p]


def test_the_captures_are_found():
    assert len(CHAT) >= 15
    names = {os.path.basename(p).split("__")[0] for p in CHAT}
    assert {"openai", "groq", "deepseek", "mistral", "xai", "vllm", "alibaba-qwen"} <= names


@pytest.mark.parametrize("path", SDK_READABLE, ids=os.path.basename)
def test_to_response_equals_the_sdks_final_completion(impl, path):
    body, chunks = clean(path)
    result = impl.reassemble(body)
    assert result.errors == []
    got = result.to_response()
    assert got == sdk_expected(chunks)
    ChatCompletion.model_validate(got)


@pytest.mark.parametrize("path", CHAT, ids=os.path.basename)
def test_to_message_is_a_request_param(impl, path):
    result = impl.reassemble(read(path))
    message = result.to_message()
    MESSAGE_PARAM.validate_python(message)
    assert message["role"] == "assistant"
    assert [c["id"] for c in message.get("tool_calls", [])] == [c.id for c in result.tool_calls if c.choice == 0]
    assert [c["function"]["arguments"] for c in message.get("tool_calls", [])] == [
        c.raw_arguments for c in result.tool_calls if c.choice == 0]


@pytest.mark.parametrize("path", CHAT, ids=os.path.basename)
def test_any_split_gives_the_same_turn(impl, path):
    body = read(path)
    whole = impl.reassemble(body)
    for seed in range(3):
        split = feed_split(impl, body, random_cuts(len(body), seed))
        assert split.to_response() == whole.to_response()
        assert split.to_message() == whole.to_message()


@pytest.mark.parametrize("path", CHAT, ids=os.path.basename)
def test_twins_give_the_same_turn(both, path):
    body = read(path)
    c, py = (i.reassemble(body) for i in both)
    assert c.to_response() == py.to_response()
    assert c.to_message() == py.to_message()


def test_the_groq_turn_keeps_x_groq_with_its_usage(impl):
    path = os.path.join(CAPTURES, "groq__pydantic-ai__gpt-oss-reasoning-then-call.sse")
    got = impl.reassemble(read(path)).to_response()
    assert got["x_groq"]["id"] == "req_01khrvt32ze9rb75za4xqmdz13"
    assert got["x_groq"]["seed"] == 1367355884
    assert got["x_groq"]["usage"]["total_tokens"] == 353
    message = got["choices"][0]["message"]
    assert message["reasoning"].startswith("We need to call")
    assert "reasoning_content" not in message


def test_deepseek_reasoning_content_goes_back(impl):
    path = os.path.join(CAPTURES, "deepseek__vercel-ai__reasoner-tool-call.sse")
    result = impl.reassemble(read(path))
    message = result.to_message()
    assert message["reasoning_content"] == result.reasoning
    assert "reasoning" not in message


def test_a_result_with_its_turn_pickles(impl):
    result = impl.reassemble(read(os.path.join(CAPTURES, "groq__pydantic-ai__gpt-oss-reasoning-then-call.sse")))
    again = pickle.loads(pickle.dumps(result))
    assert again.to_response() == result.to_response()


# ---------------------------------------------------------------- what callstitch keeps that the fast path skips

SIGNATURE = "CiQB0e2Kb9x+/==sig\u00e9"


def rich_stream() -> bytes:
    """A stream with everything the turn keeps: extras at every level, logprobs, a thought signature, n=2."""
    lp = lambda t: {"token": t, "logprob": -0.5, "bytes": list(t.encode()), "top_logprobs": []}  # noqa: E731
    return sse(
        chunk_obj([choice_obj({"role": "assistant", "content": ""}, 0), choice_obj({"role": "assistant"}, 1)],
                  provider="Together", x_groq={"id": "req_1"}),
        chunk_obj([choice_obj({"content": "Hel"}, 0, logprobs={"content": [lp("Hel")], "refusal": None})]),
        chunk_obj([choice_obj({"content": "lo", "annotations": [{"type": "url_citation", "url_citation": {
            "url": "https://example.com", "title": "x", "start_index": 0, "end_index": 2}}]}, 0,
            logprobs={"content": [lp("lo")], "refusal": None})]),
        chunk_obj([choice_obj({"reasoning_content": "think"}, 1)]),
        chunk_obj([choice_obj({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                               "function": {"name": "get", "arguments": ""},
                                               "extra_content": {"google": {"thought_signature": SIGNATURE}}}]}, 1)]),
        chunk_obj([choice_obj({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":1}"}}]}, 1)]),
        chunk_obj([choice_obj({}, 0, finish_reason="stop"), choice_obj({}, 1, finish_reason="tool_calls",
                                                                        stop_reason=None)]),
        chunk_obj([], usage={"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
                  x_groq={"id": "req_1", "usage": {"queue_time": 0.1}}))


def test_a_rich_stream_keeps_everything(impl):
    got = impl.reassemble(rich_stream()).to_response()
    ChatCompletion.model_validate(got)
    assert got["provider"] == "Together"
    assert got["x_groq"] == {"id": "req_1", "usage": {"queue_time": 0.1}}
    assert got["usage"]["total_tokens"] == 7
    first, second = got["choices"]
    assert first["message"]["content"] == "Hello"
    assert [t["token"] for t in first["logprobs"]["content"]] == ["Hel", "lo"]
    assert first["message"]["annotations"][0]["url_citation"]["url"] == "https://example.com"
    assert second["message"]["reasoning_content"] == "think"
    call = second["message"]["tool_calls"][0]
    assert call["extra_content"]["google"]["thought_signature"] == SIGNATURE
    assert call["function"] == {"name": "get", "arguments": "{\"a\":1}"}
    assert second["finish_reason"] == "tool_calls"


def test_a_rich_stream_equals_the_sdk(impl):
    body = rich_stream()
    assert impl.reassemble(body).to_response() == sdk_expected(chunks_of(body))


def test_a_rich_stream_is_the_same_in_both_twins_split_anywhere(both):
    body = rich_stream()
    want = both[1].reassemble(body).to_response()
    for impl in both:
        for seed in range(5):
            assert feed_split(impl, body, random_cuts(len(body), seed)).to_response() == want


def test_to_message_of_another_choice(impl):
    result = impl.reassemble(rich_stream())
    message = result.to_message(1)
    MESSAGE_PARAM.validate_python(message)
    assert message["reasoning_content"] == "think"
    assert message["tool_calls"][0]["extra_content"]["google"]["thought_signature"] == SIGNATURE
    with pytest.raises(IndexError):
        result.to_message(5)


def test_an_audio_answer_goes_back_by_its_id(impl):
    # Found by review: to_message() left the audio out, so the message was no request param (its
    # content is null, required unless calls come) and the reference to the audio answer was lost.
    envelope = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-audio-preview"}
    body = sse({**envelope, "choices": [{"index": 0, "finish_reason": None, "delta": {
                   "role": "assistant", "content": None,
                   "audio": {"id": "audio_abc123", "data": "UklG", "expires_at": 1730000000, "transcript": "Hel"}}}]},
               {**envelope, "choices": [{"index": 0, "finish_reason": None,
                                         "delta": {"audio": {"data": "RiQA", "transcript": "lo!"}}}]},
               {**envelope, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    result = impl.reassemble(body)
    assert result.to_response()["choices"][0]["message"]["audio"] == sdk_expected(chunks_of(body))[
        "choices"][0]["message"]["audio"]
    message = result.to_message()
    assert message == {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}
    MESSAGE_PARAM.validate_python(message)


def test_later_envelope_fields_do_not_replace_the_first(impl):
    body = sse(chunk_obj([choice_obj({"content": "a"})], id="one", model="m1", system_fingerprint=None),
               chunk_obj([choice_obj({"content": "b"})], id="two", model="m2", system_fingerprint="fp_late"),
               chunk_obj([choice_obj({}, finish_reason="stop")], id="three", system_fingerprint="fp_later"))
    got = impl.reassemble(body).to_response()
    assert (got["id"], got["model"], got["system_fingerprint"]) == ("one", "m1", "fp_late")


def test_azure_filter_chunks_give_their_extras_not_their_envelope(impl):
    body = sse({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]},
               chunk_obj([choice_obj({"content": "hi"}, content_filter_results={"hate": {"filtered": False}})]),
               chunk_obj([choice_obj({}, finish_reason="stop")]))
    got = impl.reassemble(body).to_response()
    assert got["id"] == "chatcmpl-abc123" and got["created"] != 0
    assert got["prompt_filter_results"][0]["prompt_index"] == 0
    assert got["choices"][0]["content_filter_results"] == {"hate": {"filtered": False}}


# ---------------------------------------------------------------- cut and failed streams

def test_a_truncated_body_gives_the_raw_arguments_and_no_finish_reason(impl):
    path = os.path.join(CAPTURES, "openai__openai-python__chat-single-tool.sse")
    body = read(path)
    events = body.split(b"\n\n")
    cut = b"\n\n".join(events[: len(events) // 2]) + b"\n\n"  # half the events: mid-arguments
    result = impl.reassemble(cut)
    got = result.to_response()
    choice = got["choices"][0]
    assert choice["finish_reason"] is None
    arguments = choice["message"]["tool_calls"][0]["function"]["arguments"]
    assert arguments == result.tool_calls[0].raw_arguments
    received = "".join(tc["function"].get("arguments") or "" for c in chunks_of(cut) for ch in c["choices"]
                       for tc in (ch["delta"].get("tool_calls") or []))
    assert arguments == received and not arguments.endswith("}")
    assert result.to_message()["tool_calls"][0]["function"]["arguments"] == received


def test_a_length_finish_is_given_as_sent(impl):
    body = sse(chunk_obj([choice_obj({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                      "function": {"name": "f", "arguments": "{\"a\":"}}]})]),
               chunk_obj([choice_obj({}, finish_reason="length")]))
    got = impl.reassemble(body).to_response()
    assert got["choices"][0]["finish_reason"] == "length"
    assert got["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\":"


def test_a_limit_cut_keeps_what_was_kept_and_invents_nothing(impl):
    path = os.path.join(CAPTURES, "openai__openai-python__chat-parallel-weather-and-stock.sse")
    result = impl.reassemble(read(path), limits=Limits(call_bytes=10))
    got = result.to_response()
    calls = got["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == [c.raw_arguments for c in result.tool_calls]
    assert all(len(c["function"]["arguments"].encode()) <= 10 for c in calls)
    assert got["choices"][0]["finish_reason"] == result.finish_reason  # as sent, not made up


def test_an_in_band_error_gives_what_came_before_it(impl):
    path = os.path.join(CAPTURES, "groq__pydantic-ai__inband-error-tool-use-failed.sse")
    result = impl.reassemble(read(path))
    got = result.to_response()
    assert [e.kind for e in result.errors] == ["in-band error"]
    assert got["choices"][0]["finish_reason"] is None
    assert got["choices"][0]["message"]["reasoning"] == result.reasoning


# ---------------------------------------------------------------- the round trip through the SDK's client

def _echo_app(seen: list):
    async def completions(request: Request):
        raw = await request.body()
        seen.append(raw)
        return JSONResponse({"id": "chatcmpl-2", "object": "chat.completion", "created": 1, "model": "m",
                             "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                          "message": {"role": "assistant", "content": "done"}}]})
    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


@pytest.mark.parametrize("path", [os.path.join(CAPTURES, "deepseek__vercel-ai__reasoner-tool-call.sse"),
                                  os.path.join(CAPTURES, "openai__openai-python__chat-parallel-weather-and-stock.sse"),
                                  "rich"], ids=os.path.basename)
def test_the_message_goes_back_through_the_sdk_unchanged(impl, path):
    body = rich_stream() if path == "rich" else read(path)
    result = impl.reassemble(body)
    choice = 1 if path == "rich" else 0
    message = result.to_message(choice)
    history = [{"role": "user", "content": "go"}, message]
    history += [{"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in message.get("tool_calls", [])]
    seen: list[bytes] = []
    server = ServerThread(_echo_app(seen)).start()
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=history)
    finally:
        server.stop()
    assert reply.choices[0].message.content == "done"
    sent = json.loads(seen[0])
    assert sent["messages"][1] == message
    assert json.dumps(sent["messages"][1], sort_keys=True) == json.dumps(message, sort_keys=True)
    if path == "rich":
        signature = message["tool_calls"][0]["extra_content"]["google"]["thought_signature"]
        assert signature == SIGNATURE
        assert json.dumps(SIGNATURE).encode() in seen[0] or SIGNATURE.encode() in seen[0]


def test_extras_on_a_chunk_that_only_continues_a_call_are_kept(impl):
    # The commonest chunk (one call's next argument piece) takes a short way in both twins; with
    # anything the turn keeps it must take the long one.
    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}
    lp = {"content": [{"token": "x", "logprob": -1.0, "bytes": [120], "top_logprobs": []}], "refusal": None}
    body = sse(chunk_obj([choice_obj({"tool_calls": [first]})]),
               chunk_obj([choice_obj({"tool_calls": [{"index": 0, "function": {"arguments": ":"}}]})],
                         x_extra={"usage": {"queue_time": 0.5}}),
               chunk_obj([choice_obj({"tool_calls": [{"index": 0, "function": {"arguments": "1"}}]}, logprobs=lp)]),
               chunk_obj([choice_obj({"tool_calls": [{"index": 0, "function": {"arguments": "}", "x": "y"}}]})],
                         service_tier="flex"),
               chunk_obj([choice_obj({}, finish_reason="tool_calls")]))
    got = impl.reassemble(body).to_response()
    assert got["x_extra"] == {"usage": {"queue_time": 0.5}}
    assert got["service_tier"] == "flex"
    choice = got["choices"][0]
    assert choice["logprobs"]["content"][0]["token"] == "x"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "f", "arguments": "{\"a\":1}", "x": "y"}


@pytest.mark.parametrize("where", ["function", "call", "choice", "choice of two"])
def test_one_unknown_key_on_a_continuation_chunk_is_kept(both, where):
    # The short way's key checks, one dict at a time: a key it has never heard of sends the chunk the long way.
    def piece(arguments, extra):
        function = {"arguments": arguments, **({"x_fn": 1} if extra and where == "function" else {})}
        call = {"index": 0, "function": function, **({"x_call": 2} if extra and where == "call" else {})}
        choice = {"index": 0, "delta": {"tool_calls": [call]}}
        if where == "choice of two" and extra:
            choice["x_choice"] = 3  # two keys besides index and delta, neither logprobs nor finish_reason
            choice["y_choice"] = 4
        elif where == "choice":
            choice.update(logprobs=None, finish_reason=None, **({"x_choice": 3} if extra else {}))
        return chunk_obj([choice])
    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}
    body = sse(chunk_obj([choice_obj({"tool_calls": [first]})]), piece(":", False), piece("1", True),
               piece("}", False), chunk_obj([choice_obj({}, finish_reason="tool_calls")]))
    got = [impl.reassemble(body).to_response() for impl in both]
    assert got[0] == got[1]
    choice = got[0]["choices"][0]
    call = choice["message"]["tool_calls"][0]
    assert call["function"]["arguments"] == "{\"a\":1}"
    if where == "function":
        assert call["function"]["x_fn"] == 1
    elif where == "call":
        assert call["x_call"] == 2
    else:
        assert choice["x_choice"] == 3


@pytest.mark.parametrize("late", ["id", "created", "model", "system_fingerprint", "service_tier"])
@pytest.mark.parametrize("on", ["continuation", "finish", "content"])
def test_an_envelope_field_first_sent_late_is_kept(both, late, on):
    # Servers that never send some envelope fields leave the turn lacking them on every chunk; one
    # that sends a field first on a later chunk (of any kind the short ways take) gives it then.
    values = {"id": "chatcmpl-late", "created": 1730000001, "model": "m-late", "system_fingerprint": "fp_late",
              "service_tier": "flex"}

    def without(obj):
        obj.pop(late, None)
        obj.pop("service_tier", None)
        return obj

    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"a\""}}
    piece = {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}
    chunks = [without(chunk_obj([choice_obj({"tool_calls": [first]})])),
              without(chunk_obj([choice_obj({"tool_calls": [{"index": 0, "function": {"arguments": ":"}}]})])),
              without(chunk_obj([choice_obj(piece)])),
              without(chunk_obj([choice_obj({}, finish_reason="tool_calls")]))]
    if on == "content":
        chunks.insert(1, without(chunk_obj([choice_obj({"content": "x"})])))
    chunks[{"continuation": 2, "finish": 3, "content": 1}[on]][late] = values[late]
    got = [impl.reassemble(sse(*chunks)).to_response() for impl in both]
    assert got[0] == got[1]
    assert got[0][late] == values[late]
    assert got[0]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == "{\"a\":1}"


@pytest.mark.parametrize("first_index", [1, -1, 7])
def test_a_calls_extras_are_kept_whatever_index_the_provider_counts_from(both, first_index):
    # Before: a later piece's extras (Gemini's thought signature via its OpenAI endpoint), sent
    # without the call's id, were kept by the index as sent and looked for by the call's position
    # in its choice: lost for a provider counting from 1 (or -1) unless the first piece had extras too.
    signature = {"google": {"thought_signature": "SIG"}}
    calls = [[{"index": first_index + k, "id": f"call_{k}", "type": "function",
               "function": {"name": "f", "arguments": ""}}] for k in range(2)]
    later = [[{"index": first_index + k, "function": {"arguments": "{}"}, "extra_content": signature}]
             for k in range(2)]
    no_id = [[{"index": first_index + 2, "type": "function", "function": {"name": "g", "arguments": "{"},
               "x_first": 1}], [{"index": first_index + 2, "function": {"arguments": "}"}, "x_later": 2}]]
    body = sse(*[chunk_obj([choice_obj({"tool_calls": c})]) for c in calls + later + no_id],
               chunk_obj([choice_obj({}, finish_reason="tool_calls")]))
    for impl in both:
        got = impl.reassemble(body).to_response()["choices"][0]["message"]["tool_calls"]
        assert [c.get("extra_content") for c in got] == [signature, signature, None]
        assert (got[2]["x_first"], got[2]["x_later"]) == (1, 2)
        message = impl.reassemble(body).to_message()
        assert [c.get("extra_content") for c in message["tool_calls"]] == [signature, signature, None]
