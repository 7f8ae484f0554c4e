"""Captures put back to back without the blank line after each response still give one stream each.

A response written with its last event closed by one line break (a log that strips each body
and joins them with "\\n") runs into the next response: by the SSE rules the terminator's event
and the next response's first event are one event, which no response can hold (its data would be
"[DONE]" and a JSON text, or two JSON texts). The batch reader cuts right after the terminator's
data line instead.
"""

import gzip
import os
import sys

import pytest

import callstitch
from callstitch._batch import settings
from callstitch._batch.split import Splitter, by_cuts

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
FORMATS = ["openai-chat", "openai-responses", "anthropic", "cohere"]


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch machinery (in this process) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def bodies(fmt: str, n: int = 9) -> list[bytes]:
    """Return n generated responses of a format, each ending in its blank line."""
    if fmt == "openai-chat":
        return [b for b, _ in workload.responses(n, seed=3)]
    return [b for b, _ in workload.format_responses(fmt, n, seed=3)]


def glued(body: bytes) -> bytes:
    """Return a response as a log that strips bodies writes it: its last line break only."""
    assert body.endswith(b"\n\n")
    return body[:-1]


def records(path, **kw):
    """Return the records of one batch run (source left out), its stream count and errors."""
    batch = callstitch.reassemble_many([str(path)], **kw)
    out = [{**r, "source": None} for r in batch]
    return out, batch.summary.streams, batch.summary.errors


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
def test_glued_responses_give_the_records_of_separate_ones(twin, tmp_path, fmt, crlf):
    parts = bodies(fmt)
    if crlf:
        parts = [b.replace(b"\n", b"\r\n") for b in parts]
        together = [b[:-2] for b in parts]
    else:
        together = [glued(b) for b in parts]
    plain = tmp_path / "plain.sse"
    plain.write_bytes(b"".join(parts))
    path = tmp_path / "glued.sse"
    path.write_bytes(b"".join(together))
    want, streams, errors = records(plain, jobs=1)
    assert streams == len(parts) and errors == {}
    got, streams, errors = records(path, jobs=1)
    assert errors == {}, errors
    assert streams == len(parts)
    assert got == want


@pytest.mark.parametrize("fmt", FORMATS)
def test_glued_responses_in_ranges_give_the_same_records(twin, tmp_path, monkeypatch, fmt):
    parts = bodies(fmt, 20)
    path = tmp_path / "glued.sse"
    path.write_bytes(b"".join(glued(b) for b in parts))
    whole, streams, _ = records(path, jobs=1)
    assert streams == len(parts)
    monkeypatch.setattr(settings, "RANGE", 2999)
    monkeypatch.setattr(settings, "LOOKBACK", 1024)
    ranged, streams, errors = records(path)
    assert errors == {}
    assert streams == len(parts)
    assert ranged == whole


def test_a_glued_gzip_capture(twin, tmp_path):
    parts = bodies("openai-chat")
    path = tmp_path / "glued.sse.gz"
    path.write_bytes(gzip.compress(b"".join(glued(b) for b in parts)))
    got, streams, errors = records(path, jobs=1)
    assert (streams, errors) == (len(parts), {})
    assert len({r["stream"] for r in got}) == len(parts)


def test_glued_captures_of_real_streams(twin, tmp_path):
    # Real Anthropic captures, each as its file has it and glued, one after another.
    names = sorted(n for n in os.listdir(CAPTURES) if n.startswith("anthropic__") and n.endswith(".sse"))[:6]
    parts = [open(os.path.join(CAPTURES, n), "rb").read() for n in names]
    parts = [p if p.endswith(b"\n\n") else p.rstrip(b"\n") + b"\n\n" for p in parts]
    plain = tmp_path / "plain.sse"
    plain.write_bytes(b"".join(parts))
    path = tmp_path / "glued.sse"
    path.write_bytes(b"".join(glued(p) for p in parts))
    want, streams, _ = records(plain, jobs=1)
    got, glued_streams, errors = records(path, jobs=1)
    assert glued_streams == streams == len(parts)
    assert got == want


# -- where the splitter cuts, and where it does not --------------------------------------------

DONE_AND_NEXT = b'data: [DONE]\ndata: {"choices":[]}\n\n'


