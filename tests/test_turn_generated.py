"""Generated turns, streamed and reassembled: to_response() gives back the turn that was streamed.

Captures show what providers sent once; these tests make turns of every shape the formats allow
(texts and thoughts of any length, signed runs, calls whole and streamed, parts of other kinds,
several candidates or choices interleaved), stream them the way the provider does (pieces of
every size, read in random cuts), and check the turn both twins give back against the turn that
was streamed (Gemini: the non-streamed response the merge rule of _turns/gemini.py describes) or
against the provider's SDK reading the same events (Anthropic, OpenAI chat).
"""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _streams import DONE, chunk_obj, dumps, feed_pieces, random_cuts
from test_turn_anthropic import Message, _as_json, _without_sdk_stop_details, sdk_message
from test_turn_openai_chat import ChatCompletion, chunks_of, sdk_expected

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = string.ascii_letters + string.digits + " .,:;!?\"\\/\n\t" + "éß中文🙂"


def _text(r: random.Random, low: int = 1, high: int = 40) -> str:
    return "".join(r.choice(TEXT) for _ in range(r.randint(low, high)))


def _pieces(r: random.Random, text: str) -> list[str]:
    """Cut text into pieces of 1-12 characters (at least one piece, "" for an empty text)."""
    out, at = [], 0
    while at < len(text):
        step = r.randint(1, 12)
        out.append(text[at:at + step])
        at += step
    return out or [""]


def _value(r: random.Random, depth: int = 0):
    kind = r.randrange(6 if depth < 2 else 4)
    if kind == 0:
        return _text(r, 0, 30)
    if kind == 1:
        return r.choice([r.randint(-10**6, 10**6), r.random() * 100])
    if kind == 2:
        return r.choice([True, False])
    if kind == 3:
        return None
    return {f"k{n}": _value(r, depth + 1) for n in range(r.randint(1, 3))}


def _args(r: random.Random) -> dict:
    return {f"{r.choice(['city', 'q', 'n', 'opts'])}{n}": _value(r) for n in range(r.randint(1, 4))}


def _read_back(impl, fmt: str, body: bytes, seed: int):
    """Return the Result of body fed to impl in random cuts (seeded); it must hold no error."""
    acc = impl.Accumulator(format=fmt)
    feed_pieces(acc, body, random_cuts(len(body), seed))
    result = acc.finalize()
    assert not result.errors
    return result


def _leaves(value, path: str = "$"):
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, f"{path}.{key}")
    else:
        yield path, value


# ---------------------------------------------------------------- Gemini


def _gemini_parts(r: random.Random, streamed_calls: bool) -> list[tuple]:
    """Return a candidate's turn as (part as the non-streamed response has it, how it streams) pairs."""
    out: list[tuple] = []
    for _ in range(r.randint(1, 7)):
        kind = r.choice(["text", "thought", "call", "call", "other"] + (["streamed"] * 2 if streamed_calls else []))
        signature = "sig-" + _text(r, 4, 12).replace("\\", "") if r.random() < 0.4 else None
        if kind in ("text", "thought"):
            part: dict = {"text": _text(r)}
            if kind == "thought":
                part["thought"] = True
            last = out[-1][0] if out else None
            if (last is not None and "text" in last and last.get("thought") == part.get("thought")
                    and "thoughtSignature" not in last):
                continue  # it would join the run before it: the non-streamed response has one part
            if signature is not None:
                part["thoughtSignature"] = signature
            out.append((part, kind))
        elif kind in ("call", "streamed"):
            function: dict = {"name": r.choice(["get_weather", "lookup", "run"]), "args": _args(r)}
            if kind == "call" and r.random() < 0.5:
                function = {"id": "c-" + _text(r, 4, 8).replace("\\", ""), **function}
            part = {"functionCall": function}
            if signature is not None:
                part["thoughtSignature"] = signature
            out.append((part, kind))
        else:
            out.append((r.choice([{"executableCode": {"language": "PYTHON", "code": _text(r)}},
                                  {"inlineData": {"mimeType": "image/png", "data": "iVBORw0="}}]), kind))
    return out


