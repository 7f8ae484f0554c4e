"""The batch layer gets the core's treatment: properties over containers, splitting and workers, and
hostile files of every container, fed through reassemble_many on both twins.

- the same streams back to back, compressed (gzip, bzip2, xz, zstandard), in a HAR file and in a
  JSON lines log give the same calls;
- any truncation or corruption of a container is reported, never raised, and what is kept is
  either what was there or reported as damaged;
- -j 1 and -j 2 write the same bytes, whatever the cut of the files into range tasks.
"""

from __future__ import annotations

import base64
import bz2
import contextlib
import glob
import gzip
import itertools
import json
import lzma
import os
import random
import subprocess
import sys
import tempfile
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import callstitch
from callstitch._batch import settings as _batch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

try:
    import zstandard
except ImportError:  # pragma: no cover - the extra is optional
    zstandard = None

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

COMPRESSIONS = {"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}
if zstandard is not None:
    COMPRESSIONS["zstd"] = lambda data: zstandard.ZstdCompressor(write_checksum=True).compress(data)
MAGIC_LENGTH = {"gzip": 2, "bzip2": 3, "xz": 6, "zstd": 4}  # bytes that make a file read as the archive


def _bodies_by_format() -> dict[str, list[bytes]]:
    """Recorded captures and generated responses, grouped by format (and the AWS event stream apart)."""
    groups: dict[str, list[bytes]] = {}
    for path in sorted(glob.glob(os.path.join(CAPTURES, "*.sse")) + glob.glob(os.path.join(CAPTURES, "*.eventstream"))):
        body = open(path, "rb").read()
        fmt = callstitch.reassemble(body, format="auto").format
        groups.setdefault(fmt + ("/eventstream" if path.endswith(".eventstream") else ""), []).append(body)
    for fmt in ("openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "ollama"):
        made = workload.responses(4, seed=9) if fmt == "openai-chat" else workload.format_responses(fmt, 4, seed=9)
        groups.setdefault(fmt, []).extend(b for b, _ in made)
    return groups


BODIES = _bodies_by_format()
GROUPS = sorted(BODIES)


@contextlib.contextmanager
def twin_accumulator(impl):
    """Run the batch machinery of this process (and of workers forked from it) on one twin."""
    saved = _batch.Accumulator
    _batch.Accumulator = impl.Accumulator
    try:
        yield
    finally:
        _batch.Accumulator = saved


@contextlib.contextmanager
def patched(**values):
    """Set the batch settings (RANGE, LOOKBACK) for a while."""
    saved = {name: getattr(_batch, name) for name in values}
    for name, value in values.items():
        setattr(_batch, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(_batch, name, value)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile-batch")


_counter = itertools.count()


def write(workdir, name: str, data: bytes) -> str:
    path = workdir / f"{next(_counter)}-{name}"
    path.write_bytes(data)
    return str(path)


def run(paths, **kw) -> tuple[list[dict], list[tuple]]:
    """Return (records without their source, problems) of reassemble_many; it must not raise."""
    problems: list[tuple] = []
    records = [{k: v for k, v in r.items() if k != "source"}
               for r in callstitch.reassemble_many(paths, on_problem=lambda *a: problems.append(a), **kw)]
    return records, problems


def expected(impl, bodies: list[bytes]) -> list[dict]:
    return [{"stream": i, **c.to_dict()} for i, body in enumerate(bodies)
            for c in impl.reassemble(body, format="auto").tool_calls]


def har(bodies: list[bytes], binary: bool) -> bytes:
    entries = []
    for body in bodies:
        content = ({"mimeType": "application/vnd.amazon.eventstream", "encoding": "base64",
                    "text": base64.b64encode(body).decode()} if binary else
                   {"mimeType": "text/event-stream; charset=utf-8", "text": body.decode("utf-8", "surrogateescape")})
        entries.append({"request": {"method": "POST", "url": "https://api.example/v1"},
                        "response": {"status": 200, "content": content}})
    return orjson.dumps({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}})


def jsonl(bodies: list[bytes]) -> bytes:
    return b"".join(orjson.dumps({"ts": i, "response": {"status": 200, "body": body.decode()}}) + b"\n"
                    for i, body in enumerate(bodies))


@st.composite
def stream_sets(draw):
    """A format group and the positions of 1-5 of its bodies, in any order (bodies() gives them).

    No body twice: two copies of one Gemini response carry one responseId, and a chunk with the
    responseId of the response just finished belongs to it (its usage, say): they read as one.
    """
    group = draw(st.sampled_from(GROUPS))
    pool = BODIES[group]
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=1, max_size=5, unique=True))
    return group, tuple(picks)


def bodies_of(streams: tuple[str, tuple[int, ...]]) -> tuple[str, list[bytes]]:
    group, picks = streams
    return group, [BODIES[group][i] for i in picks]


# -- the same streams in every container ---------------------------------------------------------

