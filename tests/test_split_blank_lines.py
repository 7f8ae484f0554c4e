"""Every blank line SSE allows ends a response's last event for the batch splitter where both twins end it.

SSE lines end in CRLF, LF or a lone CR, and a blank line is a line end followed by an empty line's:
eight pairs (a CR then an LF is one CRLF). The twins read all eight. The splitter, which finds
where a range task starts and where a glued capture's responses end, once knew only five: after
"data: [DONE]\\n\\r" it read on to a later blank line, so range tasks counted one stream more than
a whole read (found by fuzz_batch). A CR that ends a read may be half a CRLF: the splitter then
waits for the next byte, as the twins do, however the input is cut into reads.
"""

import os
import sys

import pytest

import callstitch
from callstitch._batch import settings
from callstitch._batch.split import Splitter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402
from _split import read_in_blocks  # noqa: E402

SEPARATORS = {"LF LF": b"\n\n", "LF CRLF": b"\n\r\n", "LF CR": b"\n\r", "CRLF LF": b"\r\n\n",
              "CRLF CRLF": b"\r\n\r\n", "CRLF CR": b"\r\n\r", "CR CRLF": b"\r\r\n", "CR CR": b"\r\r"}
CHAT = [b for b, _ in workload.responses(2, seed=4)]
ANTHROPIC = [b for b, _ in workload.format_responses("anthropic", 2, seed=4)]


def glued_at(bodies: list[bytes], sep: bytes) -> tuple[bytes, int]:
    """Return two responses with sep as the first one's last blank line, and where that one ends."""
    first = bodies[0].rstrip(b"\n") + sep
    return first + bodies[1], len(first)


@pytest.mark.parametrize("sep", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_both_twins_halt_at_the_end_of_every_blank_line(impl, sep):
    data, end = glued_at(CHAT, sep)
    for cut in range(end - 6, end + 3):  # two reads, cut around the blank line
        acc = impl.Accumulator("openai-chat")
        acc.halt_at_end()
        acc.feed(data[:cut])
        used = acc.halted()
        if used < 0:
            acc.feed(data[cut:])
            used = cut + acc.halted()
        assert used == end, f"read cut at {cut}"


@pytest.mark.parametrize("glued", [False, True], ids=["halts", "cuts"])
@pytest.mark.parametrize("sep", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_the_splitter_cuts_a_chat_capture_where_the_twins_halt(sep, glued):
    data, end = glued_at(CHAT, sep)
    assert Splitter("openai-chat", "sse", glued=glued).scan(data, 0, True)[0] == [end]
    for block in (1, 2, 3, 5, 64, 1000):
        assert read_in_blocks(Splitter("openai-chat", "sse", glued=glued), data, block)[0] == [end], block


@pytest.mark.parametrize("sep", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_the_splitter_cuts_an_anthropic_capture_at_the_end_of_every_blank_line(sep):
    data, end = glued_at(ANTHROPIC, sep)
    assert Splitter("anthropic", "sse").scan(data, 0, True)[0] == [end]
    for block in (1, 2, 3, 7, 64, 1000):
        assert read_in_blocks(Splitter("anthropic", "sse"), data, block)[0] == [end], block


@pytest.mark.parametrize("bodies", [CHAT, ANTHROPIC], ids=["openai-chat", "anthropic"])
@pytest.mark.parametrize("sep", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_range_tasks_read_every_blank_line_as_a_whole_read_does(impl, tmp_path, monkeypatch, bodies, sep):
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    data, _ = glued_at(bodies, sep)
    path = tmp_path / "capture.sse"
    path.write_bytes(data * 3)
    whole = list(callstitch.reassemble_many([str(path)]))
    assert [r["stream"] for r in whole][-1] == 5  # six responses, none run into the next
    for size in (16, 61, 97):
        monkeypatch.setattr(settings, "RANGE", size)
        assert list(callstitch.reassemble_many([str(path)])) == whole, size
