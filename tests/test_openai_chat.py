"""The openai-chat format: fragments to calls, the message around them, bad input. Both twins."""

import json

import pytest

from _streams import (DONE, MISSING, bytewise, call_obj, choice_obj, chunk, chunk_obj, dumps, finish, summary,
                      text_delta, tool_delta, tool_deltas)

import callstitch


def _stream(*events, done=True):
    return b"".join(events) + (DONE if done else b"")


def _one(result):
    assert len(result.tool_calls) == 1, result
    return result.tool_calls[0]


# ---------------------------------------------------------------- id, name, arguments


def test_single_call(impl):
    body = _stream(
        chunk([text_delta(role="assistant", content=None, refusal=None)]),
        chunk([tool_delta(0, id="call_abc", name="get_weather", arguments="")]),
        chunk([tool_delta(0, arguments='{"lo')]),
        chunk([tool_delta(0, arguments='cation": "Par')]),
        chunk([tool_delta(0, arguments='is, France"}')]),
        chunk([finish("tool_calls")]),
    )
    result = impl.reassemble(body)
    call = _one(result)
    assert (call.id, call.name, call.choice, call.index) == ("call_abc", "get_weather", 0, 0)
    assert call.arguments == {"location": "Paris, France"}
    assert call.raw_arguments == '{"location": "Paris, France"}'
    assert call.error is None
    assert call.quirks == ()
    assert result.errors == []
    assert result.complete is True
    assert result.finish_reason == "tool_calls"
    assert result.format == "openai-chat"


def test_id_and_name_set_only_from_non_empty_values(impl):
    body = _stream(
        chunk([tool_delta(0, id="", name="", arguments="")]),
        chunk([tool_delta(0, id="call_1", arguments='{"a"')]),
        chunk([tool_delta(0, id="", name="lookup", arguments=": ")]),
        chunk([tool_delta(0, id=None, name=None, arguments="1}")]),
        chunk([choice_obj({"tool_calls": [{"index": 0, "id": None, "function": {"name": None, "arguments": None}}]})]),
    )
    call = _one(impl.reassemble(body))
    assert (call.id, call.name, call.arguments) == ("call_1", "lookup", {"a": 1})


def test_id_and_name_never_concatenated_nor_cleared(impl):
    body = _stream(
        chunk([tool_delta(0, id="call_1", name="lookup", arguments='{"a"')]),
        chunk([tool_delta(0, id="call_1", name="lookup", arguments=': 1')]),
        chunk([tool_delta(0, id="", name="", arguments="}")]),
        chunk([choice_obj({"tool_calls": [{"index": 0, "id": None, "function": {"name": None}}]})]),
    )
    call = _one(impl.reassemble(body))
    assert (call.id, call.name, call.arguments) == ("call_1", "lookup", {"a": 1})


def test_name_arrives_after_arguments(impl):
    body = _stream(
        chunk([tool_delta(0, id="call_1", arguments='{"a": ')]),
        chunk([tool_delta(0, name="late", arguments="2}")]),
    )
    call = _one(impl.reassemble(body))
    assert (call.id, call.name, call.arguments) == ("call_1", "late", {"a": 2})


@pytest.mark.parametrize("arguments", [MISSING, None, ""], ids=["absent", "null", "empty"])
def test_empty_arguments_give_empty_object(impl, arguments):
    call = call_obj(0, "call_1", "get_time", arguments)
    body = _stream(chunk([tool_deltas(call)]), chunk([finish()]))
    result = impl.reassemble(body)
    c = _one(result)
    assert c.arguments == {}
    assert c.raw_arguments == ""
    assert c.error is None
    assert result.errors == []


def test_whitespace_arguments_give_empty_object(impl):
    body = _stream(chunk([tool_delta(0, id="call_1", name="f", arguments=" ")]),
                   chunk([tool_delta(0, arguments="\n")]))
    c = _one(impl.reassemble(body))
    assert c.arguments == {}
    assert c.error is None


