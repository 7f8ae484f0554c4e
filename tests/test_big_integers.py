"""Integers beyond 64 bits in arguments come out exact in every format and on every path, never as floats.

orjson reads 2**64 as 1.8446744073709552e+19 without a word; callstitch reads such a text again
with the standard library when it holds a run of 19 digits or more. Each test compares through
json.dumps, which tells an int from the float of the same value (2**64 == float(2**64)).
"""

import json
import os
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

import callstitch
from callstitch._exactjson import LONG_RUN, long_digit_run, loads_exact
from callstitch._records import read_record, read_records
from callstitch._text import compact_json

from _formats import VARIANTS, Call, bedrock_events, bedrock_eventstream, bedrock_sse, build, compact, format_of
from _streams import DONE, chunk, tool_delta

# 10**400: beyond a double too, which orjson refuses outright ("number is infinity")
BIGS = [2**64, -(2**63) - 1, 10**30, 7 * 10**400, -(10**1000)]
BIG_IDS = [f"{len(str(abs(v)))}digits{'-' if v < 0 else ''}" for v in BIGS]
FLOAT = 12345678901234567890.5  # a float of 20 digits stays a float


def arguments_text(value):
    """Return arguments holding value at the top, inside nested arrays and as a string's digits."""
    return '{"n": %d, "deep": {"list": [[1, [%d]], 2.5]}, "s": "%d", "f": %r, "small": -7}' % (
        value, value, value, FLOAT)


def same(got, text):
    """Tell whether got is text's JSON value exactly: ints as ints, floats as floats."""
    return json.dumps(got) == json.dumps(json.loads(text))


