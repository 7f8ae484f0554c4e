"""What follows a response's last event with no blank line after it is fed as it comes, never all held.

Found by a hostile-input review: an Anthropic capture whose message_stop event gets no blank
line, then 200 MB of keep-alive comments with none either. By the SSE rules the event runs on to
a blank line, and the batch splitter kept every byte back until one came (423 MB of RSS and 12 s
at -j 1, against 39 MB and 1.2 s with the blank line). Comments and other lines after a
terminator belong to no new event: once no glued response can follow any more (split.GLUE_GAP
past the terminator's data line), the splitter knows the response ends at the next blank line,
or the file's end, and lets the bytes until then be fed as they come. The records stay those of
the same file with the blank line.
"""

import os
import sys
import tracemalloc

import pytest

import callstitch
from callstitch._batch import settings, split
from callstitch._batch.split import Splitter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402
from test_batch_repeated_terminators import BODIES  # noqa: E402
from _split import read_in_blocks  # noqa: E402

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
KEEP_ALIVE = b": keep-alive\n"
ANTHROPIC = BODIES["anthropic"]  # one Anthropic response with a tool call


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch machinery (in this process) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def unended(body: bytes) -> bytes:
    """Return a response without the blank line after its last event (its last line break kept)."""
    end = b"\r\n" if body.endswith(b"\r\n\r\n") else b"\n"
    assert body.endswith(end + end)
    return body[:-len(end)]