def test_no_function_at_all(impl):
    body = _stream(chunk([tool_deltas({"index": 0, "id": "call_1", "type": "function"})]))
    c = _one(impl.reassemble(body))
    assert (c.id, c.name, c.arguments) == ("call_1", None, {})


def test_arguments_parsed_once_whole(impl):
    # Each fragment alone is not JSON; only the whole is.
    text = '{"query": "SELECT * FROM t WHERE a = \\"x\\"", "limit": 10, "nested": {"k": [1, 2.5, null, true]}}'
    parts = [text[i:i + 3] for i in range(0, len(text), 3)]
    body = _stream(chunk([tool_delta(0, id="call_q", name="sql", arguments="")]),
                   *[chunk([tool_delta(0, arguments=p)]) for p in parts])
    c = _one(impl.reassemble(body))
    assert c.arguments == json.loads(text)
    assert c.raw_arguments == text


def test_parallel_calls_interleaved(impl):
    a = '{"city": "Paris"}'
    b = '{"ticker": "AAPL", "days": 3}'
    c = '{}'
    body = _stream(
        chunk([tool_delta(0, id="call_a", name="weather", arguments="")]),
        chunk([tool_delta(1, id="call_b", name="stock", arguments=b[:5])]),
        chunk([tool_delta(0, arguments=a[:4])]),
        chunk([tool_deltas(call_obj(1, arguments=b[5:12]), call_obj(0, arguments=a[4:9]))]),
        chunk([tool_delta(2, id="call_c", name="noop", arguments=c)]),
        chunk([tool_delta(0, arguments=a[9:])]),
        chunk([tool_delta(1, arguments=b[12:])]),
        chunk([finish()]),
    )
    result = impl.reassemble(body)
    assert summary(result) == [("call_a", "weather", {"city": "Paris"}),
                               ("call_b", "stock", {"ticker": "AAPL", "days": 3}), ("call_c", "noop", {})]
    assert [c.index for c in result.tool_calls] == [0, 1, 2]
    assert all(c.quirks == () for c in result.tool_calls)
    assert bytewise(impl, body) == result


def test_calls_ordered_by_first_appearance_not_index(impl):
    body = _stream(
        chunk([tool_delta(1, id="call_b", name="second_index_first", arguments="{}")]),
        chunk([tool_delta(0, id="call_a", name="first_index_second", arguments="{}")]),
    )
    result = impl.reassemble(body)
    assert [(c.id, c.index) for c in result.tool_calls] == [("call_b", 0), ("call_a", 1)]


def test_n_choices(impl):
    body = _stream(
        chunk([tool_delta(0, id="c1a", name="f", arguments='{"x":', choice=1)]),
        chunk([tool_delta(0, id="c0a", name="g", arguments='{"y":', choice=0)]),
        chunk([tool_delta(1, id="c1b", name="h", arguments='{}', choice=1),
               tool_delta(0, arguments=' 0}', choice=0)]),
        chunk([tool_delta(0, arguments=' 1}', choice=1)]),
        chunk([text_delta(choice=2, content="just text")]),
        chunk([finish("tool_calls", 0), finish("tool_calls", 1), finish("stop", 2)]),
    )
    result = impl.reassemble(body)
    assert [(c.choice, c.index, c.id, c.arguments) for c in result.tool_calls] == [
        (0, 0, "c0a", {"y": 0}), (1, 0, "c1a", {"x": 1}), (1, 1, "c1b", {})]
    assert [ch.index for ch in result.choices] == [0, 1, 2]
    assert [[c.id for c in ch.tool_calls] for ch in result.choices] == [["c0a"], ["c1a", "c1b"], []]
    assert [ch.finish_reason for ch in result.choices] == ["tool_calls", "tool_calls", "stop"]
    assert [ch.text for ch in result.choices] == [None, None, "just text"]
    assert result.choices[0].tool_calls == result.tool_calls[:1]
    assert result.choices[1].tool_calls == result.tool_calls[1:]
    assert result.errors == []


