"""JsonEnd tells a growing text complete exactly when it parses, reading each byte once (shared by both twins)."""

from __future__ import annotations

import importlib
import json
import random

import orjson
import pytest

from callstitch import _json_end
from callstitch._finalize import parses
from callstitch._json_end import JsonEnd

TEXTS = ['{"a": 1}', '{"a": "x}y{\\"]\\\\", "b": [1, {"c": null}]}', "[1, 2, [3]]", "  {}  ", '{"é": "☕"}',
         '{"a": 1}}', '{"a": 1} x', '{"a": 1} {"b": 2}', '{]', '{"a": [1}', '"just a string"', "123", "true",
         '{"k": "\\u00e9\\"}"}', "", "   ", '{"a":' + "[" * 50 + "]" * 50 + "}"]


def _pieces(text: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 8)))) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


@pytest.mark.parametrize("text", TEXTS)
def test_it_agrees_with_a_whole_parse_after_every_piece(text):
    rng = random.Random(text)
    for _ in range(50):
        buf, end = bytearray(), JsonEnd()
        for piece in _pieces(text.encode(), rng):
            buf += piece
            assert end.ask(buf) == parses(buf), (text, bytes(buf))


def test_it_agrees_on_random_json_cut_anywhere():
    rng = random.Random(7)
    for _ in range(300):
        value = {"s": "".join(rng.choice('ab"\\{}[] é') for _ in range(rng.randint(0, 12))),
                 "n": [rng.randint(-5, 5) for _ in range(rng.randint(0, 4))], "o": {"t": rng.random() < 0.5}}
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5) + rng.choice(["", " ", "\n", "}", "x"])
        buf, end = bytearray(), JsonEnd()
        for piece in _pieces(text.encode(), rng):
            buf += piece
            assert end.ask(buf) == parses(buf), (text, bytes(buf))


def test_a_call_sent_with_a_fresh_id_per_fragment_is_read_once(both, monkeypatch):
    # Kimi and LM Studio send a new id with every fragment: each one asks whether the call is
    # complete. The bytes parsed to tell must not grow with the square of the call (a 4 MB call
    # took 37 s): count them (in the pure twin's slot rules too; the compiled twin's are compiled).
    parsed = []

    def counted(data):
        parsed.append(len(data))
        return parses(data)
    monkeypatch.setattr(_json_end, "parses", counted)
    monkeypatch.setattr(importlib.import_module("callstitch._slots_py"), "parses", counted)

    def chunk(call: dict, finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]},
                                                      "finish_reason": finish}]}) + b"\n\n"
    pieces = [chunk({"index": 0, "id": "c0", "function": {"name": "f", "arguments": '{"a": "'}})]
    pieces += [chunk({"index": 0, "id": f"c{k}", "function": {"arguments": "x" * 100}}) for k in range(1, 2000)]
    pieces.append(chunk({"index": 0, "function": {"arguments": '"}'}}, "tool_calls") + b"data: [DONE]\n\n")
    body = b"".join(pieces)
    for impl in both:
        parsed.clear()
        (call,) = impl.reassemble(body, format="openai-chat").tool_calls
        assert call.arguments == {"a": "x" * 199_900} and "changing-id" in call.quirks
        if impl.name == "py":
            assert sum(parsed) <= 2 * len(body), sum(parsed)
