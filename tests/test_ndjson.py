"""NDJSON framing and Ollama lines: the compiled twin frames and reads them in place, the twins agree."""

import json
import os
import random

import orjson
import pytest

from _formats import CALLS, build
from conftest import agree, run  # noqa: F401  (the twin-parity helper)

from callstitch import Limits


CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")


def line(obj):
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def message(**fields):
    return {"model": "m", "created_at": "2025-06-01T10:00:00Z", "message": {"role": "assistant", "content": "",
                                                                              **fields}, "done": False}


DONE = {"model": "m", "done": True, "done_reason": "stop", "prompt_eval_count": 12, "eval_count": 34}
CALL = {"id": "call_1", "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}


@pytest.mark.parametrize("fmt", ["ollama", "auto"])
def test_every_line_end_and_blank_line(both, fmt):
    lines = [line(message(content="Hel")), line(message(content="lo")), line(message(tool_calls=[CALL])), line(DONE)]
    for sep in (b"\n", b"\r\n", b"\n\n", b"\n  \t\r\n"):
        body = sep.join(part.rstrip(b"\n") for part in lines) + sep
        result = agree(both, body, fmt)
        assert result.text == "Hello" and result.finish_reason == "stop" and result.format == "ollama"
        assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "get_weather",
                                                                              {"city": "Paris", "days": 3})]
        assert result.usage == {"prompt_eval_count": 12, "eval_count": 34}
        assert not result.errors


