"""The example gateway against hostile upstreams and clients: it never crashes, it logs what it got,
and it relays the stream unchanged.

Upstreams: a uvicorn app replaying bytes it is given (garbage, HTML, a line that never ends, a
call nested 1,000 deep, lone surrogates), hanging up mid-stream or stalling; a raw TCP server
answering with no HTTP at all. Clients: malformed request lines, huge headers, a bad
Content-Length, the wrong method, leaving mid-stream. The gateway logs with its default handler
(log_call), over each twin's accumulator; every check compares with the library's own reading of
the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import threading
import zlib

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

import callstitch  # noqa: E402
from callstitch._records import MAX_DEPTH  # noqa: E402
from callstitch._results import ToolCall  # noqa: E402
from callstitch._tee import ATee  # noqa: E402
from _servers import HOST, ServerThread, gateway, lifespan, new_client, run, wait_until  # noqa: E402

LIMITS = callstitch.Limits(event_bytes=1 << 20)


def chat_body(arguments: str, call_id: str = "call_1", name: str = "f") -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}}]}
    return b"data: " + json.dumps(chunk).encode() + b'\n\ndata: {"choices":[{"index":0,"delta":{},' \
        b'"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'


DEEP = '{"a":' + "[" * 999 + "]" * 999 + "}"
BODIES = {
    "deep-call": chat_body(DEEP, "call_deep"),
    "lone-surrogates": chat_body('{"x": 1}', "call_\ud800", "f\udc00x"),
    "random-bytes": random.Random(7).randbytes(20_000),
    "html-502": b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>\n",
    "nul-bytes": b"\x00" * 5000 + b"data: [DONE]\n\n",
    "deep-json-event": b"data: " + b"[" * 200_000 + b"\n\n" + chat_body('{"after": true}', "call_after"),
    "no-newline-ever": b"data: " + b"x" * (3 << 20),
    "unended-line-then-call": b"data: {" + b"y" * (2 << 20) + b"\n\n" + chat_body('{"ok": 1}', "call_ok"),
    # a call begun and never finished, then keep-alive comments (the first half holds the call)
    "half-a-call": chat_body('{"city": "Par', "call_half").split(b"\n\n")[0] + b"\n\n" + b": keep-alive\n\n" * 40,
}


class Replay:
    """An upstream that answers a POST to /<name>/<mode> with BODIES[name], in pieces, as the mode says.

    Modes: "whole" (then the response ends), "hangup" (half the bytes, then the connection is
    dropped), "stall" (half the bytes, then nothing until the gateway hangs up), "500" (the body as
    an error response).
    """

    def __init__(self):
        self.ended = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        _, name, mode = scope["path"].split("/")
        data = BODIES[name]
        status = 500 if mode == "500" else 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/event-stream"), (b"x-upstream", name.encode())]})
        end = len(data) // 2 if mode in ("hangup", "stall") else len(data)
        rng = random.Random(zlib.crc32(name.encode()))
        pos = 0
        while pos < end:
            piece = data[pos:min(end, pos + rng.randint(1, 65536))]
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            pos += len(piece)
        if mode == "hangup":
            return  # unfinished: uvicorn drops the connection
        if mode == "stall":
            while (await receive())["type"] != "http.disconnect":
                pass
            self.ended[name] = "disconnected"
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture(scope="module")
def replay():
    app = Replay()
    server = ServerThread(app).start()
    server.app = app
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gate(replay, impl):
    """The example gateway with its default handler, log_call, over the twin's accumulator."""
    def tee(chunks, format, on_call):
        return ATee(chunks, format, on_call, accumulator=impl.Accumulator(format=format, limits=LIMITS))

    server = ServerThread(gateway.create_app(replay.url, tee=tee, timeout=httpx.Timeout(10.0))).start()
    yield server
    server.stop()


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.INFO, logger="callstitch.gateway")
    return caplog


def logged(caplog, prefix: str) -> list[dict]:
    return [json.loads(r.getMessage()[len(prefix):]) for r in caplog.records if r.getMessage().startswith(prefix)]


def calls_of(caplog, stream: str) -> list[dict]:
    return [e for e in logged(caplog, "tool call ") if e["stream"] == stream]


def errors_of(caplog, stream: str) -> list[str]:
    found = [e for e in logged(caplog, "stream errors ") if e["stream"] == stream]
    return found[0]["errors"] if found else []


async def fetch(url: str, path: str, rid: str):
    """POST to the gateway; return (status, headers, the bytes received, the error that ended the read)."""
    received, error = b"", None
    async with new_client() as client:
        async with client.stream("POST", url + path, content=b"{}", headers={"x-request-id": rid}) as r:
            try:
                async for piece in r.aiter_raw():
                    received += piece
            except httpx.HTTPError as exc:
                error = exc
            return r.status_code, r.headers, received, error


def expected(impl, data: bytes):
    acc = impl.Accumulator(format="auto", limits=LIMITS)
    acc.feed(data)
    return acc.finalize()


