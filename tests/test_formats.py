"""Every wire format other than OpenAI chat, through both twins: calls, errors, the message, framing, auto."""

import json
import random
import struct
import zlib

import pytest

import _formats as F
from _formats import CALLS, Call, function_call, gemini_chunk, gemini_sse, pa, vertex_args, vertex_open
from _streams import dumps, random_cuts

VARIANTS = list(F.VARIANTS)
TEXT = "Sure — let me check that for you. 東京 😀"
REASONING = "The user wants the weather; I should call get_weather."


def fmt(variant):
    return F.format_of(variant)


def calls_of(result):
    """Return the calls as (id, name, arguments, raw_arguments, error as (kind, offset, message) or None)."""
    return [(c.id, c.name, c.arguments, c.raw_arguments,
             None if c.error is None else (c.error.kind, c.error.offset, str(c.error))) for c in result.tool_calls]


def want(variant, calls):
    return [(F.expected_id(variant, c), c.name, c.value, F.expected_raw(variant, c), None) for c in calls]


def split_feed(impl, body, format, cuts):
    acc = impl.Accumulator(format=format)
    last = 0
    for c in list(cuts) + [len(body)]:
        acc.feed(body[last:c])
        last = c
    return acc.finalize()


def assert_splits_agree(impl, body, format, seeds=range(8)):
    whole = impl.reassemble(body, format=format)
    for seed in seeds:
        got = split_feed(impl, body, format, random_cuts(len(body), seed, max_cuts=60))
        assert got == whole, seed
    assert split_feed(impl, body, format, range(1, len(body))) == whole, "byte by byte"
    return whole


# ---------------------------------------------------------------- calls, every format


@pytest.mark.parametrize("variant", VARIANTS)
def test_single_call(impl, variant):
    result = impl.reassemble(F.build(variant, CALLS[:1]), format=fmt(variant))
    assert calls_of(result) == want(variant, CALLS[:1])
    assert [(c.choice, c.index, c.quirks) for c in result.tool_calls] == [(0, 0, ())]
    assert result.errors == []
    assert result.complete is True
    assert result.format == fmt(variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_parallel_calls(impl, variant):
    result = impl.reassemble(F.build(variant, CALLS), format=fmt(variant))
    assert calls_of(result) == want(variant, CALLS)
    assert [(c.choice, c.index) for c in result.tool_calls] == [(0, 0), (0, 1), (0, 2)]
    assert result.errors == []
    assert result.complete is True


@pytest.mark.parametrize("variant", F.INTERLEAVING)
def test_interleaved_fragments(impl, variant):
    body = F.build(variant, CALLS, interleave=True)
    result = impl.reassemble(body, format=fmt(variant))
    assert calls_of(result) == want(variant, CALLS)
    assert [c.index for c in result.tool_calls] == [0, 1, 2]
    assert result.errors == []
    # the same calls as when sent one after another
    assert result == impl.reassemble(F.build(variant, CALLS), format=fmt(variant))


@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_arguments(impl, variant):
    calls = [Call("call_e0", "list_files", ""), CALLS[0]]
    result = impl.reassemble(F.build(variant, calls), format=fmt(variant))
    first = result.tool_calls[0]
    assert (first.id, first.name, first.arguments, first.error) == (F.expected_id(variant, calls[0]), "list_files",
                                                                    {}, None)
    assert first.raw_arguments == ("{}" if variant in F.WHOLE else "")
    assert calls_of(result)[1:] == want(variant, calls[1:])
    assert result.errors == []


@pytest.mark.parametrize("variant", F.STREAMING)
@pytest.mark.parametrize("cut", [1, 3])
def test_truncated_mid_arguments(impl, variant, cut):
    body = F.build(variant, CALLS[:2], cut=cut)
    result = impl.reassemble(body, format=fmt(variant))
    assert calls_of(result)[:1] == want(variant, CALLS[:1])
    last = result.tool_calls[-1]
    assert len(result.tool_calls) == 2
    assert (last.id, last.name) == (CALLS[1].id, CALLS[1].name)
    assert last.arguments is None
    assert last.error is not None and last.error.kind == "truncated"
    assert last.error.call_id == CALLS[1].id and last.error.name == CALLS[1].name
    assert last.raw_arguments == "".join(CALLS[1].pieces()[:cut])
    assert last.error.offset == len(last.raw_arguments.encode())
    assert result.errors == []
    assert result.complete is False
    assert result.finish_reason is None


@pytest.mark.parametrize("variant", F.STREAMING)
def test_truncated_inside_an_event(impl, variant):
    """A stream cut inside the event that carried the next piece: the call keeps what came whole."""
    body = F.build(variant, CALLS[:1], cut=3)
    shorter = F.build(variant, CALLS[:1], cut=2)
    assert body.startswith(shorter)
    cut_body = body[:len(shorter) + (len(body) - len(shorter)) // 2]
    result = impl.reassemble(cut_body, format=fmt(variant))
    (call,) = result.tool_calls
    assert call.arguments is None and call.error.kind == "truncated"
    assert call.raw_arguments == "".join(CALLS[0].pieces()[:2])
    assert [e.kind for e in result.errors] == ["malformed chunk"]
    assert result.errors[0].offset >= len(shorter)
    assert result.complete is False


@pytest.mark.parametrize("variant", F.WHOLE)
def test_whole_call_formats_cut_mid_chunk(impl, variant):
    """Gemini and Ollama send each call whole: a cut inside its chunk loses that chunk, reported, and no more."""
    body = F.build(variant, CALLS[:2])
    one = F.build(variant, CALLS[:1])
    # the bodies agree up to the second call's chunk
    common = next(i for i, (a, b) in enumerate(zip(body, one)) if a != b)
    common = body.rfind(b"\n", 0, common) + 1
    cut_body = body[:common + 40]
    result = impl.reassemble(cut_body, format=fmt(variant))
    assert calls_of(result) == want(variant, CALLS[:1])
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", common)]
    assert result.complete is False


# ---------------------------------------------------------------- in-band errors


def _error_offset_ok(variant, body, offset):
    if variant == "bedrock-eventstream":
        total = struct.unpack_from(">I", body, offset)[0]
        return offset + total == len(body)  # the exception is the last message
    if variant == "ollama":
        return body[offset:].startswith(b'{"error"')
    return body[offset:].startswith(b"data: ") and body.rfind(b"data: ") == offset


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "openai-responses"] +
                         ["openai-responses:error", "openai-responses:failed"])
