"""--emit turns and --emit chat-messages: reassemble_many and the CLI write each stream's whole turn.

Each turn record must equal what the library gives for the same body (Result.to_response()),
whatever the way in: one file, back-to-back streams cut into range tasks, worker processes, a
JSONL log with its request joined, JSON lines or Parquet. Bad input never stops the run.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import orjson
import pytest

import callstitch
from callstitch._batch import settings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
BODIES = sorted(p for p in glob.glob(os.path.join(CAPTURES, "*")) if p.endswith((".sse", ".eventstream", ".json"))
                and not p.endswith(".expected.json"))
CHAT = os.path.join(CAPTURES, "openai__openai-python__chat-parallel-weather-and-stock.sse")


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch layer (in this process: jobs=1) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def turns(sources, **kw):
    problems = []
    batch = callstitch.reassemble_many(sources, emit="turns", jobs=kw.pop("jobs", 1),
                                       on_problem=lambda *p: problems.append(p), **kw)
    return list(batch), problems, batch.summary


def expected_turn(impl, body: bytes) -> dict:
    result = impl.reassemble(body)
    return {"format": result.format, "complete": result.complete, "response": result.to_response()}


@pytest.mark.parametrize("path", BODIES, ids=os.path.basename)
def test_each_capture_gives_the_library_turn(twin, path):
    records, _, summary = turns([path])
    body = open(path, "rb").read()
    assert len(records) == summary.streams >= 1
    first = records[0]
    assert (first["source"], first["stream"]) == (path, 0)
    if summary.streams == 1:
        assert {k: first[k] for k in ("format", "complete", "response")} == expected_turn(twin, body)
    assert all(type(r["errors"]) is list for r in records)


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic", "ollama", "bedrock"])
def test_back_to_back_streams_cut_into_ranges_give_each_turn(twin, tmp_path, monkeypatch, fmt):
    made = workload.responses(30) if fmt == "openai-chat" else workload.format_responses(fmt, 30)
    bodies = [b for b, _ in made]
    path = tmp_path / "many.stream"
    path.write_bytes(b"".join(bodies))
    whole, _, _ = turns([str(path)])
    monkeypatch.setattr(settings, "RANGE", 7919)  # range tasks, cut at response boundaries
    monkeypatch.setattr(settings, "LOOKBACK", 4096)
    ranged, _, _ = turns([str(path)])
    assert ranged == whole
    assert [r["stream"] for r in whole] == list(range(30))
    assert [r["response"] for r in whole] == [twin.reassemble(b, format=fmt).to_response() for b in bodies]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_worker_processes_give_the_same_records(tmp_path):
    paths = BODIES[:12]
    assert turns(paths, jobs=2)[0] == turns(paths, jobs=1)[0]


def test_a_body_of_no_format_has_a_record_saying_so(twin, tmp_path):
    page = tmp_path / "502.sse"
    page.write_bytes(b"<html><body><h1>502 Bad Gateway</h1></body></html>\n")
    records, problems, summary = turns([str(page), CHAT])
    assert [r["source"] for r in records] == [str(page), CHAT]
    bad = records[0]
    assert bad["response"] is None and bad["complete"] is False
    assert any("not a stream" in e for e in bad["errors"]) and any("never recognised" in e for e in bad["errors"])
    assert records[1]["response"] == twin.reassemble(open(CHAT, "rb").read()).to_response()
    assert summary.failed


def test_a_response_too_deep_to_write_is_reported_and_the_run_goes_on(twin, tmp_path):
    deep = "[" * 2000 + "]" * 2000
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                                                 "function": {"name": "f", "arguments": '{"a":' + deep + "}"}}]}}]}
    body = b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"
    path = tmp_path / "deep.sse"
    path.write_bytes(body)
    records, problems, _ = turns([str(path), CHAT])
    assert len(records) == 2
    assert records[1]["response"] is not None
    kinds = [p[4] for p in problems]
    if records[0]["response"] is None:  # a response nested deeper than the writers go: said so
        assert "turn not written" in kinds
        assert any("turn not written" in e for e in records[0]["errors"])


def _log(tmp_path, lines) -> str:
    path = tmp_path / "gateway.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


REQUEST = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Weather in Edinburgh and AAPL?"}],
           "tools": [{"type": "function", "function": {"name": "GetWeatherArgs", "parameters": {"type": "object"}}}],
           "parallel_tool_calls": True}


def test_turns_of_a_log_carry_the_request(twin, tmp_path):
    body = open(CHAT).read()
    path = _log(tmp_path, [{"request": REQUEST, "response": {"body": body}}, {"response": {"body": body}}])
    records, _, _ = turns([path], field="response.body", request_field="request")
    assert [r["stream"] for r in records] == [0, 1]
    assert records[0]["request"] == REQUEST and "request" not in records[1]
    assert records[0]["response"] == twin.reassemble(body.encode()).to_response()


def test_chat_messages_are_fine_tuning_lines(twin, tmp_path):
    from pydantic import TypeAdapter
    from openai.types.chat import ChatCompletionMessageParam

    body = open(CHAT, "rb").read()
    cut = body[:len(body) // 2]  # a stream cut short: not training data
    anthropic = open(os.path.join(CAPTURES, "anthropic__anthropic-sdk-python__text-then-tool.sse")).read()
    lines = [{"request": REQUEST, "body": body.decode()}, {"request": REQUEST, "body": cut.decode()},
             {"body": body.decode()}, {"request": REQUEST, "body": anthropic}]
    problems = []
    batch = callstitch.reassemble_many([_log(tmp_path, lines)], field="body", request_field="request",
                                       emit="chat-messages", on_problem=lambda *p: problems.append(p))
    got = list(batch)
    assert got == [{"messages": [*REQUEST["messages"], twin.reassemble(body).to_message()],
                    "tools": REQUEST["tools"], "parallel_tool_calls": True}]
    adapter = TypeAdapter(ChatCompletionMessageParam)
    for message in got[0]["messages"]:
        adapter.validate_python(message)
    assert [(p[2], p[4]) for p in problems if p[4] in ("turn not written", "no request", "not chat")] == [
        (1, "turn not written"), (2, "no request"), (3, "not chat")]
    assert batch.summary.failed


def test_chat_messages_need_a_request_field():
    with pytest.raises(ValueError, match="request_field"):
        callstitch.reassemble_many([CHAT], emit="chat-messages")
    with pytest.raises(ValueError, match="unknown emit"):
        callstitch.reassemble_many([CHAT], emit="messages")


# -- the command line, in a subprocess ------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], capture_output=True,
                          timeout=120)


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_cli_writes_turns_as_json_lines_and_parquet(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    paths = [CHAT, os.path.join(CAPTURES, "anthropic__anthropic-sdk-python__text-then-tool.sse")]
    proc = cli(*paths, "--emit", "turns", "-j", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    lines = [orjson.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["source"], r["stream"]) for r in lines] == [(p, 0) for p in paths]
    for r, p in zip(lines, paths):
        assert r["response"] == callstitch.reassemble(open(p, "rb").read()).to_response()
    out = tmp_path / "turns.parquet"
    proc = cli(*paths, "--emit", "turns", "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    table = pq.read_table(out).to_pylist()
    assert [orjson.loads(row["response"]) for row in table] == [r["response"] for r in lines]
    assert [{k: row[k] for k in ("source", "stream", "format", "complete", "errors")} for row in table] == [
        {k: r[k] for k in ("source", "stream", "format", "complete", "errors")} for r in lines]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_cli_chat_messages(tmp_path):
    body = open(CHAT).read()
    path = _log(tmp_path, [{"req": REQUEST, "resp": body}])
    proc = cli(path, "--field", "resp", "--request-field", "req", "--emit", "chat-messages", "-q")
    assert proc.returncode == 0, proc.stderr
    [line] = [orjson.loads(x) for x in proc.stdout.splitlines()]
    assert line["messages"][-1] == callstitch.reassemble(body).to_message()
    assert set(line) == {"messages", "tools", "parallel_tool_calls"}


@pytest.mark.parametrize("args, says", [
    (["--emit", "chat-messages", "--field", "resp"], "--request-field"),
    (["--request-field", "req"], "--field"),
    (["--emit", "chat-messages", "--field", "resp", "--request-field", "req", "--output-format", "parquet",
      "-o", "x.parquet"], ".jsonl"),
])
def test_cli_refuses_options_that_do_not_go_together(tmp_path, args, says):
    proc = cli(CHAT, *args)
    assert proc.returncode == 2
    assert says in proc.stderr.decode()