@SETTINGS
@given(streams=stream_sets(), compression=st.sampled_from(sorted(COMPRESSIONS)))
def test_every_container_gives_the_same_calls(impl, workdir, streams, compression):
    group, bodies = bodies_of(streams)
    binary = group.endswith("/eventstream")
    with twin_accumulator(impl):
        want = expected(impl, bodies)
        plain = b"".join(bodies)
        assert run([write(workdir, "b2b.bin", plain)])[0] == want
        assert run([write(workdir, "b2b.bin", COMPRESSIONS[compression](plain))])[0] == want
        assert run([write(workdir, "session.har", har(bodies, binary))])[0] == want
        assert run([write(workdir, "session.har.gz", gzip.compress(har(bodies, binary)))])[0] == want
        if not binary:  # a log's body is text
            assert run([write(workdir, "log.jsonl", jsonl(bodies))], field="response.body")[0] == want
            assert run([write(workdir, "log.jsonl.xz", lzma.compress(jsonl(bodies)))], field="response.body")[0] == want


# -- damage is reported, never raised ----------------------------------------------------------------

@SETTINGS
@given(streams=stream_sets(), compression=st.sampled_from(sorted(COMPRESSIONS)), data=st.data())
def test_any_cut_of_an_archive_is_reported(impl, workdir, streams, compression, data):
    _, bodies = bodies_of(streams)
    packed = COMPRESSIONS[compression](b"".join(bodies))
    cut = data.draw(st.integers(MAGIC_LENGTH[compression], len(packed) - 1), label="cut")
    with twin_accumulator(impl):
        records, problems = run([write(workdir, "cut.bin", packed[:cut])])
    damage = [p for p in problems if p[4] == "corrupt archive"]
    assert len(damage) == 1, problems
    assert f"the {compression} data" in damage[0][5]