def chat_body(call_id, name, text, pieces=4):
    size = max(1, len(text) // pieces)
    parts = [text[i:i + size] for i in range(0, len(text), size)]
    body = chunk([tool_delta(0, id=call_id, name=name, arguments="")])
    body += b"".join(chunk([tool_delta(0, arguments=part)]) for part in parts)
    return body + DONE


# -- every format, arguments streamed as text or sent whole ------------------------------------------

@pytest.mark.parametrize("value", BIGS, ids=BIG_IDS)
def test_openai_chat_arguments_text(impl, value):
    text = arguments_text(value)
    for pieces in (1, 4, len(text)):  # the integer split across fragments too
        call, = impl.reassemble(chat_body("call_1", "f", text, pieces), format="openai-chat").tool_calls
        assert call.error is None and same(call.arguments, text), pieces
        assert call.arguments["s"] == str(value) and type(call.arguments["f"]) is float
        assert call.raw_arguments == text


@pytest.mark.parametrize("value", BIGS, ids=BIG_IDS)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_format(impl, variant, value):
    call_in = Call("call_1", "f", arguments_text(value))
    for fmt in (format_of(variant), "auto"):
        result = impl.reassemble(build(variant, [call_in]), format=fmt)
        call, = result.tool_calls
        assert result.errors == [] and call.error is None, (fmt, result.errors)
        assert same(call.arguments, call_in.arguments), fmt
        expected_raw = compact(call_in.value) if variant in ("gemini", "ollama") else call_in.arguments
        assert call.raw_arguments == expected_raw


@pytest.mark.parametrize("value", BIGS, ids=BIG_IDS)
def test_openai_chat_arguments_as_an_object(impl, value):
    # GLM and llama-server send arguments as a JSON object instead of a string.
    body = chunk([tool_delta(0, id="call_1", name="f", arguments={"n": value, "l": [[value]]})]) + DONE
    call, = impl.reassemble(body, format="openai-chat").tool_calls
    assert json.dumps(call.arguments) == json.dumps({"n": value, "l": [[value]]})
    assert call.raw_arguments == '{"n":%d,"l":[[%d]]}' % (value, value)


@pytest.mark.parametrize("framing", ["eventstream", "sse"])
def test_bedrock_input_as_an_object(impl, framing):
    # A Converse-compatible server sending a tool's input as an object instead of its text.
    value = {"n": 10**30, "l": [[-(2**63) - 1]]}
    events = bedrock_events([Call("t1", "f", '{"x": 1}')])
    deltas = [i for i, (name, obj) in enumerate(events) if name == "contentBlockDelta" and "toolUse" in obj["delta"]]
    first = events[deltas[0]][1]
    events[deltas[0]] = ("contentBlockDelta", {**first, "delta": {"toolUse": {"input": value}}})
    events = [e for i, e in enumerate(events) if i not in deltas[1:]]
    body = bedrock_eventstream(events) if framing == "eventstream" else bedrock_sse(events)
    call, = impl.reassemble(body, format="bedrock").tool_calls
    assert json.dumps(call.arguments) == json.dumps(value)
    assert call.raw_arguments == compact(value)


@pytest.mark.parametrize("value", BIGS, ids=BIG_IDS)
def test_anthropic_start_input(impl, value):
    # A tool_use block that streams no input keeps the input its start event carried.
    call_in = Call("toolu_1", "f", "")
    body = build("anthropic", [call_in], start_input={"n": value, "l": [value]})
    call, = impl.reassemble(body, format="anthropic").tool_calls
    assert json.dumps(call.arguments) == json.dumps({"n": value, "l": [value]})
    assert call.raw_arguments == '{"n":%d,"l":[%d]}' % (value, value)


@pytest.mark.parametrize("fmt", ["ollama", "gemini"])
def test_whole_call_with_a_lone_surrogate_in_the_event(impl, fmt):
    # The lone surrogate escape sends the event to the standard library's parser (orjson refuses
    # it); the call keeps its integer exact and the text its escape.
    args = '{"n":%d}' % 2**64
    if fmt == "ollama":
        body = ('{"model":"m","message":{"role":"assistant","content":"\\ud83d","tool_calls":[{"function":'
                '{"name":"f","arguments":%s}}]},"done":false}\n{"model":"m","message":{"role":"assistant",'
                '"content":""},"done":true}\n' % args)
    else:
        body = ('data: {"candidates":[{"content":{"parts":[{"text":"a\\udc00"},{"functionCall":{"name":"f",'
                '"args":%s}}],"role":"model"},"finishReason":"STOP"}]}\r\n\r\n' % args)
    result = impl.reassemble(body, format=fmt)
    call, = result.tool_calls
    assert result.errors == [] and call.error is None
    assert json.dumps(call.arguments) == json.dumps({"n": 2**64}) and call.raw_arguments == args


def test_gemini_located_args_beside_a_call_being_built(impl):
    # The compiled twin reads a call's args that arrive while another is open through _value.
    value = 10**30
    body = ('data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"n":%d}}},'
            '{"functionCall":{"name":"g","args":{"m":[%d]}}}],"role":"model"},"finishReason":"STOP"}]}\r\n\r\n'
            % (value, value))
    for fmt in ("gemini", "auto"):
        calls = impl.reassemble(body, format=fmt).tool_calls
        assert [json.dumps(c.arguments) for c in calls] == ['{"n": %d}' % value, '{"m": [%d]}' % value]


def test_feed_chunk_objects(impl):
    acc = impl.Accumulator(format="ollama")
    acc.feed_chunk({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "f", "arguments": {"n": 2**64}}}]}, "done": True})
    acc.feed_chunk('{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":'
                   '{"name":"g","arguments":{"n":%d}}}]},"done":true}' % 10**30)
    first, second = acc.finalize().tool_calls
    assert first.arguments == {"n": 2**64} and type(first.arguments["n"]) is int
    assert first.raw_arguments == '{"n":%d}' % 2**64
    assert json.dumps(second.arguments) == '{"n": %d}' % 10**30


def test_digits_in_strings_only(impl):
    # A false alarm (a long run inside a string) costs a second reading, never a different value.
    text = '{"id": "%s", "card": "4111111111111111111", "e": 1e300, "x": 18446744073709551615}' % ("9" * 40)
    call, = impl.reassemble(chat_body("c", "f", text), format="openai-chat").tool_calls
    assert same(call.arguments, text) and call.raw_arguments == text


