"""The example gateway's request bodies: capped (413), streamed to the upstream, never held whole.

Real servers only: the gateway under uvicorn (in a thread, or `uvicorn examples.gateway:app` in a
subprocess for the memory test), in front of an upstream that reads each body as it arrives,
counting and checksumming it without keeping it.
"""

from __future__ import annotations

import os
import socket
import zlib

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from _servers import (HOST, ServerThread, gateway_process, gateway, lifespan, new_client, run,  # noqa: E402
                      wait_until)

ANSWER = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
          b'"function":{"name":"f","arguments":"{\\"ok\\": true}"}}]}}]}\n\ndata: [DONE]\n\n')


class Sink:
    """An upstream that reads a body as it comes (length and CRC only) and answers with a one-call stream.

    seen[request id] = (bytes received, their CRC-32, whether the body arrived whole, headers).
    """

    def __init__(self):
        self.seen = {}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        rid = headers.get("x-request-id", "")
        size, crc, whole = 0, 0, False
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            body = message.get("body", b"")
            size += len(body)
            crc = zlib.crc32(body, crc)
            if not message.get("more_body", False):
                whole = True
                break
        self.seen[rid] = (size, crc, whole, headers)
        if not whole:
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"x-body-bytes", str(size).encode())]})
        await send({"type": "http.response.body", "body": ANSWER, "more_body": False})


@pytest.fixture(scope="module")
def sink():
    app = Sink()
    server = ServerThread(app).start()
    server.app = app
    yield server
    server.stop()


CAP = 10_000


@pytest.fixture(scope="module")
def capped(sink):
    """The gateway with a 10,000-byte cap, its calls recorded."""
    calls = []
    server = ServerThread(gateway.create_app(sink.url, on_call=lambda sid, call: calls.append((sid, call)),
                                             max_body_bytes=CAP)).start()
    server.calls = calls
    yield server
    server.stop()


def pattern(size: int, piece: int = 1 << 16):
    """Yield size bytes of a fixed pseudo-random pattern, piece by piece."""
    block = bytes((i * 131 + 7) % 251 for i in range(piece))
    sent = 0
    while sent < size:
        part = block[: min(piece, size - sent)]
        sent += len(part)
        yield part


def crc_of(size: int) -> int:
    crc = 0
    for part in pattern(size):
        crc = zlib.crc32(part, crc)
    return crc


async def chunked(size: int):
    for part in pattern(size):
        yield part


async def post(url, rid, content, headers=()):
    async with new_client() as client:
        response = await client.post(url + "/v1/chat/completions", content=content,
                                     headers=[("x-request-id", rid), *headers])
        return response


# -- the cap ---------------------------------------------------------------------------------------

def test_a_declared_length_over_the_cap_is_a_413_and_never_reaches_the_upstream(capped, sink, caplog):
    caplog.set_level("WARNING", logger="callstitch.gateway")
    response = run(post(capped.url, "over-declared", b"x" * (CAP + 1)))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["type"] == "request_too_large" and error["limit_bytes"] == CAP
    assert f"{CAP + 1} bytes" in error["message"] and "CALLSTITCH_GATEWAY_MAX_BODY_BYTES" in error["message"]
    capped.wait_idle()
    assert "over-declared" not in sink.app.seen  # not even a connection was opened for it
    assert any("request body over the limit for stream over-declared" in r.getMessage() for r in caplog.records)


def test_a_chunked_body_over_the_cap_is_a_413_and_the_upstream_never_gets_it_whole(capped, sink):
    response = run(post(capped.url, "over-chunked", chunked(CAP * 5)))
    assert response.status_code == 413
    assert "a chunked body" in response.json()["error"]["message"]
    capped.wait_idle()
    wait_until(lambda: "over-chunked" in sink.app.seen, 5, "the upstream to see the request broken off")
    size, _, whole, _ = sink.app.seen["over-chunked"]
    assert not whole and size <= CAP
    assert not [c for sid, c in capped.calls if sid == "over-chunked"]


