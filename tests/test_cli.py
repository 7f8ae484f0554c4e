"""The command line, run for real: `python -m callstitch reassemble ...` in a subprocess."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import orjson
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
PARALLEL = os.path.join(CAPTURES, "openai__openai-python__chat-parallel-weather-and-stock.sse")
# Every test here runs the command line on each twin (the variable reaches the subprocess).
pytestmark = pytest.mark.usefixtures("every_twin")


def run(*args: str, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], input=stdin,
                          capture_output=True, timeout=60, env={**os.environ, **(env or {})})


def records(proc: subprocess.CompletedProcess) -> list[dict]:
    return [orjson.loads(line) for line in proc.stdout.splitlines()]


def test_one_file():
    proc = run(PARALLEL)
    assert proc.returncode == 0, proc.stderr
    got = records(proc)
    assert [(r["source"], r["stream"], r["index"], r["name"]) for r in got] == [
        (PARALLEL, 0, 0, "GetWeatherArgs"), (PARALLEL, 0, 1, "get_stock_price")]
    assert got[0]["arguments"] == {"city": "Edinburgh", "country": "GB", "units": "c"}
    summary = proc.stderr.decode()
    assert "1 source, 1 stream, 2 calls" in summary and "no errors" in summary
    assert "\r" not in summary  # no progress bar when stderr is not a terminal


def test_stdin_gzipped_back_to_back():
    bodies = [b for b, _ in workload.format_responses("anthropic", 5)]
    proc = run("-", "--quiet", stdin=gzip.compress(b"".join(bodies)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert sorted({r["stream"] for r in records(proc)}) == [0, 1, 2, 3, 4]
    assert {r["source"] for r in records(proc)} == {"<stdin>"}


def test_errors_are_reported_and_the_run_goes_on(tmp_path):
    good = tmp_path / "good.sse"
    good.write_bytes(open(PARALLEL, "rb").read())
    broken = tmp_path / "broken.sse"
    broken.write_bytes(b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":'
                       b'{"name":"f","arguments":"{}"}}]}}]}\n\ndata: {oops\n\ndata: [DONE]\n\n')
    corrupt = tmp_path / "corrupt.sse.gz"
    corrupt.write_bytes(gzip.compress(open(PARALLEL, "rb").read())[:200])
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"not json\n" + orjson.dumps({"body": open(PARALLEL).read()}) + b"\n")
    proc = run(str(tmp_path / "missing.sse"), str(broken), str(corrupt), str(good), "-j", "1")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert f"{tmp_path / 'missing.sse'}: No such file" in err
    assert f"{broken} (stream 0, byte 120): malformed chunk" in err
    assert f"{corrupt}" in err and "corrupt archive" in err
    assert {r["source"] for r in records(proc)} == {str(broken), str(good)}
    assert "errors: " in err
    proc = run(str(log), "--field", "body")
    assert proc.returncode == 1
    assert f"{log} (line 1, byte 0): not JSON" in proc.stderr.decode()
    assert [r["stream"] for r in records(proc)] == [1, 1]


def test_bad_arguments_make_status_1(tmp_path):
    path = tmp_path / "trunc.sse"
    path.write_bytes(b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":'
                     b'{"name":"f","arguments":"{\\"a\\":"}}]}}]}\n\ndata: [DONE]\n\n')
    proc = run(str(path))
    assert proc.returncode == 1
    (record,) = records(proc)
    assert record["arguments"] is None and record["raw_arguments"] == '{"a":'
    assert "arguments truncated" in proc.stderr.decode()


@pytest.mark.parametrize("args", [["--format", "nope"], ["-j", "x"], ["--output-format", "csv"], [],
                                  ["--max-call-bytes", "99999999999G"], ["--max-event-bytes", str(2**62 + 1)]])
def test_usage_errors_exit_2(args):
    proc = run(*args, PARALLEL) if args else subprocess.run(
        [sys.executable, "-m", "callstitch"], capture_output=True, timeout=60)
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr


def test_jobs_give_the_same_output(tmp_path):
    for i, fmt in enumerate(["openai-chat", "gemini", "bedrock", "ollama"]):
        body = b"".join(b for b, _ in (workload.format_responses(fmt, 30, seed=i) if fmt != "openai-chat"
                                       else workload.responses(30, seed=i)))
        (tmp_path / f"{i}.sse").write_bytes(body)
    (tmp_path / "z.sse.gz").write_bytes(gzip.compress(open(PARALLEL, "rb").read()))
    env = {"CALLSTITCH_RANGE_BYTES": "50000"}  # several range tasks per file
    one = run(str(tmp_path), "-j", "1", env=env)
    two = run(str(tmp_path), "-j", "2", env=env)
    whole = run(str(tmp_path), "-j", "2")
    assert one.returncode == two.returncode == 0, two.stderr
    assert one.stdout == two.stdout == whole.stdout
    assert len(records(one)) > 100


def test_output_file_and_parquet(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    trunc = tmp_path / "trunc.sse"
    trunc.write_bytes(b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":'
                      b'{"name":"f","arguments":"{\\"a\\":"}}]}}]}\n\ndata: [DONE]\n\n')
    out = tmp_path / "calls.jsonl"
    proc = run(PARALLEL, str(trunc), "-o", str(out))
    assert proc.returncode == 1 and proc.stdout == b""
    expected = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    parquet = tmp_path / "calls.parquet"
    proc = run(PARALLEL, str(trunc), "--output-format", "parquet", "-o", str(parquet))
    assert proc.returncode == 1
    rows = pq.read_table(parquet).to_pylist()
    assert [r["name"] for r in rows] == [r["name"] for r in expected]
    assert orjson.loads(rows[0]["arguments"]) == expected[0]["arguments"]
    assert rows[2]["arguments"] is None and rows[2]["raw_arguments"] == '{"a":'
    assert rows[0]["raw_arguments"] is None and rows[0]["quirks"] == []
    assert [r["stream"] for r in rows] == [0, 0, 0]


def test_closed_stdout_ends_quietly(tmp_path):
    body = b"".join(b for b, _ in workload.responses(200))
    path = tmp_path / "many.sse"
    path.write_bytes(body * 5)
    proc = subprocess.Popen([sys.executable, "-m", "callstitch", "reassemble", str(path), "-j", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 1)
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_progress_bar_on_a_terminal():
    pty = pytest.importorskip("pty")
    main, secondary = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", PARALLEL, "-j", "1"],
                              stdout=subprocess.PIPE, stderr=secondary, timeout=60)
        os.close(secondary)
        secondary = -1
        seen = b""
        try:
            while True:
                data = os.read(main, 4096)
                if not data:
                    break
                seen += data
        except OSError:
            pass
    finally:
        os.close(main)
        if secondary != -1:
            os.close(secondary)
    assert proc.returncode == 0
    assert b"ETA" in seen and b"1 source" in seen


def test_help_explains_with_examples():
    proc = run("--help")
    text = proc.stdout.decode()
    assert proc.returncode == 0
    for word in ("--field", "--output-format", "-j", "HAR", "gzip", "[DONE]", "Exit status", "examples:",
                 "callstitch reassemble gateway.jsonl --field response.body"):
        assert word in text


def test_parquet_writes_a_choice_past_64_bits_as_null_and_says_so(tmp_path):
    # A choice number is kept as sent, and JSON lines hold any integer; Parquet's int64 column does
    # not: the CLI died with an OverflowError traceback and wrote no file.
    pq = pytest.importorskip("pyarrow.parquet")
    body = tmp_path / "big.sse"
    body.write_bytes(b'data: {"choices":[{"index":9223372036854775808,"delta":{"tool_calls":[{"index":0,"id":"big",'
                     b'"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n'
                     b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"ok","function":'
                     b'{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
    lines = run(str(body))
    assert lines.returncode == 0 and [r["choice"] for r in records(lines)] == [0, 2 ** 63]  # choices in order
    parquet = tmp_path / "big.parquet"
    proc = run(str(body), "-o", str(parquet))
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr
    assert b"1 call's choice or index does not fit Parquet's int64: written as null" in proc.stderr
    rows = pq.read_table(parquet).to_pylist()
    assert [(r["id"], r["choice"], r["index"], orjson.loads(r["arguments"])) for r in rows] == [
        ("ok", 0, 0, {}), ("big", None, 0, {})]
    assert rows[0]["reason"] is None
    assert rows[1]["reason"] == "choice 9223372036854775808 does not fit Parquet's int64: written as null"


def test_the_command_line_runs_the_twin_the_environment_picks(every_twin):
    # What makes every test here run on both twins: the subprocess reads CALLSTITCH_NO_EXTENSIONS.
    proc = subprocess.run([sys.executable, "-m", "callstitch", "--version"], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert {"c": b"(c implementation)", "py": b"(python implementation)"}[every_twin.name] in proc.stdout


def test_a_body_of_json_lines_is_read_whatever_the_format_option(tmp_path):
    # Found by review: chat chunks written one per line lost every call in the CLI (with --format
    # auto too: the batch layer named the format it detected, which then framed the body as SSE).
    lines = [line[6:] for line in open(PARALLEL, "rb").read().split(b"\n") if line.startswith(b"data: {")]
    path = tmp_path / "chunks.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    want = [(r["id"], r["name"], r["arguments"]) for r in records(run(PARALLEL))]
    for option in ([], ["--format", "auto"], ["--format", "openai-chat"]):
        proc = run(str(path), *option)
        assert proc.returncode == 0, proc.stderr
        assert [(r["id"], r["name"], r["arguments"]) for r in records(proc)] == want, option
