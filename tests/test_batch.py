"""Batch reprocessing (callstitch.reassemble_many): containers, compression, splitting, ranges, errors."""

from __future__ import annotations

import base64
import bz2
import glob
import gzip
import lzma
import multiprocessing
import os
import subprocess
import sys

import orjson
import pytest

import callstitch
from callstitch._batch import plan, pool, settings
from callstitch._batch.split import Splitter
from callstitch._formats import registry

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
FORMATS = list(registry.ADAPTERS)


@pytest.fixture
def twin(impl, monkeypatch):
    """Run the batch machinery (in this process) on one twin."""
    monkeypatch.setattr(settings, "Accumulator", impl.Accumulator)
    return impl


def _bodies(fmt: str, n: int = 12, seed: int = 7) -> list[bytes]:
    if fmt == "openai-chat":
        return [b for b, _ in workload.responses(n, seed=seed)]
    return [b for b, _ in workload.format_responses(fmt, n, seed=seed)]


def _expected(impl, bodies: list[bytes], source: str) -> list[dict]:
    out = []
    for i, body in enumerate(bodies):
        for call in impl.reassemble(body, format="auto").tool_calls:
            out.append({"source": source, "stream": i, **call.to_dict()})
    return out


def _captures_by_format() -> dict[tuple[str, bool], list[bytes]]:
    groups: dict = {}
    paths = sorted(glob.glob(os.path.join(CAPTURES, "*.sse")) + glob.glob(os.path.join(CAPTURES, "*.eventstream")))
    for path in paths:
        body = open(path, "rb").read()
        fmt = callstitch.reassemble(body, format="auto").format
        groups.setdefault((fmt, path.endswith(".eventstream")), []).append(body)
    return groups


def _write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


# -- back-to-back responses ----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_back_to_back_generated(twin, tmp_path, fmt):
    bodies = _bodies(fmt)
    path = _write(tmp_path, "b2b.bin", b"".join(bodies))
    batch = callstitch.reassemble_many([path])
    assert list(batch) == _expected(twin, bodies, path)
    assert batch.summary.streams == len(bodies)


@pytest.mark.parametrize("key", sorted(_captures_by_format()), ids=lambda k: f"{k[0]}{'-eventstream' if k[1] else ''}")
def test_back_to_back_captures(twin, tmp_path, key):
    bodies = _captures_by_format()[key] * 2
    path = _write(tmp_path, "captures.bin", b"".join(bodies))
    batch = callstitch.reassemble_many([path])
    assert list(batch) == _expected(twin, bodies, path)
    assert batch.summary.streams == len(bodies)


@pytest.mark.parametrize("block", [61, 509, 4096])
@pytest.mark.parametrize("fmt", FORMATS)
def test_any_read_size_gives_the_same_cuts(twin, tmp_path, monkeypatch, fmt, block):
    bodies = _bodies(fmt, n=6, seed=3)
    path = _write(tmp_path, "b2b.bin", b"".join(bodies))
    monkeypatch.setattr(settings, "BLOCK", block)
    monkeypatch.setattr(settings, "PROBE", (block,))
    assert list(callstitch.reassemble_many([path], format=fmt)) == _expected(twin, bodies, path)


def test_crlf_and_whitespace_between_responses(twin, tmp_path):
    bodies = [b.replace(b"\n", b"\r\n") for b in _bodies("anthropic", n=4)]
    path = _write(tmp_path, "crlf.sse", b"\r\n\r\n".join(bodies) + b"\r\n\r\n\r\n")
    batch = callstitch.reassemble_many([path])
    assert [(r["stream"], r["id"]) for r in batch] == [(r["stream"], r["id"]) for r in _expected(twin, bodies, path)]
    assert batch.summary.streams == 4


@pytest.mark.parametrize("between", [b": ping\n", b"retry: 5\n", b"id: 7\n", b"event: completion\n", b""],
                         ids=["comment", "retry", "id", "event name", "nothing"])