# -- hostile upstreams ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BODIES))
def test_whatever_the_upstream_sends_is_relayed_and_logged(gate, impl, logs, name):
    rid = f"whole-{name}-{impl.name}"
    status, headers, received, error = run(fetch(gate.url, f"/{name}/whole", rid))
    assert (status, error) == (200, None) and headers["x-upstream"] == name
    assert received == BODIES[name]
    gate.wait_idle()
    want = expected(impl, BODIES[name])
    wait_until(lambda: len(calls_of(logs, rid)) == len(want.tool_calls), 5, "the call log lines")
    got = calls_of(logs, rid)
    assert [(e["id"], e["name"]) for e in got] == [(c.id, c.name) for c in want.tool_calls]
    for entry, call in zip(got, want.tool_calls):
        if "reason" in entry:  # too deep to write as JSON: the text received, and why
            assert entry["arguments"] is None and entry["raw_arguments"] == call.raw_arguments
        else:
            assert entry["arguments"] == call.arguments
    assert errors_of(logs, rid) == [str(e) for e in want.errors][:20]


def test_a_1000_deep_call_is_logged_as_its_text_with_the_reason(gate, impl, logs):
    # Before: orjson.dumps raised in log_call (254 levels at most) and the call was never logged.
    rid = f"deep-{impl.name}"
    run(fetch(gate.url, "/deep-call/whole", rid))
    wait_until(lambda: calls_of(logs, rid), 5, "the call's log line")
    (entry,) = calls_of(logs, rid)
    assert entry == {"stream": rid, "id": "call_deep", "name": "f", "arguments": None, "raw_arguments": DEEP,
                     "reason": f"arguments nested deeper than {MAX_DEPTH} levels: kept as raw_arguments only"}
    assert not [r for r in logs.records if r.levelno >= logging.ERROR]


def test_lone_surrogates_and_integers_beyond_64_bits_are_logged_exactly(logs):
    gateway.log_call("s", ToolCall("call_\ud800", "f\udc00x", 0, 0, {"n": 2**70, "s": "a\ud800"}, "{}"))
    (record,) = [r for r in logs.records if r.getMessage().startswith("tool call ")]
    line = record.getMessage()[len("tool call "):]
    line.encode("utf-8")  # a log line that any handler can write
    assert json.loads(line) == {"stream": "s", "id": "call_\ud800", "name": "f\udc00x",
                                "arguments": {"n": 2**70, "s": "a\ud800"}}


@pytest.mark.parametrize("name", ["half-a-call", "deep-call", "random-bytes"])
def test_an_upstream_that_hangs_up_mid_stream(gate, impl, logs, name):
    rid = f"hangup-{name}-{impl.name}"
    status, _, received, error = run(fetch(gate.url, f"/{name}/hangup", rid))
    # The client sees what the upstream sent, then the stream cut short, as the gateway did.
    assert status == 200 and error is not None
    assert received == BODIES[name][:len(received)] and len(received) == len(BODIES[name]) // 2
    gate.wait_idle()
    wait_until(lambda: any(f"upstream failed mid-stream for stream {rid}" in r.getMessage() for r in logs.records),
               5, "the warning")
    want = expected(impl, received)
    wait_until(lambda: len(calls_of(logs, rid)) == len(want.tool_calls), 5, "the calls in flight")
    assert [(e["id"], e.get("error")) for e in calls_of(logs, rid)] == \
        [(c.id, c.error and c.error.kind) for c in want.tool_calls]
    assert not [r for r in logs.records if "Traceback" in r.getMessage() or r.exc_info]


def test_an_upstream_that_stalls_is_let_go_when_the_client_leaves(gate, replay, impl, logs):
    rid = f"stall-{impl.name}"

    async def leave():
        async with new_client() as client:
            async with client.stream("POST", gate.url + "/half-a-call/stall", content=b"{}",
                                     headers={"x-request-id": rid}) as r:
                async for _ in r.aiter_raw():
                    return  # the first bytes, then gone

    run(leave())
    wait_until(lambda: replay.app.ended.get("half-a-call") == "disconnected", 5, "the gateway to hang up")
    gate.wait_idle()
    wait_until(lambda: calls_of(logs, rid), 5, "the call in flight")
    assert calls_of(logs, rid)[0]["error"] == "truncated"


def test_an_error_status_is_relayed_with_its_body(gate, impl, logs):
    status, _, received, error = run(fetch(gate.url, "/html-502/500", f"status-{impl.name}"))
    assert (status, received, error) == (500, BODIES["html-502"], None)


class RawUpstream:
    """A TCP server on 127.0.0.1 that answers every connection with fixed bytes (no HTTP), then closes."""

    def __init__(self, answer: bytes):
        self.answer = answer
        self.sock = socket.create_server((HOST, 0))
        self.url = f"http://{HOST}:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if self.answer:
                    conn.sendall(self.answer)

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("answer", [b"", b"garbage that is not HTTP\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Le"],
                         ids=["closes", "garbage", "cut-headers"])