def _gemini_stream_parts(r: random.Random, part: dict, kind: str) -> list[dict]:
    """Return the streamed parts that give part: a text in pieces, a call whole or by partialArgs."""
    if kind in ("text", "thought"):
        pieces = [{"text": piece} for piece in _pieces(r, part["text"])]
        for piece in pieces:
            if kind == "thought":
                piece["thought"] = True
        if "thoughtSignature" in part:
            if r.random() < 0.5:
                pieces[-1]["thoughtSignature"] = part["thoughtSignature"]
            else:  # sent after the text, on an empty part of its kind
                pieces.append({"text": "", **({"thought": True} if kind == "thought" else {}),
                               "thoughtSignature": part["thoughtSignature"]})
        return pieces
    if kind == "streamed":  # Vertex AI's streamFunctionCallArguments: no id, the arguments by path
        first: dict = {"functionCall": {"name": part["functionCall"]["name"], "willContinue": True}}
        if "thoughtSignature" in part:
            first["thoughtSignature"] = part["thoughtSignature"]
        out = [first]
        for path, value in _leaves(part["functionCall"]["args"]):
            if isinstance(value, str):
                for piece in _pieces(r, value):
                    out.append({"functionCall": {"partialArgs": [
                        {"jsonPath": path, "stringValue": piece, "willContinue": True}], "willContinue": True}})
                entry: dict = {"jsonPath": path, "stringValue": ""}
            elif value is None:
                entry = {"jsonPath": path, "nullValue": "NULL_VALUE"}
            elif isinstance(value, bool):
                entry = {"jsonPath": path, "boolValue": value}
            else:
                entry = {"jsonPath": path, "numberValue": value}
            out.append({"functionCall": {"partialArgs": [entry], "willContinue": True}})
        out.append({"functionCall": {}})
        return out
    return [part]


def _gemini_case(seed: int) -> tuple[bytes, dict]:
    """Return a Gemini SSE stream of random candidates, and the non-streamed response it stands for."""
    r = random.Random(seed)
    envelope = {"modelVersion": "gemini-3-pro-preview", "responseId": "resp-" + str(seed)}
    turns = {index: _gemini_parts(r, streamed_calls=True) for index in range(r.randint(1, 2))}
    queues = {index: [p for part, kind in turn for p in _gemini_stream_parts(r, part, kind)]
              for index, turn in turns.items()}
    chunks = []
    while any(queues.values()):
        waiting = [i for i, q in queues.items() if q]
        candidates = []  # a chunk carries parts of one candidate, or now and then of each one waiting
        for index in (waiting if r.random() < 0.3 else [r.choice(waiting)]):
            take = r.randint(1, 3)
            parts, queues[index] = queues[index][:take], queues[index][take:]
            candidates.append({"content": {"role": "model", "parts": parts}, "index": index})
        chunks.append({"candidates": candidates, **envelope})
    usage = {"promptTokenCount": 7, "candidatesTokenCount": 40, "totalTokenCount": 47}
    for index in turns:
        chunks.append({"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP",
                                       "index": index}], **envelope})
    chunks[-1]["usageMetadata"] = usage
    body = b"".join(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\r\n\r\n" for c in chunks)
    response = {"candidates": [{"content": {"role": "model", "parts": [part for part, _ in turns[index]]},
                                "finishReason": "STOP", "index": index} for index in sorted(turns)],
                **envelope, "usageMetadata": usage}
    return body, response


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_a_gemini_turn_comes_back_as_the_non_streamed_response(both, seed):
    body, response = _gemini_case(seed)
    for impl in both:
        result = _read_back(impl, "gemini", body, seed)
        assert result.to_response() == response, impl.__name__
        for candidate in response["candidates"]:
            assert result.to_message(candidate["index"]) == candidate["content"]


# ---------------------------------------------------------------- Anthropic, against the SDK


def _sse_event(obj: dict) -> bytes:
    return b"event: " + obj["type"].encode() + b"\ndata: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def _anthropic_block(r: random.Random, index: int) -> list[dict]:
    """Return the events of one random content block at index: its start, deltas and stop."""
    kind = r.choice(["text", "text", "thinking", "redacted_thinking", "tool_use", "tool_use", "server_tool_use"])
    deltas: list[dict] = []
    if kind == "text":
        start: dict = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(r, _text(r, 0, 60))]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(r, _text(r, 0, 60))]
        deltas.append({"type": "signature_delta", "signature": "Sig" + _text(r, 8, 20).replace("\\", "")})
    elif kind == "redacted_thinking":
        start = {"type": "redacted_thinking", "data": "EmwK" + str(r.getrandbits(64))}
    else:
        server = kind == "server_tool_use"
        start = {"type": kind, "id": ("srvtoolu_" if server else "toolu_") + str(r.getrandbits(48)),
                 "name": "web_search" if server else r.choice(["get_weather", "lookup"]), "input": {}}
        arguments = {} if r.random() < 0.15 else _args(r)
        text = json.dumps(arguments, ensure_ascii=r.random() < 0.5) if arguments else ""
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _pieces(r, text) if piece]
    events = [{"type": "content_block_start", "index": index, "content_block": start}]
    events += [{"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas]
    if r.random() < 0.2:
        events.insert(r.randint(1, len(events)), {"type": "ping"})
    events.append({"type": "content_block_stop", "index": index})
    if kind == "server_tool_use":  # its result follows, whole in its start
        events += [{"type": "content_block_start", "index": index + 1, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": start["id"], "content": [
                {"type": "web_search_result", "url": "https://example.com/" + str(index), "title": _text(r),
                 "encrypted_content": "Eo" + str(r.getrandbits(64)), "page_age": None}]}},
            {"type": "content_block_stop", "index": index + 1}]
    return events