def test_same_call_index_in_two_choices_are_two_calls(impl):
    body = _stream(chunk([tool_delta(0, id="x", name="f", arguments='{"a": 1}', choice=0),
                          tool_delta(0, id="y", name="f", arguments='{"a": 2}', choice=1)]))
    result = impl.reassemble(body)
    assert [(c.choice, c.index, c.arguments) for c in result.tool_calls] == [(0, 0, {"a": 1}), (1, 0, {"a": 2})]


# ---------------------------------------------------------------- events with no tool call


def test_events_without_tool_calls_have_no_effect(impl):
    call_events = [
        chunk([tool_delta(0, id="call_1", name="f", arguments='{"k": ')]),
        chunk([tool_delta(0, arguments='"v"}')]),
    ]
    noise = [
        chunk([text_delta(role="assistant", content="")]),
        chunk([text_delta(content="Hello")]),
        chunk([text_delta(reasoning_content="thinking")]),
        chunk([text_delta(reasoning="more thinking")]),
        chunk([text_delta(refusal="no")]),
        chunk([], usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}),
        chunk(None),
        chunk([choice_obj()]),
        chunk([choice_obj(None)]),
        chunk([choice_obj({})]),
        chunk([choice_obj({"tool_calls": None})]),
        chunk([choice_obj({"tool_calls": []})]),
        chunk([choice_obj({"content": None, "tool_calls": None, "function_call": None, "refusal": None})]),
        dumps({"choices": [], "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {
            "hate": {"filtered": False, "severity": "safe"}}}]}).join([b"data: ", b"\n\n"]),
        chunk([choice_obj({}, content_filter_results={"violence": {"filtered": False, "severity": "safe"}})]),
        b": keep-alive\n\n",
        b": OPENROUTER PROCESSING\n\n",
        b"\n\n",
    ]
    plain = impl.reassemble(_stream(*call_events))
    for extra in noise:
        for position in range(3):
            events = list(call_events)
            events.insert(position, extra)
            result = impl.reassemble(_stream(*events))
            assert result.errors == [], extra
            assert result.tool_calls == plain.tool_calls, extra
            assert summary(result) == [("call_1", "f", {"k": "v"})]


def test_the_whole_message(impl):
    body = _stream(
        chunk([text_delta(role="assistant", content="", refusal=None)]),
        chunk([text_delta(reasoning_content="Let me ")]),
        chunk([text_delta(reasoning_content="think. ")]),
        chunk([text_delta(reasoning="Done.")]),
        chunk([text_delta(content="I'll check ")]),
        chunk([text_delta(content="the weather — 東京 😀.")]),
        chunk([tool_delta(0, id="call_1", name="weather", arguments='{"c": "Tokyo"}')]),
        chunk([text_delta(refusal="partly ")]),
        chunk([text_delta(refusal="refused")]),
        chunk([finish("tool_calls")]),
        chunk([], usage={"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}),
    )
    result = impl.reassemble(body)
    assert result.text == "I'll check the weather — 東京 😀."
    assert result.reasoning == "Let me think. Done."
    assert result.refusal == "partly refused"
    assert result.finish_reason == "tool_calls"
    assert result.usage == {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    assert len(result.choices) == 1
    ch = result.choices[0]
    assert (ch.index, ch.text, ch.reasoning, ch.refusal, ch.finish_reason) == (
        0, result.text, result.reasoning, result.refusal, "tool_calls")
    assert ch.tool_calls == result.tool_calls
    assert result.errors == []


def test_message_fields_absent(impl):
    result = impl.reassemble(_stream(chunk([tool_delta(0, id="a", name="f", arguments="{}")])))
    assert (result.text, result.reasoning, result.refusal, result.finish_reason, result.usage) == (
        None, None, None, None, None)


def test_empty_body_has_no_choices(impl):
    result = impl.reassemble(b"")
    assert result.choices == []
    assert (result.text, result.finish_reason) == (None, None)


def test_texts_per_choice(impl):
    body = _stream(chunk([text_delta(0, content="zero"), text_delta(1, content="one", reasoning_content="r1")]),
                   chunk([text_delta(1, content=" more")]))
    result = impl.reassemble(body)
    assert [(c.index, c.text, c.reasoning) for c in result.choices] == [(0, "zero", None), (1, "one more", "r1")]


def test_text_with_escaped_surrogate_pair_split_across_chunks(impl):
    body = (b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud83d"}}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00b"}}]}\n\n')
    result = impl.reassemble(body)
    assert result.text == "a😀b"
    assert result.errors == []