def test_in_band_error(impl, variant):
    variant, _, how = variant.partition(":")
    body = F.build(variant, CALLS[:2], error=how or True)
    result = impl.reassemble(body, format=fmt(variant))
    assert calls_of(result) == want(variant, CALLS[:2])  # the calls before the error are kept
    assert [e.kind for e in result.errors] == ["in-band error"]
    error = result.errors[0]
    assert _error_offset_ok(variant, body, error.offset), error.offset
    message = {"anthropic": "Overloaded", "gemini": "internal error", "cohere": "model overloaded",
               "ollama": "unexpected EOF", "bedrock-eventstream": F.BEDROCK_ERROR[1],
               "bedrock-sse": F.BEDROCK_ERROR[1]}.get(variant) or (
        "server had an error" if how == "error" else "failed to generate")
    assert message.lower() in str(error).lower()
    if variant.startswith("bedrock"):
        assert F.BEDROCK_ERROR[0] in str(error)
    with pytest.raises(type(error)):
        impl.reassemble(body, format=fmt(variant), strict=True)


@pytest.mark.parametrize("variant", F.STREAMING)
def test_in_band_error_mid_call(impl, variant):
    """An error that cuts a call short: the call before is whole, the cut one truncated, the error reported."""
    body = F.build(variant, CALLS[:2], cut=2)
    if variant == "bedrock-eventstream":
        body += F.es_exception(*F.BEDROCK_ERROR)
    elif variant == "bedrock-sse":
        body += F.sse([(F.BEDROCK_ERROR[0], {"message": F.BEDROCK_ERROR[1]})])
    elif variant == "cohere":
        body += F.sse([("message-end", {"type": "message-end", "delta": {"finish_reason": "ERROR",
                                                                          "error": "stream interrupted"}})])
    else:
        body += F.sse([("error", {"type": "error", "error": {"type": "api_error", "message": "Internal error"}})])
    result = impl.reassemble(body, format=fmt(variant))
    assert calls_of(result)[:1] == want(variant, CALLS[:1])
    assert result.tool_calls[1].error.kind == "truncated"
    assert result.tool_calls[1].raw_arguments == "".join(CALLS[1].pieces()[:2])
    assert [e.kind for e in result.errors] == ["in-band error"]


def test_responses_failed_keeps_status(impl):
    result = impl.reassemble(F.responses_body(CALLS[:1], error="failed"), format="openai-responses")
    assert result.finish_reason == "failed"
    assert "server_error" in str(result.errors[0])


def test_responses_incomplete_reason(impl):
    body = F.responses_body(CALLS[:1]).replace(b'"response.completed"', b'"response.incomplete"')
    body = body.replace(b'"status":"completed","error":null,"incomplete_details":null',
                        b'"status":"incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}')
    result = impl.reassemble(body, format="openai-responses")
    assert result.finish_reason == "max_output_tokens"
    assert calls_of(result) == want("openai-responses", CALLS[:1])


# ---------------------------------------------------------------- the whole message


@pytest.mark.parametrize("variant", VARIANTS)
def test_whole_message(impl, variant):
    body = F.build(variant, CALLS[:2], text=TEXT, reasoning=REASONING)
    result = impl.reassemble(body, format=fmt(variant))
    assert result.text == TEXT
    assert result.reasoning == REASONING
    assert result.refusal is None
    assert result.finish_reason == F.FINISH[variant]
    assert result.usage == F.USAGE[variant]
    assert result.format == fmt(variant)
    assert result.complete is True
    assert result.errors == []
    assert calls_of(result) == want(variant, CALLS[:2])
    (choice,) = result.choices
    assert (choice.index, choice.text, choice.reasoning, choice.finish_reason) == (0, TEXT, REASONING,
                                                                                   F.FINISH[variant])
    assert choice.tool_calls == result.tool_calls


