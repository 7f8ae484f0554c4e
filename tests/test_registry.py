"""The registry of formats: every table derives from it, detection asks in its order, and a new format is one entry."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import callstitch
from callstitch import _cli
from callstitch._batch import split
from callstitch._formats import dispatch, registry
from callstitch._state import StreamState

SRC = os.path.join(os.path.dirname(callstitch.__file__))


def test_every_table_lists_the_registered_formats():
    named = list(registry.ENTRIES)
    assert list(registry.ADAPTERS) == named
    assert registry.names() == tuple(named) + ("auto",)
    assert sorted(name for name, _ in registry.DETECTION) == sorted(named)
    assert set(registry.DEFAULT_FRAMING) == set(named) | {"auto"}
    assert set(split.SPLITTABLE) == {name for name, entry in registry.ENTRIES.items() if entry.terminator}
    for entry in registry.ENTRIES.values():
        assert callable(entry.adapter.handle) and callable(entry.adapter.claims), entry.name
    assert registry.STARTS == {name: (registry.DEFAULT_FRAMING[name], registry.STATES.get(name))
                               for name in registry.names()}
    assert registry.CLOSERS == {name: entry.adapter.close for name, entry in registry.ENTRIES.items()
                                if hasattr(entry.adapter, "close")}


def test_the_seven_formats_of_the_contract():
    assert set(registry.ADAPTERS) == {"openai-chat", "openai-responses", "anthropic", "gemini", "bedrock", "cohere",
                                      "ollama"}


def test_the_cli_offers_the_registered_formats():
    choices = next(a.choices for a in _cli.build_parser()._subparsers._group_actions[0].choices["reassemble"]._actions
                   if "--format" in a.option_strings)
    assert tuple(choices) == registry.names()


def test_unknown_formats_are_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match="known formats: openai-chat, .*, auto"):
        dispatch.check_format("openai")
    assert dispatch.check_format("auto") == "auto"


@pytest.mark.parametrize("name", list(registry.names()))
def test_a_stream_s_framing_is_told_by_its_first_bytes_else_its_format_s(name):
    state = StreamState(name)
    assert state.framing is None and state.fallback == registry.DEFAULT_FRAMING[name]


def test_framings_per_format():
    # When the first bytes do not tell: Ollama streams NDJSON, the rest SSE (Bedrock's event stream
    # and Gemini's JSON array are told by their first byte).
    assert {name: StreamState(name).fallback for name in registry.names()} == {
        "openai-chat": "sse", "openai-responses": "sse", "anthropic": "sse", "cohere": "sse", "ollama": "ndjson",
        "bedrock": "sse", "gemini": "sse", "auto": "sse"}


def test_detection_asks_the_most_specific_first():
    assert [name for name, _ in registry.DETECTION] == [
        "openai-responses", "anthropic", "cohere", "bedrock", "gemini", "ollama", "openai-chat"]
    ranks = [registry.ENTRIES[name].rank for name, _ in registry.DETECTION]
    assert ranks == sorted(ranks)


@pytest.mark.parametrize("obj, found", [
    # an Ollama line that also has "choices" is Ollama's: Ollama is asked before OpenAI chat
    ({"model": "m", "done": False, "message": {}, "choices": []}, "ollama"),
    # a Gemini chunk that also looks like an Ollama line is Gemini's
    ({"candidates": [], "done": True, "model": "m"}, "gemini"),
    ({"choices": []}, "openai-chat"),
    ({"type": "response.created"}, "openai-responses"),
    ({"type": "message_start"}, "anthropic"),
    ({"nothing": 1}, None),
])
def test_detection_order_decides_between_formats_that_both_claim(obj, found):
    assert dispatch.detect(None, obj) == found


@pytest.mark.parametrize("obj, found", [
    ({"model": "m", "done": True, "message": {"content": "hi"}, "choices": []}, "ollama"),
    ({"candidates": [{"content": {"parts": [{"text": "hi"}]}}], "done": True, "model": "m"}, "gemini"),
])
def test_the_twins_detect_in_registry_order(impl, obj, found):
    acc = impl.Accumulator()
    acc.feed_chunk(obj)
    assert acc.finalize().format == found


@pytest.fixture
def claim_everything():
    """Register, for one test, a format that claims every event, asked first; restore the registry after."""
    module = type(sys)("everything")
    module.claims = lambda event, obj: True
    module.handle = lambda acc, state, event, obj, offset: acc.text_piece(0, 0, "seen ")
    before = list(registry.DETECTION)
    registry.register(registry.Format("everything", module, "sse", None, rank=0))
    yield
    registry.unregister("everything")
    assert registry.DETECTION == before


def test_a_registered_format_is_asked_in_its_rank(impl, claim_everything):
    assert dispatch.detect(None, {"choices": []}) == "everything"
    assert "everything" not in split.SPLITTABLE  # it declared no terminator
    result = impl.reassemble(b'data: {"choices": []}\n\ndata: {"type": "message_start"}\n\n')
    assert (result.format, result.text) == ("everything", "seen seen ")
    with pytest.raises(ValueError, match="has no turn module"):  # a turn module is found by the adapter's name
        result.to_response()


def test_unregister_restores_every_table(claim_everything):
    pass  # the fixture's own check, after the test: the detection order is as before


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.Format("anthropic", registry.ADAPTERS["anthropic"], "sse", None, rank=1))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.Format("auto", registry.ADAPTERS["anthropic"], "sse", None, rank=1))


def _enum_codes() -> dict[str, int]:
    """Return the compiled twin's FMT_* codes, read from its source (wherever the pyx or a .pxi keeps them)."""
    codes = {}
    for folder, _, files in os.walk(SRC):
        for name in files:
            if name.endswith((".pyx", ".pxi", ".pxd")):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    codes.update((m[1], int(m[2])) for m in re.finditer(r"^\s+FMT_([A-Z]+) = (\d+)$", f.read(), re.M))
    return codes