# ---------------------------------------------------------------- unicode


def test_multibyte_utf8_in_arguments(impl):
    value = {"text": "naïve café — 東京タワー 😀🇫🇷 ñ", "q": "\"quoted\" and \\backslash\\ and\nnewline\t"}
    text = json.dumps(value, ensure_ascii=False)
    raw = text.encode()
    # cut the UTF-8 text at character boundaries of the str: every fragment is a whole str
    parts = [text[i:i + 2] for i in range(0, len(text), 2)]
    body = _stream(chunk([tool_delta(0, id="call_u", name="echo", arguments="")]),
                   *[chunk([tool_delta(0, arguments=p)]) for p in parts])
    result = impl.reassemble(body)
    c = _one(result)
    assert c.arguments == value
    assert c.raw_arguments == text
    assert bytewise(impl, body) == result
    assert len(raw) > len(text)


def test_unicode_escapes_in_arguments(impl):
    value = {"text": "naïve 東京 😀 \u2028 \x01", "q": "\"\\/"}
    text = json.dumps(value, ensure_ascii=True)  # arguments text full of \\uXXXX escapes
    parts = [text[i:i + 5] for i in range(0, len(text), 5)]
    body = b"".join(chunk([tool_delta(0, id="call_e", name="echo", arguments=p)]) for p in parts)
    # ... and the chunk JSON itself escapes non-ASCII too (ensure_ascii)
    body2 = b"".join(b"data: " + json.dumps(chunk_obj([tool_delta(0, id="call_e", name="echo", arguments=p)]),
                                            ensure_ascii=True).encode() + b"\n\n" for p in parts)
    for b in (body, body2):
        c = _one(impl.reassemble(b))
        assert c.arguments == value
        assert c.raw_arguments == text


def test_surrogate_pair_escape_in_chunk_json(impl):
    # The chunk's own JSON carries "\ud83d\ude00" (one character) inside the arguments string.
    args = json.dumps({"e": "😀"}, ensure_ascii=False)
    payload = json.dumps(chunk_obj([tool_delta(0, id="call_s", name="emoji", arguments=args)]), ensure_ascii=True)
    assert "\\ud83d\\ude00" in payload
    c = _one(impl.reassemble(b"data: " + payload.encode() + b"\n\n"))
    assert c.arguments == {"e": "😀"}
    assert c.raw_arguments == args
    assert c.quirks == ()


def test_escaped_id_and_name(impl):
    payload = json.dumps(chunk_obj([tool_delta(0, id="call_é", name="función", arguments="{}")]), ensure_ascii=True)
    c = _one(impl.reassemble(b"data: " + payload.encode() + b"\n\n"))
    assert (c.id, c.name) == ("call_é", "función")


# ---------------------------------------------------------------- feed_chunk and add


