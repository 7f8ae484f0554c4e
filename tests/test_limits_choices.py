"""Limits.choices bounds all of a choice (text, calls, finish reason, turn record), and every choice kept is listed.

Before: a choice past the limit lost its calls and text but kept its finish reason and its turn
record, so a stream of 50,000 choices with Limits(choices=4) gave a Result, and a to_response(),
of 50,000 choices; and a choice that said only its role, or only fields the turn keeps, was in
neither. Each behaviour runs on every entry point that takes limits: the library (both twins),
reassemble_many and the CLI.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import pytest

import callstitch
from callstitch import Limits
from callstitch._tee import Tee
from _streams import DONE, dumps

LIMIT = 3


def _chat_choice(k: int) -> list[dict]:
    """The chunks of one chat choice: role and an extra first, logprobs, a text, a call, a finish reason."""
    def one(choice: dict) -> dict:
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": k, **choice}]}
    return [one({"delta": {"role": "assistant", "annotations": [{"k": k}]}, "stop_reason": k}),
            one({"delta": {"content": f"text {k}"}, "logprobs": {"content": [{"token": "t", "logprob": -1.0}]}}),
            one({"delta": {"tool_calls": [{"index": 0, "id": f"call_{k}", "type": "function",
                                           "function": {"name": "f", "arguments": '{"k": %d}' % k}}]}}),
            one({"delta": {}, "finish_reason": "tool_calls"})]


def chat_body(n: int) -> bytes:
    return b"".join(b"data: " + dumps(c) + b"\n\n" for k in range(n) for c in _chat_choice(k)) + DONE


def gemini_body(n: int, finish_each: bool = True) -> bytes:
    def chunk(k: int) -> dict:
        finish = {"finishReason": "STOP"} if finish_each or k == n - 1 else {}
        return {"candidates": [{"index": k, "content": {"role": "model", "parts": [
            {"text": f"text {k}"}, {"functionCall": {"name": "f", "args": {"k": k}}}, {"inlineData": {"k": k}}]},
            **finish, "safetyRatings": [{"k": k}], "citationMetadata": {"citations": [{"k": k}]}}],
            "modelVersion": "g", "responseId": "r"}
    return b"".join(b"data: " + dumps(chunk(k)) + b"\r\n\r\n" for k in range(n))


BODIES = {"openai-chat": chat_body, "gemini": gemini_body}


def _listed(fmt: str, response: dict) -> list[int]:
    if fmt == "openai-chat":
        return [c["index"] for c in response["choices"]]
    return [c.get("index") for c in response.get("candidates", [])]


@pytest.mark.parametrize("fmt", BODIES)
def test_nothing_of_a_choice_past_the_limit_is_kept(impl, fmt):
    result = impl.reassemble(BODIES[fmt](40), format=fmt, limits=Limits(choices=LIMIT))
    assert [c.index for c in result.choices] == list(range(LIMIT))
    assert all(c.finish_reason is not None for c in result.choices)
    assert sorted({call.choice for call in result.tool_calls}) == list(range(LIMIT))
    assert _listed(fmt, result.to_response()) == list(range(LIMIT))
    assert [e.detail for e in result.errors] == [
        f"Limits.choices ({LIMIT}) exceeded, first by choice {LIMIT}; it and further choices are dropped: their text, "
        "calls, finish reason and other fields"]
    with pytest.raises(IndexError):
        result.to_message(choice=LIMIT)


@pytest.mark.parametrize("fmt", BODIES)
def test_the_turn_does_not_grow_with_choices_past_the_limit(impl, fmt):
    # (Gemini's turn logs up to FOLD_AT changed envelopes before it folds them: some slack, not growth)
    sizes = [len(pickle.dumps(impl.reassemble(BODIES[fmt](n), format=fmt, limits=Limits(choices=LIMIT))._turn))
             for n in (400, 4000)]
    assert sizes[1] <= 1.5 * sizes[0], sizes


def test_the_limit_holds_against_50000_choices(impl):
    result = impl.reassemble(chat_body(50_000), format="openai-chat", limits=Limits(choices=4))
    assert len(result.choices) == 4 and len(result.to_response()["choices"]) == 4


def test_a_choice_that_says_only_its_role_or_its_extras_is_listed(impl):
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]},
              {"choices": [{"index": 1, "delta": {"role": "assistant"}}]},
              {"choices": [{"index": 2, "delta": {"role": "assistant", "audio": {"id": "a"}}}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    body = b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + DONE
    result = impl.reassemble(body, format="openai-chat")
    assert [(c.index, c.text, c.finish_reason) for c in result.choices] == [(0, "hi", "stop"), (1, None, None),
                                                                          (2, None, None)]
    response = result.to_response()
    assert [c["message"] for c in response["choices"]][1:] == [
        {"role": "assistant", "content": None, "refusal": None},
        {"role": "assistant", "content": None, "refusal": None, "audio": {"id": "a"}}]
    assert result.to_message(choice=2) == {"role": "assistant", "content": None, "audio": {"id": "a"}}


def test_a_choice_whose_calls_a_limit_refused_is_listed(impl):
    chunks = [{"choices": [{"index": k, "delta": {"tool_calls": [
        {"index": 0, "id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}
        for k in range(3)]
    body = b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + DONE
    result = impl.reassemble(body, format="openai-chat", limits=Limits(calls=1))
    assert [(c.index, len(c.tool_calls)) for c in result.choices] == [(0, 1), (1, 0), (2, 0)]


def test_reassemble_many_turns_keep_only_the_choices_within_the_limit(tmp_path):
    # (a Gemini stream ends at its first finishReason: only the last chunk has one here)
    (tmp_path / "gemini.sse").write_bytes(gemini_body(20, finish_each=False))
    (tmp_path / "openai-chat.sse").write_bytes(chat_body(20))
    records = list(callstitch.reassemble_many(str(tmp_path), emit="turns", limits=Limits(choices=LIMIT)))
    assert sorted((r["format"], _listed(r["format"], r["response"])) for r in records) == [
        ("gemini", list(range(LIMIT))), ("openai-chat", list(range(LIMIT)))]


def test_the_cli_keeps_only_the_choices_within_the_limit(tmp_path):
    path = tmp_path / "many.sse"
    path.write_bytes(chat_body(20))
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(path), "--emit", "turns",
                          "--max-choices", str(LIMIT), "-j", "1", "--quiet"],
                         capture_output=True, text=True, timeout=120)
    (line,) = out.stdout.splitlines()
    record = json.loads(line)
    assert _listed("openai-chat", record["response"]) == list(range(LIMIT))
    assert "Limits.choices (3)" in json.dumps(record["errors"])
    calls = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(path),
                            "--max-choices", str(LIMIT), "-j", "1", "--quiet"],
                           capture_output=True, text=True, timeout=120)
    assert sorted(json.loads(line)["choice"] for line in calls.stdout.splitlines()) == list(range(LIMIT))


def test_tee_keeps_only_the_choices_within_the_limit(impl):
    # A gateway's tap, on each twin: on_call gets the calls of the choices kept, the result lists only those.
    seen: list = []
    tap = Tee([chat_body(20)], "openai-chat", seen.append,
              accumulator=impl.Accumulator(format="openai-chat", limits=Limits(choices=LIMIT)))
    assert b"".join(tap) == chat_body(20)  # the stream itself passes through whole
    assert [c.index for c in tap.result.choices] == list(range(LIMIT))
    assert sorted(call.choice for call in seen) == list(range(LIMIT))


def test_callstitch_tee_passes_its_limits_on():
    tap = callstitch.tee([chat_body(20)], format="openai-chat", limits=Limits(choices=LIMIT))
    assert b"".join(tap) == chat_body(20)
    assert [c.index for c in tap.result.choices] == list(range(LIMIT))