def test_a_line_after_the_terminator_does_not_join_the_responses(twin, tmp_path, between):
    # A keep-alive or a field right after [DONE], in the same framing as the next response's first
    # event: each twin still reads two responses, not one with every call sent twice.
    bodies = _bodies("openai-chat", n=2, seed=5)
    path = _write(tmp_path, "between.sse", bodies[0] + between + bodies[1])
    batch = callstitch.reassemble_many([path], format="openai-chat")
    records = list(batch)
    assert batch.summary.streams == 2
    assert [(r["stream"], r["id"], r["arguments"], r["quirks"]) for r in records] == [
        (r["stream"], r["id"], r["arguments"], r["quirks"]) for r in _expected(twin, bodies, path)]


def _gemini_response(rid: str, name: str, finished: bool = True) -> bytes:
    """A Gemini SSE response: text, a call, and (unless cut short) the chunk with its finishReason."""
    def chunk(parts: list, finish: str | None = None) -> bytes:
        candidate = {"content": {"parts": parts, "role": "model"}, "index": 0, **({"finishReason": finish} if finish else {})}
        return b"data: " + orjson.dumps({"candidates": [candidate], "responseId": rid}) + b"\n\n"

    body = chunk([{"text": "Let me look."}]) + chunk([{"functionCall": {"name": name, "args": {"q": name}}}])
    return body + (chunk([{"text": ""}], "STOP") if finished else b"")


@pytest.mark.parametrize("block", [None, 21, 22, 23, 61, 509])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_a_new_gemini_response_id_starts_the_next_response(twin, tmp_path, monkeypatch, eol, block):
    # The middle response was cut short (no finishReason): the next one's new responseId starts it,
    # in Gemini's own CRLF too, and at whatever read size.
    if block is not None:
        monkeypatch.setattr(settings, "BLOCK", block)
        monkeypatch.setattr(settings, "PROBE", (block,))
    names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
    bodies = [_gemini_response(f"r{k}", name, name not in ("beta", "epsilon")).replace(b"\n", eol)
              for k, name in enumerate(names)]
    path = _write(tmp_path, "gemini.sse", b"".join(bodies))
    batch = callstitch.reassemble_many([path], format="gemini")
    assert [(r["stream"], r["name"]) for r in batch] == list(enumerate(names))
    assert batch.summary.streams == 6 and batch.summary.incomplete == 2


def _cuts_read_at(splitter: Splitter, data: bytes, first: int, block: int) -> list[int]:
    """Return the cuts a splitter finds in data read as the batch reads it: a first read, then blocks."""
    cuts, base, tail, at = [], 0, b"", 0
    while True:
        size = first if at == 0 else max(block, len(tail))
        piece, at = data[at:at + size], at + size
        buf = tail + piece
        found, safe = splitter.scan(buf, 0, not piece)
        cuts += [base + c for c in found]
        if not piece:
            return [c for c in cuts if c < len(data)]  # (a cut at the very end delimits nothing)
        tail, base = buf[safe:], base + safe


def test_a_read_ending_inside_the_metadata_headers_keeps_them_with_their_response():
    # Bedrock's metadata message (usage, metrics) follows messageStop and is its response's: a read
    # that ends anywhere in or near its headers must not cut it off into a stream of its own.
    first, second = (open(os.path.join(CAPTURES, f"bedrock__pydantic-ai__{name}.eventstream"), "rb").read()
                     for name in ("converse-server-tool-then-client-tool", "converse-nova-tool"))
    data = first + second
    whole = Splitter("bedrock", "eventstream").scan(data, 0, True)[0]
    assert whole == [len(first)]
    stop = first.index(b"messageStop")
    for read in range(stop - 40, len(first) + 40):
        assert _cuts_read_at(Splitter("bedrock", "eventstream"), data, read, 4096) == whole, read


@pytest.mark.parametrize("keepalive", [b": ping\n\n", b":\n\n\n", b": ping\r\n\r\n"], ids=["ping", "bare", "CRLF"])
def test_a_keepalive_before_bedrock_metadata_keeps_it_with_its_response(twin, tmp_path, keepalive):
    # Over SSE, Bedrock's metadata event (usage) follows messageStop: a keep-alive comment between
    # them must not cut it off into the next response.
    first, second = (open(os.path.join(CAPTURES, f"bedrock__pydantic-ai__{name}.sse"), "rb").read()
                     for name in ("converse-nova-tool", "converse-server-tool-then-client-tool"))
    at = first.rindex(b"event: metadata")
    bodies = [first[:at] + keepalive + first[at:], second]
    path = _write(tmp_path, "bedrock.sse", b"".join(bodies))
    turns = list(callstitch.reassemble_many([path], format="bedrock", emit="turns"))
    alone = [callstitch.reassemble(b, format="bedrock").to_response()["usage"] for b in bodies]
    assert [t["response"]["usage"] for t in turns] == alone and None not in alone