@pytest.mark.parametrize("head", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef", b"  \n", b""])
def test_bom_and_partial_bom(both, head):
    body = head + line(message(tool_calls=[CALL])) + line(DONE).rstrip(b"\n")  # the last line has no LF
    result = agree(both, body)
    assert [e.kind for e in result.errors] == ([] if head in (b"\xef\xbb\xbf", b"  \n", b"") else ["malformed chunk"])
    assert result.errors[0].offset == 0 if result.errors else True


def test_lines_over_the_event_limit_are_dropped_with_their_offset(both):
    small = line(message(content="ok"))
    long = line({"pad": "z" * 5000})
    body = small + long + small + long.rstrip(b"\n")
    result = agree(both, body, limits=Limits(event_bytes=1000))
    assert [(e.kind, e.offset) for e in result.errors] == [("limit", len(small)),
                                                          ("limit", 2 * len(small) + len(long))]
    assert result.text == "ok"  # the text is cut at the first dropped line: it may have held a piece of it


@pytest.mark.parametrize("entry", [
    {"id": 7, "function": {"name": "f", "arguments": {"a": 1}}},            # integer id
    {"id": 1.5, "function": {"name": "f", "arguments": {"a": 1}}},          # an id of no usable type
    {"function": {"name": 3, "arguments": {"a": 1}}},                       # a name that is no string
    {"function": {"name": "f", "arguments": '{"a": 1}'}},                   # arguments as text
    {"function": {"name": "f", "arguments": '{"a": '}},                     # … cut short
    {"function": {"name": "f", "arguments": ""}},                           # … empty
    {"function": {"name": "f", "arguments": [1, 2]}},                       # not an object
    {"function": {"name": "f", "arguments": 5}},
    {"function": {"name": "f", "arguments": None}},
    {"function": {"name": "f"}},
    {"function": {"name": "f", "arguments": {"x": "\u00e9\u65e5\U0001f600 <&> \"q\" \\ \t"}}},
    {"function": {"name": "f", "arguments": {"big": 1e300, "neg": -0.0, "n": 12345678901234567890}}},
    {"function": "f"},                                                      # no function object
    {"function": None},
    "not a call",
    None,
])
def test_whole_call_entries(both, entry):
    body = line(message(tool_calls=[CALL, entry])) + line(DONE)
    result = agree(both, body)
    assert result.tool_calls[0].arguments == CALL["function"]["arguments"]


@pytest.mark.parametrize("text", [
    b'{"message": {"tool_calls": {"function": {"name": "f"}}}, "done": false}',  # tool_calls not a list
    b'{"message": "hi", "done": false}',
    b'{"message": null, "done": true}',
    b'{"message": {"content": 5, "thinking": ["x"]}, "done": false}',
    b'{"message": {"content": "a", "content": "b"}, "done": false}',              # duplicate key
    b'{"mess\\u0061ge": {"content": "esc"}, "done": false}',                       # escaped key
    b'{"message": {"content": "\\ud83d"}, "done": false}',                         # lone surrogate
    b'{"done": true, "done_reason": 5, "prompt_eval_count": null}',
    b'{"done": true, "done_reason": "length", "eval_count": 3.5, "prompt_eval_count": [1]}',
    b'{"done": "true"}',
    b'{"error": "model not found"}',
    b'{"error": null, "message": {"content": "fine"}, "done": false}',
    b'[1, 2]',
    b'"text"',
    b'{"message": {"content": "x"}, "done": false} trailing',
])
def test_odd_lines(both, text):
    body = line(message(content="a", tool_calls=[CALL])) + text + b"\n" + line(DONE)
    agree(both, body)


def test_many_calls_in_one_line_and_across_lines(both):
    calls = [{"id": f"c{i}", "function": {"name": f"f{i}", "arguments": {"i": i}}} for i in range(40)]
    body = line(message(tool_calls=calls[:20])) + line(message(tool_calls=calls[20:])) + line(DONE)
    result = agree(both, body, seeds=range(2))
    assert [c.arguments for c in result.tool_calls] == [{"i": i} for i in range(40)]


def test_whole_calls_within_the_limits(both):
    body = line(message(tool_calls=[CALL, {"function": {"name": "big", "arguments": {"x": "y" * 500}}}])) + line(DONE)
    result = agree(both, body, limits=Limits(call_bytes=100))
    assert [c.error.kind if c.error else None for c in result.tool_calls] == [None, "truncated"]
    result = agree(both, body, limits=Limits(calls=1))
    assert [c.name for c in result.tool_calls] == ["get_weather"]
    assert [e.kind for e in result.errors] == ["limit"]


@pytest.mark.parametrize("seed", range(30))
def test_mangled_ollama_streams(both, seed):
    rng = random.Random(seed)
    body = bytearray(build("ollama", CALLS))
    for _ in range(rng.randint(1, 6)):
        pos = rng.randrange(len(body))
        body[pos:pos + rng.randint(0, 3)] = bytes(rng.choice(b'{}[]",:\n\r 0aZ\\\xc3') for _ in range(rng.randint(0, 3)))
    agree(both, bytes(body), seeds=range(2))


def go_line(obj):
    """Return a line as Ollama's server writes it: compact, fields in order, <, > and & escaped."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode() + b"\n"


TEXTS = ["", "plain", "caf\u00e9 \u65e5\u672c \U0001f600", "<a & b>", "quote \" back \\ slash", "tab\tnew\nline",
         "\u2028\u2029", "\x00\x1f", "}", "\",\"done\":true}"]


@pytest.mark.parametrize("text", TEXTS)
def test_text_lines_in_the_server_shape(both, text):
    lines = [go_line(message(content=text)), go_line(message(thinking=text)), go_line(message(content=text, thinking=text))]
    result = agree(both, b"".join(lines) + go_line(DONE))
    assert result.text == (text * 2 or None) and result.reasoning == (text * 2 or None)
    assert not result.errors


@pytest.mark.parametrize("bad", [
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"\xff"},"done":false}',    # not UTF-8
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"\x01"},"done":false}',    # raw control
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"\\ud83d"},"done":false}',  # lone half
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"\\x"},"done":false}',     # bad escape
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a"},"done":false} ',     # trailing space
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a"},"done":false}}',     # one brace more
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a"},"done":true}',       # the last line
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a","thinking":5},"done":false}',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","thinking":"b","content":"a"},"done":false}',
    b'{"model":7,"created_at":"t","message":{"role":"assistant","content":"a"},"done":false}',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a"},"done":false,"x":1}',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"a\xc3"},"done":false}',  # cut character
    b'{"model":"m","remote_model":5,"created_at":"t","message":{"role":"assistant","content":"a"},"done":false}',
    b'{"model":"m","remote_host":"h","remote_model":"r","created_at":"t","message":{"role":"assistant",'
    b'"content":"a"},"done":false}',                                                # remote fields out of order
])
def test_lines_almost_in_the_server_shape(both, bad):
    # Each is read the general way (or reported) exactly as the other twin does.
    agree(both, go_line(message(content="x")) + bad + b"\n" + go_line(DONE))


@pytest.mark.parametrize("remote", [{"remote_model": "gpt-oss:120b"}, {"remote_host": "https://ollama.com:443"},
                                    {"remote_model": "gpt-oss:120b", "remote_host": "https://ollama.com:443"}])
def test_lines_of_a_cloud_model_in_the_server_shape(both, remote):
    # A cloud model run through a local server: the remote fields come right after model.
    def cloud(obj):
        return {"model": obj.pop("model"), **remote, **obj}

    call = {"id": "call_1", "function": {"index": 0, "name": "f", "arguments": {"q": "<x>"}}}
    body = (go_line(cloud(message(thinking="t"))) + go_line(cloud(message(content="a", tool_calls=[call])))
            + go_line(cloud({"model": "m", "created_at": "t", "message": {"role": "assistant", "content": ""},
                             "done": True, "done_reason": "stop", "eval_count": 3})))
    result = agree(both, body)
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "f", {"q": "<x>"})]
    assert (result.text, result.reasoning, result.finish_reason, result.usage) == ("a", "t", "stop", {"eval_count": 3})
    assert not result.errors


def go_call(name, arguments, call_id=None, index=None):
    function = {"name": name, "arguments": arguments} if index is None else {"index": index, "name": name,
                                                                              "arguments": arguments}
    return {"function": function} if call_id is None else {"id": call_id, "function": function}


ARGUMENTS = [{}, {"a": 1}, {"q": "<a & b>", "n": [1, [2, {"x": "}]\"["}]], "u": "\u00e9\U0001f600\\"},
             {"f": 1.5, "e": -0.0, "big": 12345678901234567890}, {"dup": 1, "nested": {"dup": 2}},
             {"s": "\u2028", "t": "\t\n"}]


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_call_lines_in_the_server_shape(both, arguments):
    calls = [go_call("f", arguments), go_call("g", arguments, "call_1"), go_call("h", arguments, "call_2", 2),
             go_call("", arguments, "", 3)]
    body = go_line(message(content="a", tool_calls=calls)) + go_line(message(thinking="t", tool_calls=calls[:1]))
    result = agree(both, body + go_line(DONE))
    assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [
        (None, "f", arguments), ("call_1", "g", arguments), ("call_2", "h", arguments), (None, None, arguments),
        (None, "f", arguments)]
    assert [c.raw_arguments for c in result.tool_calls] == [orjson.dumps(arguments).decode()] * 5
    assert result.text == "a" and result.reasoning == "t" and not result.errors


def deep(levels):
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("arguments", [
    b'{"a":"\xff"}', b'{"a":"\x01"}', b'{"a":"\\ud83d"}', b'{"a":"\\ud83d\\ude00"}', b'{"a":1,}', b'{"a":[1}]',
    b'{"a":1}}', b'{"a":"b\\"}"}', b'{"a":"\\\\"}', b'{"a":NaN}', b'{"a":1e999}', b'{"a":-}', b'{"a" :1}',
    b'{"a":' + deep(600).encode() + b'}', b'{"a":' + deep(1100).encode() + b'}', b'{"a":"unterminated}',
])
def test_call_lines_with_odd_arguments(both, arguments):
    # Each is read the shortcut way, or the general way, or reported, exactly as the other twin does.
    head = b'{"model":"m","created_at":"t","message":{"role":"assistant","content":"","tool_calls":[{"function":'
    body = head + b'{"name":"f","arguments":' + arguments + b'}}]},"done":false}\n'
    agree(both, go_line(message(content="x")) + body + go_line(DONE), seeds=range(1))


def test_many_calls_in_a_line_of_the_server_shape(both):
    for count in (15, 16, 17, 40):
        calls = [go_call(f"f{i}", {"i": i}, f"c{i}", i) for i in range(count)]
        result = agree(both, go_line(message(tool_calls=calls)) + go_line(DONE), seeds=range(1))
        assert [c.arguments for c in result.tool_calls] == [{"i": i} for i in range(count)]


METRICS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
           "eval_duration")


def last_line(message_fields=None, reason="stop", reason_first=True, **metrics):
    """Return a last line: older servers write done_reason before done, newer ones after it."""
    obj = message(**(message_fields or {}))
    del obj["done"]
    if reason is not None and reason_first:
        obj["done_reason"] = reason
    obj["done"] = True
    if reason is not None and not reason_first:
        obj["done_reason"] = reason
    obj.update(metrics)
    return go_line(obj)


@pytest.mark.parametrize("metrics", [
    dict(zip(METRICS, (4883583458, 1334875, 212, 342546000, 38, 4535599000))),
    {}, {"eval_count": 38}, {"prompt_eval_count": 212}, {"total_duration": 5, "eval_duration": 6},
    {"prompt_eval_count": 1.5, "eval_count": -3}, {"prompt_eval_count": 123456789012345678901234, "eval_count": 1e5},
    {"prompt_eval_count": 0, "eval_count": 9223372036854775808},
])
@pytest.mark.parametrize("reason", ["stop", "length", None, "", "q\"uo\\te \u00e9"])
@pytest.mark.parametrize("reason_first", [True, False])
def test_last_lines_in_the_server_shape(both, metrics, reason, reason_first):
    last = last_line(reason=reason, reason_first=reason_first, **metrics)
    result = agree(both, go_line(message(content="a")) + last, seeds=range(1))
    assert result.finish_reason == (reason if reason is not None else "stop") and result.complete
    sent = json.loads(last)  # the counts as sent, integers exact
    usage = {k: sent[k] for k in ("prompt_eval_count", "eval_count") if k in sent}
    assert result.usage == (usage or None)


@pytest.mark.parametrize("last", [
    last_line({"content": "end", "thinking": "t"}),                               # text on the last line
    last_line({"tool_calls": [go_call("f", {"a": 1}, "c1", 0)]}),                 # a call on the last line
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"eval_count":1,'
    b'"prompt_eval_count":2}\n',                                                   # counts out of order
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"eval_count":1,'
    b'"eval_count":2}\n',                                                          # a count twice
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"extra":1}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"eval_count":01}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"eval_count":"1"}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"done_reason":5}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done_reason":5,"done":true}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done_reason":"a","done":true,'
    b'"done_reason":"b"}\n',                                                      # a reason twice
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done_reason":"load",'
    b'"done":false}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true,"eval_count":}\n',
    b'{"model":"m","created_at":"t","message":{"role":"assistant","content":""},"done":true}',  # no LF at the end
])
def test_last_lines_in_and_out_of_the_server_shape(both, last):
    agree(both, go_line(message(content="a", tool_calls=[go_call("g", {})])) + last, seeds=range(1))


def _as_json_lines(sse_body: bytes) -> bytes:
    """Return an SSE body's events as JSON lines: each event's data on a line of its own (a log's way)."""
    out = []
    for block in sse_body.split(b"\n\n"):
        data = [ln[5:].strip() for ln in block.split(b"\n") if ln.startswith(b"data:")]
        if data and data[0] != b"[DONE]":
            out.append(b"\n".join(data) + b"\n")
    return b"".join(out)


@pytest.mark.parametrize("variant", ["openai-chat", "openai-responses", "anthropic", "cohere", "gemini"])  # (bedrock names its events in SSE only)
def test_any_format_s_events_as_json_lines_read_named_as_auto_reads_them(both, variant):
    # Found by review: a named format other than ollama framed its body as SSE whatever it held,
    # so its events written one per line (a log, a proxy) gave no call and "the body looks like
    # openai-chat (JSON lines); pass format='openai-chat'", the format passed; only "auto" read them.
    if variant == "openai-chat":
        sse_body = open(os.path.join(CAPTURES, "openai__openai-python__chat-parallel-weather-and-stock.sse"), "rb").read()
    else:
        sse_body = build(variant, CALLS)
    fmt = variant.split("-sse")[0]
    body = _as_json_lines(sse_body)
    assert body[:1] == b"{"
    want = [(c.id, c.name, c.arguments) for c in agree(both, sse_body, fmt).tool_calls]
    assert want
    for named in (fmt, "auto"):
        result = agree(both, body, named)
        assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == want, named
        assert result.format == fmt and not [e for e in result.errors if e.kind != "in-band error"]
