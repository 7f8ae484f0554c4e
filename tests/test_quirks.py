"""Provider quirks: each rule through feed (whole and seeded random splits), feed_chunk and add. Both twins."""

import json

import pytest

from _streams import (DONE, MISSING, WAYS, bytewise, chunk_obj, feed_split, finish, frag, random_cuts, run_way,
                      text_delta, tool_delta)


@pytest.fixture(params=WAYS)
def way(request):
    """How the fragments go in: feed() whole, feed() in random pieces, feed_chunk() dicts, add()."""
    return request.param


def calls(result):
    return [(c.id, c.name, c.arguments) for c in result.tool_calls]


# ---------------------------------------------------------------- (1) missing or null index


@pytest.mark.parametrize("absent", [MISSING, None], ids=["no-index", "null-index"])
def test_missing_index(impl, way, absent):
    frags = [
        frag(absent, id="call_a", name="get_weather", arguments='{"city": '),
        frag(absent, arguments='"Paris"}'),
        frag(absent, id="call_b", name="get_time", arguments='{"tz"'),
        frag(absent, id="", arguments=': "CET"'),
        frag(absent, arguments="}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_a", "get_weather", {"city": "Paris"}), ("call_b", "get_time", {"tz": "CET"})]
    assert [c.index for c in result.tool_calls] == [0, 1]
    assert all("missing-index" in c.quirks for c in result.tool_calls)
    assert result.errors == []