def test_terminator_text_inside_arguments_does_not_cut():
    # "[DONE]" and "message_stop" inside a JSON string are escaped context, not terminators.
    chunk = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":'
             b'{"name":"f","arguments":"{\\"t\\": \\"data: [DONE]\\"}"}}]}}]}\n\n')
    body = chunk + b"data: [DONE]\n\n"
    cuts, safe = Splitter("openai-chat", "sse").scan(body + body, 0, True)
    assert cuts == [len(body)]
    ollama = (b'{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"done":true}}}]},"done":false}\n'
              b'{"message":{},"done":true}\n')
    cuts, _ = Splitter("ollama", "ndjson").scan(ollama + ollama, 0, True)
    assert cuts == [len(ollama)]


def test_gemini_new_response_id_starts_a_stream():
    def chunk(rid: str, finish: bool = False) -> bytes:
        cand = {"content": {"parts": [{"functionCall": {"name": "f", "args": {"x": rid}}}]}}
        if finish:
            cand["finishReason"] = "STOP"
        return b"data: " + orjson.dumps({"candidates": [cand], "responseId": rid}) + b"\n\n"

    body = chunk("a") + chunk("a") + chunk("b") + chunk("b", True) + chunk("c")
    cuts, _ = Splitter("gemini", "sse").scan(body, 0, True)
    first = len(chunk("a")) * 2
    assert cuts == [first, first + len(chunk("b")) + len(chunk("b", True))]


def test_openai_error_without_done_ends_a_response(twin, tmp_path):
    groq = open(os.path.join(CAPTURES, "groq__pydantic-ai__inband-error-tool-use-failed.sse"), "rb").read()
    assert b"[DONE]" not in groq
    other = _bodies("openai-chat", n=2)
    bodies = [other[0], groq, other[1]]
    path = _write(tmp_path, "err.sse", b"".join(bodies))
    batch = callstitch.reassemble_many([path])
    records = list(batch)
    assert records == _expected(twin, bodies, path)
    assert batch.summary.streams == 3
    assert batch.summary.errors["in-band error"] == 1


# -- byte ranges and parallel workers ------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic", "gemini", "bedrock", "ollama"])
def test_ranges_give_the_same_records(twin, tmp_path, monkeypatch, fmt):
    bodies = _bodies(fmt, n=40, seed=11)
    path = _write(tmp_path, "big.bin", b"".join(bodies))
    whole = list(callstitch.reassemble_many([path]))
    monkeypatch.setattr(settings, "RANGE", 7919)
    monkeypatch.setattr(settings, "LOOKBACK", 4096)
    batch = callstitch.reassemble_many([path])
    assert list(batch) == whole == _expected(twin, bodies, path)
    assert batch.summary.streams == len(bodies)


@pytest.mark.parametrize("size", [1, 1000, 4 * 1000, 4 * 1000 + 1, 57_321, 10**6 + 7])
def test_range_bounds_cover_the_file_and_shrink_at_the_end(monkeypatch, size):
    monkeypatch.setattr(settings, "RANGE", 1000)
    bounds = plan.range_bounds(size)
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(end == start for (_, end), (start, _) in zip(bounds, bounds[1:]))  # no gap, no overlap
    steps = [end - start for start, end in bounds]
    assert all(0 < b <= a for a, b in zip(steps, steps[1:]))
    assert max(steps) <= 1000 and all(step >= 125 for step in steps[:-1])
    if size > 8000:
        assert steps[-2] < 1000  # the last tasks are short ones