@pytest.mark.parametrize("variant", VARIANTS)
def test_text_only_message(impl, variant):
    body = F.build(variant, [], text=TEXT)
    result = impl.reassemble(body, format=fmt(variant))
    assert result.tool_calls == []
    assert result.text == TEXT
    assert result.reasoning is None
    assert result.errors == []
    assert result.complete is True


# ---------------------------------------------------------------- server-side tools are not client calls


def test_responses_server_side_items(impl):
    items = [
        {"id": "ws_01", "type": "web_search_call", "action": {"type": "search", "query": "weather Paris"}},
        {"id": "tsc_01", "type": "tool_search_call", "arguments": {"paths": ["get_weather"]}, "call_id": None,
         "execution": "server"},
        {"id": "tso_01", "type": "tool_search_output", "call_id": None, "execution": "server", "tools": []},
    ]
    result = impl.reassemble(F.responses_body(CALLS[:1], extra_items=items), format="openai-responses")
    assert calls_of(result) == want("openai-responses", CALLS[:1])
    assert result.tool_calls[0].index == 0
    assert result.errors == []


def test_anthropic_server_tool_use(impl):
    server = Call("srvtoolu_01S5swZdBmTzLDVzwcT5LbHp", "web_search", '{"query": "weather in Paris"}')
    result = impl.reassemble(F.anthropic_body(CALLS[:2], server_tools=[server]), format="anthropic")
    assert calls_of(result) == want("anthropic", CALLS[:2])
    assert [c.index for c in result.tool_calls] == [0, 1]
    assert result.errors == []


@pytest.mark.parametrize("framing", ["eventstream", "sse"])
def test_bedrock_server_tool_use(impl, framing):
    server = Call("tooluse_VQNZJRUFMoqZzszVsRd4og", "nova_code_interpreter", '{"snippet": "1234 * 5678"}')
    result = impl.reassemble(F.bedrock_body(CALLS[:1], framing=framing, server_tools=[server]), format="bedrock")
    assert calls_of(result) == want("bedrock-" + framing, CALLS[:1])
    assert result.tool_calls[0].index == 0
    assert result.errors == []


# ---------------------------------------------------------------- Anthropic details


def test_anthropic_input_on_the_start_block(impl):
    """A tool_use block that streams no input_json_delta keeps the input its start event carried."""
    call = Call("toolu_01", "get_weather", "")
    result = impl.reassemble(F.anthropic_body([call], start_input={"city": "Paris"}), format="anthropic")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("toolu_01", "get_weather",
                                                                        {"city": "Paris"})]


def test_anthropic_start_input_survives_an_empty_delta(impl):
    """An empty input_json_delta streams no input: the input the start block carried still stands."""
    body = F.sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                                "content": [], "usage": {"input_tokens": 5}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_stop", {"type": "message_stop"}),
    ])
    result = impl.reassemble(body, format="anthropic")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("toolu_1", "get_weather", {"city": "Paris"})]


def test_anthropic_empty_input_json_delta_only(impl):
    body = F.sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                                "content": [], "usage": {"input_tokens": 5}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                           "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ])
    result = impl.reassemble(body, format="anthropic")
    assert calls_of(result) == [("toolu_1", "now", {}, "", None)]
    assert result.usage == {"input_tokens": 5, "output_tokens": 3}


# ---------------------------------------------------------------- Gemini details


def test_gemini_several_calls_in_one_chunk(impl):
    body = F.gemini_body(CALLS, one_chunk=True)
    result = impl.reassemble(body, format="gemini")
    assert calls_of(result) == want("gemini", CALLS)
    assert [c.index for c in result.tool_calls] == [0, 1, 2]
    assert result == impl.reassemble(F.gemini_body(CALLS), format="gemini")


def test_gemini_call_with_id(impl):
    result = impl.reassemble(F.gemini_body(CALLS[:2], with_ids=True), format="gemini")
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [(c.id, c.name, c.value) for c in CALLS[:2]]


def test_gemini_call_without_args(impl):
    body = gemini_sse([gemini_chunk([function_call("now")]),
                       gemini_chunk([{"text": ""}], finish="STOP", usage=F.GEMINI_USAGE)])
    result = impl.reassemble(body, format="gemini")
    assert calls_of(result) == [(None, "now", {}, "", None)]


def test_gemini_body_is_crlf_framed(impl):
    body = F.gemini_body(CALLS[:1])
    assert b"\r\n\r\n" in body and b"\n\n" not in body.replace(b"\r\n", b"")
    assert calls_of(impl.reassemble(body, format="gemini")) == want("gemini", CALLS[:1])


def test_gemini_two_candidates(impl):
    body = gemini_sse([
        {"candidates": [{"content": {"role": "model", "parts": [function_call("a", {"x": 1})]}, "index": 0},
                        {"content": {"role": "model", "parts": [function_call("b", {"y": 2})]}, "index": 1}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0},
                        {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "MAX_TOKENS",
                         "index": 1}]},
    ])
    result = impl.reassemble(body, format="gemini")
    assert [(c.choice, c.index, c.name, c.arguments) for c in result.tool_calls] == [(0, 0, "a", {"x": 1}),
                                                                                      (1, 0, "b", {"y": 2})]
    assert [ch.finish_reason for ch in result.choices] == ["STOP", "MAX_TOKENS"]


