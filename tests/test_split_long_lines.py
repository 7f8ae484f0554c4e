"""The batch splitter lets a line longer than Limits.event_bytes go by, as the accumulators do.

To cut back-to-back responses the splitter kept the last line of each read back until it ended,
so a line of 400 MiB with no line end took memory by its length in the splitter that plans the
ranges of a large file (773 MB of RSS at -j 1 and -j 2, with --max-event-bytes 1M as without),
where the accumulators drop it as it streams past. A line over the limit is now let go as well:
what is held is bounded by the limit, and the output is what it was.
"""

from __future__ import annotations

import tracemalloc

import pytest
from _formats import CALLS, build
from _split import read_in_blocks
from _streams import chunk, tool_delta
from test_batch_damage import _peak_rss_mb

import callstitch
from callstitch import Limits
from callstitch._batch import settings, split
from callstitch._batch.split import Splitter

LIMIT = 1 << 16  # Limits.event_bytes of these tests

# What a long line is made of, per framing: nothing in it looks like any format's terminator.
JUNK = {"sse": b"data: " + b"x" * 50, "ndjson": b'{"junk": "' + b"y" * 50}


def chat(i: int) -> bytes:
    return chunk([tool_delta(0, id=f"call_{i}", name="f", arguments='{"n": %d}' % i)]) + b"data: [DONE]\n\n"


BODIES = {  # (format, framing): a function of i giving one response
    ("openai-chat", "sse"): chat,
    ("ollama", "ndjson"): lambda i: build("ollama", CALLS[i % 3:i % 3 + 1]),
    ("anthropic", "sse"): lambda i: build("anthropic", CALLS[i % 3:i % 3 + 1]),
    ("gemini", "sse"): lambda i: build("gemini", CALLS[i % 3:i % 3 + 1]).replace(
        b"g1P6aZnMMZq5qtsPj9fyuQ8", b"response-%d" % i),  # (each response its own id, as servers send)
}