@pytest.mark.parametrize("kind", ["body", "jsonl"])
def test_a_long_stretch_without_a_cut_is_scanned_once(twin, tmp_path, monkeypatch, kind):
    # Each range task found its own cuts: a stretch with none (one long response, one long line)
    # was scanned to its end once by every task whose range lay in it, quadratic in its length.
    # Now the plan finds each cut once, and a range inside the stretch joins the task before it.
    small = _bodies("anthropic", 3)
    long_one = small[0]
    text = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,' \
           b'"delta":{"type":"text_delta","text":"' + b"x" * 80 + b'"}}\n\n'
    at = long_one.index(b"event: content_block_delta")
    long_one = long_one[:at] + text * 2000 + long_one[at:]  # ~260 KB with no cut inside
    bodies = [small[1], long_one, small[2]]
    if kind == "body":
        data = b"".join(bodies)
        kw: dict = {}
    else:
        data = b"".join(orjson.dumps({"response": body.decode()}) + b"\n" for body in bodies)
        kw = {"field": "response"}
    path = _write(tmp_path, f"long.{'sse' if kind == 'body' else 'jsonl'}", data)
    whole = list(callstitch.reassemble_many([path], **kw))
    monkeypatch.setattr(settings, "RANGE", 4000)
    scanned = []

    def counted(locate):
        def run(f, x, *rest):
            cut = locate(f, x, *rest)
            scanned.append(cut - x)
            return cut
        return run
    monkeypatch.setattr(plan, "first_cut", counted(plan.first_cut))
    monkeypatch.setattr(plan, "next_line", counted(plan.next_line))
    tasks = [t for what, t in plan.Plan([path], "auto", ("response",) if kind == "jsonl" else None, "auto",
                                        None, callstitch._batch.run.Summary()) if what == "task"]
    assert len(tasks) < 20 and all(t.exact for t in tasks)  # (not one per 4000 bytes: 65 of them)
    assert sum(scanned) < len(data)  # each stretch once (old: 65 tasks each scanned the rest of it)
    assert [(t.start, t.end) for t in tasks][0][0] == 0 and tasks[-1].end is None
    assert all(a.end == b.start for a, b in zip(tasks, tasks[1:]))
    assert list(callstitch.reassemble_many([path], **kw)) == whole
    assert list(callstitch.reassemble_many([path], jobs=2, **kw)) == whole
    assert sorted({r["stream"] for r in whole}) == [0, 1, 2]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_jobs_keep_the_order(tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "RANGE", 20000)
    paths = []
    for i, fmt in enumerate(FORMATS):
        paths.append(_write(tmp_path, f"{i}-{fmt}.sse", b"".join(_bodies(fmt, n=10, seed=i))))
    serial = list(callstitch.reassemble_many(paths, jobs=1))
    parallel = list(callstitch.reassemble_many(paths, jobs=2))
    assert parallel == serial
    assert len({r["source"] for r in serial}) == len(FORMATS)


def test_a_huge_jobs_starts_no_more_processes_than_there_are_tasks_nor_than_four_per_core(tmp_path, monkeypatch):
    # Found by review: -j 100000 on two small files forked thousands of workers (a pool forks all
    # of its processes at its first task) and outlived a SIGTERM.
    paths = [_write(tmp_path, f"{i}.sse", b"".join(_bodies("openai-chat", n=3, seed=i))) for i in range(2)]
    serial = list(callstitch.reassemble_many(paths, jobs=1))
    started = []
    real = pool.Workers.__init__

    def counted(self, jobs):
        started.append(jobs)
        real(self, jobs)

    monkeypatch.setattr(pool.Workers, "__init__", counted)  # (a spy: the pool itself is real)
    batch = iter(callstitch.reassemble_many(paths, jobs=100_000))
    first = next(batch)
    assert 1 <= len(multiprocessing.active_children()) <= 2
    assert [first, *batch] == serial
    assert started == [2]
    cores = os.cpu_count() or 1
    assert pool.worker_count(100_000) == pool.worker_count(4 * cores) == 4 * cores
    assert pool.worker_count(3) == min(3, 4 * cores) and pool.worker_count(0) == 1


def test_jobs_beside_another_thread_start_no_fork(tmp_path, monkeypatch):
    # A fork taken while another thread holds a lock can hang the child (Python 3.12 warns of it).
    import threading
    import warnings
    monkeypatch.setattr(settings, "RANGE", 20000)
    paths = [_write(tmp_path, f"{i}.sse", b"".join(_bodies("openai-chat", n=10, seed=i))) for i in range(3)]
    serial = list(callstitch.reassemble_many(paths, jobs=1))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        if "forkserver" in multiprocessing.get_all_start_methods():
            assert pool._pool_context().get_start_method() != "fork"
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            parallel = list(callstitch.reassemble_many(paths, jobs=2))
    finally:
        stop.set()
        other.join()
    assert parallel == serial


