"""OpenAI chat chunks written as JSON lines, responses back to back: each response is a stream of its own.

A gateway's log often writes each chat chunk as one line of JSON, with no "[DONE]" between the
responses. Read as one stream, their calls ran together: the second response's call 0 joined
the first's arguments. Every chunk of a response carries the response's "id", and the SDKs (and
json.dumps of a chunk) write it as the first key: the batch splitter cuts where a line opens
with a new one, whole or in byte ranges, on both twins and the command line. A log that puts
another key first is not cut (one stream, as before), and says nothing wrong about it.
"""

import gzip
import json
import os
import random
import subprocess
import sys

import pytest

import callstitch
from callstitch._batch import settings
from callstitch._batch.split import Splitter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402
from _split import read_in_blocks  # noqa: E402

BODIES = [b for b, _ in workload.responses(6, seed=5)]


def chunk_lines(body: bytes, layout=None) -> bytes:
    """Return an SSE chat body's chunks as JSON lines, compact as written or re-written by layout."""
    payloads = [event[6:] for event in body.split(b"\n\n") if event.startswith(b"data: {")]
    if layout is not None:
        payloads = [layout(json.loads(p)).encode() for p in payloads]
    return b"".join(p + b"\n" for p in payloads)


LAYOUTS = {
    "compact": None,
    "json.dumps": lambda chunk: json.dumps(chunk),  # '{"id": "chatcmpl-…", …': spaces after each colon
    "CRLF": lambda chunk: json.dumps(chunk, separators=(",", ":")) + "\r",  # (the line's LF follows)
}


def expected(bodies: list[bytes]) -> list[tuple]:
    return [(i, c.id, c.name, c.arguments) for i, body in enumerate(bodies)
            for c in callstitch.reassemble(body).tool_calls]


def records(path: str) -> list[tuple]:
    return [(r["stream"], r["id"], r["name"], r["arguments"]) for r in callstitch.reassemble_many([path])]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_each_response_is_a_stream(every_twin, tmp_path, monkeypatch, layout):
    path = tmp_path / "chat.ndjson"
    path.write_bytes(b"".join(chunk_lines(body, LAYOUTS[layout]) for body in BODIES))
    want = expected(BODIES)
    assert len({stream for stream, *_ in want}) > 3  # (calls in most responses)
    assert records(str(path)) == want
    for size in (64, 1000, 20_000):  # range tasks start where a response does
        monkeypatch.setattr(settings, "RANGE", size)
        assert records(str(path)) == want, size


def test_a_gzipped_log_and_a_pipe(every_twin, tmp_path):
    data = b"".join(chunk_lines(body) for body in BODIES)
    want = [list(r) for r in expected(BODIES)]
    path = tmp_path / "chat.ndjson.gz"
    path.write_bytes(gzip.compress(data))
    for args, stdin in (([str(path)], None), (["-"], data)):
        proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", *args], input=stdin,
                              capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        got = [json.loads(line) for line in proc.stdout.splitlines()]
        assert [[r["stream"], r["id"], r["name"], r["arguments"]] for r in got] == want


def test_the_usage_chunk_after_the_finish_is_the_same_response(every_twin, tmp_path):
    lines = [chunk_lines(body) for body in BODIES[:2]]
    first_id = json.loads(lines[0].split(b"\n")[0])["id"]
    usage = json.dumps({"id": first_id, "object": "chat.completion.chunk", "choices": [],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}},
                       separators=(",", ":")).encode() + b"\n"
    path = tmp_path / "chat.ndjson"
    path.write_bytes(lines[0] + usage + lines[1])
    assert records(str(path)) == expected(BODIES[:2])


def test_another_key_first_is_one_stream_as_before(every_twin, tmp_path):
    def object_first(chunk):
        return json.dumps({"object": chunk.pop("object"), **chunk}, separators=(",", ":"))
    path = tmp_path / "chat.ndjson"
    path.write_bytes(b"".join(chunk_lines(body, object_first) for body in BODIES[:2]))
    streams = {r["stream"] for r in callstitch.reassemble_many([str(path)])}
    assert streams == {0}


def test_a_call_id_first_in_its_object_is_no_chunk_id():
    # A call's object may open with its "id" too, but never at a line's start.
    chunk = {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"id": "call_other", "index": 0, "type": "function", "function": {"name": "f", "arguments": ""}}]}}]}
    line = json.dumps(chunk, separators=(",", ":")).encode() + b"\n"
    assert Splitter("openai-chat", "ndjson").scan(line * 3, 0, True)[0] == []


def test_the_splitter_finds_the_same_cuts_however_the_log_is_read():
    data = b"".join(chunk_lines(body) for body in BODIES)
    whole, _ = Splitter("openai-chat", "ndjson").scan(data, 0, True)
    starts = [0]
    for body in BODIES[:-1]:
        starts.append(starts[-1] + len(chunk_lines(body)))
    assert whole == starts[1:]
    rng = random.Random(3)
    for _ in range(20):
        block = rng.choice([1, 7, 300, 4096])
        cuts, _ = read_in_blocks(Splitter("openai-chat", "ndjson"), data, block)
        assert cuts == whole, block


def _line(response_id: str, call_id: str) -> str:
    chunk = {"id": response_id, "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}]}
    return json.dumps(chunk) + "\n"  # (json.dumps writes \uXXXX for what is not ASCII)


@pytest.mark.parametrize("ids", [("é1", "é2"), ('q"1', 'q"2'), ("a\\b", "a\\c"), ("a", "ab")])
def test_ids_with_escapes_are_told_apart(every_twin, tmp_path, ids):
    # Found by review: an id with any escape in it (every non-ASCII one, as json.dumps writes it)
    # told nothing, so its responses ran together.
    path = tmp_path / "chat.ndjson"
    path.write_text(_line(ids[0], "c1") + _line(ids[1], "c2"))
    assert [(r["stream"], r["id"]) for r in callstitch.reassemble_many([str(path)])] == [(0, "c1"), (1, "c2")]


def test_the_ids_of_a_read_are_found_once_however_many_responses_it_holds(monkeypatch):
    # Found by review: after each cut the rest of the read was looked at again (4 MB of
    # three-line responses took 54 s to split, against 0.1 s now). Counted, not timed.
    data = b"".join(b'{"id":"r%d","choices":[{"index":0,"delta":{"content":"hi"}}]}\n' % (i // 3)
                    for i in range(30_000))
    looks = []
    original = Splitter._ids
    monkeypatch.setattr(Splitter, "_ids", lambda self, *a: looks.append(a[1:]) or original(self, *a))
    cuts, _ = Splitter("openai-chat", "ndjson").scan(data, 0, True)
    assert len(cuts) == 9_999
    assert len(looks) <= 2