def _vertex(parts_per_chunk, *, close=True, finish=True):
    chunks = [gemini_chunk(parts) for parts in parts_per_chunk]
    if close:
        chunks.append(gemini_chunk([F.VERTEX_CLOSE], finish="STOP" if finish else None, usage=F.GEMINI_USAGE))
    elif finish:
        chunks.append(gemini_chunk([{"text": ""}], finish="STOP", usage=F.GEMINI_USAGE))
    return gemini_sse(chunks)


VERTEX_NESTED = [
    [vertex_open("cookRecipe", id="fc_r1")],
    [vertex_args(pa("$.recipe.name", "Lasa", cont=True))],
    [vertex_args(pa("$.recipe.name", "gna ", cont=True))],
    [vertex_args(pa("$.recipe.name", "al forno"))],
    [vertex_args(pa("$.recipe.ingredients[0].name", "noodles"))],
    [vertex_args(pa("$.recipe.ingredients[0].grams", 500))],
    [vertex_args(pa("$.recipe.ingredients[1].name", "ricotta"), pa("$.recipe.ingredients[1].grams", 250.5))],
    [{"functionCall": {"willContinue": True}}],
    [vertex_args(pa("$.recipe.vegetarian", True))],
    [vertex_args(pa("$.recipe.steps[0]", "Boil", cont=True))],
    [vertex_args(pa("$.recipe.steps[0]", " water", cont=True))],
    [vertex_args(pa("$.recipe.steps[0]", ""))],
    [vertex_args(pa("$.recipe.steps[1]", "Layer 東京 😀"))],
    [vertex_args(pa("$.recipe.note", None))],
    [vertex_args(pa("$['odd key'].v", False))],
]
VERTEX_NESTED_VALUE = {
    "recipe": {"name": "Lasagna al forno",
               "ingredients": [{"name": "noodles", "grams": 500}, {"name": "ricotta", "grams": 250.5}],
               "vegetarian": True, "steps": ["Boil water", "Layer 東京 😀"], "note": None},
    "odd key": {"v": False},
}


def test_vertex_partial_args(impl):
    result = impl.reassemble(_vertex(VERTEX_NESTED), format="gemini")
    assert [(c.id, c.name, c.arguments, c.error) for c in result.tool_calls] == [
        ("fc_r1", "cookRecipe", VERTEX_NESTED_VALUE, None)]
    assert json.loads(result.tool_calls[0].raw_arguments) == VERTEX_NESTED_VALUE
    assert result.errors == []
    assert result.complete is True
    assert result.finish_reason == "STOP"


def test_vertex_bare_will_continue_does_not_end_the_call(impl):
    parts = [
        [vertex_open("f")],
        [vertex_args(pa("$.a", "x"))],
        [{"functionCall": {"willContinue": True}}],
        [{"functionCall": {"willContinue": True}}],
        [vertex_args(pa("$.b", 2))],
    ]
    result = impl.reassemble(_vertex(parts), format="gemini")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("f", {"a": "x", "b": 2})]
    assert result.errors == []


@pytest.mark.parametrize("finish", [True, False], ids=["finish", "no-finish"])
def test_vertex_stream_ends_without_the_closing_call(impl, finish):
    result = impl.reassemble(_vertex(VERTEX_NESTED, close=False, finish=finish), format="gemini")
    assert [(c.name, c.arguments, c.error) for c in result.tool_calls] == [
        ("cookRecipe", VERTEX_NESTED_VALUE, None)]
    assert result.complete is finish


def test_vertex_cut_inside_a_continued_string(impl):
    parts = [
        [vertex_open("writeItems")],
        [vertex_args(pa("$.items[0].name", "apple"))],
        [vertex_args(pa("$.items[0].price", 0.5))],
        [vertex_args(pa("$.items[1].name", "Ripe yel", cont=True))],
        [vertex_args(pa("$.items[1].name", "low ban", cont=True))],
    ]
    result = impl.reassemble(_vertex(parts, close=False, finish=False), format="gemini")
    (call,) = result.tool_calls
    assert call.name == "writeItems"
    assert call.arguments is None
    assert call.error is not None and call.error.kind == "truncated"
    assert call.raw_arguments == '{"items":[{"name":"apple","price":0.5},{"name":"Ripe yellow ban'
    assert result.complete is False


def test_vertex_sequential_calls_and_a_whole_one(impl):
    parts = [
        [vertex_open("first")],
        [vertex_args(pa("$.q", "one"))],
        [F.VERTEX_CLOSE],
        [vertex_open("second")],
        [vertex_args(pa("$.list[1]", 2), pa("$.list[0]", 1))],
        [F.VERTEX_CLOSE],
        [function_call("third", {"whole": True})],
    ]
    result = impl.reassemble(_vertex(parts, close=False), format="gemini")
    assert [(c.name, c.arguments, c.index) for c in result.tool_calls] == [
        ("first", {"q": "one"}, 0), ("second", {"list": [1, 2]}, 1), ("third", {"whole": True}, 2)]
    assert result.errors == []