def test_feed_chunk_dicts(impl):
    acc = impl.Accumulator()
    acc.feed_chunk(chunk_obj([text_delta(role="assistant", content="Hi")]))
    acc.feed_chunk(chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a"')]))
    acc.feed_chunk(chunk_obj([tool_delta(0, arguments=': [1, "東"]}')]))
    acc.feed_chunk(chunk_obj([finish()]))
    result = acc.finalize()
    assert summary(result) == [("call_1", "f", {"a": [1, "東"]})]
    assert result.text == "Hi"
    assert result.complete is True
    assert result.errors == []


@pytest.mark.parametrize("kind", ["str", "bytes"])
def test_feed_chunk_json_text(impl, kind):
    acc = impl.Accumulator()
    for obj in (chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": "é')]),
                chunk_obj([tool_delta(0, arguments='"}')])):
        text = json.dumps(obj, ensure_ascii=False)
        acc.feed_chunk(text if kind == "str" else text.encode())
    acc.feed_chunk("[DONE]")
    result = acc.finalize()
    assert summary(result) == [("call_1", "f", {"a": "é"})]
    assert result.complete is True


def test_feed_chunk_bad_json_text_is_reported_without_offset(impl):
    acc = impl.Accumulator()
    acc.feed_chunk('{"choices": [')
    acc.feed_chunk(chunk_obj([tool_delta(0, id="call_1", name="f", arguments="{}")]))
    result = acc.finalize()
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", None)]
    assert summary(result) == [("call_1", "f", {})]


def test_feed_chunk_rejects_other_types(impl):
    acc = impl.Accumulator()
    with pytest.raises(TypeError):
        acc.feed_chunk(object())
    with pytest.raises(TypeError):
        acc.feed_chunk({1, 2})
    acc.feed_chunk(42)  # a JSON value that is no chunk: reported, as its text "42" is
    assert [e.kind for e in acc.finalize().errors] == ["unexpected shape"]


def test_feed_chunk_sdk_object(impl):
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionChunk

    objs = [
        chunk_obj([text_delta(role="assistant", content="")]),
        chunk_obj([tool_delta(0, id="call_1", name="get_weather", arguments="")]),
        chunk_obj([tool_delta(1, id="call_2", name="get_time", arguments='{"tz": ')]),
        chunk_obj([tool_delta(0, arguments='{"city": "東京"}')]),
        chunk_obj([tool_delta(1, arguments='"UTC"}')]),
        chunk_obj([finish()]),
        chunk_obj([], usage={"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}),
    ]
    acc = impl.Accumulator()
    for obj in objs:
        acc.feed_chunk(ChatCompletionChunk.model_validate(obj))
    result = acc.finalize()
    assert summary(result) == [("call_1", "get_weather", {"city": "東京"}), ("call_2", "get_time", {"tz": "UTC"})]
    assert result.finish_reason == "tool_calls"
    assert result.complete is True
    assert result.errors == []
    assert result.usage["total_tokens"] == 11
    assert all(c.quirks == () for c in result.tool_calls)


def test_add(impl):
    acc = impl.Accumulator()
    acc.add(0, id="call_1", name="f", arguments="")
    acc.add(1, id="call_2", name="g", arguments='{"b"', choice=0)
    acc.add(0, arguments='{"a": 1}')
    acc.add(1, arguments=": 2}")
    acc.add(0, id="call_x", name="h", arguments="{}", choice=3)
    result = acc.finalize()
    assert [(c.choice, c.index, c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (0, 0, "call_1", "f", {"a": 1}), (0, 1, "call_2", "g", {"b": 2}), (3, 0, "call_x", "h", {})]
    assert result.complete is False


def test_add_bytes_arguments(impl):
    acc = impl.Accumulator()
    acc.add(0, id="c", name="f", arguments='{"t": "'.encode())
    acc.add(0, arguments="東京".encode())
    acc.add(0, arguments=bytearray(b'"}'))
    assert summary(acc.finalize()) == [("c", "f", {"t": "東京"})]


@pytest.mark.parametrize("index", ["0", 1.0, [0], b"0"])
def test_add_rejects_non_int_index(impl, index):
    acc = impl.Accumulator()
    with pytest.raises(TypeError):
        acc.add(index, id="a", name="f", arguments="{}")


def test_add_rejects_bad_choice_id_name(impl):
    acc = impl.Accumulator()
    with pytest.raises(TypeError):
        acc.add(0, choice="0")
    with pytest.raises(TypeError):
        acc.add(0, id=["a"])
    with pytest.raises(TypeError):
        acc.add(0, name=5)
    assert acc.finalize().tool_calls == []


def test_unknown_format(impl):
    with pytest.raises(ValueError, match="openai-chat"):
        impl.Accumulator(format="no-such-format")


# ---------------------------------------------------------------- bad input


def test_malformed_chunk_is_reported_and_skipped(impl):
    head = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": ')])
    bad = b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"argum\n\n'
    tail = chunk([tool_delta(0, arguments="1}")]) + chunk([tool_delta(1, id="call_2", name="g", arguments="{}")])
    result = impl.reassemble(head + bad + tail + DONE)
    # The chunk skipped held a piece of call_1 ("argum..."): call_1 is cut there, not {"a": 1},
    # which parses but is not what was sent; call_2, started after it, comes through whole.
    assert summary(result) == [("call_1", "f", None), ("call_2", "g", {})]
    assert result.tool_calls[0].raw_arguments == '{"a": ' and "could not be read" in result.tool_calls[0].error.detail
    assert len(result.errors) == 1
    err = result.errors[0]
    assert isinstance(err, callstitch.StreamError) and isinstance(err, ValueError)
    assert (err.kind, err.offset) == ("malformed chunk", len(head))
    assert str(len(head)) in str(err)
    assert result.complete is True


@pytest.mark.parametrize("payload", [b"not json", b"{", b"{}}", b'{"a": NaN}', b"\xff\xfe", b"[DONE"])
def test_malformed_payloads(impl, payload):
    head = chunk([tool_delta(0, id="call_1", name="f", arguments="{}")])
    result = impl.reassemble(head + b"data: " + payload + b"\n\n" + head.replace(b"call_1", b"call_2").replace(
        b'"index":0,"id"', b'"index":1,"id"'))
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(head))]
    assert [c.id for c in result.tool_calls] == ["call_1", "call_2"]


def test_in_band_error_object(impl):
    head = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')])
    err = b'data: {"error": {"message": "Rate limit reached", "type": "rate_limit_error", "code": 429}}\n\n'
    result = impl.reassemble(head + err)
    assert summary(result) == [("call_1", "f", {"a": 1})]
    assert [(e.kind, e.offset) for e in result.errors] == [("in-band error", len(head))]
    assert "Rate limit reached" in str(result.errors[0])


def test_in_band_error_event(impl):
    head = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')])
    err = b'event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'
    err2 = b"event: error\ndata: upstream went away\n\n"
    result = impl.reassemble(head + err + err2)
    assert summary(result) == [("call_1", "f", {"a": 1})]
    assert [(e.kind, e.offset) for e in result.errors] == [
        ("in-band error", len(head) + len(b"event: error\n")),
        ("in-band error", len(head) + len(err) + len(b"event: error\n"))]
    assert "overloaded" in str(result.errors[0])


def test_in_band_error_keeps_calls_so_far_and_after(impl):
    body = (chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1')])
            + b'data: {"error": {"message": "boom"}}\n\n'
            + chunk([tool_delta(0, arguments="}")]))
    result = impl.reassemble(body)
    assert summary(result) == [("call_1", "f", {"a": 1})]
    assert [e.kind for e in result.errors] == ["in-band error"]


@pytest.mark.parametrize("text,kind,offset", [
    ('{"city": "Par', "truncated", 13),
    ('{"a": 1', "truncated", 7),
    ('{"a": x}', "malformed", 6),
    ('{"é": x}', "malformed", 7),
    ('{"a": 1}{"a": 1, "b": 2}', "trailing data", 8),
    ('{"a": 1} x', "trailing data", 9),
    ('[1, 2]', "not an object", 0),
    ('"just a string"', "not an object", 0),
    ('null', "not an object", 0),
    ('42', "not an object", 0),
])
def test_arguments_that_do_not_parse(impl, text, kind, offset):
    parts = [text[:3], text[3:]] if len(text) > 3 else [text]
    good = chunk([tool_delta(1, id="call_ok", name="fine", arguments='{"ok": true}')])
    body = _stream(chunk([tool_delta(0, id="call_bad", name="broken_tool", arguments="")]),
                   *[chunk([tool_delta(0, arguments=p)]) for p in parts], good)
    result = impl.reassemble(body)
    bad, ok = result.tool_calls
    assert bad.arguments is None
    assert bad.raw_arguments == text
    err = bad.error
    assert isinstance(err, callstitch.ArgumentsError) and isinstance(err, ValueError)
    assert (err.kind, err.offset, err.call_id, err.name) == (kind, offset, "call_bad", "broken_tool")
    assert "call_bad" in str(err) and "broken_tool" in str(err) and kind in str(err)
    assert (ok.arguments, ok.error) == ({"ok": True}, None)
    assert result.errors == []  # argument problems belong to their call, not to the stream


def test_strict_raises_first_stream_error(impl):
    body = (chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": ')])
            + b"data: {oops\n\n" + b'data: {"error": {"message": "later"}}\n\n')
    with pytest.raises(callstitch.StreamError) as info:
        impl.reassemble(body, strict=True)
    assert info.value.kind == "malformed chunk"
    acc = impl.Accumulator()
    acc.feed(body)
    with pytest.raises(ValueError):
        acc.finalize(strict=True)


def test_strict_raises_first_call_error(impl):
    body = (chunk([tool_delta(0, id="call_1", name="good", arguments='{}')])
            + chunk([tool_delta(1, id="call_2", name="bad", arguments='{"a": ')])
            + chunk([tool_delta(2, id="call_3", name="worse", arguments='[]')]))
    with pytest.raises(callstitch.ArgumentsError) as info:
        impl.reassemble(body, strict=True)
    assert (info.value.call_id, info.value.kind) == ("call_2", "truncated")
    result = impl.reassemble(body)
    assert [c.error.kind if c.error else None for c in result.tool_calls] == [None, "truncated", "not an object"]


def test_strict_passes_a_clean_stream(impl):
    body = _stream(chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]), chunk([finish()]))
    assert summary(impl.reassemble(body, strict=True)) == [("call_1", "f", {"a": 1})]