def source(fmt: str, framing: str, long: int, *, ended: bool = True) -> bytes:
    """Three responses, a line of long bytes after the first (its end, ended or not), two more."""
    make = BODIES[(fmt, framing)]
    line = (JUNK[framing] * (long // len(JUNK[framing]) + 1))[:long]
    return make(0) + line + (b"\n\n" if ended else b"") + make(1) + make(2)


def run(path, fmt: str, **kwargs) -> tuple[list[dict], list[tuple]]:
    problems: list[tuple] = []
    records = list(callstitch.reassemble_many([str(path)], format=fmt, jobs=1, limits=Limits(event_bytes=LIMIT),
                                              on_problem=lambda *p: problems.append(p), **kwargs))
    return records, problems


def traced(path, fmt: str) -> tuple[tuple[list[dict], list[tuple]], int]:
    """Return what run() returns and the peak of the Python memory it took."""
    tracemalloc.start()
    try:
        return run(path, fmt), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def cap_off(monkeypatch) -> None:
    """Make every splitter hold each line whole, as before 58ad92b (the accumulators' limit as it is)."""
    for module in (split, callstitch._batch.streams, callstitch._batch.plan):
        monkeypatch.setattr(module, "line_cap_of", lambda limits: 1 << 62)


@pytest.mark.parametrize("fmt, framing", list(BODIES))
@pytest.mark.parametrize("ended", [True, False], ids=["line-ended", "line-runs-on"])
def test_a_line_over_the_limit_changes_nothing_but_memory(every_twin, tmp_path, monkeypatch, fmt, framing, ended):
    # Small reads and ranges, so that the line crosses reads and range bounds (first_cut) alike.
    monkeypatch.setattr(settings, "BLOCK", 1 << 14)
    monkeypatch.setattr(settings, "RANGE", 1 << 17)
    data = source(fmt, framing, 40 * LIMIT, ended=ended)
    path = tmp_path / ("capture.sse" if framing == "sse" else "capture.ndjson")
    path.write_bytes(data)
    (records, problems), peak = traced(path, fmt)
    cap_off(monkeypatch)  # the reference: the splitter holding every line whole
    (held_records, held_problems), held_peak = traced(path, fmt)
    assert records == held_records and problems == held_problems
    assert [r["id"] for r in records if r["id"]] == [r["id"] for r in held_records if r["id"]]
    # The responses around the line gave their calls (a line that runs on swallows the next one's first line).
    assert sum(1 for r in records if r["name"]) >= (3 if ended else 2)
    assert any(p[4] == "limit" for p in problems)  # the line is reported, as the accumulators drop it
    assert peak < 12 * LIMIT + (2 << 20), (peak, held_peak)  # the limit, reads, records; not the line
    assert held_peak > 2 * len(data) // 3, held_peak  # (the test sees the difference)


@pytest.mark.parametrize("framing", ["sse", "ndjson"])
def test_the_splitter_holds_no_more_than_its_cap(framing):
    fmt = "openai-chat" if framing == "sse" else "ollama"
    data = source(fmt, framing, 50 * LIMIT)
    capped, held = read_in_blocks(Splitter(fmt, framing, glued=True, line_cap=LIMIT), data, 4096)
    whole, held_whole = read_in_blocks(Splitter(fmt, framing, glued=True), data, 4096)
    assert capped == whole and len(capped) == 2  # (the last response's end is the data's: not listed)
    assert held <= LIMIT + split.HOLD + 4096 < held_whole


def test_a_terminator_inside_a_line_over_the_limit_makes_no_cut():
    # The accumulators drop that line, its terminator with it: no cut the splitter finds there.
    line = b"data: [DONE]" + b" " * (2 * LIMIT) + b"x\n\n"
    data = chat(0)[:-len(b"data: [DONE]\n\n")] + line + chat(1)
    cuts, held = read_in_blocks(Splitter("openai-chat", "sse", glued=True, line_cap=LIMIT), data, 4096)
    assert cuts == [] and held <= LIMIT + split.HOLD + 4096


@pytest.mark.usefixtures("every_twin")
def test_the_cli_holds_a_long_line_by_the_limit_not_by_its_length(tmp_path):
    path = tmp_path / "capture.sse"
    with open(path, "wb") as f:
        f.write(chat(0))
        f.write(b"data: ")
        for _ in range(200):
            f.write(b"x" * (1 << 20))
        f.write(b"\n\n" + chat(1))
    for jobs in ("1", "2"):
        rc, rss, err = _peak_rss_mb(str(path), "-j", jobs, "--max-event-bytes", "1M",
                                    env={"CALLSTITCH_RANGE_BYTES": str(64 << 20)})
        assert rc == 1, err
        assert rss < 120, (jobs, rss)  # 773 MB for a 400 MiB line before; a base and the limit now
        assert b"limit: Limits.event_bytes (1 MiB) exceeded by a line; the line is dropped" in err
        assert b"2 calls" in err


# -- found by review of 58ad92b -------------------------------------------------------------------

def _chunk_line(response: str, delta: dict, finish: str | None = None) -> bytes:
    """One OpenAI chat chunk as a JSON line (its id first, as the SDKs write it)."""
    import json
    return json.dumps({"id": response, "object": "chat.completion.chunk",
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n"


def _call_lines(response: str, n: int) -> bytes:
    return (_chunk_line(response, {"tool_calls": [{"index": 0, "id": f"call_{n}", "type": "function",
                                                   "function": {"name": "f", "arguments": '{"n": '}}]})
            + _chunk_line(response, {"tool_calls": [{"index": 0, "function": {"arguments": f"{n}}}"}}]})
            + _chunk_line(response, {}, "tool_calls"))


def test_a_new_id_just_after_a_long_line_that_ends_in_a_read_is_cut_there():
    # The long line ended within the last HOLD bytes of a read, and the id check stopped at its
    # start: the next response's first line was passed over, and cut one line late.
    block = 1 << 18
    head = _chunk_line("r0", {"content": "hello"})
    nxt = _call_lines("r1", 1)
    first = len(nxt.split(b"\n")[0]) + 1
    filler = _chunk_line("r0", {"content": ""})
    # The long line ends 250 bytes before the first read does, the next response's first line within it.
    long0 = filler.replace(b'"content": ""', b'"content": "' + b"x" * (block - 250 - len(head) - len(filler)) + b'"')
    data = head + long0 + nxt + _call_lines("r2", 2)
    assert len(head) + len(long0) == block - 250 and first <= 250
    for size in (block, 4096, 1000):
        capped, _ = read_in_blocks(Splitter("openai-chat", "ndjson", glued=True, line_cap=LIMIT), data, size)
        whole, _ = read_in_blocks(Splitter("openai-chat", "ndjson", glued=True), data, size)
        assert capped == whole == [len(head) + len(long0), len(head) + len(long0) + len(nxt)], size


@pytest.mark.parametrize("layout", ["glued-sse", "json-lines"])
def test_a_response_whose_first_event_is_over_the_limit_is_cut_as_with_the_cap_off(every_twin, tmp_path,
                                                                                    monkeypatch, layout):
    # glued-sse: "data: [DONE]" glued to the next response's first data line, which is over the
    # limit: the cap's check ran before the one for a glued response, and the two were merged (a good
    # call read as truncated). json-lines: a response opening with an over-limit line was cut at a
    # place that depended on the reads and the ranges.
    if layout == "glued-sse":
        def response(i: int, pad: int = 0) -> bytes:
            return (chunk([tool_delta(0, id=f"call_{i}", name="f", arguments='{"n": %d, "pad": "%s"}' % (i, "x" * pad))])
                    + b"data: [DONE]\n")  # (glued: no blank line after it)
        data = response(0) + response(1, 3 << 20) + response(2)
        path = tmp_path / "glued.sse"
    else:
        big = _chunk_line("r1", {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
            "name": "f", "arguments": '{"pad": "' + "x" * (3 * LIMIT) + '", '}}]})
        data = _call_lines("r0", 0) + big + _chunk_line("r1", {"tool_calls": [{"index": 0, "function": {
            "arguments": '"n": 1}'}}]}) + _chunk_line("r1", {}, "tool_calls") + _call_lines("r2", 2)
        path = tmp_path / "chat.jsonl"
    path.write_bytes(data)
    runs = []
    for block, range_bytes in ((4 << 20, 64 << 20), (1 << 20, 64 << 20), (1 << 14, 1 << 17), (LIMIT, 3 * LIMIT)):
        monkeypatch.setattr(settings, "BLOCK", block)
        monkeypatch.setattr(settings, "RANGE", range_bytes)
        runs.append(run(path, "openai-chat"))
    cap_off(monkeypatch)
    held = run(path, "openai-chat")
    assert all(r == held for r in runs), [(r[0], r[1]) for r in runs + [held]]
    records, problems = held
    assert [(r["stream"], r["id"], r["arguments"]["n"]) for r in records if r["id"] in ("call_0", "call_2")] == [
        (0, "call_0", 0), (2, "call_2", 2)]
    assert any(p[2] == 1 and p[4] == "limit" for p in problems)


# -- found by test_hostile_batch's property on Gemini and Responses captures, event_bytes=200 --------

CAP = 1000  # Limits.event_bytes of these tests: the splitter lets lines past CAP + HOLD go


def _padded(body: bytes, marker: bytes, length: int) -> bytes:
    """Return body with the JSON data of its first event that holds marker opened with a pad key of length bytes."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n"
    events = body.split(sep)
    k = next(k for k, event in enumerate(events) if marker in event)
    events[k] = events[k].replace(b"data: {", b'data: {"pad":"' + b"x" * length + b'",', 1)
    return sep.join(events)


def _gemini(i: int, calls: slice, pad_first: int = 0, pad_finish: int = 0) -> bytes:
    """A Gemini response with its own responseId, its first chunk or its finish chunk padded."""
    body = build("gemini", CALLS[calls]).replace(b"g1P6aZnMMZq5qtsPj9fyuQ8", b"response-%d" % i)
    body = _padded(body, b"data:", pad_first) if pad_first else body
    return _padded(body, b"finishReason", pad_finish) if pad_finish else body


def _cuts_alike(fmt: str, data: bytes) -> list[int]:
    """Return the cuts of data read whole, after checking that reads of many sizes give the same."""
    whole, _ = read_in_blocks(Splitter(fmt, "sse", glued=True, line_cap=CAP), data, len(data))
    for block in range(256, 2600, 37):  # (reads that end everywhere in the long events)
        cuts, _ = read_in_blocks(Splitter(fmt, "sse", glued=True, line_cap=CAP), data, block)
        assert cuts == whole, (block, cuts, whole)
    return whole


def test_a_gemini_finish_chunk_or_response_id_past_the_limit_cuts_alike_whatever_the_reads():
    # A finish chunk past the cap made a cut when a read held it whole, none when a read ended
    # inside it (its event let go); and a responseId at the end of a chunk line past the cap
    # (Gemini writes it last) was seen in a whole read, never once the line was let go. The
    # accumulators drop both chunks: neither cuts, whatever the reads. (With reads of 256 bytes,
    # one held back from between the CR and the LF of a blank line also cut b one byte early.)
    a = _gemini(0, slice(0, 1), pad_finish=CAP + 400)
    b = _gemini(1, slice(1, 3), pad_first=CAP + 1500)
    c = _gemini(2, slice(0, 1))
    data = a + b + c
    second = len(a) + b.index(b"\r\n\r\n") + 4  # b's first chunk within the cap: its id is new there
    assert _cuts_alike("gemini", data) == [second, len(a) + len(b)]


def test_a_responses_terminating_event_past_the_limit_cuts_alike_whatever_the_reads():
    # response.completed repeats the whole output: past the cap, a whole read cut at its end, and
    # reads that ended inside it let it go with no cut. No cut now: the second response runs into
    # the third, as it does for the accumulators, which never see it end.
    def response(i: int, pad: int = 0) -> bytes:
        body = build("openai-responses", CALLS[i:i + 1]).replace(b"resp_0a1b2c", b"resp_%d" % i)
        return _padded(body, b"response.completed", pad) if pad else body
    data = response(0) + response(1, pad=CAP + 700) + response(2)
    assert _cuts_alike("openai-responses", data) == [len(response(0))]
