"""Responses not streamed (a JSON body): read as the events their stream would have brought.

Each recorded stream of a format gives, through the turn, the response the API would have
answered without streaming (`to_response()`). That body, read by both twins (compact and
pretty-printed, the format named and "auto"), must give the stream's calls, texts and finish
reason, no error, and `to_response()` must give the body back unchanged.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
FORMATS = {"anthropic-messages": "anthropic", "openai-responses": "openai-responses", "bedrock-converse": "bedrock",
           "cohere-v2": "cohere", "openai-chat": "openai-chat", "gemini": "gemini"}


def _captures():
    out = []
    for path in sorted(glob.glob(os.path.join(HERE, "*.expected.json"))):
        with open(path) as f:
            expected = json.load(f)
        fmt = FORMATS.get(expected.get("format"))
        if fmt is not None:
            out.append(pytest.param(os.path.join(HERE, expected["capture"]), fmt,
                                    id=os.path.basename(path).split(".")[0]))
    return out


def _seen(result):
    return ([(c.id, c.name, c.kind, c.arguments if c.error is None else c.raw_arguments) for c in result.tool_calls],
            [(c.index, c.text, c.reasoning, c.finish_reason) for c in result.choices])


@pytest.mark.parametrize("path, fmt", _captures())
def test_the_response_a_stream_stands_for_reads_as_the_stream_did(both, path, fmt):
    with open(path, "rb") as f:
        streamed = both[0].reassemble(f.read(), format=fmt)
    document = streamed.to_response()
    calls, choices = _seen(streamed)
    if any(c.error is not None for c in streamed.tool_calls):
        calls = None  # a call cut short is whole in the body (its partial input): compared through the body itself
    for impl in both:
        for body in (json.dumps(document).encode(), json.dumps(document, indent=2, ensure_ascii=False).encode()):
            for named in (fmt, "auto"):
                result = impl.reassemble(body, format=named)
                assert result.errors == [], (impl.name, named, result.errors)
                got_calls, got_choices = _seen(result)
                assert got_choices == choices
                if calls is not None:
                    assert got_calls == calls
                assert result.to_response() == document


def _responses(status, output, **extra):
    return {"id": "resp_1", "object": "response", "created_at": 1741290958, "status": status, "model": "gpt-4.1",
            "output": output, **extra}


FC = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
      "arguments": "{\"city\":\"Paris\"}", "status": "completed"}
CUSTOM = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_2", "name": "run_sql", "input": "SELECT 1"}
MESSAGE = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": "Hello", "annotations": []},
                       {"type": "refusal", "refusal": "No."}]}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Thought."}]}
RESPONSES_BODIES = {
    "completed": (_responses("completed", [REASONING, MESSAGE, FC, CUSTOM], usage={"input_tokens": 5}),
                  [("call_1", "get_weather", "function", {"city": "Paris"}), ("call_2", "run_sql", "custom", "SELECT 1")],
                  ("Hello", "Thought.", "No.", "completed"), []),
    "incomplete": (_responses("incomplete", [FC], incomplete_details={"reason": "max_output_tokens"}),
                   [("call_1", "get_weather", "function", {"city": "Paris"})], (None, None, None, "max_output_tokens"), []),
    "failed": (_responses("failed", [], error={"code": "server_error", "message": "The model failed."}),
               [], (None, None, None, "failed"), ["in-band error"]),
    "in-progress": (_responses("in_progress", []), [], None, []),
}


@pytest.mark.parametrize("name", list(RESPONSES_BODIES))
def test_a_responses_body_of_each_status(both, name):
    document, calls, choice, errors = RESPONSES_BODIES[name]
    for impl in both:
        for named in ("openai-responses", "auto"):
            result = impl.reassemble(json.dumps(document).encode(), format=named)
            assert [e.kind for e in result.errors] == errors
            assert [(c.id, c.name, c.kind, c.arguments) for c in result.tool_calls] == calls
            first = result.choices[0] if result.choices else None
            assert (None if first is None else (first.text, first.reasoning, first.refusal, first.finish_reason)) == choice
            assert result.to_response() == document


def _reads_whole(both, fmt, document, calls, texts):
    """Read document with both twins, fmt named and auto: its calls, (text, reasoning, finish reason), no error, itself back."""
    for impl in both:
        for named in (fmt, "auto"):
            result = impl.reassemble(json.dumps(document).encode(), format=named)
            assert result.errors == []
            assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == calls
            first = result.choices[0]
            assert (first.text, first.reasoning, first.finish_reason) == texts
            assert result.to_response() == document
    return result


def test_an_anthropic_message_read_whole_keeps_every_block(both):
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"},
                           {"type": "redacted_thinking", "data": "ZGF0YQ=="},
                           {"type": "text", "text": "Let me look.", "citations": None},
                           {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
                           {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                           {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                           {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}],
               "stop_reason": "tool_use", "stop_sequence": None, "container": None,
               "usage": {"input_tokens": 10, "output_tokens": 5, "server_tool_use": {"web_search_requests": 1}}}
    result = _reads_whole(both, "anthropic", message,
                          [("toolu_1", "get_weather", {"city": "Paris"}), ("toolu_2", "now", {})],
                          ("Let me look.", "Hmm.", "tool_use"))
    assert result.to_message() == {"role": "assistant", "content": message["content"]}


def test_a_converse_response_read_whole_keeps_every_block(both):
    response = {"output": {"message": {"role": "assistant", "content": [
        {"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "c2ln"}}},
        {"reasoningContent": {"redactedContent": "cmVk"}},
        {"text": "Looking."},
        {"citationsContent": {"content": [{"text": "Cited."}], "citations": [{"title": "doc", "location": {}}]}},
        {"toolUse": {"toolUseId": "tooluse_1", "name": "get_weather", "input": {"city": "Paris"}}},
        {"toolUse": {"toolUseId": "tooluse_2", "name": "web", "type": "server_tool_use", "input": {"q": "x"}}},
        {"toolResult": {"toolUseId": "tooluse_2", "type": "web_search_result", "content": [{"text": "hit"}]}},
        {"toolUse": {"toolUseId": "tooluse_3", "name": "now", "input": {}}},
    ]}}, "stopReason": "tool_use", "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 100}, "additionalModelResponseFields": {"x": 1}}
    _reads_whole(both, "bedrock", response,
                 [("tooluse_1", "get_weather", {"city": "Paris"}), ("tooluse_3", "now", {})],
                 ("Looking.Cited.", "Think.", "tool_use"))


def test_a_cohere_response_read_whole_keeps_plan_calls_content_citations_and_logprobs(both):
    response = {"id": "c0ffee", "finish_reason": "TOOL_CALL", "message": {
        "role": "assistant", "tool_plan": "I will look it up.",
        "tool_calls": [{"id": "get_weather_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                       {"id": "now_2", "type": "function", "function": {"name": "now", "arguments": "{}"}}],
        "content": [{"type": "thinking", "thinking": "Hm."}, {"type": "text", "text": "Sure."}],
        "citations": [{"start": 0, "end": 4, "text": "Sure", "sources": []}]},
        "usage": {"billed_units": {"input_tokens": 5, "output_tokens": 3}, "tokens": {"input_tokens": 70}},
        "logprobs": [{"token_ids": [1], "logprobs": [-0.1]}]}
    _reads_whole(both, "cohere", response,
                 [("get_weather_1", "get_weather", {"city": "Paris"}), ("now_2", "now", {})],
                 ("Sure.", "I will look it up.Hm.", "TOOL_CALL"))


# -- many in one file (batch) ----------------------------------------------------------------------

def _documents(fmt):
    """The responses the recorded streams of fmt stand for, with the calls each gives (whole ones only)."""
    import callstitch
    out = []
    for param in _captures():
        path, named = param.values
        if named == fmt:
            with open(path, "rb") as f:
                result = callstitch.reassemble(f.read(), format=fmt)
            out.append(result.to_response())
    return out


WRITTEN = {"pretty": (lambda d: json.dumps(d, indent=2), "\n"), "lines": (json.dumps, "\n"),
           "crlf-lines": (json.dumps, "\r\n"),
           # bodies joined with no line end between (cat of files that end without one)
           "glued-pretty": (lambda d: json.dumps(d, indent=2), ""), "glued": (json.dumps, "")}


@pytest.mark.usefixtures("every_twin")
@pytest.mark.parametrize("written", list(WRITTEN))
@pytest.mark.parametrize("fmt", sorted(set(FORMATS.values())))
@pytest.mark.parametrize("block", [97, 1 << 20])
def test_responses_not_streamed_back_to_back_are_each_a_stream(every_twin, tmp_path, monkeypatch, fmt, written, block):
    # Before: a file of them one a line was one stream (JSON lines), every call in it; and so was
    # a file of them glued ("}{"), with no call read at all.
    if fmt == "gemini" and written == "glued":
        pytest.skip("a Gemini response is a chunk like any other: glued on one line, it is told from none")
    import callstitch
    from callstitch._batch import settings
    documents = _documents(fmt)
    dump, end = WRITTEN[written]
    path = tmp_path / "responses.json"
    path.write_bytes(end.join(dump(d) for d in documents).encode() + end.encode())
    monkeypatch.setattr(settings, "BLOCK", block)  # (97: the line that tells comes in several reads)
    monkeypatch.setattr(settings, "PROBE", (block,))
    expected = [(k, c.id, c.name, c.arguments) for k, d in enumerate(documents)
                for c in every_twin.reassemble(json.dumps(d).encode(), format=fmt).tool_calls]
    for jobs, range_bytes in ((1, None), (2, 3000)):
        if range_bytes:
            monkeypatch.setattr(settings, "RANGE", range_bytes)
        batch = callstitch.reassemble_many([str(path)], jobs=jobs)
        assert [(r["stream"], r["id"], r["name"], r["arguments"]) for r in batch] == expected
        assert batch.summary.streams == len(documents) and not batch.summary.errors


# -- hostile bodies ---------------------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_ODD = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
                    | st.text(max_size=6) | st.sampled_from(["message", "tool_use", "function_call", "text", "\ud800"]),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=6)
_SAMPLES = None


def _samples():
    global _SAMPLES
    if _SAMPLES is None:
        _SAMPLES = [(fmt, d) for fmt in sorted(set(FORMATS.values())) for d in _documents(fmt)]
        _SAMPLES += [("openai-responses", d) for d, *_ in RESPONSES_BODIES.values()]
    return _SAMPLES


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, path + (i,))


def _replaced(value, path, new):
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_damaged_body_not_streamed_gives_both_twins_one_result_and_never_raises(both, data):
    fmt, document = data.draw(st.sampled_from(_samples()))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = list(_paths(document))[1:]
        if not paths:
            break
        document = _replaced(document, data.draw(st.sampled_from(paths)), data.draw(_ODD))
    try:
        body = json.dumps(document).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError):
        return
    seen = []
    for impl in both:
        for named in (fmt, "auto"):
            result = impl.reassemble(body, format=named)
            try:
                response = result.to_response()
            except ValueError as exc:  # (a body whose format was never recognised has no turn: it says so)
                response = str(exc)
            seen.append((named, result, [str(e) for e in result.errors], response))
    assert seen[0] == seen[2] and seen[1] == seen[3]


# -- the other entry points: the gateway's tee, the command line -----------------------------------

@pytest.mark.parametrize("fmt", sorted(set(FORMATS.values())))
def test_tee_hands_over_the_calls_of_a_body_not_streamed(impl, fmt):
    from callstitch._tee import Tee
    document = next(d for d in _documents(fmt) if d)
    body = json.dumps(document, indent=2).encode()
    reads = [body[i:i + 37] for i in range(0, len(body), 37)]
    seen = []
    tapped = Tee(iter(reads), "auto", seen.append, accumulator=impl.Accumulator())
    assert list(tapped) == reads
    expected = impl.reassemble(body, format=fmt).tool_calls
    assert [(c.id, c.name, c.arguments) for c in seen] == [(c.id, c.name, c.arguments) for c in expected]
    assert tapped.result.to_response() == document


def test_the_command_line_gives_one_stream_per_body_not_streamed(tmp_path):
    import subprocess
    import sys
    documents = _documents("anthropic") + _documents("openai-responses")
    (tmp_path / "anthropic.jsonl").write_text("\n".join(json.dumps(d) for d in _documents("anthropic")) + "\n")
    (tmp_path / "responses.txt").write_text("\n".join(json.dumps(d, indent=2) for d in _documents("openai-responses")))
    done = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", "--emit", "turns", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    turns = [json.loads(line)["response"] for line in done.stdout.splitlines()]
    assert turns == documents  # each body one stream, its turn the body itself


# -- what a log of them holds besides: error bodies, damaged lines, odd text (found by review) ------

def _message(i, text="t"):
    return {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": text},
                        {"type": "tool_use", "id": f"toolu_{i}", "name": "f", "input": {"city": f"c{i}"}}],
            "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 1}}


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
LOGS = {
    # Before: each line after the first that was no whole response went into that line's stream.
    "an error body between": [_message(0), OVERLOADED, _message(1), _message(2)],
    "an error body first": [OVERLOADED, _message(0), _message(1)],
    "a damaged line between": [_message(0), b'{"id":"msg_x","type":"mess', _message(1)],
    "text between": [_message(0), b"upstream connect error", b"", _message(1)],
    # orjson refuses a lone surrogate escape; the accumulators read it (the text keeps it)
    "a lone surrogate": [_message(0), _message(1, "\ud800"), _message(2)],
}


@pytest.mark.usefixtures("every_twin")
@pytest.mark.parametrize("block", [61, 1 << 20])
@pytest.mark.parametrize("name", list(LOGS))
def test_each_line_of_a_log_of_bodies_not_streamed_is_its_own_stream(every_twin, tmp_path, monkeypatch, name, block):
    import callstitch
    from callstitch._batch import settings
    lines = [line if isinstance(line, bytes) else json.dumps(line).encode("utf-8", "surrogatepass") for line in LOGS[name]]
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(settings, "BLOCK", block)
    monkeypatch.setattr(settings, "PROBE", (block,))
    responses = [line for line in lines if line]  # (a blank line is none)
    expected = [(k, c.id, c.arguments) for k, line in enumerate(responses)
                for c in every_twin.reassemble(line, format="anthropic").tool_calls]
    for fmt in ("anthropic", "auto"):
        batch = callstitch.reassemble_many([str(path)], format=fmt)
        assert [(r["stream"], r["id"], r["arguments"]) for r in batch] == expected
        assert batch.summary.streams == len(responses)


def test_a_first_line_too_long_to_tell_the_format_by_is_still_cut_under_auto(every_twin, tmp_path, monkeypatch):
    # Found by review: detection read only the head of the first line (settings.PROBE_MORE, 16 MiB),
    # said "auto", and the file was one stream, the second call's input lost.
    import callstitch
    from callstitch._batch import settings
    monkeypatch.setattr(settings, "PROBE", (64,))
    monkeypatch.setattr(settings, "PROBE_MORE", 256)
    lines = [json.dumps(_message(0, "x" * 5000)), json.dumps(_message(1))]
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n")
    batch = callstitch.reassemble_many([str(path)])
    assert [(r["stream"], r["id"], r["arguments"]) for r in batch] == [(0, "toolu_0", {"city": "c0"}),
                                                                        (1, "toolu_1", {"city": "c1"})]


def test_two_messages_read_as_one_stream_keep_each_tool_input(both):
    # Found by review: the second Message's tool_use block at index 1 again lost its input ({}), as
    # the first's index was marked as streamed.
    body = json.dumps(_message(0)).encode() + b"\n" + json.dumps(_message(1)).encode() + b"\n"
    for impl in both:
        result = impl.reassemble(body, format="anthropic")
        assert [(c.id, c.arguments) for c in result.tool_calls] == [("toolu_0", {"city": "c0"}),
                                                                    ("toolu_1", {"city": "c1"})]
