"""Calls no JSON writer takes as they are — nested 1,000 deep, lone surrogates, integers beyond 64 bits —
are written by every output path (the CLI's JSON lines and Parquet, reassemble_many), as the text
received with the reason when they are too deep, and the run goes on.

The CLI runs for real, in a subprocess, on each twin (CALLSTITCH_NO_EXTENSIONS); the in-process
paths take the twin from the ``impl`` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import orjson
import pytest

import callstitch
from callstitch._batch import settings as _batch
from callstitch._records import (MAX_DEPTH, Unwritable, call_line, nesting, read_record, read_records,
                                 record_json, to_json)
from callstitch._results import ToolCall


def chat_body(arguments: str, call_id: str = "c1", name: str = "f") -> bytes:
    """An OpenAI chat stream of one call with these argument text, id and name (escaped as JSON allows)."""
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


def nested(depth: int) -> str:
    """Return argument text nested `depth` levels deep: an object holding depth - 1 nested arrays."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


DEEP = nested(1000)


def run_cli(*args: str, twin: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="1" if twin == "python" else "0")
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], capture_output=True,
                          timeout=120, env=env)


@pytest.fixture
def inputs(tmp_path):
    """A 1,000-deep call, then ordinary files, one with a lone surrogate in its call's id and name."""
    paths = []
    for name, body in [("a_deep.sse", chat_body(DEEP, "deep")), ("b_ok.sse", chat_body('{"x": 1}', "ok1")),
                       ("c_surrogate.sse", chat_body('{"y": 2}', "c\ud800", "f\udc00x")),
                       ("d_ok.sse", chat_body('{"z": 3}', "ok2"))]:
        path = tmp_path / name
        path.write_bytes(body)
        paths.append(str(path))
    return paths


# -- the CLI ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("twin", ["c", "python"])
def test_cli_writes_a_1000_deep_call_raw_with_its_reason_and_goes_on(inputs, twin):
    proc = run_cli(*inputs, "-j", "1", twin=twin)
    assert proc.returncode == 1, proc.stderr  # the deep call is reported: the data had a problem
    assert b"Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    for line in lines:
        line.decode("utf-8")  # strict: every line is UTF-8 (a lone surrogate goes as its \u escape)
    records = [json.loads(line) for line in lines]
    assert [(r["source"], r["id"]) for r in records] == [
        (inputs[0], "deep"), (inputs[1], "ok1"), (inputs[2], "c\ud800"), (inputs[3], "ok2")]
    deep = records[0]
    assert deep["arguments"] is None and deep["error"] is None
    assert deep["raw_arguments"] == DEEP
    assert deep["reason"] == f"arguments nested deeper than {MAX_DEPTH} levels: kept as raw_arguments only"
    assert [r["arguments"] for r in records[1:]] == [{"x": 1}, {"y": 2}, {"z": 3}]
    assert records[2]["name"] == "f\udc00x" and "reason" not in records[2]
    err = proc.stderr.decode()
    assert f"{inputs[0]} (stream 0): arguments not written: tool call 'deep' ('f'): arguments nested deeper" in err
    assert "4 sources, 4 streams, 4 calls" in err and "1 arguments not written" in err
    # Worker processes write the same lines.
    assert run_cli(*inputs, "-j", "2", twin=twin).stdout == proc.stdout


@pytest.mark.parametrize("twin", ["c", "python"])
def test_parquet_writes_the_deep_call_and_the_lone_surrogates(inputs, tmp_path, twin):
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "calls.parquet"
    proc = run_cli(*inputs, "-j", "1", "--output-format", "parquet", "-o", str(out), twin=twin)
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr, proc.stderr
    rows = pq.read_table(out).to_pylist()
    assert [r["id"] for r in rows] == ["deep", "ok1", "c\ufffd", "ok2"]  # Parquet's strings are UTF-8
    assert rows[0]["arguments"] is None and rows[0]["raw_arguments"] == DEEP
    assert rows[0]["reason"].startswith(f"arguments nested deeper than {MAX_DEPTH} levels")
    assert rows[2]["name"] == "f\ufffdx"
    assert [orjson.loads(r["arguments"]) for r in rows[1:]] == [{"x": 1}, {"y": 2}, {"z": 3}]
    assert [r["reason"] for r in rows[1:]] == [None, None, None]


# -- reassemble_many, in this process ------------------------------------------------------------------

@pytest.fixture
def twin(impl, monkeypatch):
    monkeypatch.setattr(_batch, "Accumulator", impl.Accumulator)
    return impl