def mangle(data: bytes, rng: random.Random) -> bytes:
    """Flip, drop, insert or repeat a few bytes somewhere."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buf:
            break
        at = rng.randrange(len(buf))
        how = rng.randrange(4)
        if how == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif how == 1:
            del buf[at:at + rng.randint(1, 64)]
        elif how == 2:
            buf[at:at] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
        else:
            buf[at:at] = buf[at:at + rng.randint(1, 256)]
    return bytes(buf)


@SETTINGS
@given(streams=stream_sets(), container=st.sampled_from(["plain", "har", "jsonl", *sorted(COMPRESSIONS)]),
       seed=st.integers(0, 2**32 - 1))
def test_mangled_containers_never_raise(impl, workdir, streams, container, seed):
    group, bodies = bodies_of(streams)
    binary = group.endswith("/eventstream")
    if container == "har":
        data, kw = har(bodies, binary), {}
    elif container == "jsonl" and not binary:
        data, kw = jsonl(bodies), {"field": "response.body"}
    elif container in COMPRESSIONS:
        data, kw = COMPRESSIONS[container](b"".join(bodies)), {}
    else:
        data, kw = b"".join(bodies), {}
    bad = mangle(data, random.Random(seed))
    name = "session.har" if container == "har" else "log.jsonl" if "field" in kw else "capture.bin"
    with twin_accumulator(impl):
        records, problems = run([write(workdir, name, bad)], **kw)
        if container in COMPRESSIONS and not problems:
            # Damage that no check caught (a gzip header's time stamp, say) changed nothing.
            assert records == run([write(workdir, "plain.bin", b"".join(bodies))])[0]
    for record in records:
        assert set(record) >= {"stream", "choice", "index", "id", "name", "arguments", "error", "quirks"}


# -- workers and ranges ------------------------------------------------------------------------------

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams=st.lists(stream_sets(), min_size=2, max_size=4), range_bytes=st.sampled_from([3000, 20000, 1 << 20]),
       compressed=st.booleans())
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_jobs_write_the_same_bytes(workdir, streams, range_bytes, compressed):
    paths = []
    for group, bodies in map(bodies_of, streams):
        data = b"".join(bodies)
        paths.append(write(workdir, "capture.bin", gzip.compress(data) if compressed and len(paths) == 0 else data))
    group, bodies = bodies_of(streams[0])
    if not group.endswith("/eventstream"):
        paths.append(write(workdir, "log.jsonl", jsonl(bodies * 4)))
    # RANGE is the parent's (it plans the tasks); LOOKBACK stays as it is: workers from a fork
    # server would not see a patched one.
    with patched(RANGE=range_bytes):
        one = b"".join(callstitch.reassemble_many(paths, field="response.body", jobs=1).chunks())
        two = b"".join(callstitch.reassemble_many(paths, field="response.body", jobs=2).chunks())
    assert one == two


# -- hostile files, one by one ---------------------------------------------------------------------

HOSTILE_LOG_LINES = [
    b"",
    b"   \t",
    b"\x00" * 100,
    b"[" * 100000 + b"]" * 100000,                          # nested past any parser's depth
    b'{"response": {"body": ' + b"[" * 5000 + b"]" * 5000 + b"}}",
    b'{"response": {"body": 1e999999}}',
    b'{"response": {"body": ' + b"9" * 100000 + b"}}",     # a number of 100,000 digits
    b'{"response": {"body": "\\ud800"}}',                    # a lone surrogate
    b'{"response": {"body": "data: {\\"choices\\": [}\\n\\n"}}',
    b'{"response": {"body": [1, "two", null, {"choices": 5}]}}',
    b'{"response": {"body": {"choices": [{"delta": {"tool_calls": "x"}}]}}}',
    b'{"response": null}',
    b'{"response": {"body": "' + "😀".encode() * 10000 + b'"}}',
    b'"just a string"',
    b"\xff\xfe\xfd",
    b'{"response": {"body": "data: [DONE]\\n\\n"}, "response": 3}',
]


def test_hostile_log_lines(impl, workdir):
    good = jsonl(BODIES["openai-chat"][:1])
    data = b"\n".join(HOSTILE_LOG_LINES) + b"\n" + good
    with twin_accumulator(impl):
        records, problems = run([write(workdir, "hostile.jsonl", data)], field="response.body")
    last = len(HOSTILE_LOG_LINES)
    assert [r for r in records if r["stream"] == last] == [
        {"stream": last, **c.to_dict()} for c in impl.reassemble(BODIES["openai-chat"][0]).tool_calls]
    assert {p[2] for p in problems} <= set(range(last))  # every problem is on the line that has it


HOSTILE_HAR = [
    b"",
    b'{"log": 5}',
    b'{"log": {"entries": 5}}',
    b'{"log": {"entries": [5, null, "x", [], {"response": 5}, {"response": {"content": 5}}]}}',
    b'{"log": {"entries": [{"response": {"content": {"mimeType": "text/event-stream", "text": 5}}}]}}',
    b'{"log": {"entries": [{"response": {"content": {"mimeType": 5, "text": "data: x"}}}]}}',
    b'{"log": {"entries": [{"response": {"content": {"mimeType": "application/vnd.amazon.eventstream", '
    b'"encoding": "base64", "text": "!!!not base64!!!"}}}]}}',
    b'{"log": {"entries": [{"response": {"content": {"mimeType": "text/event-stream", "text": "\\u0000\\ud800"}}}]}}',
    b'{"log": {"entries": [' + b"[" * 3000 + b"]" * 3000 + b"]}}",
    b'{"log": {"entries": []}}' + b"trailing",
]


@pytest.mark.parametrize("data", HOSTILE_HAR, ids=range(len(HOSTILE_HAR)))
def test_hostile_har_files(impl, workdir, data):
    with twin_accumulator(impl):
        run([write(workdir, "hostile.har", data)])


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("container", ["plain", "har", "jsonl", *sorted(COMPRESSIONS)])
def test_random_bytes_in_every_container(impl, workdir, container, seed):
    rng = random.Random(seed)
    noise = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 5000)))
    if container in COMPRESSIONS:
        data = COMPRESSIONS[container](noise)[:rng.randint(0, 400)] + noise[:rng.randint(0, 100)]
    elif container == "har":
        data = b'{"log": {"entries": [' + noise + b"]}}"
    elif container == "jsonl":
        data = noise.replace(b"\r", b"\n")
    else:
        data = noise
    name = {"har": "noise.har", "jsonl": "noise.jsonl"}.get(container, "noise.bin")
    with twin_accumulator(impl):
        run([write(workdir, name, data)], field="response.body" if container == "jsonl" else None)
        run([write(workdir, name, data)])  # and without the field


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_many_small_bad_events_keep_the_problems_bounded(workdir):
    # 200,000 broken events in one file: the problems a task describes are capped, the rest counted.
    data = b"data: {oops\n\n" * 200_000 + b"data: [DONE]\n\n"
    problems: list = []
    batch = callstitch.reassemble_many([write(workdir, "noisy.sse", data)], on_problem=lambda *a: problems.append(a))
    assert list(batch) == []
    assert len(problems) <= _batch.MAX_PROBLEMS + 1
    assert batch.summary.errors["malformed chunk"] >= 1  # all counted (the accumulator may cap its own list)


def test_a_corrupt_archive_is_reported_past_the_problem_cap(impl, workdir):
    # Found by a hostile probe: a gzip file whose responses had 185 problems, then cut short, said
    # "137 more problems not shown" and never that the archive was corrupt (with -q, nothing did).
    one = b"".join(b"data: {oops %d\n\n" % i for i in range(3)) + BODIES["openai-chat"][0]
    data = gzip.compress(one * 100)
    path = write(workdir, "noisy.sse.gz", data[:-300])
    with twin_accumulator(impl):
        records, problems = run([path])
    assert len(problems) == _batch.MAX_PROBLEMS + 2  # the cap, the corrupt archive, then how many more
    assert problems[-2][4] == "corrupt archive" and problems[-1][4] == "more"
    assert records  # what came before the damage
    env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="1") if impl.name == "py" else None
    proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path, "-q"], capture_output=True,
                          timeout=120, env=env)
    assert proc.returncode == 1 and b"corrupt archive" in proc.stderr


def test_a_first_event_past_the_peek_still_lets_the_file_be_split(impl, workdir):
    # Found by test_every_container_gives_the_same_calls: the format of a file was detected on the
    # 4 KiB peeked at first only; a Gemini response whose first event is longer (a thoughtSignature)
    # left the format unknown, and the file was read as one stream: two responses' calls in one.
    long_first = [b for b in BODIES["gemini"] if len(b.split(b"\r\n\r\n", 1)[0]) > 4096][0]
    other = [b for b in BODIES["gemini"] if b is not long_first and b"functionCall" in b][0]
    with twin_accumulator(impl):
        records, problems = run([write(workdir, "gemini.sse", long_first + other)])
        assert records == expected(impl, [long_first, other])
    assert {r["stream"] for r in records} == {0, 1}


def test_a_log_whose_first_line_holds_zero_bytes_is_still_a_log(impl, workdir):
    # Found by test_hostile_log_lines: any zero byte at the start made a log "plainly an AWS event
    # stream", and the whole file was lost as one damaged prelude. A prelude is now told by its CRC.
    good = jsonl(BODIES["openai-chat"][:2])
    with twin_accumulator(impl):
        records, problems = run([write(workdir, "damaged.jsonl", b"\x00" * 40 + b"\n" + good)],
                                field="response.body")
    assert [p[2:5] for p in problems] == [(0, 0, "not JSON")]
    assert {r["stream"] for r in records} == {1, 2}


@SETTINGS
@given(streams=stream_sets(), range_bytes=st.sampled_from([500, 3000, 20000]), lookback=st.sampled_from([512, 4096]))
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_range_tasks_read_what_a_whole_read_does(workdir, streams, range_bytes, lookback):
    # Whatever the cut into tasks, and however short the look back before each: the same records.
    _, bodies = bodies_of(streams)
    path = write(workdir, "b2b.bin", b"".join(bodies))
    whole = run([path])
    with patched(RANGE=range_bytes, LOOKBACK=lookback):
        assert run([path]) == whole


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_terminating_event_longer_than_the_look_back_loses_nothing(workdir):
    # Found by test_range_tasks_read_what_a_whole_read_does: a Responses stream's
    # response.completed event repeats its whole output (here 400 KB). A task boundary inside it
    # hid the cut before it from the next task (its scan starts LOOKBACK back); that task started
    # at the next cut found, the one before saw its range end first and read nothing: the
    # response after the long one was lost, in silence.
    long_one = max(BODIES["openai-responses"], key=len)
    bodies = [BODIES["openai-responses"][0], long_one, BODIES["openai-responses"][1]]
    path = write(workdir, "responses.sse", b"".join(bodies))
    whole = run([path])
    with patched(RANGE=3000, LOOKBACK=4096):
        ranged = run([path])
    assert {r["stream"] for r in whole[0]} == {0, 1, 2}
    assert ranged == whole


def _call_event(index: int, call_id: str, name: str, data: bytes = b"data: ") -> bytes:
    """Return one OpenAI chat event starting a call with empty arguments (data: its field's start)."""
    return (data + b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"%s","function":'
            b'{"name":"%s","arguments":"{}"}}]}}]}\n\n' % (index, call_id.encode(), name.encode()))


def _ranges_agree(path: str, whole: tuple, sizes: tuple = (64, 128, 200)) -> None:
    """Fail unless range tasks of each size read the chat file at path as a whole read did, named or detected."""
    for range_bytes in sizes:
        with patched(RANGE=range_bytes):
            assert run([path], format="openai-chat") == whole, range_bytes
            assert run([path]) == whole, range_bytes


@pytest.mark.parametrize("junk", [b" \xff", b"x", b" [DONE]"])
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_done_line_with_more_on_it_ends_no_response_in_range_tasks_either(workdir, junk):
    # Found by fuzz_batch: the twins read "data: [DONE] \xff" as a malformed chunk, not as the end,
    # so a whole read kept one response; range tasks cut there, making two (and a "not a stream").
    first = _call_event(0, "call_a", "f") + b"data: [DONE]" + junk + b"\n\n"
    second = _call_event(1, "call_b", "g") + b"data: [DONE]\n\n"
    path = write(workdir, "done-junk.sse", first + second)
    whole = run([path], format="openai-chat")
    assert [(r["stream"], r["id"]) for r in whole[0]] == [(0, "call_a"), (0, "call_b")]
    _ranges_agree(path, whole)


@pytest.mark.parametrize("done", [b"data:  [DONE]", b"data:\t[DONE]", b"data:[DONE]", b"data: [DONE] \t",
                                  b"data:\t [DONE]\t "])
def test_a_done_line_spaced_as_the_twins_allow_ends_its_response(workdir, done):
    # The twins take any blanks around [DONE] for the terminator; the splitter took one space at
    # most, so "data:  [DONE]" ran two responses into one stream (and its range tasks split them).
    first = _call_event(0, "call_a", "f") + done + b"\n\n"
    second = _call_event(0, "call_b", "g", data=b"data:  ") + done + b"\n\n"
    # Apart, each Accumulator halts at its [DONE]; glued (no blank line before the next response),
    # the splitter cuts (split.by_cuts): both must read two responses.
    for between in (b"\n\n", b"\n"):
        path = write(workdir, "done-spaced.sse", first[:-2] + between + second[:-2] + between)
        whole = run([path], format="openai-chat")
        assert [(r["stream"], r["id"], r["error"]) for r in whole[0]] == [(0, "call_a", None), (1, "call_b", None)]
        assert whole[1] == []
        assert run([path], format="auto") == whole
        _ranges_agree(path, whole)


@pytest.mark.parametrize("between", [b"sage: x\n", b"", b": a comment\n", b"id: 7\n"])
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_done_event_with_a_later_data_line_ends_no_response_in_range_tasks(workdir, between):
    # Found by fuzz_batch: "data: [DONE]", other lines, then "data: x" before the blank line is one
    # event whose data is "[DONE]\nx": no terminator, and the twins read on. Range tasks cut there
    # (their boundary scan took the later data line for the next response, glued on), so the
    # records of one response came out in two streams.
    first = _call_event(0, "call_a", "f") + b"data: [DONE]\n" + between + b'data: {"x": 1}\n\n'
    second = _call_event(1, "call_b", "g") + b"data: [DONE]\n\n"
    path = write(workdir, "done-then-data.sse", first + second)
    whole = run([path], format="openai-chat")
    # (right after the [DONE] line, a data line is read as a capture that glues responses: split.by_cuts)
    assert [(r["stream"], r["id"]) for r in whole[0]] == [(0, "call_a"), (0 if between else 1, "call_b")]
    _ranges_agree(path, whole, (32, 64, 100, 128, 200))


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_a_done_event_with_a_later_data_line_is_no_cut_in_a_stream_with_an_in_band_error(workdir):
    # Found by review: a stream holding an in-band error is cut again at its error events by a second
    # Splitter (error_cuts), which still took the later data line for a glued next response.
    chunk = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%s","function":'
             b'{"name":"f","arguments":"{}"}}]}}]}\n\n')
    body = (chunk % (0, b"a") + b'data: [DONE]\n: c\ndata: {"x": 1}\n\n' + chunk % (1, b"b")
            + b'data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n' + chunk % (0, b"c") + b"data: [DONE]\n\n")
    path = write(workdir, "done-data-error.sse", body)
    records, _ = run([path], format="openai-chat")
    assert [(r["stream"], r["id"]) for r in records] == [(0, "call_a"), (0, "call_b"), (1, "call_c")]


