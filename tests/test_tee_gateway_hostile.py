"""Hostile input for the gateway layer: tee/atee with odd sources and callbacks, the example gateway
with odd clients and upstreams. Each test here failed before the fix it names.

Servers listen on 127.0.0.1 only, on ports the OS picks (tests/_servers.py); waits are bounded.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from _streams import DONE, call_obj, chunk

from callstitch._tee import ATee, Tee

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

from _servers import HOST, ServerThread, gateway, lifespan, new_client, run, wait_until  # noqa: E402


def finish(reason: str = "tool_calls") -> bytes:
    return chunk([{"index": 0, "delta": {}, "finish_reason": reason}])


def tool_chunk(*calls: dict) -> bytes:
    return chunk([{"index": 0, "delta": {"tool_calls": list(calls)}}])


# A call the finish reason completes, then one more piece of it (a server that sends a stray
# fragment after finish_reason): the final Result keeps the piece, so the call is rebuilt.
LATE_PIECE = (tool_chunk(call_obj(0, "call_a", "f", '{"a": 1}')) + finish()
              + tool_chunk(call_obj(0, arguments=" ")) + DONE)

# Two calls that one chunk completes.
TWO_AT_ONCE = (tool_chunk(call_obj(0, "call_a", "f", "{}"), call_obj(1, "call_b", "g", "{}")) + finish() + DONE)

# A call begun and never finished (its arguments stop mid-string).
IN_FLIGHT = tool_chunk(call_obj(0, "call_half", "f", '{"city": "Par'))


# -- tee / atee -------------------------------------------------------------------------------------

def test_a_call_that_gets_a_piece_after_completion_reaches_on_call_once(impl):
    # Before: the tee told calls apart by id(): the call rebuilt at the end is a new object, so
    # on_call got call_a twice (and an id the allocator reused could have hidden another call).
    pieces = LATE_PIECE.split(b"\n\n")
    seen = []
    t = Tee([p + b"\n\n" for p in pieces[:-1]], "auto", seen.append, accumulator=impl.Accumulator())
    list(t)
    assert [(c.id, c.arguments) for c in seen] == [("call_a", {"a": 1})]
    assert [c.id for c in t.result.tool_calls] == ["call_a"]


def test_atee_hands_a_call_that_gets_a_piece_after_completion_once(impl):
    async def source():
        for piece in LATE_PIECE.split(b"\n\n")[:-1]:
            yield piece + b"\n\n"

    async def main():
        seen = []
        t = ATee(source(), "auto", seen.append, accumulator=impl.Accumulator())
        async for _ in t:
            pass
        return seen

    assert [c.id for c in asyncio.run(main())] == ["call_a"]


def test_reading_result_inside_on_call_hands_no_call_twice(impl):
    # on_call reading .result finishes the stream and hands over the calls still due, among them
    # the second call of the same chunk. Before: that call was handed over again afterwards.
    seen = []
    holder = {}

    def on_call(call):
        seen.append(call.id)
        holder["tee"].result

    t = holder["tee"] = Tee([TWO_AT_ONCE], "auto", on_call, accumulator=impl.Accumulator())
    assert list(t) == [TWO_AT_ONCE]
    assert seen == ["call_a", "call_b"]


def test_a_source_whose_close_fails_still_hands_over_the_calls_in_flight(impl):
    # Before: the error from the source's close() skipped the hand-over; the call in flight
    # never reached on_call.
    def source():
        try:
            yield IN_FLIGHT
            yield b": keep-alive\n\n"
        finally:
            raise OSError("connection reset while closing")

    seen = []
    it = iter(Tee(source(), "auto", seen.append, accumulator=impl.Accumulator()))
    assert next(it) == IN_FLIGHT
    with pytest.raises(OSError, match="connection reset"):
        it.close()  # the consumer stops early
    assert [(c.id, c.error and c.error.kind) for c in seen] == [("call_half", "truncated")]


def test_an_async_source_whose_aclose_fails_still_hands_over_the_calls_in_flight(impl):
    # Before: atee lost the call for good (its .result never calls on_call).
    async def source():
        try:
            yield IN_FLIGHT
            yield b": keep-alive\n\n"
        finally:
            raise OSError("connection reset while closing")

    async def main():
        seen = []
        it = aiter(ATee(source(), "auto", seen.append, accumulator=impl.Accumulator()))
        assert await anext(it) == IN_FLIGHT
        with pytest.raises(OSError, match="connection reset"):
            await it.aclose()
        return seen

    assert [(c.id, c.error and c.error.kind) for c in asyncio.run(main())] == [("call_half", "truncated")]


# Three calls begun and not closed; then the same three completed by the finish reason.
THREE = tool_chunk(call_obj(0, "call_a", "f", '{"x": 1'), call_obj(1, "call_b", "g", "{}"), call_obj(2, "call_c", "h", "{}"))
THREE_DONE = THREE + finish()


@pytest.mark.parametrize("body, quiet_after", [(THREE, False), (THREE_DONE, True)], ids=["in-flight-at-end", "completed"])
def test_asyncio_cancellation_lets_every_call_in_flight_reach_an_async_on_call_to_its_end(impl, body, quiet_after):
    # asyncio's own Task.cancel() (wait_for, asyncio.timeout, aiohttp, a server's shutdown), which
    # anyio's shield does not hold off. Before: on_call was stopped in call_a, and call_b and call_c
    # never reached it (marked as had before they ran).
    begun, done = [], []

    async def on_call(call):
        begun.append(call.id)
        await asyncio.sleep(0.05)
        done.append(call.id)

    async def source():
        yield body
        if quiet_after:
            await asyncio.sleep(5)  # the upstream goes quiet after the calls
            yield DONE

    async def respond():
        async for _ in ATee(source(), "auto", on_call, accumulator=impl.Accumulator()):
            pass

    async def main():
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):  # the cancellation still ends the request
            await asyncio.wait_for(respond(), 0.02)
        return time.monotonic() - started

    took = asyncio.run(main())
    assert begun == done == ["call_a", "call_b", "call_c"]
    assert took < 4  # after the calls, not after the quiet upstream


@pytest.mark.parametrize("seed", range(24))
def test_a_task_cancelled_at_any_point_hands_each_call_to_an_async_on_call_once_and_to_its_end(impl, seed):
    import random
    rng = random.Random(seed)
    body = TWO_AT_ONCE + LATE_PIECE
    cuts = sorted(rng.sample(range(1, len(body)), 6))
    chunks = [body[a:b] for a, b in zip([0] + cuts, cuts + [len(body)])]
    begun, done, out = [], [], []

    async def on_call(call):
        begun.append((call.choice, call.index))
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(0)
        done.append((call.choice, call.index))

    async def source():
        for piece in chunks:
            await asyncio.sleep(0)
            yield piece

    async def main():
        tap = ATee(source(), "auto", on_call, accumulator=impl.Accumulator())

        async def consume():
            async for piece in tap:
                out.append(piece)
                await asyncio.sleep(0)

        task = asyncio.ensure_future(consume())
        for _ in range(rng.randint(0, 40)):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        for _ in range(200):  # the generator's own close, when it was paused at a yield
            await asyncio.sleep(0)
        return sorted((c.choice, c.index) for c in tap.result.tool_calls)

    final = asyncio.run(main())
    assert out == chunks[:len(out)]
    assert sorted(begun) == sorted(done) == final and len(set(begun)) == len(begun)


def test_an_async_on_call_that_fails_or_cancels_itself_still_ends_the_iteration_with_its_error(impl):
    async def failing(call):
        await asyncio.sleep(0)
        raise ValueError("the queue is full")

    async def cancelling(call):
        await asyncio.sleep(0)
        raise asyncio.CancelledError

    async def main(on_call):
        async def source():
            yield TWO_AT_ONCE

        async for _ in ATee(source(), "auto", on_call, accumulator=impl.Accumulator()):
            pass

    with pytest.raises(ValueError, match="the queue is full"):
        asyncio.run(main(failing))
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main(cancelling))


def test_atee_under_starlette_gets_the_call_in_flight_to_an_async_on_call_when_the_client_leaves(impl):
    # The README's own use: StreamingResponse(atee(...), on_call=async_fn). Starlette cancels the
    # response by an anyio cancel scope when the client leaves, which cancels every await after it
    # too. Before: the on_call awaiting in the final hand-over was cancelled, and the call lost.
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    got, ended = [], []

    async def on_call(call):
        await asyncio.sleep(0.01)  # as one that writes to a queue or a socket would
        got.append((call.id, call.error and call.error.kind))

    async def source():
        try:
            yield IN_FLIGHT
            await asyncio.sleep(8)  # the upstream goes quiet: the client gives up first
        finally:
            ended.append(True)

    async def endpoint(request):
        return StreamingResponse(ATee(source(), "auto", on_call, accumulator=impl.Accumulator()))

    server = ServerThread(Starlette(routes=[Route("/", endpoint, methods=["POST"])])).start()
    try:
        async def leave():
            async with new_client() as client:
                async with client.stream("POST", server.url + "/", content=b"{}") as response:
                    async for _ in response.aiter_raw():
                        return

        run(leave())
        wait_until(lambda: ended and got, 6, "the stream to end and its call to be handed over")
        assert got == [("call_half", "truncated")]
    finally:
        server.stop()


def test_atee_under_starlette_lets_an_async_on_call_under_way_finish_when_the_client_leaves(impl):
    # A call completed mid-stream: atee awaits on_call before it passes the chunk on, and the client
    # gives up meanwhile. Starlette's cancellation reached into on_call and stopped it half done.
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    begun, done, ended = [], [], []

    async def on_call(call):
        begun.append(call.id)
        await asyncio.sleep(0.6)  # as a slow write to a queue or a socket would
        done.append(call.id)

    async def source():
        try:
            yield TWO_AT_ONCE
            await asyncio.sleep(8)
        finally:
            ended.append(True)

    async def endpoint(request):
        return StreamingResponse(ATee(source(), "auto", on_call, accumulator=impl.Accumulator()))

    server = ServerThread(Starlette(routes=[Route("/", endpoint, methods=["POST"])])).start()
    try:
        async def leave():
            async with new_client() as client:
                with pytest.raises(asyncio.TimeoutError):  # on_call is still under way: nothing came yet
                    await asyncio.wait_for(client.post(server.url + "/", content=b"{}"), 0.2)

        run(leave())
        wait_until(lambda: ended and len(done) == 2, 6, "the stream to end and on_call to finish both calls")
        assert begun == done == ["call_a", "call_b"]
    finally:
        server.stop()


# -- the example gateway ------------------------------------------------------------------------------

class Upstream:
    """An upstream on 127.0.0.1: POST /stream answers with STREAM; POST /hold sends nothing, not even
    headers, until the gateway hangs up (at most HOLD seconds); POST /half sends IN_FLIGHT and then
    waits the same way. It keeps each request's headers and how each hold ended."""

    HOLD = 8.0

    def __init__(self):
        self.headers = {}  # request id -> {name: value}
        self.ended = {}    # request id -> ("disconnected", seconds held) | ("timed out", seconds held)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        rid = headers.get("x-request-id", "")
        self.headers[rid] = headers
        if scope["path"] == "/half":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": IN_FLIGHT, "more_body": True})
        if scope["path"] in ("/hold", "/half"):
            start = time.monotonic()
            try:
                while (await asyncio.wait_for(receive(), self.HOLD))["type"] != "http.disconnect":
                    pass
                self.ended[rid] = ("disconnected", time.monotonic() - start)
            except asyncio.TimeoutError:
                self.ended[rid] = ("timed out", time.monotonic() - start)
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": TWO_AT_ONCE})