def test_missing_index_same_id_resent_continues(impl, way):
    # Mistral-style: every fragment of a call carries its id, none an index.
    frags = [
        frag(id="call_a", name="f", arguments='{"x": '),
        frag(id="call_a", arguments="1}"),
        frag(id="call_b", name="g", arguments='{"y": 2}'),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_a", "f", {"x": 1}), ("call_b", "g", {"y": 2})]
    assert "missing-index" in result.tool_calls[0].quirks
    assert "resent-id" in result.tool_calls[0].quirks


def test_missing_index_continues_latest_call_of_its_choice(impl, way):
    frags = [
        frag(id="c0", name="f", arguments='{"a": ', choice=0),
        frag(id="c1", name="g", arguments='{"b": ', choice=1),
        frag(arguments="0}", choice=0),
        frag(arguments="1}", choice=1),
    ]
    result = run_way(impl, way, frags)
    assert [(c.choice, c.id, c.arguments) for c in result.tool_calls] == [(0, "c0", {"a": 0}), (1, "c1", {"b": 1})]


def test_missing_index_after_indexed_fragments(impl, way):
    # Some servers give the index on the first fragment only.
    frags = [
        frag(0, id="call_a", name="f", arguments=""),
        frag(arguments='{"q": '),
        frag(None, arguments='"x"}'),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_a", "f", {"q": "x"})]
    assert "missing-index" in result.tool_calls[0].quirks


# ---------------------------------------------------------------- (2) same index, different id


def test_same_index_new_id_with_name_is_a_new_call(impl, way):
    # Ollama: parallel calls, each complete in one fragment, all at index 0.
    frags = [
        frag(0, id="call_1", name="get_weather", arguments='{"city": "Paris"}'),
        frag(0, id="call_2", name="get_weather", arguments='{"city": "London"}'),
        frag(0, id="call_3", name="get_time", arguments='{}'),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_1", "get_weather", {"city": "Paris"}), ("call_2", "get_weather", {"city": "London"}),
                             ("call_3", "get_time", {})]
    assert [c.index for c in result.tool_calls] == [0, 1, 2]
    assert "new-call-same-index" in result.tool_calls[1].quirks
    assert "new-call-same-index" in result.tool_calls[2].quirks
    assert "new-call-same-index" not in result.tool_calls[0].quirks


def test_same_index_new_id_with_name_before_arguments_complete(impl, way):
    frags = [
        frag(0, id="call_1", name="f", arguments='{"a": '),
        frag(0, id="call_2", name="g", arguments='{"b": 2}'),
    ]
    result = run_way(impl, way, frags)
    assert [(c.id, c.name, c.raw_arguments) for c in result.tool_calls] == [
        ("call_1", "f", '{"a": '), ("call_2", "g", '{"b": 2}')]
    assert result.tool_calls[0].error.kind == "truncated"
    assert "new-call-same-index" in result.tool_calls[1].quirks


def test_same_index_new_id_after_complete_arguments_is_a_new_call(impl, way):
    frags = [
        frag(0, id="call_1", name="f", arguments='{"a": '),
        frag(0, arguments="1}"),
        frag(0, id="call_2", arguments='{"b": 2}'),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_1", "f", {"a": 1}), ("call_2", None, {"b": 2})]
    assert "new-call-same-index" in result.tool_calls[1].quirks


def test_changing_id_keeps_the_first(impl, way):
    # Kimi / LM Studio: a fresh id on every fragment of the same call.
    frags = [
        frag(0, id="call_x1", name="search", arguments='{"q": '),
        frag(0, id="call_x2", arguments='"cats'),
        frag(0, id="call_x3", arguments='"'),
        frag(0, id="call_x4", arguments="}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_x1", "search", {"q": "cats"})]
    assert "changing-id" in result.tool_calls[0].quirks


# ---------------------------------------------------------------- (3) a different name at the same index


def test_different_name_same_index_after_arguments_is_a_new_call(impl, way):
    frags = [
        frag(0, id="call_1", name="first", arguments='{"a": 1}'),
        frag(0, name="second", arguments='{"b": '),
        frag(0, arguments="2}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_1", "first", {"a": 1}), (None, "second", {"b": 2})]


# ---------------------------------------------------------------- (4) resent id and name, empty and integer values


def test_resent_id_and_name(impl, way):
    frags = [
        frag(0, id="call_r", name="lookup", arguments='{"k"'),
        frag(0, id="call_r", name="lookup", arguments=': "v"'),
        frag(0, id="call_r", name="lookup", arguments="}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_r", "lookup", {"k": "v"})]
    q = result.tool_calls[0].quirks
    assert "resent-id" in q and "resent-name" in q


def test_empty_name_then_real_name(impl, way):
    frags = [
        frag(0, id="call_e", name="", arguments=""),
        frag(0, name="real_name", arguments='{"z": '),
        frag(0, name="", arguments="0}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_e", "real_name", {"z": 0})]
    assert "empty-name" in result.tool_calls[0].quirks


def test_integer_ids(impl, way):
    frags = [
        frag(0, id=0, name="f", arguments='{"a": '),
        frag(0, id=0, arguments="1}"),
        frag(1, id=17, name="g", arguments="{}"),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("0", "f", {"a": 1}), ("17", "g", {})]
    assert all("integer-id" in c.quirks for c in result.tool_calls)


def test_empty_strings_mean_absent(impl, way):
    frags = [
        frag(0, id="", name="", arguments=""),
        frag(0, id="", name="tool", arguments='{"a": '),
        frag(0, id="call_late", name="", arguments="true}"),
        frag(0, id="", name="", arguments=""),
    ]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_late", "tool", {"a": True})]


# ---------------------------------------------------------------- (5) cumulative and repeated arguments


def test_cumulative_arguments(impl, way):
    text = '{"city": "Paris", "days": 3}'
    frags = [frag(0, id="call_c", name="forecast", arguments="")]
    frags += [frag(0, arguments=text[:k]) for k in (5, 9, 17, 24, len(text))]
    result = run_way(impl, way, frags)
    call, = result.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_c", "forecast", {"city": "Paris", "days": 3})
    assert call.raw_arguments == text
    assert "cumulative-arguments" in call.quirks


def test_cumulative_arguments_parallel(impl, way):
    a, b = '{"x": "東京 😀"}', '{"y": [1, 2]}'
    frags = [frag(0, id="call_a", name="f", arguments=a[:3]), frag(1, id="call_b", name="g", arguments=b[:4]),
             frag(0, arguments=a[:8]), frag(1, arguments=b), frag(0, arguments=a)]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_a", "f", {"x": "東京 😀"}), ("call_b", "g", {"y": [1, 2]})]
    assert all("cumulative-arguments" in c.quirks for c in result.tool_calls)


def test_repeated_arguments_at_the_end(impl, way):
    text = '{"q": "weather in Paris"}'
    frags = [frag(0, id="call_r", name="search", arguments=""), frag(0, arguments=text[:7]),
             frag(0, arguments=text[7:15]), frag(0, arguments=text[15:]), frag(0, arguments=text)]
    result = run_way(impl, way, frags)
    call, = result.tool_calls
    assert call.arguments == {"q": "weather in Paris"}
    assert call.raw_arguments == text
    assert "repeated-arguments" in call.quirks


def test_whole_arguments_sent_twice(impl, way):
    text = '{"a": 1}'
    frags = [frag(0, id="call_w", name="f", arguments=text), frag(0, arguments=text)]
    call, = run_way(impl, way, frags).tool_calls
    assert (call.arguments, call.raw_arguments) == ({"a": 1}, text)
    assert "repeated-arguments" in call.quirks


def test_cumulative_then_complete_arguments_resent(impl, way):
    # A cumulative stream whose final, complete arguments are then sent once more.
    text = '{"a": 1, "b": "two"}'
    frags = [frag(0, id="call_cr", name="f", arguments=text[:4]), frag(0, arguments=text[:12]),
             frag(0, arguments=text), frag(0, arguments=text)]
    call, = run_way(impl, way, frags).tool_calls
    assert (call.arguments, call.raw_arguments) == ({"a": 1, "b": "two"}, text)
    assert call.error is None


def test_stream_that_parses_as_sent_is_never_altered(impl, way):
    # Each fragment begins with the one before, but the text as sent is valid JSON: keep it.
    frags = [frag(0, id="call_p", name="f", arguments=" "), frag(0, arguments="  "),
             frag(0, arguments='   {"a": "  "}')]
    call, = run_way(impl, way, frags).tool_calls
    assert call.raw_arguments == '      {"a": "  "}'
    assert call.arguments == {"a": "  "}
    assert call.quirks == ()


def test_repeat_lookalike_that_parses_is_not_altered(impl, way):
    # The last fragment equals an earlier part of the text, but the whole parses as sent.
    frags = [frag(0, id="call_p", name="f", arguments='{"a": ["x", '), frag(0, arguments='"x"'),
             frag(0, arguments="]}")]
    call, = run_way(impl, way, frags).tool_calls
    assert call.arguments == {"a": ["x", "x"]}
    assert call.quirks == ()


def test_genuinely_truncated_is_not_mistaken_for_repeats(impl, way):
    frags = [frag(0, id="call_t", name="f", arguments='{"a": '), frag(0, arguments='{"a": ')]
    call, = run_way(impl, way, frags).tool_calls
    assert call.arguments is None
    assert call.raw_arguments == '{"a": {"a": '
    assert call.error.kind == "truncated"


# ---------------------------------------------------------------- (6) arguments as a JSON object


def test_object_arguments(impl, way):
    value = {"city": "Paris", "when": {"days": [1, 2]}, "note": "東京 😀 \"q\""}
    frags = [frag(0, id="call_o", name="weather", arguments=value), frag(1, id="call_p", name="noop", arguments={})]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_o", "weather", value), ("call_p", "noop", {})]
    assert json.loads(result.tool_calls[0].raw_arguments) == value
    assert all("object-arguments" in c.quirks for c in result.tool_calls)


def test_object_arguments_without_index(impl, way):
    # Ollama / llama-server style: whole calls, no index, arguments as an object.
    frags = [frag(id="call_1", name="a", arguments={"x": 1}), frag(id="call_2", name="b", arguments={"y": 2})]
    result = run_way(impl, way, frags)
    assert calls(result) == [("call_1", "a", {"x": 1}), ("call_2", "b", {"y": 2})]


# ---------------------------------------------------------------- (7) odd index values


@pytest.mark.parametrize("indexes", [[-1, -2], [1, 2, 3], [0, 5, 2], [2 ** 40, 7], [2 ** 63 - 1, 0],
                                     [2 ** 63 - 1, -(2 ** 63)]],
                         ids=["negative", "one-based", "sparse", "2**40", "2**63-1", "int64-extremes"])
def test_odd_index_values(impl, way, indexes):
    frags = [frag(ix, id=f"call_{n}", name=f"fn{n}", arguments="") for n, ix in enumerate(indexes)]
    frags += [frag(ix, arguments='{"n": ') for ix in reversed(indexes)]
    frags += [frag(ix, arguments=f"{n}}}") for n, ix in enumerate(indexes)]
    result = run_way(impl, way, frags)
    assert calls(result) == [(f"call_{n}", f"fn{n}", {"n": n}) for n in range(len(indexes))]
    assert [c.index for c in result.tool_calls] == list(range(len(indexes)))
    assert result.errors == []


# ---------------------------------------------------------------- (9) split surrogate pairs


def test_split_surrogate_pair(impl, way):
    # "\ud83d" ends one fragment's (escaped) JSON string, "\ude00" starts the next: together 😀.
    frags = [frag(0, id="call_s", name="emoji", arguments='{"e": "a'), frag(0, arguments='b\ud83d'),
             frag(0, arguments='\ude00c'), frag(0, arguments='"}')]
    result = run_way(impl, way, frags)
    call, = result.tool_calls
    assert call.arguments == {"e": "ab😀c"}
    assert call.raw_arguments == '{"e": "ab😀c"}'
    assert "split-surrogate" in call.quirks
    assert result.errors == []


def test_split_surrogate_pair_alone_in_fragments(impl, way):
    frags = [frag(0, id="call_s", name="emoji", arguments='{"e": "'), frag(0, arguments='\ud83d'),
             frag(0, arguments='\ude00'), frag(0, arguments='\ud83c'), frag(0, arguments='\udf89"}')]
    call, = run_way(impl, way, frags).tool_calls
    assert call.arguments == {"e": "😀🎉"}
    assert "split-surrogate" in call.quirks


def test_escaped_surrogates_in_argument_text(impl, way):
    # The arguments text itself holds "\\ud83d" and "\\ude00" escapes: JSON joins them, no quirk.
    frags = [frag(0, id="call_s", name="emoji", arguments='{"e": "\\ud83d'), frag(0, arguments='\\ude00"}')]
    call, = run_way(impl, way, frags).tool_calls
    assert call.arguments == {"e": "😀"}
    assert call.raw_arguments == '{"e": "\\ud83d\\ude00"}'
    assert call.quirks == ()


@pytest.mark.parametrize("parts,raw", [
    (['{"e": "\ud83d', 'x"}'], '{"e": "\\ud83dx"}'),
    (['{"e": "\ud83d', '"}'], '{"e": "\\ud83d"}'),
    (['{"e": "x\ud83d"}'], '{"e": "x\\ud83d"}'),
    (['{"e": "\ude00"}'], '{"e": "\\ude00"}'),
    (['{"e": "', '\ude00"}'], '{"e": "\\ude00"}'),
    (['{"e": "\ud83d'], '{"e": "\\ud83d'),
], ids=["high-then-text", "high-then-quote", "high-inside", "low-alone", "low-first", "high-at-end"])
def test_lone_surrogate_kept_as_escape_text(impl, way, parts, raw):
    frags = [frag(0, id="call_l", name="f", arguments=parts[0])] + [frag(0, arguments=p) for p in parts[1:]]
    call, = run_way(impl, way, frags).tool_calls
    assert call.raw_arguments == raw
    assert (call.id, call.name) == ("call_l", "f")


# ---------------------------------------------------------------- (8) where calls and finish reasons fall


def _feed_ways(impl, events):
    """Results of a list of chunk dicts sent as SSE (whole, random splits, bytewise) and through feed_chunk."""
    from _streams import dumps
    body = b"".join(b"data: " + dumps(e) + b"\n\n" if isinstance(e, dict) else e for e in events)
    results = [impl.reassemble(body), bytewise(impl, body)]
    results += [feed_split(impl, body, random_cuts(len(body), seed)) for seed in range(5)]
    acc = impl.Accumulator()
    for e in events:
        acc.feed_chunk(e if isinstance(e, dict) else e.decode()[6:].strip())
    results.append(acc.finalize())
    return results


def test_whole_call_in_one_chunk(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]), DONE]
    for result in _feed_ways(impl, events):
        assert calls(result) == [("call_1", "f", {"a": 1})]
        assert result.complete is True
        assert result.tool_calls[0].quirks == ()


def test_whole_call_with_finish_in_one_chunk(impl):
    choice = tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')
    choice["finish_reason"] = "tool_calls"
    for result in _feed_ways(impl, [chunk_obj([choice])]):
        assert calls(result) == [("call_1", "f", {"a": 1})]
        assert result.complete is True
        assert result.finish_reason == "tool_calls"


def test_calls_after_a_finish_chunk(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]), chunk_obj([finish()]),
              chunk_obj([tool_delta(1, id="call_2", name="g", arguments='{"b": ')]),
              chunk_obj([tool_delta(1, arguments="2}")]), DONE]
    for result in _feed_ways(impl, events):
        assert calls(result) == [("call_1", "f", {"a": 1}), ("call_2", "g", {"b": 2})]
        assert result.complete is True