def test_reassemble_many_yields_every_record(twin, inputs):
    problems = []
    batch = callstitch.reassemble_many(inputs, jobs=1, on_problem=lambda *a: problems.append(a))
    records = list(batch)
    assert [r["id"] for r in records] == ["deep", "ok1", "c\ud800", "ok2"]
    assert records[0]["raw_arguments"] == DEEP and "deeper than" in records[0]["reason"]
    assert batch.summary.errors == {"arguments not written": 1}
    assert [(p[0], p[4]) for p in problems] == [(inputs[0], "arguments not written")]


@pytest.mark.parametrize("depth", [200, 254, 255, 256, 400, MAX_DEPTH])
def test_arguments_up_to_the_limit_are_written_parsed(twin, depth):
    (call,) = twin.reassemble(chat_body(nested(depth))).tool_calls
    assert call.error is None and nesting(call.arguments) == depth
    line, reason = call_line(call)
    assert reason is None
    assert json.loads(line)["arguments"] == call.arguments


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1000, 1023])
def test_arguments_past_the_limit_are_written_as_text(twin, depth):
    (call,) = twin.reassemble(chat_body(nested(depth))).tool_calls
    assert call.error is None  # orjson reads them (up to 1,023 levels): the writers must cope
    line, reason = call_line(call)
    record = json.loads(line)
    assert record["arguments"] is None and record["raw_arguments"] == nested(depth)
    assert record["reason"] == reason == f"arguments nested deeper than {MAX_DEPTH} levels: kept as raw_arguments only"
    assert {k: v for k, v in record.items() if k not in ("arguments", "raw_arguments", "reason")} == \
        {k: v for k, v in call.to_dict().items() if k != "arguments"}


# -- the writer itself ---------------------------------------------------------------------------------

def test_integers_beyond_64_bits_and_lone_surrogates_are_written_exactly():
    arguments = {"big": 2**70, "neg": -(2**64) - 1, "lone": "a\ud800b", "pair": "\U0001f600", "cjk": "東京"}
    call = ToolCall("id\udc00", "f", 0, 0, arguments, "{}")
    line, reason = call_line(call)
    assert reason is None and line.endswith(b"\n")
    line.decode("utf-8")
    record = json.loads(line)
    assert record["arguments"] == arguments and record["id"] == "id\udc00"
    assert read_record(line) == record
    assert "東京".encode() in line  # readable text stays as it is


def test_records_read_back_exactly():
    # orjson alone read an integer beyond 64 bits back as a float (found by fuzz/fuzz_records.py).
    arguments = {"big": [2**64, -(2**70)], "id": "12345678901234567890123"}
    line, _ = call_line(ToolCall("c", "f", 0, 0, arguments, "{}"))
    assert read_record(line)["arguments"] == arguments
    assert type(read_record(line)["arguments"]["big"][0]) is int
    plain, _ = call_line(ToolCall("c", "f", 0, 0, {"x": 1}, "{}"))
    lone, _ = call_line(ToolCall("c\ud800", "f", 0, 0, {"x": 1}, "{}"))
    for chunk in (plain + line + lone, plain + lone):  # a chunk with a long digit run, one without
        assert list(read_records(chunk)) == [read_record(part) for part in chunk.splitlines()]
    assert [r["id"] for r in read_records(plain + lone)] == ["c", "c\ud800"]


def test_a_value_holding_itself_is_written_as_text():
    loop: dict = {}
    loop["self"] = loop
    call = ToolCall("c", "f", 0, 0, loop, "{...}")
    line, reason = call_line(call)
    assert json.loads(line)["raw_arguments"] == "{...}" and "deeper than" in reason
    with pytest.raises(Unwritable):
        to_json(loop)


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text")


@pytest.mark.parametrize("value", [10**5000, Unprintable()], ids=["5001-digits", "failing-str"])
def test_values_json_cannot_hold_are_written_as_text(value):
    call = ToolCall("c", "f", 0, 0, {"v": value}, '{"v": ...}')
    line, reason = call_line(call)
    record = json.loads(line)
    assert record["arguments"] is None and record["raw_arguments"] == '{"v": ...}' and "not writable" in reason


def test_raw_text_that_cannot_be_read_still_gives_a_record():
    class Broken:
        def compact(self):
            raise RecursionError("too deep to compact")

    call = ToolCall("c", "f", 0, 0, orjson.loads(DEEP), Broken())
    line, reason = record_json({"id": "c", "arguments": call.arguments}, call)
    assert json.loads(line) == {"id": "c", "arguments": None, "raw_arguments": None, "reason": reason}
    assert reason.endswith("(and the raw text could not be read)")


def test_nesting_counts_without_recursion():
    value: list = []
    for _ in range(200_000):
        value = [value]
    assert nesting(value, stop=10) == 11
    assert nesting(value, stop=10**6) == 200_001
    assert nesting({"a": [1, {"b": []}], "c": 2}) == 4 and nesting(5) == 0