def test_a_logged_chunk_list_holding_values_that_are_no_chunk_keeps_its_calls(impl, workdir):
    # Found by a review of the README's promises: a null or a number in a logged list of chunks
    # made feed_chunk raise, and the batch layer dropped every call of that body (so did Spark).
    body = BODIES["openai-chat"][0]
    chunks = [orjson.loads(line[6:]) for line in body.split(b"\n\n") if line.startswith(b"data: {")]
    lines = [{"body": chunks}, {"body": [chunks[0], None, *chunks[1:]]}, {"body": [chunks[0], 7, *chunks[1:], [1]]}]
    path = write(workdir, "chunks.jsonl", b"".join(orjson.dumps(line) + b"\n" for line in lines))
    calls = [c.to_dict() for c in impl.reassemble(body).tool_calls]
    assert calls
    want = [{"stream": n, **call} for n in range(3) for call in calls]
    with twin_accumulator(impl):
        records, problems = run([path], field="body")
    assert records == want
    assert sorted(p[2] for p in problems) == [1, 2, 2]  # each value that is no chunk, on its line
    env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="1") if impl.name == "py" else None
    proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path, "--field", "body"],
                          capture_output=True, timeout=120, env=env)
    assert proc.returncode == 1  # the input had errors; every call came through all the same
    assert [{k: v for k, v in orjson.loads(line).items() if k != "source"}
            for line in proc.stdout.splitlines()] == want
    assert b"errors: 3 unexpected shape" in proc.stderr


