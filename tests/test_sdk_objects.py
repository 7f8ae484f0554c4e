"""feed_chunk() with the real SDK objects: OpenAI chat chunks and Responses events, Anthropic stream events.

Each data line of a recorded capture is turned into the SDK's own type, as the SDK's stream hands it
to users, and fed with feed_chunk(); the result must be that of reassemble() on the raw bytes.
Two ways of building the objects: "validate" (Model.model_validate / the SDK's union type, checked
by pydantic; a payload the SDK's model rejects falls back to construct, as the SDK's stream does)
and "construct" (the SDK's construct_type, exactly what openai.Stream / anthropic.Stream yield).
"""

import glob
import json
import os

import pytest

import _formats as F

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
pydantic = pytest.importorskip("pydantic")

from anthropic import types as atypes  # noqa: E402
from anthropic._models import construct_type as anthropic_construct  # noqa: E402
from openai._models import construct_type as openai_construct  # noqa: E402
from openai.types import responses as rtypes  # noqa: E402
from openai.types.chat import ChatCompletionChunk  # noqa: E402

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
FORMATS = {"openai-chat": "openai-chat", "openai-responses": "openai-responses", "anthropic-messages": "anthropic"}

RESPONSES_EVENT = pydantic.TypeAdapter(rtypes.ResponseStreamEvent)
ANTHROPIC_EVENT = pydantic.TypeAdapter(atypes.RawMessageStreamEvent)