def test_vertex_open_call_closed_by_the_next_named_call(impl):
    parts = [
        [vertex_open("first")],
        [vertex_args(pa("$.q", "one"))],
        [vertex_open("second")],
        [vertex_args(pa("$.r", "two"))],
    ]
    result = impl.reassemble(_vertex(parts), format="gemini")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("first", {"q": "one"}), ("second", {"r": "two"})]


def test_vertex_no_args_call(impl):
    parts = [[vertex_open("ping")]]
    result = impl.reassemble(_vertex(parts), format="gemini")
    assert calls_of(result) == [(None, "ping", {}, "{}", None)]


def test_vertex_capture_like_shape(impl):
    """The shape of the recorded Vertex stream: each string closed by an empty stringValue."""
    parts = [[vertex_open("cookRecipe")]]
    for i, (amount, name) in enumerate([("16 oz", "Lasagna noodles"), ("1 lb", "Ground beef")]):
        parts += [[vertex_args(pa(f"$.recipe.ingredients[{i}].amount", amount, cont=True))],
                  [vertex_args(pa(f"$.recipe.ingredients[{i}].amount", ""))],
                  [vertex_args(pa(f"$.recipe.ingredients[{i}].name", name, cont=True))],
                  [vertex_args(pa(f"$.recipe.ingredients[{i}].name", ""))],
                  [{"functionCall": {"willContinue": True}}]]
    result = impl.reassemble(_vertex(parts), format="gemini")
    assert result.tool_calls[0].arguments == {"recipe": {"ingredients": [
        {"amount": "16 oz", "name": "Lasagna noodles"}, {"amount": "1 lb", "name": "Ground beef"}]}}


# ---------------------------------------------------------------- Bedrock: the binary framing


def test_eventstream_encoder_matches_a_capture():
    """The test encoder writes exactly the bytes AWS does (checked against the recorded stream)."""
    import os

    from callstitch._wire.framing import parse_headers

    path = os.path.join(os.path.dirname(__file__), "fixtures", "captures",
                        "bedrock__pydantic-ai__converse-nova-tool.eventstream")
    data = open(path, "rb").read()
    pos = 0
    while pos < len(data):
        total, hlen = struct.unpack_from(">II", data, pos)
        message = data[pos:pos + total]
        headers = parse_headers(message[12:12 + hlen])
        assert F.eventstream_message(headers, message[12 + hlen:-4]) == message
        pos += total


def _messages(body):
    """Return the (offset, length) of each event-stream message in body."""
    out, pos = [], 0
    while pos < len(body):
        total = struct.unpack_from(">I", body, pos)[0]
        out.append((pos, total))
        pos += total
    return out


def _bedrock_parts():
    events = F.bedrock_events(CALLS[:2])
    return events, [F.es_event(n, o) for n, o in events]


def test_eventstream_bad_crc_is_reported_and_the_next_message_processed(impl):
    events, messages = _bedrock_parts()
    # damage the payload of the second argument delta of call 0: its CRC no longer matches
    k = next(i for i, (n, o) in enumerate(events) if n == "contentBlockDelta") + 1
    assert events[k][0] == "contentBlockDelta" and events[k][1]["contentBlockIndex"] == 0
    bad = bytearray(messages[k])
    bad[-10] ^= 0x01
    body = b"".join(messages[:k]) + bytes(bad) + b"".join(messages[k + 1:])
    offset = len(b"".join(messages[:k]))
    result = impl.reassemble(body, format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", offset)]
    assert "CRC" in str(result.errors[0])
    # The damaged message held a piece of call 0: it is cut there (never holed, never guessed);
    # everything after it still comes through.
    first, second = result.tool_calls
    assert first.raw_arguments == CALLS[0].pieces()[0] and first.arguments is None
    assert first.error.kind == "truncated" and "could not be read" in first.error.detail
    assert calls_of(result)[1:] == want("bedrock-eventstream", CALLS[1:2])
    assert result.complete is True and result.usage == F.BEDROCK_USAGE
    assert_splits_agree(impl, body, "bedrock")


def test_eventstream_bad_header_crc_of_a_call_start(impl):
    events, messages = _bedrock_parts()
    k = [i for i, (n, o) in enumerate(events) if n == "contentBlockStart"][1]
    bad = bytearray(messages[k])
    bad[20] ^= 0x40  # inside the headers: the message CRC catches it
    body = b"".join(messages[:k]) + bytes(bad) + b"".join(messages[k + 1:])
    result = impl.reassemble(body, format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(b"".join(messages[:k])))]
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:1])  # the second call never started