def test_an_error_inside_a_logged_body_says_where_in_the_body(impl, workdir):
    # Found by a review of the README's promises: a log line's body is JSON-escaped in the file, so
    # no file offset points into it; its errors came with no position but the line's number.
    body = BODIES["openai-chat"][0]
    bad = body + b"data: {oops\n\n"
    path = write(workdir, "bad-body.jsonl", orjson.dumps({"body": bad.decode()}) + b"\n")
    where = f"(at byte {len(body)} of the logged body)"
    with twin_accumulator(impl):
        records, problems = run([path], field="body")
    assert [(p[2], p[3], p[4]) for p in problems] == [(0, None, "malformed chunk")]
    assert problems[0][5].endswith(where)
    assert records == [{"stream": 0, **c.to_dict()} for c in impl.reassemble(body).tool_calls]
    env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="1") if impl.name == "py" else None
    proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path, "--field", "body"],
                          capture_output=True, timeout=120, env=env)
    assert f"{path} (line 1): malformed chunk: ".encode() in proc.stderr and where.encode() in proc.stderr


def test_a_lone_surrogate_escape_or_a_bom_keeps_a_log_or_a_har_file_readable(impl, workdir):
    # Found by a hostile probe: a log line whose chunks hold a UTF-16 surrogate pair cut in two
    # ("\ud83d" then "\ude00", valid JSON) was "not JSON", and a HAR file with one lone surrogate
    # escape or a UTF-8 byte order mark was "not a HAR file": every call in them was lost.
    chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                                  "function": {"name": "say", "arguments": '{"t": "\ud83d'}}]}}]},
              {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '\ude00"}'}}]},
                            "finish_reason": "tool_calls"}]}]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    want = {"t": "\U0001f600"}
    log = json.dumps({"chunks": chunks}).encode() + b"\n"
    entry = {"response": {"content": {"mimeType": "text/event-stream", "text": body}}}
    har = json.dumps({"log": {"version": "1.2", "entries": [entry]}}).encode()  # "\\ud83d" in the text: ASCII escapes
    cases = [("sur.jsonl", log, {"field": "chunks"}), ("bom.jsonl", b"\xef\xbb\xbf" + log, {"field": "chunks"}),
             ("sur.har", har, {}), ("bom.har", b"\xef\xbb\xbf" + har, {})]
    for name, data, kw in cases:
        path = write(workdir, name, data)
        with twin_accumulator(impl):
            records, problems = run([path], **kw)
        assert [r["arguments"] for r in records] == [want] and not problems, name
        env = dict(os.environ, CALLSTITCH_NO_EXTENSIONS="1") if impl.name == "py" else None
        args = ["--field", kw["field"]] if kw else []
        proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path, *args], capture_output=True,
                              timeout=120, env=env)
        assert proc.returncode == 0, (name, proc.stderr)
        assert [orjson.loads(line)["arguments"] for line in proc.stdout.splitlines()] == [want]