def test_usage_and_other_values_twins_agree(both):
    # Values besides arguments (an Ollama count) read exactly in both twins alike.
    body = ('{"model":"m","message":{"role":"assistant","content":"hi"},"done":true,"done_reason":"stop",'
            '"prompt_eval_count":%d,"eval_count":3}\n' % 2**64)
    usages = [impl.reassemble(body, format="ollama").usage for impl in both]
    assert usages[0] == usages[1] == {"prompt_eval_count": 2**64, "eval_count": 3}
    assert type(usages[0]["prompt_eval_count"]) is int


@pytest.mark.parametrize("variant,sent", [
    ("gemini", b'"promptTokenCount":29'), ("anthropic", b'"input_tokens":472'),
    ("openai-responses", b'"input_tokens":81'), ("cohere", b'"input_tokens":119'),
    ("bedrock-sse", b'"inputTokens":471'),
])
def test_usage_counts_in_every_format(both, variant, sent):
    # The compiled twin keeps a usage object as its text until the end: it must read it as exactly.
    body = build(variant, [Call("call_1", "f", '{"a": 1}')])
    assert sent in body
    body = body.replace(sent, sent.split(b":")[0] + b":%d" % 2**64)
    usages = [impl.reassemble(body, format=format_of(variant)).usage for impl in both]
    assert json.dumps(usages[0]) == json.dumps(usages[1]) and str(2**64) in json.dumps(usages[0])


# -- the toolset, the records and the command line ---------------------------------------------------

def test_toolset_sees_the_integer(impl):
    toolset = callstitch.Toolset([{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}])
    call, = impl.reassemble(chat_body("c", "f", '{"n": %d}' % 10**30), format="openai-chat").tool_calls
    verdict = toolset.check(call)
    assert verdict.ok, verdict.problems
    assert verdict.arguments == {"n": 10**30} and type(verdict.arguments["n"]) is int


def test_records_read_back_19_digit_integers():
    # -2**63-1 has 19 digits: the reader once looked only for runs of 20 and read it as a float.
    line = b'{"arguments":{"n":-9223372036854775809},"id":"c"}'
    assert type(read_record(line)["arguments"]["n"]) is int
    assert read_record(line)["arguments"]["n"] == -(2**63) - 1
    assert [r["arguments"]["n"] for r in read_records(line + b"\n" + line)] == [-(2**63) - 1] * 2