@pytest.fixture(scope="module")
def upstream():
    app = Upstream()
    server = ServerThread(app).start()
    server.app = app
    yield server
    server.stop()


class AsyncRecorder:
    """An async on_call for the gateway: it awaits (as one that writes to a queue or a socket would)."""

    def __init__(self):
        self.calls = {}

    async def __call__(self, stream_id, call):
        await asyncio.sleep(0.001)
        self.calls.setdefault(stream_id, []).append(call)


@pytest.fixture(scope="module")
def gate(upstream, impl):
    recorder = AsyncRecorder()

    def tee(chunks, format, on_call):
        return ATee(chunks, format, on_call, accumulator=impl.Accumulator(format=format))

    server = ServerThread(gateway.create_app(upstream.url, on_call=recorder, tee=tee,
                                             timeout=httpx.Timeout(20.0))).start()
    server.recorder = recorder
    yield server
    server.stop()


def test_an_async_on_call_is_awaited_by_the_gateway(gate, impl):
    # Before: hand_over called it and dropped the coroutine ("never awaited"): no call was handed over.
    rid = f"async-{impl.name}"

    async def main():
        async with new_client() as client:
            return await client.post(gate.url + "/stream", content=b"{}", headers={"x-request-id": rid})

    response = run(main())
    assert (response.status_code, response.content) == (200, TWO_AT_ONCE)
    gate.wait_idle()
    assert [c.id for c in gate.recorder.calls.get(rid, [])] == ["call_a", "call_b"]


