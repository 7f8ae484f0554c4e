"""The pure twin's reads that end where an event ends: that last event is read inline too.

A gateway feeds the accumulator each network read as it arrives, and most reads hold one whole
event, or a few, ending the read. The pure twin reads a read's last event, when it is one "data:"
line closed by its blank line, inline (``_take_rest``), as it reads the events before it, instead of
line by line. These tests see that path taken on a common stream fed event by event, and hold its
result, errors, hand-overs and turn to the same body fed whole and to the compiled twin fed the
same reads, on the reads near that shape: other line ends, event names, several data lines, blank
lines, comments, [DONE], bad JSON, long digit runs, a BOM, limits, and a batch job's halt.
"""

import pytest
from _streams import DONE, chunk, finish, tool_delta
from conftest import agree

from callstitch import Limits
from callstitch import _accumulator_py

ENVELOPE = {"service_tier": "default"}
OPEN = chunk([tool_delta(0, id="call_1", name="get_weather", arguments="")], **ENVELOPE)
PIECES = [chunk([tool_delta(0, arguments=text)]) for text in ('{"city": ', '"Par', 'is"}')]
SECOND = chunk([tool_delta(1, id="call_2", name="get_time", arguments='{"tz": "CET"}')])
END = chunk([finish("tool_calls")], usage={"total_tokens": 9})
EVENTS = [OPEN, *PIECES, SECOND, END, DONE]


def feed_reads(impl, reads, fmt="openai-chat", limits=None, halting=False):
    """Feed reads one by one; return what a caller sees: result, errors, hand-overs per read, turn, halt."""
    acc = impl.Accumulator(format=fmt, limits=limits)
    if halting:
        acc.halt_at_end()
    handed, used = [], 0
    for read in reads:
        handed.append([(c.id, c.name, c.raw_arguments) for c in acc.feed(read)])
        if halting and acc.halted() >= 0:
            used += acc.halted()
            break
        used += len(read)
    result = acc.finalize()
    return result, [str(e) for e in result.errors], handed, result.to_response(), used


def agree_on_reads(both, reads, fmt="openai-chat", limits=None):
    """Both twins fed these reads see the same; the pure twin fed them sees what it sees fed them whole."""
    seen = [feed_reads(impl, reads, fmt, limits) for impl in both]
    assert seen[0] == seen[1]
    whole = feed_reads(both[1], [b"".join(reads)], fmt, limits)
    flat = [call for handed in seen[1][2] for call in handed]
    assert (seen[1][:2], flat, seen[1][3]) == (whole[:2], whole[2][0], whole[3])
    agree(both, b"".join(reads), fmt, limits)
    return seen[1][0]


@pytest.fixture
def line_by_line(monkeypatch):
    """Record the text the pure twin frames line by line (what the inline reading spares)."""
    seen = []
    real = _accumulator_py.Accumulator._lines

    def counting(self, text, pos):
        seen.append(text)
        return real(self, text, pos)

    monkeypatch.setattr(_accumulator_py.Accumulator, "_lines", counting)
    return seen


def test_a_stream_fed_event_by_event_is_read_inline(both, line_by_line):
    result = agree_on_reads(both, EVENTS)
    line_by_line.clear()
    feed_reads(both[1], EVENTS)
    assert line_by_line == []
    assert [(c.id, c.arguments) for c in result.tool_calls] == [("call_1", {"city": "Paris"}),
                                                                 ("call_2", {"tz": "CET"})]
    assert result.complete and result.finish_reason == "tool_calls" and not result.errors
    assert result.to_response()["service_tier"] == "default"


def test_reads_of_a_few_whole_events_are_read_inline(both, line_by_line):
    reads = [b"".join(EVENTS[:2]), b"".join(EVENTS[2:5]), b"".join(EVENTS[5:])]
    agree_on_reads(both, reads)
    line_by_line.clear()
    feed_reads(both[1], reads)
    assert line_by_line == []


def test_the_calls_are_handed_over_by_the_read_that_ends_them(both):
    result, errors, handed, response, used = feed_reads(both[1], EVENTS)
    assert handed[EVENTS.index(END)] == [("call_1", "get_weather", '{"city": "Paris"}'),
                                         ("call_2", "get_time", '{"tz": "CET"}')]
    assert sum(map(len, handed)) == 2 and used == sum(map(len, EVENTS))