@pytest.mark.parametrize("value", [-(2**63) - 1, 7 * 10**400], ids=["19digits", "401digits"])
@pytest.mark.parametrize("twin", ["c", "py"])
def test_command_line_records(tmp_path, twin, value):
    pq = pytest.importorskip("pyarrow.parquet")
    text = arguments_text(value)
    path = tmp_path / "big.sse"
    path.write_bytes(chat_body("c", "f", text))
    env = {key: value for key, value in os.environ.items() if key != "CALLSTITCH_NO_EXTENSIONS"}
    if twin == "py":
        env["CALLSTITCH_NO_EXTENSIONS"] = "1"
    command = [sys.executable, "-m", "callstitch", "reassemble", str(path)]
    proc = subprocess.run(command, capture_output=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert same(record["arguments"], text)
    parquet = tmp_path / "calls.parquet"
    proc = subprocess.run(command + ["-o", str(parquet)], capture_output=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    row, = pq.read_table(parquet).to_pylist()
    assert same(json.loads(row["arguments"]), text)


@pytest.mark.parametrize("value", [-(2**63) - 1, 7 * 10**400], ids=["19digits", "401digits"])
def test_reassemble_many_records(tmp_path, value):
    # Records travel as JSON lines between the workers and the caller, and are read back exactly.
    path = tmp_path / "big.sse"
    text = arguments_text(value)
    path.write_bytes(chat_body("c", "f", text))
    record, = callstitch.reassemble_many([str(path)], jobs=1)
    assert same(record["arguments"], text)


@pytest.mark.parametrize("value", [10**30, 7 * 10**400], ids=["31digits", "401digits"])
def test_jsonl_log_of_chunk_objects(tmp_path, value):
    # A log line whose body is the stream's chunks as objects holds the arguments as values (beyond a
    # double, orjson refuses the whole line: the log's reader takes it the way the library does).
    args = '{"n":%d,"l":[[%d]]}' % (value, -(2**63) - 1)
    chunks = ('[{"model":"m","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f",'
              '"arguments":%s}}]},"done":false},{"model":"m","message":{"role":"assistant","content":""},'
              '"done":true}]' % args)
    path = tmp_path / "log.jsonl"
    path.write_text('{"request_id": "r1", "chunks": %s}\n' % chunks)
    record, = callstitch.reassemble_many([str(path)], field="chunks", format="ollama", jobs=1)
    assert json.dumps(record["arguments"]) == json.dumps(json.loads(args))


# -- the pieces ----------------------------------------------------------------------------------------

def test_compact_json_writes_big_integers():
    assert compact_json({"n": 2**64, "l": [-(2**63) - 1, 1.5, True]}) == b'{"n":18446744073709551616,' \
        b'"l":[-9223372036854775809,1.5,true]}'
    with pytest.raises(TypeError):
        compact_json({"n": 10**5000})  # more digits than str() writes: not JSON here, as orjson says of others


@pytest.mark.parametrize("data,found", [
    (b'{"n": 123456789012345678}', False),                   # 18 digits: orjson holds it
    (b'{"n": 1234567890123456789}', True),                   # 19 in a row
    (b'{"a": [1234567890, 1234567890, 1234567890]}', False),  # 30 digits, no run of 19
    (bytearray(b'[-9223372036854775809]'), True),
    (b"9" * 19, True), (b"9" * 18, False), (b"x" * 18 + b"9" * 19, True), (b"9" * 19 + b" " * 40, True),
    (b"", False),
])
def test_long_digit_run(impl, data, found):
    assert long_digit_run(data) is found
    if impl.name == "c":
        assert impl.module._long_run(bytes(data)) is found
    if data[:1] in (b"{", b"[", b"9"):
        value = loads_exact(data)
        assert json.dumps(value) == json.dumps(json.loads(data))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"7", b"x", b" "]), st.integers(1, 45)), max_size=12))
def test_c_scan_agrees_with_python(runs):
    from callstitch import _accumulator_c

    data = b"".join(piece * n for piece, n in runs)
    assert _accumulator_c._long_run(data) is long_digit_run(data)
    assert long_digit_run(data) is (b"7" * LONG_RUN in data)


def test_every_kind_of_text():
    for data in (b"[%d]" % 2**64, bytearray(b"[%d]" % 2**64), memoryview(b"[%d]" % 2**64), "[%d]" % 2**64):
        assert long_digit_run(data) and loads_exact(data) == [2**64] and type(loads_exact(data)[0]) is int
    assert loads_exact("[\"é%d\"]" % 2**64) == ["é%d" % 2**64]


def test_random_texts_read_exactly():
    rng = random.Random(18)
    for _ in range(200):
        value = [rng.choice([rng.randrange(-10**40, 10**40), rng.random() * 1e25, str(10**25), 5]) for _ in range(6)]
        text = json.dumps({"v": value}).encode()
        assert json.dumps(loads_exact(text)) == json.dumps(json.loads(text))


def test_the_turn_keeps_big_integers_exact(impl):
    """A turn rebuilt from events kept as sent reads them exactly too (Ollama's counts, Anthropic's usage)."""
    big = 2**64 + 1
    ollama = (b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"hi"},"done":false}\n'
              b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,'
              b'"done_reason":"stop","eval_count":%d}\n' % big)
    assert impl.reassemble(ollama, format="ollama").to_response()["eval_count"] == big
    anthropic = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":"message",'
                 b'"role":"assistant","model":"c","content":[],"usage":{"input_tokens":%d,"output_tokens":1}}}\n\n'
                 b'event: message_stop\ndata: {"type":"message_stop"}\n\n' % big)
    assert impl.reassemble(anthropic, format="anthropic").to_response()["usage"]["input_tokens"] == big