def test_an_upstream_that_does_not_speak_http_is_a_502(logs, answer):
    upstream = RawUpstream(answer)
    server = ServerThread(gateway.create_app(upstream.url)).start()
    try:
        status, _, received, _ = run(fetch(server.url, "/v1/chat/completions", "raw"))
        assert status == 502 and json.loads(received)["error"]["type"] == "bad_gateway"
        assert any("upstream unreachable for stream raw" in r.getMessage() for r in logs.records)
        server.wait_idle()
    finally:
        server.stop()
        upstream.close()


# -- hostile clients ----------------------------------------------------------------------------------

def raw_request(port: int, data: bytes) -> bytes:
    """Send bytes to the gateway; return what it answers before closing (or within 5 s)."""
    answer = b""
    with socket.create_connection((HOST, port), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:  # the server answered and closed before it had all of it: as it may
            pass
    return answer


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
    b"POST /x HTTP/1.1\r\nHost: a\r\nX-Huge: " + b"h" * 200_000 + b"\r\n\r\n",
    b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64),   # a TLS hello on the plain port
    b"GET /v1/chat/completions HTTP/1.1\r\nHost: a\r\n\r\n",
], ids=["garbage", "bad-length", "two-lengths", "huge-header", "bad-chunk", "tls", "get"])
def test_malformed_requests_get_an_error_and_the_gateway_serves_on(gate, impl, request_bytes):
    answer = raw_request(gate.port, request_bytes)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 4"), answer[:200]
    gate.wait_idle()
    status, _, received, error = run(fetch(gate.url, "/lone-surrogates/whole", f"after-{impl.name}"))
    assert (status, received, error) == (200, BODIES["lone-surrogates"], None)


def test_many_clients_that_leave_at_random_points_leave_the_gateway_healthy(gate, impl, logs):
    names = ["deep-call", "unended-line-then-call", "random-bytes", "deep-json-event"]
    rng = random.Random(11)

    async def leave(client, k):
        name = names[k % len(names)]
        upto = rng.randrange(1, len(BODIES[name]))
        async with client.stream("POST", f"{gate.url}/{name}/whole", content=b"{}",
                                 headers={"x-request-id": f"leave-{k}"}) as r:
            got = b""
            async for piece in r.aiter_raw():
                got += piece
                if len(got) >= upto:
                    break
        assert BODIES[name].startswith(got)

    async def main():
        async with new_client() as client:
            await asyncio.gather(*(leave(client, k) for k in range(40)))

    run(main(), timeout=60)
    gate.wait_idle(10)
    assert not [r for r in logs.records if r.levelno >= logging.ERROR]
    status, _, received, _ = run(fetch(gate.url, "/deep-call/whole", f"healthy-{impl.name}"))
    assert status == 200 and received == BODIES["deep-call"]
    wait_until(lambda: calls_of(logs, f"healthy-{impl.name}"), 5, "its call's log line")


class PathRecorder:
    """An upstream that answers every POST with a [DONE] stream and records the raw path and query it got."""

    def __init__(self):
        self.targets = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        self.targets.append(scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b""))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@pytest.fixture(scope="module")
def based():
    """The gateway in front of a PathRecorder reached under a base path, /base/openai."""
    recorder = PathRecorder()
    upstream = ServerThread(recorder).start()
    server = ServerThread(gateway.create_app(upstream.url + "/base/openai", on_call=lambda sid, call: None)).start()
    server.recorder = recorder
    yield server
    server.stop()
    upstream.stop()


def post(port: int, target: bytes) -> bytes:
    """POST {} to the gateway with this request target as sent (no client library normalises it); return the answer."""
    answer = b""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(b"POST " + target + b" HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        while chunk := sock.recv(65536):  # (not half-closed first: the server would take that for a client gone)
            answer += chunk
    return answer


@pytest.mark.parametrize("target", [b"/../../admin/keys", b"/v1/../../../internal", b"/v1/./..", b"/..",
                                    b"/v1/%2e%2e/%2E%2E/admin", b"/v1/.%2e/x", b"/%2e/v1"])
def test_a_path_with_dot_segments_is_refused_and_never_leaves_the_base_path(based, target):
    seen = len(based.recorder.targets)
    answer = post(based.port, target)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"invalid_request_path" in answer
    assert len(based.recorder.targets) == seen  # the upstream was never asked


@pytest.mark.parametrize("target, forwarded", [
    (b"/v1/chat/completions", b"/base/openai/v1/chat/completions"),
    (b"/v1/a%2Fb/..x/.y/c?q=%2e%2e", b"/base/openai/v1/a%2Fb/..x/.y/c?q=%2e%2e"),  # as sent: no dot segment there
    (b"/v1/a#frag", b"/base/openai/v1/a%23frag"),
    (b"/v1/a?x=1#y", b"/base/openai/v1/a?x=1%23y"),
])
def test_a_path_is_forwarded_as_sent_under_the_base_path(based, target, forwarded):
    answer = post(based.port, target)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert based.recorder.targets[-1] == forwarded