@pytest.mark.parametrize("range_bytes", [None, 1 << 20])
def test_a_first_chunk_longer_than_the_last_probe_still_lets_the_file_be_split(impl, workdir, range_bytes):
    # Found by a hostile probe: format detection looked at the first MiB only; Gemini responses
    # whose first chunk carries an image of 1.1 MB left the format unknown, and the file was read
    # as one stream: three responses' calls in one, two responseIds lost from the turns.
    def response(i: int) -> bytes:
        image = base64.b64encode(random.Random(i).randbytes(800_000)).decode()
        first = {"candidates": [{"content": {"role": "model", "parts": [{"inlineData": {
            "mimeType": "image/png", "data": image}}]}, "index": 0}], "responseId": f"r{i}"}
        last = {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
            "name": "save", "args": {"n": i}}}]}, "finishReason": "STOP", "index": 0}], "responseId": f"r{i}"}
        return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in (first, last))
    bodies = [response(i) for i in range(3)]
    path = write(workdir, "images.sse", b"".join(bodies))
    with twin_accumulator(impl), patched(**({"RANGE": range_bytes} if range_bytes else {})):
        records, problems = run([path])
    assert records == expected(impl, bodies) and not problems
    assert [r["stream"] for r in records] == [0, 1, 2]


def test_a_response_ended_by_an_in_band_error_is_its_own_stream_wherever_the_reads_fall(impl, workdir):
    # Found by a hostile probe: a response that a server ended with an error event (no [DONE]) runs
    # into the next one in the Accumulator, and its stream was cut at the error afterwards only
    # when it had begun in the read that ended it: 100 bytes before the first MiB, A and B merged.
    def event(obj) -> bytes:
        return b"data: " + orjson.dumps(obj) + b"\n\n"
    call = lambda i, name: {"choices": [{"index": 0, "delta": {"tool_calls": [  # noqa: E731
        {"index": 0, "id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": '{"x": 1}'}}]}}]}
    filler = event({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}) + b"data: [DONE]\n\n"
    a = event(call(0, "a")) + event({"error": {"message": "overloaded", "type": "server_error"}})
    b = event(call(0, "b")) + event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    b += b"data: [DONE]\n\n"
    for shift in range(0, 900, 37):  # A and B across every place of a read's end
        path = write(workdir, "inband.sse", filler * 40 + b": " + b"k" * shift + b"\n\n" + a + b)
        with twin_accumulator(impl), patched(BLOCK=4096, PROBE=(4096,)):
            records, _ = run([path], format="openai-chat")
        assert [(r["stream"], r["id"]) for r in records] == [(40, "call_a"), (41, "call_b")], shift
    # The bytes read again are bounded: past REREAD_BYTES the stream is left as it is (one stream).
    path = write(workdir, "inband.sse", filler * 40 + b": " + b"k" * 150 + b"\n\n" + a + b)  # A across the read's end
    asked = []
    pread = os.pread
    with twin_accumulator(impl), patched(BLOCK=4096, PROBE=(4096,), REREAD_BYTES=len(a + b) - 1), \
            mock.patch.object(os, "pread", lambda fd, n, at: asked.append(n) or pread(fd, n, at)):
        records, _ = run([path], format="openai-chat")
    assert [(r["stream"], r["id"]) for r in records] == [(40, "call_a"), (40, "call_b")] and not asked


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_records_of_a_whole_source_past_the_spill_size_wait_in_a_file_not_in_memory(impl, workdir, jobs):
    # Found by a review of the README's promises (memory bounded): a compressed file, standard input
    # or a FIFO is one task, and its records were all held until it ended (527 MB for 120,000 calls).
    bodies = BODIES["openai-chat"] * 40
    paths = [write(workdir, "many.sse.gz", gzip.compress(b"".join(bodies))), write(workdir, "small.sse", bodies[0])]
    want, _ = run(paths)
    spills = []
    real = tempfile.mkdtemp

    def mkdtemp(**kw):
        spills.append(real(**kw))
        return spills[-1]
    with twin_accumulator(impl), patched(SPILL_BYTES=4096), mock.patch.object(tempfile, "mkdtemp", mkdtemp):
        assert run(paths, jobs=jobs)[0] == want
        records = iter(callstitch.reassemble_many(paths, jobs=jobs))
        assert next(records) == {"source": paths[0], **want[0]}  # a consumer that stops early
        spilled = os.listdir(spills[-1])
        records.close()
    assert len(spills) == 2 and spilled  # the first source's records went to a file
    assert not any(os.path.exists(d) for d in spills)  # and every file is gone, also after an early stop