def test_an_async_on_call_gets_the_call_in_flight_when_the_client_leaves(gate, upstream, impl):
    rid = f"async-leave-{impl.name}"

    async def leave():
        async with new_client() as client:
            async with client.stream("POST", gate.url + "/half", content=b"{}", headers={"x-request-id": rid}) as r:
                async for _ in r.aiter_raw():
                    return

    run(leave())
    wait_until(lambda: rid in upstream.app.ended, Upstream.HOLD + 2, "the upstream's hold to end")
    assert upstream.app.ended[rid][0] == "disconnected"
    gate.wait_idle()
    assert [(c.id, c.error and c.error.kind) for c in gate.recorder.calls.get(rid, [])] == [("call_half", "truncated")]


def test_a_client_that_leaves_before_the_upstream_answers_lets_the_upstream_go(gate, upstream, impl):
    # Before: the gateway waited for the upstream's headers (up to its read timeout, ten minutes by
    # default) although nobody was left to read them.
    rid = f"hold-{impl.name}"

    async def leave():
        async with new_client() as client:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.post(gate.url + "/hold", content=b"{}", headers={"x-request-id": rid}),
                                       0.5)

    run(leave())
    wait_until(lambda: rid in upstream.app.ended, Upstream.HOLD + 2, "the upstream's hold to end")
    how, held = upstream.app.ended[rid]
    assert how == "disconnected" and held < Upstream.HOLD / 2, (how, held)
    gate.wait_idle()