def test_threads_a_c_library_started_count_too():
    # pyarrow's compute functions start a thread pool that the threading module does not list.
    pytest.importorskip("pyarrow")
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc here to count the threads by")
    code = ("import os, threading, pyarrow as pa, pyarrow.compute as pc; from callstitch._batch import pool as _batch; "
            "pc.sum(pa.array([1, 2])); "
            "print(threading.active_count(), len(os.listdir('/proc/self/task')), _batch._thread_count(), "
            "_batch._pool_context().get_start_method())")
    python_threads, threads, counted, start = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                                             text=True, check=True, timeout=60).stdout.split()
    assert python_threads == "1"
    if threads == "1":
        pytest.skip("this pyarrow started no thread")
    assert counted == threads
    if "forkserver" in multiprocessing.get_all_start_methods():
        assert start == "forkserver"


def test_jobs_alone_in_the_process_keep_the_platform_start():
    # A fresh interpreter runs one thread: the pool starts its workers the platform's usual way.
    code = ("import multiprocessing; from callstitch._batch import pool as _batch; "
            "print(_batch._pool_context().get_start_method(), multiprocessing.get_start_method())")
    ours, platform = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    timeout=60).stdout.split()
    assert ours == platform


# -- containers -------------------------------------------------------------------------------

def test_jsonl_log_string_and_chunk_bodies(twin, tmp_path):
    chat = _bodies("openai-chat", n=2)
    chunks = [orjson.loads(line[6:]) for line in open(os.path.join(
        CAPTURES, "openai__openai-python__chat-single-tool.sse"), "rb").read().split(b"\n\n")
        if line.startswith(b"data: {")]
    lines = [
        orjson.dumps({"response": {"body": chat[0].decode()}}),
        b"",
        b"{not json",
        orjson.dumps({"response": {"status": 500}}),
        orjson.dumps({"response": {"body": chunks}}),
        orjson.dumps({"response": {"body": chat[1].decode()}}),
    ]
    path = _write(tmp_path, "gateway.jsonl", b"\n".join(lines) + b"\n")
    problems = []
    batch = callstitch.reassemble_many([path], field="response.body",
                                       on_problem=lambda *a: problems.append(a))
    records = list(batch)
    streams = [r["stream"] for r in records]
    assert set(streams) == {0, 4, 5}
    expect0 = [c.to_dict() for c in twin.reassemble(chat[0], format="auto").tool_calls]
    assert [{k: v for k, v in r.items() if k not in ("source", "stream")} for r in records if r["stream"] == 0] == expect0
    assert [r["name"] for r in records if r["stream"] == 4] == ["GetWeatherArgs"]
    kinds = {(p[2], p[4]) for p in problems}
    assert kinds == {(2, "not JSON"), (3, "no body")}
    assert batch.summary.failed