def test_fast_codes_are_the_compiled_twin_s():
    codes = _enum_codes()
    assert codes, "no FMT_ enum found in the compiled twin's source"
    for name, code in registry.FAST_CODES.items():
        assert codes[name.split("-")[-1].upper()] == code, name
    assert sorted(registry.FAST_CODES.values()) == sorted(code for code in codes.values() if code)


def test_the_compiled_twin_reads_the_registry_s_codes():
    from callstitch import _accumulator_c
    assert _accumulator_c._FORMAT_CODES is registry.FAST_CODES


# ---------------------------------------------------------------- a new format: one module, one entry

TOY_ADAPTER = '''
"""A toy SSE format: {"type": "toy.piece", "n": 0, "id": .., "name": .., "args": ".."}, toy.text, toy.end."""

def claims(event, obj):
    return type(obj) is dict and type(obj.get("type")) is str and obj["type"].startswith("toy.")

def handle(acc, state, event, obj, offset):
    kind = obj.get("type") if type(obj) is dict else None
    if kind == "toy.piece":
        acc.fragment(0, obj.get("n"), obj.get("id"), obj.get("name"), obj.get("args", ""))
    elif kind == "toy.text":
        acc.text_piece(0, 0, obj["text"])
    elif kind == "toy.end":
        acc.choice_finished(0, "stop")
        acc.complete(None, None)
    else:
        state.error("unexpected shape", "not a toy event", offset, obj)
'''

TOY_RUN = '''
import json, re, sys
sys.path.insert(0, sys.argv[1])
import toy_format
# Everything imported first: the tables are read live, so a format registered after import counts.
import callstitch._batch.run, callstitch._cli, callstitch._accumulator_c, callstitch._accumulator_py
from callstitch._formats import registry
registry.register(registry.Format("toy", toy_format, "sse", re.compile(rb'toy\\.end(?=["\\r\\n])'), rank=5))

from callstitch import _accumulator_c, _accumulator_py
from callstitch._api import make_reassemble
from callstitch._cli import main

body = open(sys.argv[2], "rb").read()
one = body[:len(body) // 2]
for twin in (_accumulator_c, _accumulator_py):
    for fmt in ("toy", "auto"):
        result = make_reassemble(twin.Accumulator)(one, format=fmt)
        acc = twin.Accumulator(format=fmt)
        for i in range(len(one)):
            acc.feed(one[i:i + 1])
        assert acc.finalize() == result
        print(json.dumps([result.format, result.complete, result.text, [e.kind for e in result.errors],
                          [(c.id, c.name, c.arguments) for c in result.tool_calls]]))
sys.stdout.flush()
sys.exit(main(["reassemble", sys.argv[2], "--format", sys.argv[3], "-j", "1"]))
'''


def _toy_event(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _toy_response(k: int) -> bytes:
    return b"".join(_toy_event(e) for e in (
        {"type": "toy.text", "text": f"hello {k}"},
        {"type": "toy.piece", "n": 0, "id": f"call_{k}", "name": "lookup", "args": '{"q": '},
        {"type": "toy.piece", "n": 0, "args": f'"x{k}"}}'},
        {"type": "toy.piece", "n": 1, "id": f"call_{k}b", "name": "noop", "args": "{}"},
        {"type": "toy.end"}))


@pytest.mark.parametrize("cli_format", ["toy", "auto"])
def test_a_new_sse_format_is_one_module_and_one_entry(tmp_path, cli_format):
    (tmp_path / "toy_format.py").write_text(TOY_ADAPTER)
    (tmp_path / "run.py").write_text(TOY_RUN)
    capture = tmp_path / "two.sse"
    capture.write_bytes(_toy_response(1) + _toy_response(2))  # back to back: the batch layer cuts at "end"
    proc = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(tmp_path), str(capture), cli_format],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    expected = ["toy", True, "hello 1", [], [["call_1", "lookup", {"q": "x1"}], ["call_1b", "noop", {}]]]
    assert [json.loads(line) for line in lines[:4]] == [expected] * 4  # both twins, named and auto
    records = [json.loads(line) for line in lines[4:]]
    assert [(r["id"], r["name"], r["arguments"]) for r in records] == [
        ("call_1", "lookup", {"q": "x1"}), ("call_1b", "noop", {}),
        ("call_2", "lookup", {"q": "x2"}), ("call_2b", "noop", {})]
    assert [r["stream"] for r in records] == [0, 0, 1, 1]  # cut at the registered terminator
    assert "quirks: " not in proc.stderr  # each response read on its own: no call index seen twice