@pytest.mark.parametrize("fed", ["whole", "chunk by chunk"])
def test_a_big_integer_in_a_chunk_that_continues_a_call_is_kept_exact(impl, fed):
    """A continuation chunk (the pure twin's inline path, looked at once per read) keeps an extra's integer exact."""
    big = 2**64 + 1
    first = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {
        "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]}}]}
    more = (b'{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","x_trace":{"n":%d},'
            b'"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}' % big)
    events = [json.dumps(first).encode(), more, b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
              b"[DONE]"]
    body = b"".join(b"data: " + e + b"\n\n" for e in events)
    acc = impl.Accumulator(format="openai-chat")
    for piece in ([body] if fed == "whole" else [b"data: " + e + b"\n\n" for e in events]):
        acc.feed(piece)
    result = acc.finalize()
    assert result.tool_calls[0].arguments == {}
    assert result.to_response()["x_trace"] == {"n": big}


# -- beyond a double: read exactly, and only what orjson refuses for that alone ------------------------

@pytest.mark.parametrize("text,kind", [
    ('{"n": 1e400}', "malformed"),  # a float beyond a double: no number Python can hold exactly
    ('{"n": -%s.5}' % ("9" * 400), "malformed"),
    ('{"n": %s}' % ("7" * 5000), "malformed"),  # more digits than int() converts: as orjson, refused
    ('{"s": "\\ud800", "n": %s}' % ("7" * 400), "malformed"),  # a lone surrogate orjson refuses, kept refused
    ('{"n": %s' % ("7" * 400), "truncated"),
])
def test_what_stays_refused_beyond_a_double(impl, text, kind):
    call, = impl.reassemble(chat_body("call_1", "f", text), format="openai-chat").tool_calls
    assert call.arguments is None and call.error is not None and call.error.kind == kind, call.error
    assert call.raw_arguments == text and call.error.call_id == "call_1"


def test_past_double_reads_only_what_orjson_refuses_for_a_long_integer():
    import orjson
    from callstitch._exactjson import REFUSED, past_double
    text = b'{"n": %s, "f": 0.5}' % (b"3" * 400)
    with pytest.raises(orjson.JSONDecodeError) as refused:
        orjson.loads(text)
    assert past_double(text, refused.value) == {"n": int("3" * 400), "f": 0.5}
    for other in (b'{"n": 1e400}', b'[1,', b'["\\ud800", %s]' % (b"3" * 400), b'"\\ud800"'):
        with pytest.raises(orjson.JSONDecodeError) as refused:
            orjson.loads(other)
        assert past_double(other, refused.value) is REFUSED, other
    cut = b'{"n": %s' % (b"3" * 400)  # no JSON past the integer either: the error says where
    with pytest.raises(orjson.JSONDecodeError) as refused:
        orjson.loads(cut)
    with pytest.raises(orjson.JSONDecodeError) as why:
        past_double(cut, refused.value)
    assert why.value.pos == len(cut)


def test_an_event_with_a_long_integer_beside_the_call_is_read(impl):
    # Not in the arguments: in the usage, which orjson alone would refuse with the whole event (and its call).
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f",'
            b'"arguments":"{}"}}]}}],"usage":{"total_tokens":%s}}\n\ndata: [DONE]\n\n' % (b"9" * 320))
    result = impl.reassemble(body, format="openai-chat")
    call, = result.tool_calls
    assert result.errors == [] and call.arguments == {} and result.usage == {"total_tokens": int("9" * 320)}


def _at_depth(frames, fn):
    """Call fn from frames more Python frames down the stack."""
    return fn() if frames == 0 else _at_depth(frames - 1, fn)


@pytest.mark.parametrize("digits,depth,exact_int", [(25, 400, True), (25, 700, False), (25, 985, False),
                                                    (400, 400, True), (400, 700, False), (400, 985, False)])