def test_complete(impl):
    calls = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')])
    assert impl.reassemble(calls).complete is False
    assert impl.reassemble(calls + DONE).complete is True
    assert impl.reassemble(calls + chunk([finish("tool_calls")])).complete is True
    assert impl.reassemble(calls + chunk([finish("length")])).complete is True
    assert impl.reassemble(calls + chunk([text_delta(content="x")])).complete is False


def test_truncated_stream(impl):
    body = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": "some')])
    result = impl.reassemble(body + body[:25])  # the connection dropped mid-event
    assert result.complete is False
    c = _one(result)
    assert c.error.kind == "truncated"
    assert c.raw_arguments == '{"a": "some'
    assert [e.kind for e in result.errors] == ["malformed chunk"]


# ---------------------------------------------------------------- unexpected shapes


GOOD_BEFORE = chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')])
GOOD_AFTER = chunk([tool_delta(1, id="call_2", name="g", arguments='{"b": 2}')])


@pytest.mark.parametrize("obj", [
    {"choices": {"index": 0}},
    {"choices": "nope"},
    {"choices": 3},
    {"choices": [7]},
    {"choices": [{"index": 0.0, "delta": {"tool_calls": [call_obj(5, "x", "h", "{}")]}}]},
    {"choices": [{"index": "0", "delta": {"tool_calls": [call_obj(5, "x", "h", "{}")]}}]},
    {"choices": [{"index": 0, "delta": "text"}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": {"index": 0}}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": ["x"]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [call_obj(1.0, "x", "h", "{}")]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [call_obj("1", "x", "h", "{}")]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 5, "function": "h({})"}]}}]},
    {"choices": [{"index": 0, "delta": {"content": 5}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]},
    [1, 2, 3],
    "a string",
], ids=lambda o: json.dumps(o)[:40])
def test_unexpected_shape_is_reported_and_skipped(impl, obj):
    # An item of the wrong shape where calls are carried (choices, a choice, a delta, tool_calls,
    # a call, its function; a chunk that is a list) may have held a piece of call_1, still open:
    # call_1 is cut there. A field that holds none (content, finish_reason) or a chunk that is a
    # scalar cuts nothing. call_2, started after it, comes through whole either way.
    holds_no_piece = obj == "a string" or (type(obj) is dict and (
        "content" in json.dumps(obj) or "finish_reason" in json.dumps(obj)))
    first = ("call_1", "f", {"a": 1} if holds_no_piece else None)
    body = GOOD_BEFORE + b"data: " + dumps(obj) + b"\n\n" + GOOD_AFTER
    result = impl.reassemble(body)
    assert summary(result) == [first, ("call_2", "g", {"b": 2})]
    assert [(e.kind, e.offset) for e in result.errors] == [("unexpected shape", len(GOOD_BEFORE))]
    acc = impl.Accumulator()
    acc.feed_chunk(chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]))
    acc.feed_chunk(obj if isinstance(obj, dict) else json.dumps(obj))
    acc.feed_chunk(chunk_obj([tool_delta(1, id="call_2", name="g", arguments='{"b": 2}')]))
    result = acc.finalize()
    assert summary(result) == [first, ("call_2", "g", {"b": 2})]
    assert [(e.kind, e.offset) for e in result.errors] == [("unexpected shape", None)]