@pytest.mark.parametrize("damage", ["total", "headers-length", "prelude-crc"])
def test_eventstream_damaged_prelude_resyncs(impl, damage):
    events, messages = _bedrock_parts()
    k = next(i for i, (n, o) in enumerate(events) if n == "contentBlockDelta") + 1
    bad = bytearray(messages[k])
    bad[{"total": 2, "headers-length": 6, "prelude-crc": 10}[damage]] ^= 0x10
    body = b"".join(messages[:k]) + bytes(bad) + b"".join(messages[k + 1:])
    offset = len(b"".join(messages[:k]))
    result = impl.reassemble(body, format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", offset)]
    first = result.tool_calls[0]  # the skipped bytes held a piece of it: cut there
    assert first.raw_arguments == CALLS[0].pieces()[0] and first.error.kind == "truncated"
    assert calls_of(result)[1:] == want("bedrock-eventstream", CALLS[1:2])
    assert result.complete is True


@pytest.mark.parametrize("damage", ["total", "prelude-crc"])
def test_eventstream_damaged_prelude_split_feeds(impl, damage):
    """Fed in pieces, a damaged prelude is still one error, and the result that of the whole body."""
    events, messages = _bedrock_parts()
    k = next(i for i, (n, o) in enumerate(events) if n == "contentBlockDelta") + 1
    bad = bytearray(messages[k])
    bad[{"total": 2, "prelude-crc": 10}[damage]] ^= 0x10
    body = b"".join(messages[:k]) + bytes(bad) + b"".join(messages[k + 1:])
    whole = impl.reassemble(body, format="bedrock")
    assert len(whole.errors) == 1
    for seed in range(5):
        assert split_feed(impl, body, "bedrock", random_cuts(len(body), seed, max_cuts=60)) == whole, seed
    assert split_feed(impl, body, "bedrock", range(1, len(body))) == whole


def test_eventstream_garbage_between_messages(impl):
    _events, messages = _bedrock_parts()
    junk = b"\x00\x00garbage-bytes-here!!"
    body = b"".join(messages[:3]) + junk + b"".join(messages[3:])
    result = impl.reassemble(body, format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(b"".join(messages[:3])))]
    # Bytes skipped may have been a message of a call still open: that call is cut; the next is whole.
    assert [c.error.kind if c.error else None for c in result.tool_calls] == ["truncated", None]
    assert result.tool_calls[0].raw_arguments == "".join(o["delta"]["toolUse"]["input"] for n, o in _events[:3]
                                                         if n == "contentBlockDelta")
    assert calls_of(result)[1:] == want("bedrock-eventstream", CALLS[1:2])


def test_eventstream_cut_inside_a_message(impl):
    _events, messages = _bedrock_parts()
    body = F.bedrock_body(CALLS[:2], cut=2)
    n = len(body)
    extra = F.es_event("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"toolUse": {"input": "zz"}}})
    result = impl.reassemble(body + extra[:30], format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", n)]
    assert result.tool_calls[1].raw_arguments == "".join(CALLS[1].pieces()[:2])
    assert result.tool_calls[1].error.kind == "truncated"


def test_eventstream_exception_message(impl):
    body = F.bedrock_body(CALLS[:1], error=True)
    last_offset, _ = _messages(body)[-1]
    result = impl.reassemble(body, format="bedrock")
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:1])
    assert [(e.kind, e.offset) for e in result.errors] == [("in-band error", last_offset)]
    assert "modelStreamErrorException" in str(result.errors[0])


def test_eventstream_exception_then_more_messages(impl):
    """An exception message is reported; messages after it are still read."""
    _events, messages = _bedrock_parts()
    k = 4
    body = b"".join(messages[:k]) + F.es_exception("throttlingException", "Too many requests") + b"".join(
        messages[k:])
    result = impl.reassemble(body, format="bedrock")
    assert [e.kind for e in result.errors] == ["in-band error"]
    assert "throttlingException" in str(result.errors[0])
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:2])


def test_eventstream_boto3_shape_as_chunks(impl):
    """boto3 hands each event as a one-key dict: feed_chunk takes those."""
    acc = impl.Accumulator(format="bedrock")
    for name, obj in F.bedrock_events(CALLS[:2], text=TEXT):
        acc.feed_chunk({name: obj})
    result = acc.finalize()
    assert result == impl.reassemble(F.bedrock_body(CALLS[:2], text=TEXT), format="bedrock")
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:2])


def test_eventstream_and_sse_forms_agree(impl):
    a = impl.reassemble(F.bedrock_body(CALLS, text=TEXT, reasoning=REASONING), format="bedrock")
    b = impl.reassemble(F.bedrock_body(CALLS, text=TEXT, reasoning=REASONING, framing="sse"), format="bedrock")
    assert calls_of(a) == calls_of(b) and a.text == b.text and a.usage == b.usage


# ---------------------------------------------------------------- Cohere and Ollama details


def test_cohere_integer_index_ids(impl):
    result = impl.reassemble(F.cohere_body(CALLS), format="cohere")
    assert [c.id for c in result.tool_calls] == [c.id for c in CALLS]


def test_cohere_event_error(impl):
    body = F.cohere_body(CALLS[:1])
    body = body[:body.index(b"event: message-end")] + F.sse(
        [("error", {"type": "error", "message": "upstream connect error"})])
    result = impl.reassemble(body, format="cohere")
    assert calls_of(result) == want("cohere", CALLS[:1])
    assert [e.kind for e in result.errors] == ["in-band error"]


def test_ollama_calls_in_one_line(impl):
    result = impl.reassemble(F.ollama_body(CALLS, one_line=True), format="ollama")
    assert calls_of(result) == want("ollama", CALLS)
    assert result == impl.reassemble(F.ollama_body(CALLS), format="ollama")


