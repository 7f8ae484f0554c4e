"""Keep-alives after a file's last response are no stream of their own (issue 18: they read as 'not a stream')."""

import subprocess
import sys

import pytest

import callstitch
from callstitch._batch import settings

CALL = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"a\\": 1}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
ANTHROPIC = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","role":"assistant",'
             b'"content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
             b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


@pytest.mark.parametrize("body", [CALL, ANTHROPIC], ids=["openai-chat", "anthropic"])
@pytest.mark.parametrize("tail", [b": keep-alive\n\n", b":\n\n: ping\n", b"\n\n: ping\n\n\n"])
def test_keep_alives_after_the_last_response_are_no_stream(impl, monkeypatch, tmp_path, body, tail):
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    path = tmp_path / "two.sse"
    path.write_bytes(body + body + tail)
    batch = callstitch.reassemble_many([str(path)], jobs=1)
    records = list(batch)
    assert batch.summary.streams == 2
    assert batch.summary.errors == {}, batch.summary.errors
    assert len(records) == (2 if body is CALL else 0)


@pytest.mark.parametrize("body", [CALL, ANTHROPIC], ids=["openai-chat", "anthropic"])
@pytest.mark.parametrize("tail", [b": keep-alive\n\n", b"event: ping\n\n", b"id: 5\n\n", b"retry: 3000\n\n", b":\n\n"])
@pytest.mark.parametrize("emit", ["calls", "turns"])
def test_keep_alives_after_the_last_response_are_no_stream_in_range_tasks_either(impl, monkeypatch, tmp_path, body,
                                                                                 tail, emit):
    # Found by review: a range task that started after the last response held only the keep-alives
    # after it, and reported them as a stream of their own ("not a stream", one record more with
    # --emit turns), so the output of a large file changed with where its ranges fell.
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    path = tmp_path / "many.sse"
    path.write_bytes(body * 20 + tail)
    whole = list(callstitch.reassemble_many([str(path)], jobs=1, emit=emit))
    for size in (len(body) * 20 - 3, len(body) * 19 + 5, 97):  # the last range: the tail alone, or with more
        monkeypatch.setattr(settings, "RANGE", size)
        batch = callstitch.reassemble_many([str(path)], jobs=1, emit=emit)
        assert list(batch) == whole, size
        assert batch.summary.streams == 20 and batch.summary.errors == {}, (size, batch.summary.errors)


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_the_cli_exits_0_on_a_capture_ending_in_a_keep_alive(tmp_path):
    path = tmp_path / "cap.sse"
    path.write_bytes(CALL + CALL + b": keep-alive\n\n")
    run = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", "--quiet", "-j", "1", str(path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count('"name":"f"') == 2


def test_a_file_of_keep_alives_alone_is_still_no_stream(impl, monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    path = tmp_path / "pings.sse"
    path.write_bytes(b": ping\n\n: ping\n\n")
    batch = callstitch.reassemble_many([str(path)], jobs=1)
    list(batch)
    assert "not a stream" in batch.summary.errors