@pytest.mark.parametrize("call", [
    {"index": 0, "id": ["call_1"], "function": {"arguments": "}"}},
    {"index": 0, "id": {"x": 1}, "function": {"arguments": "}"}},
    {"index": 0, "function": {"name": ["f"], "arguments": "}"}},
    {"index": 0, "function": {"name": 7, "arguments": "}"}},
], ids=["id-list", "id-object", "name-list", "name-int"])
def test_unexpected_id_or_name_shape(impl, call):
    # The bad field is reported and ignored; the call keeps the id and name it already had.
    body = (chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1')])
            + b"data: " + dumps(chunk_obj([tool_deltas(call)])) + b"\n\n" + GOOD_AFTER)
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("unexpected shape", len(body) - len(GOOD_AFTER) - len(
        b"data: " + dumps(chunk_obj([tool_deltas(call)])) + b"\n\n"))]
    assert [(c.id, c.name) for c in result.tool_calls] == [("call_1", "f"), ("call_2", "g")]
    assert result.tool_calls[1].arguments == {"b": 2}


def test_unexpected_shape_in_one_choice_keeps_the_other(impl):
    obj = chunk_obj([{"index": 0, "delta": 5}, tool_delta(0, id="call_9", name="z", arguments="{}", choice=1)])
    result = impl.reassemble(b"data: " + dumps(obj) + b"\n\n")
    assert [(c.choice, c.id) for c in result.tool_calls] == [(1, "call_9")]
    assert [e.kind for e in result.errors] == ["unexpected shape"]


def test_unexpected_shape_in_one_call_keeps_the_others(impl):
    obj = chunk_obj([tool_deltas(call_obj(0, "call_a", "f", "{}"), {"index": "1", "id": "bad"},
                                 call_obj(2, "call_c", "h", '{"c": 3}'))])
    result = impl.reassemble(b"data: " + dumps(obj) + b"\n\n")
    # The call whose index is no integer may have been a piece of call_a, open before it: call_a is
    # cut (keeping "{}"); call_c, started after it, is whole.
    assert summary(result) == [("call_a", "f", None), ("call_c", "h", {"c": 3})]
    assert result.tool_calls[0].raw_arguments == "{}" and result.tool_calls[0].error.kind == "truncated"
    assert [e.kind for e in result.errors] == ["unexpected shape"]


def test_nothing_raises_on_garbage(impl):
    for body in (b"\x00\x01\x02", b"data: \xff\n\n", b"data: {\"choices\": [{\"delta\": {\"tool_calls\": [{}]}}]}\n\n",
                 b"event: error\n\n", b"data: 1\n\ndata: true\n\ndata: null\n\n", b"\r\r\n\n\r"):
        impl.reassemble(body)
        bytewise(impl, body)