def test_with_a_field_plain_bodies_beside_logs_are_read_as_bodies(twin, tmp_path, monkeypatch):
    # The README's reassemble_many(["captures/", "logs/*.jsonl.gz"], field=...): a directory of
    # captures next to the logs. A file that plainly is a body (SSE, the AWS event stream, an
    # Ollama stream without the field) is read as a body, not reported line by line.
    monkeypatch.setattr(settings, "RANGE", 5000)  # the large SSE file goes in ranges
    chat = _bodies("openai-chat", n=20)
    (tmp_path / "captures").mkdir()
    sse = _write(tmp_path, "captures/chat.sse", b"\xef\xbb\xbf" + b"".join(chat))
    es_name = "bedrock__pydantic-ai__converse-nova-tool.eventstream"
    es = _write(tmp_path, "captures/nova.eventstream", open(os.path.join(CAPTURES, es_name), "rb").read())
    comment = _write(tmp_path, "captures/comment.sse", b": keep-alive\n\n" + chat[0])
    ollama = _bodies("ollama", n=3)
    ndjson = _write(tmp_path, "captures/ollama.ndjson", b"".join(ollama))  # starts with "{", as a log does
    log = _write(tmp_path, "log.jsonl", b"".join(orjson.dumps({"response": {"body": b.decode()}}) + b"\n"
                                                 for b in chat[:3]))
    problems = []
    batch = callstitch.reassemble_many([str(tmp_path / "captures"), log], field="response.body", jobs=1,
                                       on_problem=lambda *a: problems.append(a))
    records = list(batch)
    assert problems == []
    by_source = {}
    for r in records:
        by_source.setdefault(r.pop("source"), []).append(r)
    assert [{k: v for k, v in r.items() if k != "stream"} for r in by_source[sse]] == [
        {k: v for k, v in r.items() if k not in ("source", "stream")} for r in _expected(twin, chat, sse)]
    assert [r["name"] for r in by_source[es]] == [
        c.name for c in twin.reassemble(open(os.path.join(CAPTURES, es_name), "rb").read(), format="auto").tool_calls]
    assert len(by_source[comment]) == len(twin.reassemble(chat[0]).tool_calls)
    assert [r["arguments"] for r in by_source[ndjson]] == [
        c.arguments for b in ollama for c in twin.reassemble(b, format="ollama").tool_calls]
    assert [r["stream"] for r in by_source[log]] == sorted(r["stream"] for r in by_source[log])
    assert len(by_source[log]) == sum(len(twin.reassemble(b).tool_calls) for b in chat[:3])
    assert not batch.summary.errors and not batch.summary.failed


def test_jsonl_ranges(twin, tmp_path, monkeypatch):
    bodies = _bodies("anthropic", n=30)
    text = b"".join(orjson.dumps({"b": b.decode()}) + b"\n" for b in bodies)
    path = _write(tmp_path, "log.jsonl", text)
    monkeypatch.setattr(settings, "RANGE", 5000)
    assert list(callstitch.reassemble_many([path], field="b")) == _expected(twin, bodies, path)


def test_har(twin, tmp_path):
    anthropic = _bodies("anthropic", n=1)[0]
    bedrock = open(os.path.join(CAPTURES, "bedrock__pydantic-ai__converse-nova-tool.eventstream"), "rb").read()
    har = {"log": {"version": "1.2", "entries": [
        {"response": {"content": {"mimeType": "text/html", "text": "<html>"}}},
        {"response": {"content": {"mimeType": "text/event-stream; charset=utf-8", "text": anthropic.decode()}}},
        {"response": {"content": {"mimeType": "application/vnd.amazon.eventstream",
                                  "text": base64.b64encode(bedrock).decode(), "encoding": "base64"}}},
        {"response": {"content": {"mimeType": "application/json", "text": "{}"}}},
    ]}}
    path = _write(tmp_path, "session.har", orjson.dumps(har))
    records = list(callstitch.reassemble_many([path]))
    assert sorted({r["stream"] for r in records}) == [1, 2]
    assert [r["name"] for r in records if r["stream"] == 2] == ["get_temperature"]
    expect = [c.to_dict() for c in twin.reassemble(anthropic, format="auto").tool_calls]
    assert [{k: v for k, v in r.items() if k not in ("source", "stream")} for r in records if r["stream"] == 1] == expect


def test_a_har_file_with_a_bom_is_sniffed_under_any_name(twin, tmp_path):
    # Found by review: the HAR sniffing pattern allowed no BOM, so such a file not named *.har was
    # read as one unknown event (no call); named *.har, it was read.
    anthropic = _bodies("anthropic", n=1)[0]
    har = orjson.dumps({"log": {"version": "1.2", "entries": [
        {"response": {"content": {"mimeType": "text/event-stream", "text": anthropic.decode()}}}]}})
    named = _write(tmp_path, "a.har", har)
    sniffed = _write(tmp_path, "export.json", b"\xef\xbb\xbf" + har)
    strip = lambda records: [{k: v for k, v in r.items() if k != "source"} for r in records]  # noqa: E731
    want = strip(callstitch.reassemble_many([named]))
    assert want and strip(callstitch.reassemble_many([sniffed])) == want