def _with_long_lines(group: str, body: bytes, lengths: list[int]) -> bytes:
    """Return body with an event (SSE) or line (NDJSON) of each length put in at its event boundaries."""
    if group.endswith("/eventstream") or not lengths:
        return body
    sep = b"\n" if group == "ollama" else (b"\r\n\r\n" if b"\r\n\r\n" in body else b"\n\n")
    parts = body.split(sep)
    for k, length in enumerate(lengths):
        line = (b'{"pad":"' + b"x" * length + b'"}') if group == "ollama" else (b'data: {"pad":"' + b"x" * length + b'"}')
        parts.insert(1 + (k * 7) % max(1, len(parts) - 1), line)
    return sep.join(parts)


@SETTINGS
@given(streams=stream_sets(), event_bytes=st.sampled_from([200, 700, 3000]), block=st.sampled_from([256, 1000]),
       lengths=st.lists(st.integers(50, 5000), max_size=3), range_bytes=st.sampled_from([None, 3000]))
# Found with random seeds: a terminating event (a Gemini finish chunk, a Responses response.completed)
# over the cap cut when a read held it whole, not when a read ended in it; a Gemini responseId at the
# end of a chunk line over the cap was seen only in a whole read (test_split_long_lines has them built).
@example(streams=("gemini", (5, 2)), event_bytes=200, block=1000, lengths=[750], range_bytes=None)
@example(streams=("openai-responses", (4, 0)), event_bytes=200, block=1000, lengths=[700, 4342], range_bytes=None)
@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_lines_past_a_small_event_limit_are_cut_alike_whatever_the_reads(workdir, streams, event_bytes, block,
                                                                         lengths, range_bytes):
    # Lines past Limits.event_bytes, which the Accumulator drops: however the reads and the range
    # tasks fall, the splitter cuts the same responses (kept from a reverted attempt to hold no more
    # of a line than the limit, whose first version this property caught reading them differently).
    group, bodies = bodies_of(streams)
    path = write(workdir, "long-lines.bin", b"".join(_with_long_lines(group, b, lengths) for b in bodies))
    limits = callstitch.Limits(event_bytes=event_bytes)

    def read() -> tuple:  # (the problems a task describes are capped per task: their counts are compared)
        batch = callstitch.reassemble_many([path], limits=limits)
        return list(batch), batch.summary.streams, batch.summary.errors
    whole = read()
    settings_ = {"BLOCK": block, "PROBE": (block,), "LOOKBACK": 512}
    if range_bytes:
        settings_["RANGE"] = range_bytes
    with patched(**settings_):
        assert read() == whole


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_no_temporary_directory_leaves_the_records_in_memory(workdir):
    # Found by a review of the spill: a run with no writable temporary directory failed outright.
    path = write(workdir, "many.sse.gz", gzip.compress(b"".join(BODIES["openai-chat"] * 20)))
    want = run([path])

    def refuse(**kw):
        raise OSError(30, "Read-only file system")
    with patched(SPILL_BYTES=1024), mock.patch.object(tempfile, "mkdtemp", refuse):
        assert run([path]) == want


def test_range_tasks_number_the_streams_of_a_mangled_chat_capture_as_a_whole_read_does(workdir, impl):
    # Found by fuzz_batch (older than the session that found it): a file starting with "[" is a
    # JSON array to the splitter, whose cut falls just after a "]"; a range task starting at such a
    # cut took its first byte for a line's, and a "]" there for an array's end: a stream more each.
    _ranged_as_whole(workdir, impl, "range-stream-numbering.sse")


