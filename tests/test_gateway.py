"""The example gateway (examples/gateway.py) under real uvicorn servers: bytes untouched, calls handed over.

A fake upstream replays the captured provider streams (tests/fixtures/captures, every format) cut
at random byte boundaries with small random delays; the gateway sits in front of it; an httpx
client drives both. Servers listen on 127.0.0.1 only, on ports the OS picks, and run in
background threads (or, for the runnable module, a subprocess) started and stopped by fixtures.
"""

from __future__ import annotations

import asyncio
import gc
import glob
import json
import logging
import os
import random
import socket
import time
import tracemalloc
import zlib
from collections import defaultdict

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from callstitch._tee import ATee  # noqa: E402
from _servers import (HOST, ROOT, ServerThread, gateway_process, fetch, gateway, lifespan, new_client,  # noqa: E402
                      rss_kib, run, wait_until)

CAPTURES_DIR = os.path.join(ROOT, "tests", "fixtures", "captures")


# -- the captures ---------------------------------------------------------------------------------

def _captures():
    """Return {name: (body, expected)}: every capture, the raw AWS event stream and its SSE form both."""
    out = {}
    for path in sorted(glob.glob(os.path.join(CAPTURES_DIR, "*.expected.json"))):
        stem = path[: -len(".expected.json")]
        name = os.path.basename(stem)
        expected = json.load(open(path, encoding="utf-8"))
        if os.path.exists(stem + ".eventstream"):
            out[name + ".eventstream"] = (open(stem + ".eventstream", "rb").read(), expected)
        out[name + ".sse"] = (open(stem + ".sse", "rb").read(), expected)
    return out


CAPTURES = _captures()
NAMES = sorted(CAPTURES)


def client_calls(expected):
    return [c for c in expected["tool_calls"] if c.get("block_type") != "server_tool_use"]


def check_calls(got, expected):
    """The calls handed over for one stream are the expected client calls, in order, with their arguments."""
    want = client_calls(expected)
    assert [c.name for c in got] == [w["name"] for w in want]
    for call, w in zip(got, want):
        if w.get("id") is not None:
            assert call.id == w["id"]
        if expected.get("complete") is False:
            assert call.arguments is None and call.error is not None
        else:
            assert call.error is None and call.arguments == w["arguments"]


# -- servers --------------------------------------------------------------------------------------

class FakeUpstream:
    """An ASGI app replaying a capture: the request body names it, a seed picks the cuts and delays.

    Request body: {"capture": name, "seed": int, "max_piece": int, "max_delay": float, "pause_at": int?}.
    With pause_at the upstream sends that many bytes, then waits for the gateway to hang up.
    """

    def __init__(self):
        self.requests = {}   # request id -> (headers, body) as received
        self.ended = {}      # request id -> "complete" | "disconnected"
        self.paths = {}      # request id -> (raw path, query string)
        self.record = True

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        rid = dict(headers).get("x-request-id", "")
        if self.record:
            self.requests[rid] = (headers, body)
            self.paths[rid] = (scope["raw_path"], scope["query_string"])
        spec = json.loads(body)
        data = CAPTURES[spec["capture"]][0]
        rng = random.Random(spec["seed"])
        end = spec.get("pause_at", len(data))
        kind = b"application/vnd.amazon.eventstream" if spec["capture"].endswith(".eventstream") else b"text/event-stream"
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", kind), (b"cache-control", b"no-cache"), (b"x-upstream", b"fake")]})
        i = 0
        while i < end:
            piece = data[i:min(end, i + rng.randint(1, spec.get("max_piece", 256)))]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            i += len(piece)
            if spec.get("max_delay"):
                await asyncio.sleep(rng.random() * spec["max_delay"])
        if "pause_at" in spec:
            try:  # bounded: the gateway is expected to hang up as soon as its client does
                while (await asyncio.wait_for(receive(), 20))["type"] != "http.disconnect":
                    pass
                if self.record:
                    self.ended[rid] = "disconnected"
            except asyncio.TimeoutError:
                self.ended[rid] = "timed out"
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.record:
            self.ended[rid] = "complete"


class Recorder:
    """The gateway's on_call in tests: the calls per stream id, in the order they were handed over."""

    def __init__(self):
        self.calls = defaultdict(list)

    def __call__(self, stream_id, call):
        self.calls[stream_id].append(call)


@pytest.fixture(scope="module")
def upstream():
    fake = FakeUpstream()
    server = ServerThread(fake).start()
    server.fake = fake
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gate(upstream, impl):
    """The example gateway in front of the fake upstream, with the implementation's accumulator."""
    recorder = Recorder()

    def tee(chunks, format, on_call):
        return ATee(chunks, format, on_call, accumulator=impl.Accumulator(format=format))

    server = ServerThread(gateway.create_app(upstream.url, on_call=recorder, tee=tee)).start()
    server.recorder = recorder
    yield server
    server.stop()