@pytest.mark.parametrize("framing", ["declared", "chunked"])
def test_a_body_of_exactly_the_cap_is_forwarded_whole(capped, sink, framing):
    rid = f"at-cap-{framing}"
    content = b"".join(pattern(CAP)) if framing == "declared" else chunked(CAP)
    response = run(post(capped.url, rid, content))
    assert response.status_code == 200 and response.content == ANSWER
    size, crc, whole, headers = sink.app.seen[rid]
    assert (size, crc, whole) == (CAP, crc_of(CAP), True)
    # The client's framing is kept: its length when it gave one, else chunked.
    assert headers.get("content-length") == (str(CAP) if framing == "declared" else None)
    assert headers.get("transfer-encoding") == (None if framing == "declared" else "chunked")
    wait_until(lambda: any(sid == rid for sid, _ in capped.calls), 5, "the call")


def test_a_client_that_leaves_mid_body_leaves_nothing_behind(capped, sink, caplog):
    caplog.set_level("WARNING", logger="callstitch.gateway")
    capped.wait_idle()
    with socket.create_connection((HOST, capped.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-ID: left\r\n"
                     b"Content-Length: 5000\r\n\r\n" + b"y" * 2000)
        wait_until(lambda: "left" in sink.app.seen or capped.task_count() > capped.idle_tasks, 5, "the request")
    capped.wait_idle()
    wait_until(lambda: "left" in sink.app.seen, 5, "the upstream to see the request broken off")
    assert sink.app.seen["left"][2] is False
    assert any("client left while sending the request body for stream left" in r.getMessage() for r in caplog.records)
    assert run(post(capped.url, "after-left", b"{}")).status_code == 200  # and the gateway serves on


def test_the_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("CALLSTITCH_GATEWAY_MAX_BODY_BYTES", "lots")
    with pytest.raises(ValueError, match="CALLSTITCH_GATEWAY_MAX_BODY_BYTES must be a number of bytes"):
        gateway.create_app("http://127.0.0.1:9")
    assert gateway.MAX_BODY_BYTES == 64 << 20


def test_no_cap_when_negative(sink):
    server = ServerThread(gateway.create_app(sink.url, on_call=lambda sid, call: None, max_body_bytes=-1)).start()
    try:
        response = run(post(server.url, "uncapped", chunked(3 * CAP)))
        assert response.status_code == 200 and sink.app.seen["uncapped"][:3] == (3 * CAP, crc_of(3 * CAP), True)
    finally:
        server.stop()


# -- streamed, not held: the runnable module in a subprocess ----------------------------------------

def vm_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field}")


BIG = 200 << 20


@pytest.mark.parametrize("framing", ["declared", "chunked"])
def test_a_200_mb_body_is_streamed_through_without_growing_the_gateway(sink, tmp_path, framing):
    """The old gateway read the body whole (await request.body()): its peak RSS grew by more than the body."""
    env = dict(os.environ, CALLSTITCH_GATEWAY_UPSTREAM=sink.url, CALLSTITCH_GATEWAY_MAX_BODY_BYTES=str(BIG + 1),
               PYTHONUNBUFFERED="1")
    log_path = tmp_path / "gateway.log"
    with gateway_process(env, log_path) as (proc, url):
        assert run(post(url, f"warm-{framing}", b'{"warm": 1}')).status_code == 200  # imports, pools, buffers
        before = vm_kib(proc.pid, "VmHWM")

        rid = f"big-{framing}"

        async def send():
            # A generator either way, so that the client does not hold the body either; its
            # length, when declared, goes in the header.
            headers = [("content-length", str(BIG))] if framing == "declared" else []
            return await post(url, rid, chunked(BIG), headers)

        response = run(send(), timeout=300)
        assert response.status_code == 200 and response.content == ANSWER
        assert sink.app.seen[rid][:3] == (BIG, crc_of(BIG), True)  # the upstream got it whole
        peak_growth = vm_kib(proc.pid, "VmHWM") - before
        assert peak_growth < 64 << 10, f"the gateway's peak RSS grew by {peak_growth} KiB for a {BIG >> 20} MiB body"
        log_text = log_path.read_text()
        assert "Traceback" not in log_text
        assert f'"stream":"{rid}"' in log_text  # the call the upstream answered with was logged