def _anthropic_case(seed: int) -> bytes:
    r = random.Random(seed)
    events: list[dict] = [{"type": "message_start", "message": {
        "id": f"msg_{seed}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 0}}}]
    index = 0
    for _ in range(r.randint(1, 6)):
        block = _anthropic_block(r, index)
        events += block
        index = max(e["index"] for e in block if "index" in e) + 1
    events.append({"type": "message_delta", "delta": {"stop_reason": r.choice(["end_turn", "tool_use"]),
                                                      "stop_sequence": None},
                   "usage": {"output_tokens": r.randint(2, 500)}})
    events.append({"type": "message_stop"})
    return b"".join(_sse_event(e) for e in events)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_an_anthropic_turn_equals_the_sdks_message(both, seed):
    body = _anthropic_case(seed)
    want = sdk_message(body)
    for impl in both:
        result = _read_back(impl, "anthropic", body, seed)
        ours = result.to_response()
        Message.model_validate(ours)
        assert _as_json(ours) == _without_sdk_stop_details(ours, dict(want)), impl.__name__
        assert result.to_message() == {"role": "assistant", "content": ours["content"]}


# ---------------------------------------------------------------- OpenAI chat, against the SDK


def _chat_case(seed: int) -> bytes:
    """Return a chat stream of 1-3 choices interleaved: texts, reasoning, calls (several at once), then usage."""
    r = random.Random(seed)
    queues: dict[int, list[dict]] = {}
    for number in range(r.randint(1, 3)):
        deltas: list[dict] = [{"role": "assistant", "content": ""}]
        if r.random() < 0.3:
            deltas += [{"reasoning_content": piece} for piece in _pieces(r, _text(r))]
        if r.random() < 0.6:
            deltas += [{"content": piece} for piece in _pieces(r, _text(r, 0, 60))]
        calls = r.randint(0, 3)
        for index in range(calls):
            text = json.dumps(_args(r), ensure_ascii=r.random() < 0.5)
            pieces = _pieces(r, text)
            head = {"index": index, "id": f"call_{seed}_{number}_{index}", "type": "function",
                    "function": {"name": r.choice(["get_weather", "lookup"]), "arguments": pieces[0]}}
            deltas.append({"tool_calls": [head]})
            deltas += [{"tool_calls": [{"index": index, "function": {"arguments": piece}}]} for piece in pieces[1:]]
        reason = "tool_calls" if calls else "stop"  # ("length" makes the SDK's parse step raise)
        queues[number] = [{"index": number, "delta": delta, "finish_reason": None} for delta in deltas]
        queues[number].append({"index": number, "delta": {}, "finish_reason": reason})
    # The first chunk opens every choice in order: the SDK's snapshot takes no other first chunk.
    chunks = [chunk_obj([queue.pop(0) for queue in queues.values()])]
    while any(queues.values()):
        number = r.choice([n for n, q in queues.items() if q])
        chunks.append(chunk_obj([queues[number].pop(0)]))
    chunks.append(chunk_obj([], usage={"prompt_tokens": 9, "completion_tokens": 30, "total_tokens": 39}))
    return b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + DONE


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_an_openai_chat_turn_equals_the_sdks_completion(both, seed):
    body = _chat_case(seed)
    want = sdk_expected(chunks_of(body))
    for impl in both:
        result = _read_back(impl, "openai-chat", body, seed)
        ours = result.to_response()
        ChatCompletion.model_validate(ours)
        assert ours == want, impl.__name__
