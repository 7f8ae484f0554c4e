"""A file that holds no stream (empty, or only blank lines) is reported as the library reports such a body.

Issue 18 follow-up: reassemble(b"") says "not a stream", but the CLI and reassemble_many passed an
empty or blank-only file over as 0 streams, no errors, exit 0. Now the file is reported, in the
library's words ("not a stream"), and the CLI exits 1 as for any data error. Both twins.
"""

import gzip
import os
import subprocess
import sys

import pytest

import callstitch
from callstitch._batch import settings

CALL = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"a\\": 1}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
NO_STREAM = [b"", b"\n", b"\n\n\r\n", b"\r\n" * 5000, b"  \n \n"]


def _problems(impl, monkeypatch, path):
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    problems = []
    batch = callstitch.reassemble_many([str(path)], jobs=1, on_problem=lambda *a: problems.append(a))
    records = list(batch)
    return records, problems, batch.summary


@pytest.mark.parametrize("content", NO_STREAM, ids=["empty", "LF", "blank lines", "many CRLF", "spaces"])
def test_a_file_with_no_stream_is_reported_as_the_library_reports_it(impl, monkeypatch, tmp_path, content):
    path = tmp_path / "nothing.sse"
    path.write_bytes(content)
    records, problems, summary = _problems(impl, monkeypatch, path)
    library = impl.reassemble(content).errors
    assert [e.kind for e in library] == ["not a stream"]
    assert records == []
    assert [(p[0], p[3], p[4], p[5]) for p in problems] == [(str(path), e.offset, e.kind, e.detail) for e in library]
    assert summary.errors == {"not a stream": 1} and summary.streams == 0


def test_an_empty_gzip_is_reported_too(impl, monkeypatch, tmp_path):
    path = tmp_path / "nothing.sse.gz"
    path.write_bytes(gzip.compress(b""))
    _records, problems, _summary = _problems(impl, monkeypatch, path)
    assert [p[4] for p in problems] == ["not a stream"]


@pytest.mark.parametrize("head", [b"", b"\n\n", b"\r\n\r\n\r\n"])
def test_blank_lines_before_a_stream_are_no_problem(impl, monkeypatch, tmp_path, head):
    path = tmp_path / "one.sse"
    path.write_bytes(head + CALL + b"\n\n")
    records, problems, summary = _problems(impl, monkeypatch, path)
    assert [r["arguments"] for r in records] == [{"a": 1}]
    assert problems == [] and summary.streams == 1


def _cli(twin, *args, stdin=b""):
    env = dict(os.environ)
    env.pop("CALLSTITCH_NO_EXTENSIONS", None)
    if twin == "py":
        env["CALLSTITCH_NO_EXTENSIONS"] = "1"
    return subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], input=stdin,
                          capture_output=True, timeout=120, env=env)


@pytest.mark.parametrize("twin", ["c", "py"])
def test_the_cli_reports_an_empty_and_a_blank_file_and_exits_1(tmp_path, twin):
    empty, blank, good = tmp_path / "empty.sse", tmp_path / "blank.sse", tmp_path / "good.sse"
    empty.write_bytes(b"")
    blank.write_bytes(b"\n\n\n")
    good.write_bytes(CALL)
    run = _cli(twin, "-j", "1", str(empty), str(blank), str(good))
    assert run.returncode == 1, run.stderr
    err = run.stderr.decode()
    assert f"{empty} (byte 0): not a stream: no event of any known format was recognised: the body is empty" in err
    assert f"{blank} (byte 0): not a stream" in err
    assert "1 stream, 1 call" in err and "errors: 2 not a stream" in err
    assert run.stdout.count(b'"name":"f"') == 1  # the good file is read as ever
    assert _cli(twin, "-j", "1", str(good)).returncode == 0


@pytest.mark.parametrize("twin", ["c", "py"])
def test_the_cli_reports_empty_stdin(twin):
    run = _cli(twin, "-")
    assert run.returncode == 1
    assert b"<stdin> (byte 0): not a stream" in run.stderr