def test_ollama_ids(impl):
    result = impl.reassemble(F.ollama_body(CALLS[:2], with_ids=True), format="ollama")
    assert [c.id for c in result.tool_calls] == [c.id for c in CALLS[:2]]


def test_ollama_last_line_without_newline(impl):
    body = F.ollama_body(CALLS[:1])
    assert body.endswith(b"\n")
    assert impl.reassemble(body[:-1], format="ollama") == impl.reassemble(body, format="ollama")


def test_ollama_error_line_offset(impl):
    body = F.ollama_body(CALLS[:1], error=True)
    result = impl.reassemble(body, format="ollama")
    assert result.errors[0].offset == body.rindex(b'{"error"')


# ---------------------------------------------------------------- splits, auto, twins

SCENARIOS = {
    "calls": lambda v: F.build(v, CALLS),
    "message": lambda v: F.build(v, CALLS[:2], text=TEXT, reasoning=REASONING),
    "error": lambda v: F.build(v, CALLS[:2], error="error" if v == "openai-responses" else True),
    "empty": lambda v: F.build(v, [Call("call_e", "noop", "")]),
    "text-only": lambda v: F.build(v, [], text=TEXT),
}
SCENARIOS_STREAMING = {
    "truncated": lambda v: F.build(v, CALLS[:2], cut=2),
    "interleaved": lambda v: F.build(v, CALLS, interleave=v in F.INTERLEAVING),
}


def _cases():
    for v in VARIANTS:
        for name in SCENARIOS:
            yield pytest.param(v, SCENARIOS[name], id=f"{v}-{name}")
        if v in F.STREAMING:
            for name in SCENARIOS_STREAMING:
                yield pytest.param(v, SCENARIOS_STREAMING[name], id=f"{v}-{name}")
    yield pytest.param("gemini", lambda v: _vertex(VERTEX_NESTED), id="vertex-partialargs")
    yield pytest.param("gemini", lambda v: _vertex(VERTEX_NESTED[:3], close=False, finish=False),
                       id="vertex-cut-in-string")


CASES = list(_cases())


@pytest.mark.parametrize("variant,make", CASES)
def test_random_splits(impl, variant, make):
    assert_splits_agree(impl, make(variant), fmt(variant))


@pytest.mark.parametrize("variant,make", CASES)
def test_auto_detects_the_format(impl, variant, make):
    body = make(variant)
    named = impl.reassemble(body, format=fmt(variant))
    auto = impl.reassemble(body, format="auto")
    assert auto == named
    assert auto.format == fmt(variant)
    acc = impl.Accumulator(format="auto")
    for k in range(0, len(body), 7):
        acc.feed(body[k:k + 7])
    assert acc.finalize() == named


@pytest.mark.parametrize("variant,make", CASES)
def test_twins_agree(both, variant, make):
    body = make(variant)
    for name in (fmt(variant), "auto"):
        c, py = (i.reassemble(body, format=name) for i in both)
        assert c == py
        assert calls_of(c) == calls_of(py)
        assert [(e.kind, e.detail, e.offset) for e in c.errors] == [(e.kind, e.detail, e.offset) for e in py.errors]
        rng = random.Random(len(body))
        cuts = sorted(rng.sample(range(1, len(body)), min(30, len(body) - 1)))
        assert split_feed(both[0], body, name, cuts) == split_feed(both[1], body, name, cuts) == c


@pytest.mark.parametrize("variant,framing", [("openai-responses", "sse"), ("anthropic", "sse"), ("gemini", "sse"),
                                             ("bedrock-eventstream", "eventstream"), ("bedrock-sse", "sse"),
                                             ("cohere", "sse"), ("ollama", "ndjson")])
def test_auto_detects_the_framing(impl, variant, framing):
    body = F.build(variant, CALLS[:1])
    assert {"eventstream": body[:1] == b"\x00", "ndjson": body[:1] == b"{",
            "sse": body[:6] in (b"event:", b"data: ")}[framing]
    acc = impl.Accumulator(format="auto")
    acc.feed(body)
    result = acc.finalize()
    assert result.format == fmt(variant)
    assert calls_of(result) == want(variant, CALLS[:1])


def test_auto_bedrock_boto3_shape_as_ndjson(impl):
    """Bedrock events logged one JSON object per line (boto3's one-key shape) are read as NDJSON."""
    body = F.ndjson({name: obj} for name, obj in F.bedrock_events(CALLS[:2]))
    for name in ("auto", "bedrock"):
        result = impl.reassemble(body, format=name)
        assert calls_of(result) == want("bedrock-eventstream", CALLS[:2])
        assert result.format == "bedrock"


def test_auto_eventstream_fed_in_tiny_pieces(impl):
    """The framing is told from the first 12 bytes even when they come one at a time."""
    body = F.bedrock_body(CALLS[:2])
    acc = impl.Accumulator(format="auto")
    for k in range(len(body)):
        acc.feed(body[k:k + 1])
    assert acc.finalize() == impl.reassemble(body, format="bedrock")