# -- bytes and calls ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_stream_passes_through_untouched_and_calls_are_handed_over(gate, upstream, name):
    body, expected = CAPTURES[name]
    rid = f"one-{name}-{gate.port}"
    spec = {"capture": name, "seed": zlib.crc32(name.encode()), "max_piece": max(200, len(body) // 40),
            "max_delay": 0.002}

    async def main():
        async with new_client() as client:
            return await fetch(client, gate.url, rid, spec)

    response, received = run(main())
    assert response.status_code == 200
    assert received == body
    assert response.headers["content-type"] == ("application/vnd.amazon.eventstream" if name.endswith(".eventstream")
                                                else "text/event-stream")
    assert response.headers["x-upstream"] == "fake"
    wait_until(lambda: upstream.fake.ended.get(rid) == "complete", 5, "the upstream to finish")
    check_calls(gate.recorder.calls[rid], expected)


def test_request_is_forwarded_with_body_path_query_and_end_to_end_headers(gate, upstream):
    spec = {"capture": NAMES[0], "seed": 1, "model": "gpt-4o", "messages": [{"role": "user", "content": "héllo"}]}
    raw = json.dumps(spec, ensure_ascii=False).encode()

    async def main():
        async with new_client() as client:
            async with client.stream("POST", gate.url + "/v1/chat/completions?api-version=2024-10-21", content=raw,
                                     headers=[("x-request-id", "fwd"), ("authorization", "Bearer sk-test"),
                                              ("connection", "keep-alive, x-per-hop"), ("x-per-hop", "1"),
                                              ("te", "trailers"), ("x-custom", "a"), ("x-custom", "b"),
                                              ("accept-encoding", "gzip")]) as r:
                await r.aread()

    run(main())
    headers, body = upstream.fake.requests["fwd"]
    assert body == raw
    names = [k for k, _ in headers]
    assert ("authorization", "Bearer sk-test") in headers
    assert [v for k, v in headers if k == "x-custom"] == ["a", "b"]
    assert "x-per-hop" not in names and "te" not in names
    assert ("accept-encoding", "identity") in headers
    assert dict(headers)["host"] == f"{HOST}:{upstream.port}"
    assert upstream.fake.paths["fwd"] == (b"/v1/chat/completions", b"api-version=2024-10-21")


def test_unreachable_upstream_is_a_502():
    sock = socket.socket()
    sock.bind((HOST, 0))
    dead = f"http://{HOST}:{sock.getsockname()[1]}"  # bound, never listening: connection refused
    server = ServerThread(gateway.create_app(dead, on_call=Recorder())).start()
    try:
        async def main():
            async with new_client() as client:
                return await client.post(server.url + "/v1/chat/completions", content=b"{}")
        assert run(main()).status_code == 502
    finally:
        server.stop()
        sock.close()


def test_default_handler_logs_one_json_line_per_call(upstream, caplog):
    name = "openai__openai-python__chat-parallel-weather-and-stock.sse"
    server = ServerThread(gateway.create_app(upstream.url)).start()
    caplog.set_level("INFO", logger="callstitch.gateway")
    try:
        async def main():
            async with new_client() as client:
                return await fetch(client, server.url, "logged", {"capture": name, "seed": 5})
        run(main())
        lines = lambda: [r.getMessage() for r in caplog.records if r.getMessage().startswith("tool call ")]  # noqa: E731
        wait_until(lambda: len(lines()) == 2, 5, "two log lines")
    finally:
        server.stop()
    logged = [json.loads(line[len("tool call "):]) for line in lines()]
    want = client_calls(CAPTURES[name][1])
    assert [(e["stream"], e["id"], e["name"], e["arguments"]) for e in logged] == \
        [("logged", w["id"], w["name"], w["arguments"]) for w in want]


# -- many at once ---------------------------------------------------------------------------------

def test_200_concurrent_streams_of_mixed_formats_are_not_mixed_up(gate, upstream):
    rng = random.Random(2024)
    jobs = [(f"many-{gate.port}-{k}", rng.choice(NAMES), rng.randrange(1 << 30)) for k in range(200)]

    async def main():
        async with new_client() as client:
            return await asyncio.gather(*(fetch(client, gate.url, rid, {"capture": name, "seed": seed,
                                                                         "max_piece": 1024, "max_delay": 0.003})
                                          for rid, name, seed in jobs))

    outcomes = run(main(), timeout=60)
    for (rid, name, _), (response, received) in zip(jobs, outcomes):
        assert response.status_code == 200 and received == CAPTURES[name][0], rid
    wait_until(lambda: all(upstream.fake.ended.get(rid) == "complete" for rid, _, _ in jobs), 10, "all upstreams")
    for rid, name, _ in jobs:
        check_calls(gate.recorder.calls[rid], CAPTURES[name][1])


# -- clients that leave ---------------------------------------------------------------------------

DISCONNECT = "openai__openai-python__chat-parallel-weather-and-stock.sse"


async def read_then_leave(client, url, rid, spec, upto):
    """Read until `upto` bytes have arrived, then drop the connection."""
    async with client.stream("POST", url + "/v1/chat/completions", content=json.dumps(spec).encode(),
                             headers={"x-request-id": rid}) as r:
        got = b""
        async for chunk in r.aiter_raw():
            got += chunk
            if len(got) >= upto:
                break
    return got


def reference_handover(impl, data):
    """What on_call must have seen for a stream cut after `data`: the calls feed() completed, then the rest."""
    acc = impl.Accumulator(format="auto")
    completed = acc.feed(data)
    result = acc.finalize()
    rest = [c for c in result.tool_calls if all(c is not d for d in completed)]
    return completed, rest


def completions(impl, body):
    """Return the byte positions at which feed() hands calls over, fed one byte at a time."""
    acc = impl.Accumulator(format="auto")
    return [pos + 1 for pos in range(len(body)) if acc.feed(body[pos:pos + 1])]


@pytest.mark.parametrize("name,after", [
    ("cohere__vercel-ai__v2-parallel.sse", 1),                          # inside the second call
    ("vertex__vercel-ai__partialargs-noargs-plus-3-parallel.sse", 2),   # after two of four calls
    ("vertex__vercel-ai__partialargs-sequential-two-calls.sse", 1),
    ("anthropic__pydantic-ai__server-tool-then-client-tool.sse", 0),    # inside the only client call
    ("openai__pydantic-ai__responses-single-call.sse", 0),
    ("bedrock__pydantic-ai__converse-nova-tool.eventstream", 0),
    ("openai__openai-python__chat-parallel-weather-and-stock.sse", 0),  # before the finish reason
])
def test_client_that_leaves_mid_stream_leaves_nothing_behind(gate, upstream, impl, name, after):
    body, expected = CAPTURES[name]
    marks = [0] + completions(impl, body)
    cut = (marks[after] + marks[after + 1]) // 2
    gate.wait_idle()  # the tasks of earlier tests' streams are gone
    rid = f"leave-{name}-{gate.port}"

    async def main():
        async with new_client() as client:
            return await read_then_leave(client, gate.url, rid, {"capture": name, "seed": 9, "pause_at": cut,
                                                                 "max_delay": 0.001}, cut)

    assert run(main()) == body[:cut]
    wait_until(lambda: upstream.fake.ended.get(rid) == "disconnected", 5, "the gateway to hang up upstream")
    gate.wait_idle()
    # Handed over while streaming: exactly the calls completed before the cut, with their arguments.
    # Then, when the client left, the tee hands over what was in flight (callstitch's contract: every
    # call reaches on_call once), flagged by its error when its arguments were cut short.
    completed, rest = reference_handover(impl, body[:cut])
    got = gate.recorder.calls[rid]
    assert len(completed) == after
    want = client_calls(expected)
    assert [(c.id, c.name, c.arguments, c.error) for c in got[:after]] == \
        [(w.get("id", c.id), w["name"], w["arguments"], None) for c, w in zip(got, want[:after])]
    assert [(c.id, c.name, c.raw_arguments, c.error and c.error.kind) for c in got[after:]] == \
        [(c.id, c.name, c.raw_arguments, c.error and c.error.kind) for c in rest]


LIVE_TYPES = ("ATee", "Accumulator", "Response", "Request", "_Relay", "async_generator")


def live_objects():
    """Count the live objects of the types a stream creates (tee, accumulator, requests, responses, generators)."""
    counts = dict.fromkeys(LIVE_TYPES, 0)
    for obj in gc.get_objects():
        name = type(obj).__name__
        if name in counts:
            counts[name] += 1
    return counts


def test_hundreds_of_disconnects_leave_no_tasks_or_memory(upstream, impl):
    """200 clients leave mid-stream: tasks, tees and traced memory come back to where they were."""
    upstream.fake.record = False
    # Each stream cut mid-event ends with a "stream errors" warning, which pytest's log capture
    # would keep: that memory is the test's, not the gateway's.
    level = gateway.log.level
    gateway.log.setLevel(logging.ERROR)
    counted = []
    server = ServerThread(gateway.create_app(
        upstream.url, on_call=lambda sid, call: counted.append(None),
        tee=lambda chunks, fmt, on_call: ATee(chunks, fmt, on_call, accumulator=impl.Accumulator(format=fmt)))).start()
    name = "openai__openai-python__chat-parallel-weather-and-stock.sse"
    body = CAPTURES[name][0]

    async def leave(client, k):
        cut = 200 + (k * 97) % (len(body) - 400)
        got = await read_then_leave(client, server.url, f"m{k}", {"capture": name, "seed": k, "pause_at": cut}, cut)
        assert got == body[:cut]

    async def rounds(start, n, width=25):
        async with new_client() as client:
            for base in range(start, start + n, width):
                await asyncio.gather(*(leave(client, k) for k in range(base, min(start + n, base + width))))

    try:
        run(rounds(0, 50))  # warm up: pools, caches, interned strings
        server.wait_idle()
        upstream.wait_idle()
        gc.collect()
        before = live_objects()
        tracemalloc.start()
        try:
            run(rounds(50, 200), timeout=60)
            server.wait_idle()
            upstream.wait_idle()
            gc.collect()
            grown, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        after = live_objects()
    finally:
        server.stop()
        upstream.fake.record = True
        gateway.log.setLevel(level)
    assert after == before
    # Each stream held a few KB (the accumulator, its buffers, the response objects); a leak of any
    # of them would grow this by 200 times that. What remains (~80 KB) is cache noise: re, weakref
    # sets, the selector's map.
    assert grown < 256 * 1024, f"{grown} bytes still allocated after 200 disconnects"


# -- the runnable module, in a subprocess ---------------------------------------------------------

@pytest.mark.parametrize("twin", ["c", "python"])
def test_uvicorn_examples_gateway_app_in_a_subprocess(upstream, tmp_path, twin):
    """`uvicorn examples.gateway:app`, configured by env vars: bytes, log lines, flat RSS over disconnects."""
    env = dict(os.environ, CALLSTITCH_GATEWAY_UPSTREAM=upstream.url, CALLSTITCH_NO_EXTENSIONS="1" if twin == "python" else "0",
               PYTHONUNBUFFERED="1")
    log_path = tmp_path / "gateway.log"
    with gateway_process(env, log_path) as (proc, url):
        assert f"callstitch 0.1.0 ({twin})" in log_path.read_text()

        jobs = [(f"sub-{twin}-{k}", name) for k, name in enumerate(NAMES)]

        async def streams():
            async with new_client() as client:
                return await asyncio.gather(*(fetch(client, url, rid, {"capture": name, "seed": 3, "max_delay": 0.001})
                                              for rid, name in jobs))

        for (rid, name), (response, received) in zip(jobs, run(streams())):
            assert received == CAPTURES[name][0], rid
        want = {rid: client_calls(CAPTURES[name][1]) for rid, name in jobs}

        def logged():
            out = defaultdict(list)
            for line in log_path.read_text(encoding="utf-8").splitlines():
                if "tool call {" in line:
                    entry = json.loads(line.split("tool call ", 1)[1])
                    out[entry["stream"]].append(entry)
            return out
        wait_until(lambda: sum(map(len, logged().values())) >= sum(map(len, want.values())), 5, "the log lines")
        entries = logged()
        for rid, name in jobs:
            expected = CAPTURES[name][1]
            assert [e["name"] for e in entries[rid]] == [w["name"] for w in want[rid]], rid
            assert all(w.get("id") in (None, e["id"]) for e, w in zip(entries[rid], want[rid])), rid
            if expected.get("complete") is False:
                assert all(e["arguments"] is None and e["error"] for e in entries[rid]), rid
            else:
                assert [e["arguments"] for e in entries[rid]] == [w["arguments"] for w in want[rid]], rid

        # Memory: a few hundred clients leave mid-stream; the gateway's RSS stays flat.
        async def leave(n, start):
            async with new_client() as client:
                for base in range(start, start + n, 25):
                    await asyncio.gather(*(read_then_leave(client, url, f"rss{k}", {"capture": DISCONNECT, "seed": k,
                                                                                    "pause_at": 300 + k % 900}, 300 + k % 900)
                                           for k in range(base, base + 25)))
        # Windows of 200 after a warm-up of 200: a leak of the per-stream state (a few KB) grows every
        # one by far more than the tolerance. The server stack itself (both twins alike) grows in humps
        # that can last a few windows on Python 3.13 before they settle, so one window must stay flat.
        upstream.fake.record = False
        try:
            run(leave(200, 0))
            rss = [rss_kib(proc.pid)]
            for window in range(6):
                run(leave(200, 200 * (window + 1)), timeout=60)
                time.sleep(0.1)
                rss.append(rss_kib(proc.pid))
        finally:
            upstream.fake.record = True
        growth = [b - a for a, b in zip(rss, rss[1:])]
        assert min(growth) < 512, f"RSS grew {growth} KiB over windows of 200 disconnects (from {rss[0]} KiB)"