@pytest.mark.parametrize("kw, error", [
    ({"limits": 5}, TypeError), ({"limits": {"calls": 1}}, TypeError), ({"jobs": "2"}, TypeError),
    ({"jobs": -1}, ValueError), ({"jobs": 1.5}, TypeError), ({"field": 123}, TypeError),
    ({"field": ["a", "b"]}, TypeError), ({"request_field": 7, "emit": "turns"}, TypeError),
])
def test_wrong_arguments_are_refused_where_they_are_given(tmp_path, kw, error):
    # Found by review: limits=5 reported an internal error for every source, jobs="2" and field=123
    # raised from inside the run, jobs=-1 ran; each is now refused by the call itself.
    path = _write(tmp_path, "a.sse", _bodies("anthropic", n=1)[0])
    with pytest.raises(error):
        callstitch.reassemble_many([path], **kw)


def test_a_name_with_a_nul_is_reported_and_the_other_sources_are_read(twin, tmp_path):
    path = _write(tmp_path, "a.sse", _bodies("anthropic", n=1)[0])
    problems = []
    records = list(callstitch.reassemble_many([path, "b\x00.sse"], on_problem=lambda *a: problems.append(a)))
    assert records and {r["source"] for r in records} == {path}
    assert [(p[0], p[4]) for p in problems] == [("b\x00.sse", "input")]


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress, _zstd],
                         ids=["gzip", "bzip2", "xz", "zstd"])
def test_compressed_by_magic_bytes(twin, tmp_path, compress):
    bodies = _bodies("cohere", n=5)
    # A misleading name: the magic bytes decide.
    path = _write(tmp_path, "capture.sse", compress(b"".join(bodies)))
    assert [(r["stream"], r["id"]) for r in callstitch.reassemble_many([path])] == \
        [(r["stream"], r["id"]) for r in _expected(twin, bodies, path)]


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_compressed_har_and_jsonl(tmp_path):
    body = _bodies("openai-chat", n=1)[0]
    har = {"log": {"entries": [{"response": {"content": {"mimeType": "text/event-stream", "text": body.decode()}}}]}}
    p1 = _write(tmp_path, "a.har.gz", gzip.compress(orjson.dumps(har)))
    p2 = _write(tmp_path, "b.jsonl.xz", lzma.compress(orjson.dumps({"body": body.decode()}) + b"\n"))
    p3 = _write(tmp_path, "c.bin", gzip.compress(orjson.dumps(har)))  # HAR sniffed from its content
    batch = callstitch.reassemble_many([p1, p2, p3], field="body")
    names = [(r["source"], r["stream"]) for r in batch]
    assert {n[0] for n in names} == {p1, p2, p3}
    assert not batch.summary.failed


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_bad_inputs_never_stop_the_run(tmp_path):
    good = _write(tmp_path, "good.sse", _bodies("openai-chat", n=1)[0])
    corrupt = _write(tmp_path, "bad.sse.gz", gzip.compress(_bodies("openai-chat", n=3)[0] * 3)[:300])
    problems = []
    batch = callstitch.reassemble_many([str(tmp_path / "missing.sse"), corrupt, str(tmp_path / "*.nothing"), good],
                                       on_problem=lambda *a: problems.append(a))
    records = list(batch)
    assert {r["source"] for r in records} == {good}
    kinds = [p[4] for p in problems]
    assert "unreadable" in kinds and "corrupt archive" in kinds and "input" in kinds
    assert batch.summary.failed
    assert batch.summary.sources == 4


@pytest.mark.usefixtures("every_twin")  # the batch layer here and in subprocesses
def test_directories_and_globs(tmp_path):
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    body = _bodies("openai-chat", n=1)[0]
    (sub / "one.sse").write_bytes(body)
    (tmp_path / "a" / "two.sse.gz").write_bytes(gzip.compress(body))
    (tmp_path / "a" / "notes.md").write_text("not a capture")
    sources = sorted({r["source"] for r in callstitch.reassemble_many([str(tmp_path)])})
    assert sources == sorted([str(sub / "one.sse"), str(tmp_path / "a" / "two.sse.gz")])
    globbed = {r["source"] for r in callstitch.reassemble_many([str(tmp_path / "**" / "*.sse")])}
    assert globbed == {str(sub / "one.sse")}


