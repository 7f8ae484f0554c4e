"""A response's terminator sent twice (some proxies do) is no response of its own in a batch."""

import os
import subprocess
import sys

import pytest

import callstitch
from callstitch._batch import settings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CHAT = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
        b'[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"a\\": 1}"}}]}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')
ANTHROPIC = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","role":"assistant",'
             b'"content":[],"usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
             b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
             b'{"type":"tool_use","id":"t1","name":"f","input":{}}}\n\n'
             b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":'
             b'{"type":"input_json_delta","partial_json":"{\\"a\\": 1}"}}\n\n'
             b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
             b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
TERMINATORS = {"openai-chat": b"data: [DONE]\n\n",
               "anthropic": b'event: message_stop\ndata: {"type":"message_stop"}\n\n'}
BODIES = {"openai-chat": CHAT, "anthropic": ANTHROPIC}


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch machinery (in this process) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def batch_of(path, **kw):
    """Return the records and the summary of one batch run over path."""
    batch = callstitch.reassemble_many([str(path)], **kw)
    return list(batch), batch.summary


@pytest.mark.parametrize("fmt", list(BODIES))
@pytest.mark.parametrize("emit", ["calls", "turns"])
def test_a_repeated_terminator_is_no_stream(twin, tmp_path, fmt, emit):
    body, end = BODIES[fmt], TERMINATORS[fmt]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    repeated, plain = tmp_path / "a" / "cap.sse", tmp_path / "b" / "cap.sse"
    repeated.write_bytes(body + end + b": ping\n\n" + body + end + end)
    plain.write_bytes(body + body)
    got, summary = batch_of(repeated, jobs=1, emit=emit)
    want, _ = batch_of(plain, jobs=1, emit=emit)
    assert summary.streams == 2
    assert summary.errors == {}, summary.errors
    assert [{**r, "source": None} for r in got] == [{**r, "source": None} for r in want]
    assert [r["stream"] for r in got] == [0, 1]


def test_ranges_give_the_same_records_with_repeated_terminators(twin, tmp_path, monkeypatch):
    bodies = [b for b, _ in workload.responses(30, seed=5)]
    # Every third response sends [DONE] twice, so some ranges begin right at a repeated one.
    data = b"".join(body + (b"data: [DONE]\n\n" if i % 3 == 0 else b"") for i, body in enumerate(bodies))
    path = tmp_path / "big.sse"
    path.write_bytes(data)
    whole, summary = batch_of(path, jobs=1)
    assert summary.streams == len(bodies)
    monkeypatch.setattr(settings, "RANGE", 3001)
    monkeypatch.setattr(settings, "LOOKBACK", 1024)
    ranged, summary = batch_of(path)
    assert summary.streams == len(bodies)
    assert ranged == whole
    assert len({r["stream"] for r in whole}) == len(bodies)


def test_a_file_of_a_terminator_alone_is_still_a_stream(twin, tmp_path):
    path = tmp_path / "done.sse"
    path.write_bytes(b"\n\ndata: [DONE]\n\n")
    _, summary = batch_of(path, jobs=1)
    assert summary.streams == 1
    assert summary.errors == {}


@pytest.mark.parametrize("second", [
    b'data: {"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[]}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}\n\ndata: [DONE]\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n',
    b'data: {not json}\n\ndata: [DONE]\n\n',
], ids=["envelope", "finish", "usage", "text", "malformed"])
def test_a_short_response_after_another_is_a_stream(twin, tmp_path, second):
    # Only a terminator with nothing before it is taken for a repeat: anything else is a response.
    path = tmp_path / "two.sse"
    path.write_bytes(CHAT + second)
    records, summary = batch_of(path, jobs=1, emit="turns")
    assert summary.streams == 2
    assert len(records) == 2


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_the_cli_counts_no_stream_for_a_repeated_terminator(tmp_path):
    path = tmp_path / "cap.sse"
    path.write_bytes(CHAT + b"data: [DONE]\n\n" + CHAT)
    run = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", "--emit", "turns", str(path)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count('"stream":') == 2
    assert "2 streams" in run.stderr