def test_a_request_without_a_body_reaches_the_upstream_without_one(gate, upstream, impl):
    # RFC 9112 section 6.3: a request with neither Content-Length nor Transfer-Encoding has an empty
    # body. Before: the gateway forwarded it chunked (a framing the client never chose, which some
    # upstreams refuse for requests).
    rid = f"nobody-{impl.name}"
    with socket.create_connection((HOST, gate.port), timeout=10) as sock:
        sock.sendall(f"POST /stream HTTP/1.1\r\nHost: a\r\nX-Request-ID: {rid}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    assert answer.startswith(b"HTTP/1.1 200 ")
    headers = upstream.app.headers[rid]
    assert headers.get("content-length") == "0" and "transfer-encoding" not in headers


def test_the_gateway_adds_no_request_headers_of_its_own(gate, upstream, impl):
    # Before: httpx's defaults went upstream on a request that had none: "user-agent: python-httpx/…"
    # and "accept: */*", as if the client had sent them.
    rid = f"bare-{impl.name}"
    with socket.create_connection((HOST, gate.port), timeout=10) as sock:
        sock.sendall(f"POST /stream HTTP/1.1\r\nHost: a\r\nX-Request-ID: {rid}\r\nContent-Length: 2\r\n"
                     "Connection: close\r\n\r\n{}".encode())
        while sock.recv(65536):
            pass
    headers = upstream.app.headers[rid]
    assert "user-agent" not in headers and "accept" not in headers, headers
    assert headers["accept-encoding"] == "identity" and headers["content-length"] == "2"

    async def main():  # a client's own are forwarded as sent
        async with new_client() as client:
            await client.post(gate.url + "/stream", content=b"{}", headers={
                "x-request-id": rid + "-own", "user-agent": "OpenAI/Python 1.0", "accept": "x/y"})

    run(main())
    assert (upstream.app.headers[rid + "-own"]["user-agent"], upstream.app.headers[rid + "-own"]["accept"]) == \
        ("OpenAI/Python 1.0", "x/y")
