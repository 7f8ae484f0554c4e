"""A JSON body between the responses of a capture is a response of its own, in the batch.

A server that fails sends a JSON error body instead of a stream (compact, or pretty-printed as
OpenAI's are), and a log may hold a response that was not streamed. Between the streamed
responses of a capture, such a body was read on into the next response: an accumulator framing
it as JSON never halts, so it read that response's events as JSON (a "malformed chunk" each,
about fifty for one Anthropic response) and gave it the error. Now the body ends where its value
closes, in the splitter (cuts) and where accumulators halt (OpenAI chat) alike.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _formats import CALLS, build, format_of
from _streams import chunk, tool_delta

import callstitch
from callstitch._batch import settings

ERRORS = {
    "openai-chat": {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
    "openai-responses": {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}},
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded {not a brace}"}},
    "gemini": {"error": {"code": 429, "message": "Resource exhausted \"}\"", "status": "RESOURCE_EXHAUSTED"}},
    "bedrock-sse": {"message": "Too many requests"},
    "cohere": {"message": "too many requests"},
}


def response(variant: str, i: int) -> bytes:
    """One streamed response of a variant, with a call of its own (and, for Gemini, its own responseId)."""
    if variant == "openai-chat":
        return chunk([tool_delta(0, id=f"call_{i}", name=f"f{i}", arguments='{"n": %d}' % i)]) + b"data: [DONE]\n\n"
    body = build(variant, CALLS[i % 3:i % 3 + 1])
    return body.replace(b"g1P6aZnMMZq5qtsPj9fyuQ8", b"response-%d" % i)


def fmt_of(variant: str) -> str:
    return "openai-chat" if variant == "openai-chat" else format_of(variant)


def run(path, fmt: str) -> tuple[list[dict], list[tuple]]:
    problems: list[tuple] = []
    records = list(callstitch.reassemble_many([str(path)], format=fmt, jobs=1,
                                              on_problem=lambda *p: problems.append(p[2:5])))
    return records, problems


@pytest.mark.parametrize("variant", list(ERRORS))
@pytest.mark.parametrize("layout", ["pretty", "compact"])
def test_an_error_body_between_responses_is_a_stream_of_its_own(every_twin, tmp_path, monkeypatch, variant, layout):
    error = json.dumps(ERRORS[variant], indent=2 if layout == "pretty" else None).encode() + b"\n"
    first = response(variant, 0)
    path = tmp_path / "capture.sse"
    path.write_bytes(first + error + response(variant, 1) + response(variant, 2))
    clean = tmp_path / "clean.sse"
    clean.write_bytes(first + response(variant, 1) + response(variant, 2))
    records, problems = run(path, fmt_of(variant))
    expected, _ = run(clean, fmt_of(variant))
    # The calls are those of the capture without the body, the streams after it one on.
    assert [(r["stream"], r["id"], r["name"], r["arguments"]) for r in records] == [
        (r["stream"] + (r["stream"] > 0), r["id"], r["name"], r["arguments"]) for r in expected]
    # One stream for the body, its problems its own, at its first byte; no "malformed chunk".
    assert problems and {(stream, offset) for stream, offset, _ in problems} == {(1, len(first))}, problems
    assert not any(kind == "malformed chunk" for _, _, kind in problems)
    # Cut into range tasks of a few hundred bytes, read in small blocks: the same records.
    monkeypatch.setattr(settings, "RANGE", 300)
    monkeypatch.setattr(settings, "BLOCK", 256)
    assert run(path, fmt_of(variant)) == (records, problems)


def test_a_response_not_streamed_between_streamed_ones_gives_its_calls(every_twin, tmp_path):
    message = {"id": "chatcmpl-whole", "object": "chat.completion", "created": 1, "model": "gpt-4o",
               "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                   "role": "assistant", "content": None, "tool_calls": [
                       {"id": "call_whole", "type": "function",
                        "function": {"name": "g", "arguments": '{"a": "}{"}'}}]}}]}
    path = tmp_path / "capture.sse"
    path.write_bytes(response("openai-chat", 0) + json.dumps(message, indent=2).encode() + b"\n"
                     + response("openai-chat", 1))
    records, problems = run(path, "openai-chat")
    assert [(r["stream"], r["id"], r["arguments"]) for r in records] == [
        (0, "call_0", {"n": 0}), (1, "call_whole", {"a": "}{"}), (2, "call_1", {"n": 1})]
    assert problems == []


def test_the_cli_reports_the_error_once_at_its_stream(tmp_path):
    error = json.dumps(ERRORS["anthropic"], indent=2).encode() + b"\n"
    first = response("anthropic", 0)
    path = tmp_path / "capture.sse"
    path.write_bytes(first + error + response("anthropic", 1))
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(path), "-q"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr == (f"callstitch: {path} (stream 1, byte {len(first)}): in-band error: overloaded_error: "
                          "Overloaded {not a brace}\n")
    assert [json.loads(line)["stream"] for line in out.stdout.splitlines()] == [0, 2]


# -- found by review of 3d1ffb7 -------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["openai-chat", "anthropic", "gemini"])
@pytest.mark.parametrize("cut", ["in-a-string", "between-keys"])
def test_a_body_cut_short_ends_where_the_events_resume(every_twin, tmp_path, monkeypatch, variant, cut):
    # A truncated error body never closes: passed by its structure alone, it took every response
    # after it (2,000 Anthropic responses gave 1 call; the response after it alone was lost before).
    body = (b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overl\n' if cut == "in-a-string"
            else b'{\n  "error": {\n    "message": "Rate limit",\n')
    first = response(variant, 0)
    path = tmp_path / "capture.sse"
    path.write_bytes(first + body + b"".join(response(variant, i) for i in range(1, 6)))
    clean = tmp_path / "clean.sse"
    clean.write_bytes(first + b"".join(response(variant, i) for i in range(1, 6)))
    expected, _ = run(clean, fmt_of(variant))
    for block, range_bytes in ((4 << 20, 64 << 20), (256, 700), (64, 300)):
        monkeypatch.setattr(settings, "BLOCK", block)
        monkeypatch.setattr(settings, "RANGE", range_bytes)
        records, problems = run(path, fmt_of(variant))
        assert [(r["stream"], r["id"], r["arguments"]) for r in records] == [
            (r["stream"] + (r["stream"] > 0), r["id"], r["arguments"]) for r in expected], (block, range_bytes)
        assert problems and {stream for stream, _, _ in problems} == {1}, problems


@pytest.mark.parametrize("variant", ["openai-chat", "anthropic"])
def test_a_body_glued_on_a_terminator_is_its_own_stream_wherever_the_ranges_end(every_twin, tmp_path, monkeypatch,
                                                                                 variant):
    # A capture that glues each response on the line after its terminator: the whole-file scan cut
    # before the body only because it saw the next response's data line after it; a range task
    # ending at the body's end did not, and took the body for more of the terminator's event.
    def glued(i: int) -> bytes:
        one = response(variant, i)
        return one[:-1] if one.endswith(b"\n\n") else one
    error = json.dumps(ERRORS[variant]).encode() + b"\n"
    path = tmp_path / "glued.sse"
    path.write_bytes(glued(0) + error + b"".join(glued(i) for i in range(1, 4)))
    whole = run(path, fmt_of(variant))
    assert [r["stream"] for r in whole[0]] == [0, 2, 3, 4] and {p[0] for p in whole[1]} == {1}, whole
    for range_bytes in range(200, 3000, 97):
        monkeypatch.setattr(settings, "RANGE", range_bytes)
        assert run(path, fmt_of(variant)) == whole, range_bytes


@pytest.mark.parametrize("variant", ["openai-chat", "anthropic"])
def test_a_body_indented_on_its_line_is_a_stream_of_its_own_in_both_paths(every_twin, tmp_path, monkeypatch, variant):
    # The splitter took a "{" for a body only at its line's start, the halting path (OpenAI chat)
    # after any blanks: the two now agree, and so do range tasks, whose ends the splitter finds.
    first = response(variant, 0)
    path = tmp_path / "capture.sse"
    path.write_bytes(first + b"  \t" + json.dumps(ERRORS[variant]).encode() + b"\n" + response(variant, 1)
                     + response(variant, 2))
    whole = run(path, fmt_of(variant))
    assert [r["stream"] for r in whole[0]] == [0, 2, 3] and {p[:2] for p in whole[1]} == {(1, len(first) + 3)}
    for range_bytes in range(200, 2000, 61):
        monkeypatch.setattr(settings, "RANGE", range_bytes)
        assert run(path, fmt_of(variant)) == whole, range_bytes
