"""ToolCall.kind reaches every output: JSONL records, Parquet, reassemble_many (issue 18 follow-up)."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

import callstitch

# Every test here runs the command line on each twin (the variable reaches the subprocess).
pytestmark = pytest.mark.usefixtures("every_twin")

PATCH = "*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 2\n*** End Patch"


def custom_body() -> bytes:
    """Return an OpenAI chat stream with a custom call (apply_patch) and then a function call."""
    deltas = [
        {"tool_calls": [{"index": 0, "id": "call_p", "type": "custom", "custom": {"name": "apply_patch", "input": ""}}]},
        {"tool_calls": [{"index": 0, "custom": {"input": PATCH[:20]}}]},
        {"tool_calls": [{"index": 0, "custom": {"input": PATCH[20:]}}]},
        {"tool_calls": [{"index": 1, "id": "call_w", "type": "function",
                         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    ]
    events = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


EXPECTED = [("apply_patch", "custom", PATCH), ("get_weather", "function", {"city": "Paris"})]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], capture_output=True,
                          timeout=60, env=dict(os.environ))


def test_jsonl_records_carry_kind(tmp_path):
    path = tmp_path / "custom.sse"
    path.write_bytes(custom_body())
    proc = run(str(path))
    assert proc.returncode == 0, proc.stderr
    records = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["name"], r["kind"], r["arguments"]) for r in records] == EXPECTED


def test_parquet_has_a_kind_column(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "custom.sse"
    path.write_bytes(custom_body())
    out = tmp_path / "calls.parquet"
    proc = run(str(path), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out)
    assert table.schema.names.index("kind") == table.schema.names.index("name") + 1
    rows = table.to_pylist()
    assert [(r["name"], r["kind"], orjson.loads(r["arguments"])) for r in rows] == EXPECTED


def test_reassemble_many_dicts_carry_kind(tmp_path):
    path = tmp_path / "custom.sse"
    path.write_bytes(custom_body())
    records = list(callstitch.reassemble_many([str(path)], jobs=1))
    assert [(r["name"], r["kind"], r["arguments"]) for r in records] == EXPECTED