def run(path, **kw):
    """Return the records of one batch run (source left out) and its summary's counts."""
    batch = callstitch.reassemble_many([str(path)], jobs=1, **kw)
    records = [{**r, "source": None} for r in batch]
    return records, (batch.summary.streams, batch.summary.calls, dict(batch.summary.errors))


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_keep_alives_after_an_unended_terminator_are_not_held(tmp_path):
    # The review's file, at a quarter of its size: memory must not grow with what follows.
    size = 12 * settings.BLOCK
    path, blank = tmp_path / "unended.sse", tmp_path / "blank.sse"
    rest = KEEP_ALIVE * (size // len(KEEP_ALIVE))
    path.write_bytes(unended(ANTHROPIC) + rest)
    blank.write_bytes(ANTHROPIC + rest)
    tracemalloc.start()
    try:
        got = run(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A few reads live at a time (it was the whole rest of the file, twice over while it was joined).
    assert peak < 6 * settings.BLOCK, f"peak {peak / 2**20:.0f} MB for a file of {size / 2**20:.0f} MB"
    assert got == run(blank)
    assert got[1] == (1, 1, {})


# -- how much the splitter keeps back, whatever follows ------------------------------------------

def _bedrock_sse() -> bytes:
    """Return a Bedrock response over SSE: messageStop, then its metadata event."""
    return open(os.path.join(CAPTURES, "bedrock__pydantic-ai__converse-nova-tool.sse"), "rb").read()


def _last_events() -> dict:
    """Return, per format, a response's end with no blank line after its last event."""
    bedrock = _bedrock_sse()
    at = bedrock.rindex(b"event: metadata")
    return {
        "anthropic": b'event: message_stop\ndata: {"type":"message_stop"}\n',
        "openai-responses": b'event: response.completed\ndata: {"type":"response.completed","response":{}}\n',
        "cohere": b'event: message-end\ndata: {"type":"message-end"}\n',
        "openai-chat": b"data: [DONE]\n",
        "bedrock": unended(bedrock),                        # its metadata event unended
        "bedrock-stop": bedrock[:at - 1],                   # messageStop unended, no metadata
        "gemini": b'data: {"candidates":[{"finishReason":"STOP"}],"responseId":"a"}\r\n',
    }


RESTS = {
    "keep-alives": lambda size: KEEP_ALIVE * (size // len(KEEP_ALIVE)),
    "event-lines": lambda size: b"event: ping\n" * (size // 12),
    "id-lines": lambda size: b"id: 7\r\n" * (size // 7),
    "one-long-line": lambda size: b"x" * size,
    "one-long-comment": lambda size: b":" + b"k" * size,
}


@pytest.mark.parametrize("rest", list(RESTS))
@pytest.mark.parametrize("fmt", list(_last_events()))
@pytest.mark.parametrize("after", [b"", b"\n"], ids=["to-the-end", "then-a-blank-line"])
def test_the_splitter_keeps_little_back_whatever_follows(fmt, rest, after):
    block = 1 << 16
    data = _last_events()[fmt] + RESTS[rest](1 << 20) + after + ANTHROPIC
    splitter = Splitter(fmt.split("-stop")[0], "sse")
    cuts, held = read_in_blocks(splitter, data, block)
    assert held <= split.GLUE_GAP + 2 * block, f"{held} bytes kept back"
    whole, _ = Splitter(splitter.format, "sse").scan(data, 0, True)
    assert cuts == [c for c in whole if c < len(data)]


def test_a_data_line_far_past_the_terminator_is_no_glue(monkeypatch):
    # The price of holding little: a glued response is told only within GLUE_GAP of the terminator.
    monkeypatch.setattr(split, "GLUE_GAP", 64)
    stop = b'event: message_stop\ndata: {"type":"message_stop"}\n'
    start = b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
    assert Splitter("anthropic", "sse").scan(stop + KEEP_ALIVE * 2 + start, 0, True)[0] == [len(stop)]
    assert Splitter("anthropic", "sse").scan(stop + KEEP_ALIVE * 4 + start, 0, True)[0] == []


# -- the records ------------------------------------------------------------------------------

def _bodies(fmt: str) -> list[bytes]:
    """Return four responses of a format, each ending in its blank line."""
    if fmt == "bedrock":
        other = os.path.join(CAPTURES, "bedrock__pydantic-ai__converse-server-tool-then-client-tool.sse")
        return [_bedrock_sse(), open(other, "rb").read()] * 2
    if fmt == "anthropic-made":
        return [ANTHROPIC] * 4
    return [b for b, _ in workload.format_responses(fmt, 4, seed=5)]


RECORD_RESTS = {"few-keep-alives": KEEP_ALIVE * 3, "keep-alives": KEEP_ALIVE * 400, "id-lines": b"id: 7\n" * 200,
                "long-line": b"x" * 3000}


@pytest.mark.parametrize("fmt", ["anthropic", "anthropic-made", "openai-responses", "cohere", "gemini", "bedrock"])
@pytest.mark.parametrize("rest", list(RECORD_RESTS))
def test_the_records_are_the_same_at_any_read_size(twin, tmp_path, monkeypatch, fmt, rest):
    # A small GLUE_GAP, so that small reads wait, then let the event run on, across many reads.
    monkeypatch.setattr(split, "GLUE_GAP", 1024)
    a, b, c, d = _bodies(fmt)
    eol = b"\r\n" if a.endswith(b"\r\n") else b"\n"
    lines = RECORD_RESTS[rest].replace(b"\n", eol)
    # The lines after a terminator, then a blank line, or the file's end.
    blank, path = tmp_path / "blank.sse", tmp_path / "unended.sse"
    blank.write_bytes(a + b + lines + eol + c + d + lines)
    path.write_bytes(a + unended(b) + lines + eol + c + unended(d) + lines)
    kw = {"format": fmt.replace("-made", "")}
    whole = run(path, **kw)  # (one read: the file is smaller than settings.PROBE)
    if rest != "long-line":  # (a line of no field after a blank line is a stream of its own: "not a stream")
        assert whole == run(blank, **kw)
        assert whole[1][0] == 4 and whole[1][2] == {}
    for block in (61, 4096):
        monkeypatch.setattr(settings, "BLOCK", block)
        monkeypatch.setattr(settings, "PROBE", (block,))
        assert run(path, **kw) == whole, block


def test_a_glued_response_after_a_few_keep_alives_is_still_its_own(twin, tmp_path, monkeypatch):
    # Glued captures (no blank line after each response) still give one stream each when a few
    # keep-alives come between, at any read size.
    bodies = [ANTHROPIC] * 3
    plain, path = tmp_path / "plain.sse", tmp_path / "glued.sse"
    plain.write_bytes(b"".join(bodies))
    path.write_bytes(b"".join(unended(body) + KEEP_ALIVE * 5 for body in bodies))
    want = run(plain)
    assert want[1] == (3, 3, {})
    for block in (7, 61, 4096):
        monkeypatch.setattr(settings, "BLOCK", block)
        monkeypatch.setattr(settings, "PROBE", (block,))
        assert run(path, format="anthropic") == want, block