def payloads(body):
    """Return the JSON payloads of an SSE body's data lines, in order ([DONE] left out)."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data and data != [b"[DONE]"]:
            out.append(json.loads(b"\n".join(data)))
    return out


def sdk_object(fmt, payload, how):
    """Return the SDK object for one payload of a format (None for what the SDK stream never yields)."""
    if fmt == "anthropic" and payload.get("type") in ("ping", "error"):
        return None  # anthropic.Stream skips pings and raises on error events: users never hold them
    if how == "validate":
        try:
            if fmt == "openai-chat":
                return ChatCompletionChunk.model_validate(payload)
            if fmt == "openai-responses":
                return RESPONSES_EVENT.validate_python(payload)
            return ANTHROPIC_EVENT.validate_python(payload)
        except pydantic.ValidationError:
            pass
    if fmt == "openai-chat":
        return openai_construct(type_=ChatCompletionChunk, value=payload)
    if fmt == "openai-responses":
        return openai_construct(type_=rtypes.ResponseStreamEvent, value=payload)
    return anthropic_construct(type_=atypes.RawMessageStreamEvent, value=payload)


def feed_objects(impl, fmt, body, how, format=None):
    acc = impl.Accumulator(format=format or fmt)
    for payload in payloads(body):
        obj = sdk_object(fmt, payload, how)
        if obj is not None:
            assert not isinstance(obj, dict)
            acc.feed_chunk(obj)
    return acc.finalize()


def captures():
    for path in sorted(glob.glob(os.path.join(HERE, "*.expected.json"))):
        expected = json.load(open(path, encoding="utf-8"))
        if expected["format"] in FORMATS:
            stem = path[: -len(".expected.json")]
            yield pytest.param(stem + ".sse", FORMATS[expected["format"]], id=os.path.basename(stem))


CAPTURES = list(captures())


def same_message(got, raw, *, errors=True):
    assert got.tool_calls == raw.tool_calls
    assert [(c.id, c.name, c.arguments, c.raw_arguments) for c in got.tool_calls] == [
        (c.id, c.name, c.arguments, c.raw_arguments) for c in raw.tool_calls]
    assert (got.text, got.reasoning, got.refusal, got.finish_reason, got.complete, got.format) == (
        raw.text, raw.reasoning, raw.refusal, raw.finish_reason, raw.complete, raw.format)
    if errors:
        assert [e.kind for e in got.errors] == [e.kind for e in raw.errors]


@pytest.mark.parametrize("how", ["validate", "construct"])
@pytest.mark.parametrize("path,fmt", CAPTURES)
def test_capture_as_sdk_objects(impl, path, fmt, how):
    body = open(path, "rb").read()
    raw = impl.reassemble(body, format=fmt)
    got = feed_objects(impl, fmt, body, how)
    # the SDK never yields an Anthropic error event (it raises): compare errors where it yields them all
    same_message(got, raw, errors=fmt != "anthropic" or b"event: error" not in body)


@pytest.mark.parametrize("path,fmt", CAPTURES)
def test_capture_as_sdk_objects_auto(impl, path, fmt):
    body = open(path, "rb").read()
    raw = impl.reassemble(body, format=fmt)
    got = feed_objects(impl, fmt, body, "construct", format="auto")
    same_message(got, raw)


@pytest.mark.parametrize("path,fmt", CAPTURES)
def test_capture_as_sdk_objects_usage(impl, path, fmt):
    """The usage of SDK objects is the usage as sent: no fields the server never sent, filled with None."""
    body = open(path, "rb").read()
    raw = impl.reassemble(body, format=fmt)
    got = feed_objects(impl, fmt, body, "construct")
    assert got.usage == raw.usage


@pytest.mark.parametrize("path,fmt", CAPTURES)
def test_sdk_objects_twins_agree(both, path, fmt):
    body = open(path, "rb").read()
    c, py = (feed_objects(i, fmt, body, "validate") for i in both)
    assert c == py


# ---------------------------------------------------------------- the SDK types by name


def test_openai_chat_chunks_are_the_sdk_type(impl):
    body = open(os.path.join(HERE, "openai__openai-python__chat-parallel-weather-and-stock.sse"), "rb").read()
    objs = [ChatCompletionChunk.model_validate(p) for p in payloads(body)]
    assert all(type(o) is ChatCompletionChunk for o in objs)
    acc = impl.Accumulator()
    for o in objs:
        acc.feed_chunk(o)
    result = acc.finalize()
    assert [c.name for c in result.tool_calls] == ["GetWeatherArgs", "get_stock_price"]
    same_message(result, impl.reassemble(body))


def test_openai_chat_chunks_from_the_builders(impl):
    from _streams import chunk_obj, finish, text_delta, tool_delta

    chunks = [chunk_obj([text_delta(role="assistant", content="Let me look. 東京 😀")]),
              chunk_obj([tool_delta(0, id="call_1", name="get_weather", arguments="")]),
              chunk_obj([tool_delta(1, id="call_2", name="get_time", arguments="")]),
              chunk_obj([tool_delta(0, arguments='{"city": ')]),
              chunk_obj([tool_delta(1, arguments='{"tz": "UTC"}')]),
              chunk_obj([tool_delta(0, arguments='"Paris"}')]),
              chunk_obj([finish("tool_calls")]),
              chunk_obj([], usage={"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})]
    dicts = impl.Accumulator()
    objects = impl.Accumulator()
    for c in chunks:
        dicts.feed_chunk(c)
        objects.feed_chunk(ChatCompletionChunk.model_validate(c))
    a, b = dicts.finalize(), objects.finalize()
    assert [(c.id, c.name, c.arguments) for c in b.tool_calls] == [("call_1", "get_weather", {"city": "Paris"}),
                                                                   ("call_2", "get_time", {"tz": "UTC"})]
    same_message(b, a)


def test_openai_chat_usage_as_sent(impl):
    """A usage chunk given as the SDK object: the usage as the server sent it, no None-filled extras."""
    from _streams import chunk_obj

    usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    acc = impl.Accumulator()
    acc.feed_chunk(ChatCompletionChunk.model_validate(chunk_obj([], usage=usage)))
    assert acc.finalize().usage == usage


RESPONSES_TYPES = {
    "response.created": rtypes.ResponseCreatedEvent,
    "response.in_progress": rtypes.ResponseInProgressEvent,
    "response.output_item.added": rtypes.ResponseOutputItemAddedEvent,
    "response.output_item.done": rtypes.ResponseOutputItemDoneEvent,
    "response.function_call_arguments.delta": rtypes.ResponseFunctionCallArgumentsDeltaEvent,
    "response.function_call_arguments.done": rtypes.ResponseFunctionCallArgumentsDoneEvent,
    "response.output_text.delta": rtypes.ResponseTextDeltaEvent,
    "response.reasoning_summary_text.delta": rtypes.ResponseReasoningSummaryTextDeltaEvent,
    "response.completed": rtypes.ResponseCompletedEvent,
    "response.failed": rtypes.ResponseFailedEvent,
    "error": rtypes.ResponseErrorEvent,
}


def _responses_objects(body):
    objs = []
    for p in payloads(body):
        cls = RESPONSES_TYPES[p["type"]]
        objs.append(openai_construct(type_=cls, value=p))
        assert type(objs[-1]) is cls
    return objs


@pytest.mark.parametrize("variant", ["calls", "interleaved", "message", "error", "failed"])
def test_responses_event_types(impl, variant):
    options = {"calls": {}, "interleaved": {"interleave": True},
               "message": {"text": "Checking. 東京", "reasoning": "Need the weather."},
               "error": {"error": "error"}, "failed": {"error": "failed"}}[variant]
    body = F.responses_body(F.CALLS, **options)
    acc = impl.Accumulator(format="openai-responses")
    for obj in _responses_objects(body):
        acc.feed_chunk(obj)
    got = acc.finalize()
    raw = impl.reassemble(body, format="openai-responses")
    same_message(got, raw)
    assert [(c.id, c.name, c.arguments) for c in got.tool_calls] == [(c.id, c.name, c.value) for c in F.CALLS]


def test_responses_server_side_items_as_sdk_objects(impl):
    items = [{"id": "ws_01", "type": "web_search_call", "action": {"type": "search", "query": "weather Paris"}}]
    body = F.responses_body(F.CALLS[:1], extra_items=items)
    acc = impl.Accumulator(format="openai-responses")
    for p in payloads(body):
        acc.feed_chunk(sdk_object("openai-responses", p, "validate"))
    result = acc.finalize()
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [(F.CALLS[0].id, F.CALLS[0].name,
                                                                         F.CALLS[0].value)]


ANTHROPIC_TYPES = {
    "message_start": atypes.RawMessageStartEvent,
    "content_block_start": atypes.RawContentBlockStartEvent,
    "content_block_delta": atypes.RawContentBlockDeltaEvent,
    "content_block_stop": atypes.RawContentBlockStopEvent,
    "message_delta": atypes.RawMessageDeltaEvent,
    "message_stop": atypes.RawMessageStopEvent,
}


@pytest.mark.parametrize("variant", ["calls", "message", "truncated", "empty"])
def test_anthropic_event_types(impl, variant):
    calls = [F.Call("toolu_00", "noop", ""), *F.CALLS[:2]] if variant == "empty" else F.CALLS
    options = {"calls": {}, "empty": {}, "message": {"text": "Checking. 東京", "reasoning": "Need the weather."},
               "truncated": {"cut": 2}}[variant]
    body = F.anthropic_body(calls, **options)
    acc = impl.Accumulator(format="anthropic")
    kinds = set()
    for p in payloads(body):
        if p["type"] == "ping":
            continue
        cls = ANTHROPIC_TYPES[p["type"]]
        obj = cls.model_validate(p)
        kinds.add(type(obj))
        acc.feed_chunk(obj)
    got = acc.finalize()
    raw = impl.reassemble(body, format="anthropic")
    same_message(got, raw)
    assert {atypes.RawMessageStartEvent, atypes.RawContentBlockStartEvent, atypes.RawContentBlockDeltaEvent} <= kinds
    if variant == "truncated":
        assert got.tool_calls[-1].error.kind == "truncated"
    else:
        assert [(c.id, c.name, c.arguments) for c in got.tool_calls] == [(c.id, c.name, c.value) for c in calls]
        assert raw.usage == F.ANTHROPIC_USAGE


def test_anthropic_usage_as_sent(impl):
    body = F.anthropic_body(F.CALLS[:1])
    acc = impl.Accumulator(format="anthropic")
    for p in payloads(body):
        if p["type"] != "ping":
            acc.feed_chunk(ANTHROPIC_TYPES[p["type"]].model_validate(p))
    usage = acc.finalize().usage
    # message_start carries the input side, message_delta the output side: neither may blank the other
    assert usage["input_tokens"] == 472
    assert usage["output_tokens"] == 89
    assert usage == F.ANTHROPIC_USAGE


def test_anthropic_server_tool_use_as_sdk_objects(impl):
    server = F.Call("srvtoolu_01", "web_search", '{"query": "weather in Paris"}')
    body = F.anthropic_body(F.CALLS[:1], server_tools=[server])
    acc = impl.Accumulator(format="anthropic")
    for p in payloads(body):
        obj = sdk_object("anthropic", p, "validate")
        if obj is not None:
            acc.feed_chunk(obj)
    result = acc.finalize()
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [(F.CALLS[0].id, F.CALLS[0].name,
                                                                         F.CALLS[0].value)]
    assert result.errors == []