def test_record_shape_with_bad_arguments(twin, tmp_path):
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":'
            b'{"name":"f","arguments":"{\\"a\\": 1"}}]}}]}\n\ndata: [DONE]\n\n')
    path = _write(tmp_path, "bad.sse", body)
    batch = callstitch.reassemble_many(path)
    (record,) = list(batch)
    assert list(record) == ["source", "stream", "choice", "index", "id", "name", "kind", "arguments", "error",
                            "quirks", "raw_arguments"]
    assert record["arguments"] is None and record["raw_arguments"] == '{"a": 1'
    assert "truncated" in record["error"]
    assert batch.summary.errors["arguments truncated"] == 1


def test_sources_may_be_paths_alone_in_a_list_a_generator_or_a_glob(twin, tmp_path):
    # pathlib.Path is how most code names a file; reassemble_many raised AttributeError on one.
    import pathlib
    bodies = _bodies("openai-chat", 2)
    (tmp_path / "a.sse").write_bytes(b"".join(bodies))
    path = tmp_path / "a.sse"
    expected = _expected(twin, bodies, str(path))
    assert expected
    for sources in (path, [path], (p for p in [path]), [tmp_path / "*.sse"], pathlib.PurePath(path), [str(path)]):
        assert list(callstitch.reassemble_many(sources)) == expected, sources
    assert [r["source"] for r in callstitch.reassemble_many(tmp_path)] == [r["source"] for r in expected]


class _BytesPath:
    def __fspath__(self) -> bytes:
        return self.path

    def __init__(self, path: bytes) -> None:
        self.path = path


def test_a_pathlike_that_names_its_path_in_bytes_is_read(twin, tmp_path):
    body = _bodies("openai-chat", 1)[0]
    (tmp_path / "b.sse").write_bytes(body)
    records = list(callstitch.reassemble_many([_BytesPath(os.fsencode(tmp_path / "b.sse"))]))
    assert records == _expected(twin, [body], str(tmp_path / "b.sse"))


@pytest.mark.parametrize("sources, says", [
    (b"data: {}\n\n", "sources is bytes"), ([b"data: {}\n\n"], "source 0 is bytes"),
    (["ok.sse", bytearray(b"x")], "source 1 is bytearray"), (3, "not int"), ([None], "source 0 is NoneType"),
])
def test_what_is_not_a_path_is_refused_with_a_clear_error(sources, says):
    # A body given as a source was read as a path, or failed deep in glob with "expected string".
    with pytest.raises(TypeError, match=says) as caught:
        callstitch.reassemble_many(sources)
    assert "str or os.PathLike" in str(caught.value)


def test_a_path_named_dash_is_that_file_not_standard_input(twin, tmp_path, monkeypatch):
    # Found by review: pathlib.Path("-") (and Path("./-"), which pathlib writes "-") read standard input.
    import pathlib
    body = _bodies("openai-chat", 1)[0]
    (tmp_path / "-").write_bytes(body)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    for source in (pathlib.Path("-"), pathlib.Path("./-")):
        assert list(callstitch.reassemble_many([source])) == _expected(twin, [body], os.path.join(".", "-"))


def test_file_names_that_are_not_utf8_are_shown_escaped_and_bad_names_reported(tmp_path):
    # Found by review: a directory holding a file whose name is not UTF-8 stopped the run (JSON has no
    # lone surrogates: "str is not valid UTF-8"), and a name with a lone surrogate raised from os.stat.
    body = _bodies("openai-chat", 1)[0]
    odd = os.path.join(os.fsencode(tmp_path), b"a\xff.sse")
    with open(odd, "wb") as f:
        f.write(body)
    problems: list = []
    for jobs in (1, 2):
        records = list(callstitch.reassemble_many([str(tmp_path), str(tmp_path / "b\ud800")], jobs=jobs,
                                                  on_problem=lambda *a: problems.append(a)))
        assert {r["source"] for r in records} == {str(tmp_path) + "/a\\xff.sse"}
        assert [r["id"] for r in records] == [c.id for c in callstitch.reassemble(body).tool_calls]
    assert [p[4] for p in problems] == ["input", "input"]
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(tmp_path), "-j", "1", "--quiet"],
                         capture_output=True, timeout=120)
    assert out.returncode == 0 and b'a\\\\xff.sse' in out.stdout, out.stderr