def test_finish_reason_stop_with_calls(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]), chunk_obj([finish("stop")])]
    for result in _feed_ways(impl, events):
        assert calls(result) == [("call_1", "f", {"a": 1})]
        assert result.finish_reason == "stop"
        assert result.complete is True


def test_no_finish_and_no_done(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{"a": ')]),
              chunk_obj([tool_delta(0, arguments="1}")])]
    for result in _feed_ways(impl, events):
        assert calls(result) == [("call_1", "f", {"a": 1})]
        assert result.complete is False
        assert result.finish_reason is None
        assert result.errors == []


def test_finish_without_done(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{}')]), chunk_obj([finish()])]
    for result in _feed_ways(impl, events):
        assert result.complete is True
        assert calls(result) == [("call_1", "f", {})]


def test_done_without_finish(impl):
    events = [chunk_obj([tool_delta(0, id="call_1", name="f", arguments='{}')]), DONE]
    for result in _feed_ways(impl, events):
        assert result.complete is True
        assert result.finish_reason is None


# ---------------------------------------------------------------- (10) text is never a call


def test_text_fields_are_never_calls(impl):
    lookalike = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    events = [
        chunk_obj([text_delta(reasoning_content="I should call get_weather: " + lookalike)]),
        chunk_obj([text_delta(reasoning=lookalike)]),
        chunk_obj([text_delta(content='<tool_call>' + lookalike + '</tool_call>')]),
        chunk_obj([text_delta(refusal=lookalike)]),
        chunk_obj([finish("stop")]),
    ]
    for result in _feed_ways(impl, events):
        assert result.tool_calls == []
        assert result.errors == []
        assert result.reasoning == "I should call get_weather: " + lookalike + lookalike
        assert result.text == "<tool_call>" + lookalike + "</tool_call>"
        assert result.refusal == lookalike


def test_reasoning_then_call(impl):
    events = [
        chunk_obj([text_delta(role="assistant", reasoning_content="Need the weather.")]),
        chunk_obj([text_delta(reasoning="More thought.", content="")]),
        chunk_obj([tool_delta(0, id="call_1", name="get_weather", arguments='{"city"')]),
        chunk_obj([text_delta(reasoning_content=" (still thinking)")]),
        chunk_obj([tool_delta(0, arguments=': "Paris"}')]),
        chunk_obj([finish()]),
        DONE,
    ]
    for result in _feed_ways(impl, events):
        assert calls(result) == [("call_1", "get_weather", {"city": "Paris"})]
        assert result.reasoning == "Need the weather.More thought. (still thinking)"
        assert result.text == ""
        assert result.tool_calls[0].quirks == ()


# ---------------------------------------------------------------- a clean stream has no quirks


def test_clean_openai_stream_has_no_quirks(impl, way):
    a, b = '{"location": "Boston, MA", "unit": "celsius"}', '{"symbol": "東京"}'
    frags = [frag(0, id="call_a", name="get_weather", arguments="")]
    frags += [frag(0, arguments=a[k:k + 4]) for k in range(0, len(a), 4)]
    frags += [frag(1, id="call_b", name="get_stock", arguments="")]
    frags += [frag(1, arguments=b[k:k + 3]) for k in range(0, len(b), 3)]
    result = run_way(impl, way, frags, tail=DONE)
    assert calls(result) == [("call_a", "get_weather", json.loads(a)), ("call_b", "get_stock", json.loads(b))]
    assert [c.quirks for c in result.tool_calls] == [(), ()]