def test_deep_arguments_read_the_same_on_both_twins_from_any_stack(both, digits, depth, exact_int):
    # The standard library reads nesting by recursion, under a limit that counts the caller's frames:
    # 985 levels read on the compiled twin and not on the pure one (whose stack is deeper), 700 read
    # or not by how deep the caller stood. Now nothing deeper than STANDARD_DEPTH (500) is given to it.
    text = '{"n": %s, "d": %s%s}' % ("7" * digits, "[" * depth, "]" * depth)
    body = chat_body("call_1", "f", text)
    seen = set()
    for impl in both:
        for frames in (0, 400):
            call, = _at_depth(frames, lambda: impl.reassemble(body, format="openai-chat").tool_calls)
            seen.add((call.error and call.error.kind, repr(call.arguments and call.arguments["n"])))
    assert len(seen) == 1, seen
    (error, n), = seen
    if exact_int:
        assert error is None and n == "7" * digits
    elif digits == 25:  # orjson's reading kept, as documented
        assert error is None and n == repr(float("7" * digits))
    else:  # beyond a double and too deep to read exactly: refused as orjson refuses it
        assert error == "malformed"


@pytest.mark.parametrize("usage_first", [False, True], ids=["call-first", "usage-first"])
def test_a_lone_surrogate_and_a_long_integer_in_one_event_read_in_either_order(impl, usage_first):
    # Arguments cut between the two UTF-16 halves of an emoji, and usage beyond a double in the same
    # chunk: orjson names the first of the two it meets, and the event was kept or dropped by which.
    choices = ('"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "function": '
               '{"name": "f", "arguments": "{\\"t\\": \\"\\ud83d"}}]}}]')
    usage = '"usage": {"prompt_tokens": %s}' % ("7" * 400)
    fields = [usage, choices] if usage_first else [choices, usage]
    body = ("data: {%s}\n\n" % ", ".join(fields)).encode()
    body += chunk([tool_delta(0, arguments='\\ude00"}')]).replace(b"\\\\ude00", b"\\ude00") + DONE
    result = impl.reassemble(body, format="openai-chat")
    call, = result.tool_calls
    assert result.errors == [] and call.id == "call_a" and call.arguments == {"t": "\U0001F600"}
    assert result.usage == {"prompt_tokens": int("7" * 400)}


def test_a_string_left_open_is_one_token_to_the_end():
    # _shallow skips strings by one regular expression: a string with no closing quote once failed
    # to match, and every escaped quote after it began another scan to the end (40 KB of arguments
    # beyond a double took 7 s, 5 MB hours). Left open, it now runs to the end in one match.
    from callstitch._exactjson import _NESTING, _shallow
    text = b'{"n": 1, "s": "' + b'\\"' * 5000 + b"[" * 600
    tokens = list(_NESTING.finditer(text))  # {, "n", "s", then the open string, to the end
    assert [m.group()[:1] for m in tokens] == [b"{", b'"', b'"', b'"'] and tokens[-1].end() == len(text)
    assert _shallow(text) and not _shallow(b"[" * 501)


def test_a_caller_near_the_recursion_limit_gets_a_reported_event_not_an_exception(impl):
    # An event the standard library reads (a lone surrogate escape), nested 497 deep, fed from a
    # stack with less room than that: a RecursionError came out of feed().
    inner = "[" * 497 + "1" + "]" * 497
    payload = ('{"x": %s, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", '
               '"function": {"name": "f", "arguments": "\\ud83d"}}]}}]}') % inner
    body = b"data: " + payload.encode() + b"\n\n" + DONE
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(__import__("inspect").stack(0)) + 300)
    try:
        result = impl.reassemble(body, format="openai-chat")
    finally:
        sys.setrecursionlimit(limit)
    # (Python 3.12+ counts the standard library's recursion apart from the interpreter's limit: read)
    assert [e.kind for e in result.errors] in ([], ["malformed chunk"])


def test_an_event_of_invalid_utf8_is_refused_also_with_an_escape(impl):
    # Raw surrogate bytes (CESU-8) are no UTF-8: orjson refuses them. The standard library, asked
    # because the event also holds a \\u escape, read its bytes with surrogatepass and took them.
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_\xed\xa0\xbd",'
            b'"function":{"name":"f","arguments":"{\\"a\\": \\"\\\\u00e9\\"}"}}]}}]}\n\n') + DONE
    result = impl.reassemble(body, format="openai-chat")
    assert [e.kind for e in result.errors] == ["malformed chunk"] and result.tool_calls == []