@pytest.mark.parametrize("format", ["bedrock", "auto"])
@pytest.mark.parametrize("damage", ["total", "prelude-crc"])
def test_eventstream_damaged_first_prelude(impl, format, damage):
    """The very first message damaged: still an event stream, reported, and the rest read."""
    events, messages = _bedrock_parts()
    bad = bytearray(messages[0])
    bad[{"total": 2, "prelude-crc": 10}[damage]] ^= 0x10
    body = bytes(bad) + b"".join(messages[1:])
    result = impl.reassemble(body, format=format)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", 0)]
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:2])
    assert result.format == "bedrock"
    assert result.complete is True


def test_eventstream_error_message_type(impl):
    """A message of type "error" (error code and message in headers, no payload) is an in-band error."""
    _events, messages = _bedrock_parts()
    error = F.eventstream_message({":message-type": "error", ":error-code": "InternalServerException",
                                   ":error-message": "Internal server error"}, b"")
    body = b"".join(messages[:-2]) + error
    result = impl.reassemble(body, format="bedrock")
    assert [(e.kind, e.offset) for e in result.errors] == [("in-band error", len(b"".join(messages[:-2])))]
    assert "InternalServerException" in str(result.errors[0]) and "Internal server error" in str(result.errors[0])
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:2])


def test_eventstream_other_header_types(impl):
    """Headers of other types (timestamp, int32, bool, bytes, uuid) are read past, not mistaken."""
    extra = (bytes([5]) + b":date" + b"\x08" + struct.pack(">q", 1700000000000)
             + bytes([4]) + b"seqn" + b"\x04" + struct.pack(">i", 7)
             + bytes([4]) + b"flag" + b"\x00"
             + bytes([3]) + b"bin" + b"\x06" + struct.pack(">H", 3) + b"\x00\x01\x02"
             + bytes([4]) + b"uuid" + b"\x09" + bytes(range(16)))
    messages = []
    for name, obj in F.bedrock_events(CALLS[:1]):
        head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v)) + v.encode()
                        for k, v in {":event-type": name, ":content-type": "application/json",
                                     ":message-type": "event"}.items()) + extra
        payload = dumps(obj)
        prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
        prelude += struct.pack(">I", zlib.crc32(prelude))
        m = prelude + head + payload
        messages.append(m + struct.pack(">I", zlib.crc32(m)))
    result = impl.reassemble(b"".join(messages), format="bedrock")
    assert calls_of(result) == want("bedrock-eventstream", CALLS[:1])
    assert result.errors == []


def test_auto_bedrock_sse_exception_first(impl):
    """Under auto, a Bedrock exception event (named ...Exception) is an in-band error even before detection."""
    body = F.sse([("throttlingException", {"message": "Too many requests, please wait before trying again."})])
    named = impl.reassemble(body, format="bedrock")
    auto = impl.reassemble(body, format="auto")
    assert [e.kind for e in named.errors] == ["in-band error"]
    assert [e.kind for e in auto.errors] == ["in-band error"]


@pytest.mark.parametrize("variant", ["anthropic", "ollama", "gemini"])
def test_auto_in_band_error_first(impl, variant):
    """A stream that fails before its first event still reports an in-band error under auto."""
    body = F.build(variant, [], error=True)
    body = {"anthropic": lambda b: b[b.index(b"event: error"):],
            "ollama": lambda b: b[b.index(b'{"error"'):],
            "gemini": lambda b: b[b.index(b'data: {"error"'):]}[variant](body)
    assert [e.kind for e in impl.reassemble(body, format="auto").errors] == ["in-band error"]
    assert [e.kind for e in impl.reassemble(body, format=fmt(variant)).errors] == ["in-band error"]


def test_responses_arguments_only_in_done_events(impl):
    """A server that sends no deltas: the arguments come from function_call_arguments.done / output_item.done."""
    body = F.responses_body(CALLS[:2])
    lines = [e for e in body.split(b"\n\n") if b"function_call_arguments.delta" not in e]
    result = impl.reassemble(b"\n\n".join(lines), format="openai-responses")
    assert calls_of(result) == want("openai-responses", CALLS[:2])
    only_item_done = [e for e in lines if b"function_call_arguments.done" not in e]
    result = impl.reassemble(b"\n\n".join(only_item_done), format="openai-responses")
    assert calls_of(result) == want("openai-responses", CALLS[:2])


def test_responses_done_does_not_double_the_arguments(impl):
    result = impl.reassemble(F.responses_body(CALLS[:1]), format="openai-responses")
    assert result.tool_calls[0].raw_arguments == CALLS[0].arguments
    assert result.tool_calls[0].quirks == ()


def test_responses_refusal(impl):
    body = F.sse([
        ("response.created", {"type": "response.created", "response": F._response("in_progress")}),
        ("response.refusal.delta", {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0,
                                    "content_index": 0, "delta": "I can't "}),
        ("response.refusal.delta", {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0,
                                    "content_index": 0, "delta": "help with that."}),
        ("response.completed", {"type": "response.completed", "response": F._response("completed")}),
    ])
    result = impl.reassemble(body, format="openai-responses")
    assert result.refusal == "I can't help with that."
    assert result.text is None and result.tool_calls == [] and result.complete is True