@pytest.mark.parametrize("body, cuts", [
    (DONE_AND_NEXT, [13]),
    (b'data: [DONE]\r\ndata: {"choices":[]}\r\n\r\n', [14]),
    (b'data: [DONE]\n: ping\ndata: {"choices":[]}\n\n', [13]),
    (b'data: [DONE]\nevent: x\ndata: {"choices":[]}\n\n', [13]),
    (b"data: [DONE]\n\n", []),             # one response: the cut at its end is no cut inside
    (b"data: [DONE]\nid: 7\n\n", []),      # fields of the same event
    (b"data: [DONE]\n: ping\n\n", []),
    (b"data: [DONE]\ndata:\n\n", []),      # an empty data line: nothing of another response
    (b"data: [DONE]\ndata: \n\n", []),
], ids=["data", "crlf", "comment-then-data", "event-then-data", "blank", "id", "comment", "empty-data",
        "empty-data-space"])
def test_the_chat_splitter_cuts_only_where_a_second_response_begins(body, cuts):
    found, _ = Splitter("openai-chat", "sse").scan(body, 0, True)
    assert found == cuts


def test_data_before_event_is_no_glue():
    # Some servers write an event's data line before its event line (a Bedrock-hosted Responses
    # capture does): the event line after the terminator's data line is the same event's.
    body = (b'data: {"type":"response.completed","response":{}}\nevent: response.completed\n\n'
            b'data: {"type":"response.created","response":{}}\nevent: response.created\n\n')
    found, _ = Splitter("openai-responses", "sse").scan(body, 0, True)
    assert found == [body.index(b"data", 10)]


def test_anthropic_glued_at_its_event_line():
    stop = b'event: message_stop\ndata: {"type":"message_stop"}\n'
    body = stop + b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
    found, _ = Splitter("anthropic", "sse").scan(body, 0, True)
    assert found == [len(stop)]


@pytest.mark.parametrize("head, cuts", [
    (DONE_AND_NEXT, True), (b"data: [DONE]\n\n" + DONE_AND_NEXT[13:], False), (b'data: {"choices":[]}\n\n', False),
])
def test_a_chat_source_is_cut_by_the_splitter_only_when_glued(head, cuts):
    assert by_cuts("openai-chat", "sse", head) is cuts
    assert by_cuts("anthropic", "sse", head) is True


# -- a [DONE] line inside another event ----------------------------------------------------------

@pytest.mark.parametrize("before, cuts", [
    (b'data: {"choices":[]}\n', []),                   # a data line right before: the same event
    (b'data: {"choices":[]}\r\n', []),
    (b'data: {"choices":[]}\n: ping\n', []),           # a comment between changes nothing
    (b'data: {"choices":[]}\nid: 3\n', []),
    (b'data: {"choices":[]}\n\n', [36]),               # a blank line: [DONE] opens its own event
    (b'data: {"choices":[]}\r\n\r\n', [38]),
    (b'data: {"choices":[]}\n\n: ping\n', [43]),
    # A "[DONE]" inside the data line before, turned down (no line start before its "data:"): the
    # look back for the event's first line must still start from a line start (found by fuzz_batch).
    (b'data: {"choices":[]}\ndata: x data: [DONE] y\n', []),
    (b'data: {"choices":[]}\n\nxdata: [DONE]\ndata: {}\n', []),
    (b'data: {"choices":[]}\n\n: data: [DONE]\n', [51]),
], ids=["data", "data-crlf", "comment", "id", "blank", "blank-crlf", "blank-then-comment", "done-inside-data",
        "done-inside-data-2", "done-inside-comment"])
def test_the_chat_splitter_cuts_at_a_done_only_where_it_opens_an_event(before, cuts):
    body = before + b"data: [DONE]\n\n" + b'data: {"choices":[]}\n\n'
    found, _ = Splitter("openai-chat", "sse").scan(body, 0, True)
    assert found == cuts


def test_a_done_inside_another_event_reads_alike_in_ranges(twin, tmp_path, monkeypatch):
    # Found by fuzz_batch.py: a [DONE] line with no blank line before it is part of the event
    # before it, so neither twin ends the response there; the splitter cut there, so a range
    # task started a new stream where the whole file read on.
    parts = bodies("openai-chat", 20)
    parts[7] = parts[7].replace(b"\n\ndata: [DONE]", b"\ndata: [DONE]")
    path = tmp_path / "inside.sse"
    path.write_bytes(b"".join(parts))
    whole, streams, _ = records(path, jobs=1)
    assert streams == len(parts) - 1  # the 8th response reads on into the 9th
    monkeypatch.setattr(settings, "RANGE", 1999)
    monkeypatch.setattr(settings, "LOOKBACK", 1024)
    ranged, ranged_streams, _ = records(path)
    assert ranged_streams == streams
    assert ranged == whole