BIG = 123456789012345678901234567890
NEAR = {
    # each read-alone event is one the inline reading of a read's last event must not misread
    "bad JSON": [OPEN, b"data: {not json\n\n", *PIECES, END, DONE],
    "two spaces": [OPEN, b"data:  " + PIECES[0][6:], *PIECES[1:], END, DONE],
    "no space": [OPEN, b"data:" + PIECES[0][6:], *PIECES[1:], END, DONE],
    "event name": [OPEN, b"event: delta\n" + PIECES[0], *PIECES[1:], END, DONE],
    "two data lines": [OPEN, PIECES[0][:-2].replace(b'"index":0,"delta"', b'"index":0,\ndata: "delta"') + b"\n\n",
                       *PIECES[1:], END, DONE],
    "CRLF": [OPEN, PIECES[0][:-2] + b"\r\n\r\n", *PIECES[1:], END, DONE],
    "extra blank line": [OPEN, PIECES[0] + b"\n", *PIECES[1:], END, DONE],
    "empty data": [OPEN, b"data: \n\n", *PIECES, END, DONE],
    "comment": [OPEN, b": keep-alive\n\n", *PIECES, END, DONE],
    "a read then half the next": [OPEN, PIECES[0] + PIECES[1][:20], PIECES[1][20:], PIECES[2], END, DONE],
    "[DONE] with a space": [OPEN, *PIECES, END, b"data: [DONE] \n\n"],
    "events after [DONE]": [OPEN, *PIECES, END, DONE, PIECES[0]],
    "text for an object": [OPEN, b'data: "not a chunk"\n\n', *PIECES, END, DONE],
    "a long digit run": [OPEN, PIECES[0][:-3] + b',"created":' + str(BIG).encode() + b"}\n\n", *PIECES[1:], END, DONE],
    "a lone surrogate": [OPEN, *PIECES, chunk([tool_delta(0, arguments="\ud800")]), END, DONE],
    "a BOM first": [b"\xef\xbb\xbf" + OPEN, *PIECES, END, DONE],
    "the BOM alone": [b"\xef\xbb", b"\xbf", OPEN, *PIECES, END, DONE],
    "another format's event": [b'data: {"type":"message_start","message":{}}\n\n', OPEN, *PIECES, END, DONE],
    "an unknown key": [OPEN, chunk([tool_delta(0, arguments="{}")], provider="x"), END, DONE],
    "a long digit run the turn keeps": [OPEN, *PIECES, chunk([finish("tool_calls")], usage={"total_tokens": BIG}),
                                        DONE],
    "a space after the object": [OPEN, PIECES[0][:-2] + b" \n\n", *PIECES[1:], END, DONE],
    "a read one byte into the next line": [OPEN, PIECES[0][:-1] + b"d", b"ata: x\n\n", *PIECES[1:], END, DONE],
    # a read-alone event while an event is half read: its data line belongs to that event
    "a data line, then the rest": [OPEN, PIECES[0][:PIECES[0].index(b'"delta"')] + b"\n",
                                   b"data: " + PIECES[0][PIECES[0].index(b'"delta"'):], *PIECES[1:], END, DONE],
    "an event name, then its data": [OPEN, b"event: delta\n", PIECES[0], *PIECES[1:], END, DONE],
}


@pytest.mark.parametrize("reads", list(NEAR.values()), ids=list(NEAR))
def test_a_near_read_reads_as_the_body_whole_and_as_the_compiled_twin(both, reads):
    agree_on_reads(both, reads)


@pytest.mark.parametrize("reads", [EVENTS, [OPEN + PIECES[0], *PIECES[1:], END, DONE], NEAR["bad JSON"],
                                   NEAR["event name"]], ids=["common", "two first", "bad", "named"])
def test_under_auto_reads_read_the_same(both, reads):
    agree_on_reads(both, reads, "auto")


@pytest.mark.parametrize("event_bytes", [len(PIECES[1]) - 3, len(PIECES[1]) - 2, len(PIECES[1])])
def test_an_event_over_the_limit_read_alone_is_cut_as_in_a_body(both, event_bytes):
    # A limit may cut a call, never alter it: the read-alone event over the limit is dropped and reported.
    limits = Limits(event_bytes=event_bytes)
    result = agree_on_reads(both, EVENTS, limits=limits)
    assert result.errors


def test_an_event_read_alone_after_a_line_over_the_limit_is_dropped_with_it(both):
    # The over-long line's event goes on (no blank line yet): the next read's data line is its, dropped too.
    limits = Limits(event_bytes=max(map(len, EVENTS)))
    reads = [OPEN, b"data: " + b"x" * 1000 + b"\n", PIECES[0], *PIECES[1:], END, DONE]
    result = agree_on_reads(both, reads, limits=limits)
    assert [e.kind for e in result.errors] == ["limit"]


def test_a_batch_halt_fed_event_by_event_is_where_the_body_whole_halts(both):
    # A batch job reading concatenated streams stops right after the terminator (halt_at_end).
    reads = EVENTS + [b"data: {not json\n\n", *EVENTS]
    seen = [feed_reads(impl, reads, halting=True) for impl in both]
    whole = feed_reads(both[1], [b"".join(reads)], halting=True)
    assert seen[0] == seen[1]
    assert seen[1][4] == whole[4] == sum(map(len, EVENTS))
    assert seen[1][:2] == whole[:2] and not seen[1][1]