def _ranged_as_whole(workdir, impl, fixture: str) -> None:
    """Check that range tasks of 64 bytes give a fuzz fixture the records a whole read does (fuzz_batch's limits)."""
    data = open(os.path.join(os.path.dirname(__file__), "fixtures", "fuzz", fixture), "rb").read()
    path = write(workdir, "capture.sse", data)
    limits = callstitch.Limits(call_bytes=4096, stream_bytes=16384, calls=16, choices=4, event_bytes=2048)
    with twin_accumulator(impl):
        whole = run([path], limits=limits)[0]
        with patched(RANGE=64):
            assert run([path], limits=limits)[0] == whole


def test_range_tasks_read_a_mangled_capture_s_call_as_a_whole_read_does(workdir, impl):
    # Found by fuzz_batch (older than the session that found it): a "[DONE]" turned down inside a
    # line moved the splitter's look-back floor into that line, so the [DONE] data line after it
    # seemed to open its event; the splitter cut there (a range task's start) where both twins,
    # which see the event's earlier data lines, read on.
    _ranged_as_whole(workdir, impl, "range-call-bytes.sse")


# Found by fuzz_batch (older than the session that found it): "[DONE]\n\r" ends the event (an LF,
# then a blank line ended by a lone CR) for both twins, which halt there; the splitter's blank-line
# pattern had no LF-CR pair, so range tasks cut elsewhere and counted one stream more.
def test_range_tasks_count_a_mangled_capture_s_streams_as_a_whole_read_does(workdir, impl):
    _ranged_as_whole(workdir, impl, "range-stream-count.sse")


def test_range_tasks_read_a_response_after_zero_bytes_as_a_whole_read_does(workdir, impl):
    # Found by fuzz_batch (older than the session that found it): after a [DONE], a response
    # that began with a zero byte (junk glued before its events) was framed as the AWS event
    # stream by its own first bytes; read whole, it never ended and every later response of the
    # file was lost in it, while range tasks, starting at later [DONE]s, read them.
    _ranged_as_whole(workdir, impl, "range-zero-byte-start.sse")


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
def test_a_response_glued_after_zero_bytes_is_read_as_sse(workdir, impl, fmt):
    bodies = BODIES[fmt][:3]
    data = bodies[0] + b"\x00\x00\x00\x07junk\n" + bodies[1] + bodies[2]
    path = write(workdir, "capture.sse", data)
    with twin_accumulator(impl):
        whole = run([path])
        with patched(RANGE=97):
            assert run([path]) == whole
    calls = [r for r in whole[0] if r["stream"] == 2]
    assert [(r["id"], r["arguments"]) for r in calls] == [
        (c.id, c.arguments) for c in impl.reassemble(bodies[2], format=fmt).tool_calls]
    assert [r for r in whole[0] if r["stream"] == 1], "the response after the zero bytes is read"


def test_an_event_stream_response_after_an_sse_one_stays_an_event_stream(workdir, impl):
    # Found by review of the change above: a real AWS event-stream response starts with a zero
    # byte too; after an SSE response in the same Bedrock capture it was read as SSE and lost.
    sse = open(os.path.join(os.path.dirname(__file__), "fixtures", "captures",
                            "bedrock__pydantic-ai__converse-nova-tool.sse"), "rb").read()
    binary = [b for b, _ in workload.format_responses("bedrock", 2, seed=5)]
    assert all(b[:1] == b"\x00" for b in binary)
    path = write(workdir, "capture.bin", sse + binary[0] + binary[1])
    with twin_accumulator(impl):
        records, problems = run([path])
        with patched(RANGE=97):
            assert run([path]) == (records, problems)
    assert problems == []
    # (the splitter scans by the source's framing, SSE: the event-stream responses after it are one stream)
    assert [(min(r["stream"], 1), r["id"]) for r in records] == [
        (min(i, 1), c.id) for i, body in enumerate([sse, *binary])
        for c in impl.reassemble(body, format="bedrock").tool_calls]


def test_a_response_after_zero_bytes_that_an_in_band_error_ends_keeps_its_calls(workdir, impl):
    # Found by review: a stream holding an in-band error is cut again at it (two responses, the
    # first ended by the error with no [DONE]); its first piece started with the zero bytes.
    chunk = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%s",'
             b'"function":{"name":"f","arguments":"{}"}}]}}]}\n\n')
    data = (chunk % b"a" + b"data: [DONE]\n\n" + b"\x00\x00\x00\x07junk\n" + chunk % b"b"
            + b'data: {"error": {"message": "boom"}}\n\n' + chunk % b"c" + b"data: [DONE]\n\n")
    path = write(workdir, "capture.sse", data)
    with twin_accumulator(impl):
        records, problems = run([path], format="openai-chat")
    assert [(r["stream"], r["id"]) for r in records] == [(0, "call_a"), (1, "call_b"), (2, "call_c")]
    assert [p[4] for p in problems] == ["in-band error"]
