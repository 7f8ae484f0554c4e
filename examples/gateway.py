"""An LLM API gateway that passes streams through untouched and logs each tool call as it completes.

Run it in front of any provider (OpenAI, Anthropic, Gemini, Bedrock, an OpenAI-compatible
server, ...)::

    CALLSTITCH_GATEWAY_UPSTREAM=https://api.openai.com uvicorn examples.gateway:app --port 8080

then point a client at ``http://127.0.0.1:8080`` instead of the provider. Every POST is
forwarded to the upstream base URL with the same path, query and body, and the client's headers
minus the hop-by-hop ones (a path with a "." or ".." segment, which would leave the base URL's
path, gets a 400); the response (status, headers, body bytes) comes back unchanged,
chunk by chunk, as the upstream sends it. On the side, ``callstitch.atee`` reassembles the tool
calls from those bytes (any wire format: ``format="auto"``) and hands each one over the moment
the protocol completes it; the default handler logs one JSON line per call::

    tool call {"stream":"4f1c…","id":"call_JMW1…","name":"get_weather","arguments":{"city":"Paris"}}

The stream id is the request's ``X-Request-ID`` header when it has one, else a fresh uuid4. A
stream with errors (a body that is not a stream, malformed events, a limit reached) gets one
``stream errors {...}`` warning line when it ends; an upstream that fails mid-stream, one warning,
and the client's connection is dropped, so that it too sees the stream cut short.

Request bodies are streamed to the upstream as they arrive, never held whole, and capped: one
larger than ``CALLSTITCH_GATEWAY_MAX_BODY_BYTES`` (default 64 MiB, MAX_BODY_BYTES; negative: no
cap) gets a 413 with a JSON error, before a byte of it is read when its Content-Length says so,
else as soon as the bytes counted pass the cap (the upstream then sees the request broken off).

Environment: ``CALLSTITCH_GATEWAY_UPSTREAM`` (the upstream base URL),
``CALLSTITCH_GATEWAY_MAX_BODY_BYTES`` and, read by callstitch itself,
``CALLSTITCH_NO_EXTENSIONS=1`` (use the pure-Python twin).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import uuid
from urllib.parse import unquote_to_bytes
from typing import Any, AsyncIterable, AsyncIterator, Callable

import httpx
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

import callstitch
from callstitch._records import record_json, to_json  # the CLI's and Spark's writer: no call is too odd to log

__all__ = ["create_app", "app", "log_call", "log_stream_errors", "HOP_BY_HOP", "MAX_BODY_BYTES"]

log = logging.getLogger("callstitch.gateway")

OnCall = Callable[[str, callstitch.ToolCall], Any]
# tee(chunks, format, on_call) -> async iterable of the same chunks; callstitch.atee, or a stand-in.
TeeFactory = Callable[[AsyncIterable[bytes], str, Callable[[callstitch.ToolCall], Any]], AsyncIterable[bytes]]

# RFC 9110 section 7.6.1: these describe one connection, not the message, so a proxy drops them.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "transfer-encoding", "upgrade"})
# Recomputed for the new connection (host, content-length) or set by the ASGI server (date, server).
# accept-encoding is replaced by "identity": the accumulator must read the bytes the client gets, and
# compressing an event stream would hold events back anyway.
REQUEST_DROP = HOP_BY_HOP | {"host", "content-length", "accept-encoding"}
RESPONSE_DROP = HOP_BY_HOP | {"date", "server"}
# The largest request body forwarded (CALLSTITCH_GATEWAY_MAX_BODY_BYTES overrides it): room for the
# providers' own request limits (Anthropic's 32 MB; images and documents sent inline), not for a
# client that would fill the gateway's memory or its upstream's.
MAX_BODY_BYTES = 64 << 20
_LOGGED_ERRORS = 20  # stream errors logged one by one (the rest are counted)


def _forwardable(raw: list[tuple[bytes, bytes]], drop: frozenset[str]) -> list[tuple[bytes, bytes]]:
    """Return the headers a proxy passes on: minus `drop` and minus those the Connection header names."""
    named = set()
    for key, value in raw:
        if key.lower() == b"connection":
            named.update(token.strip().lower() for token in value.decode("latin-1").split(","))
    return [(k, v) for k, v in raw if (name := k.decode("latin-1").lower()) not in drop and name not in named]


def log_call(stream_id: str, call: callstitch.ToolCall) -> None:
    """Log one line of JSON for a finished tool call: stream, id, name, arguments (and error, if any).

    Arguments no JSON writer takes (nested deeper than 500 levels) are logged as the text received,
    with the reason; a lone surrogate in an id or a name as its JSON escape.
    """
    line: dict[str, Any] = {"stream": stream_id, "id": call.id, "name": call.name, "arguments": call.arguments}
    if call.error is not None:  # truncated or malformed: keep the text as received
        line["error"] = call.error.kind
        line["raw_arguments"] = call.raw_arguments
    text, _ = record_json(line, call)
    log.info("tool call %s", text.decode())


def log_stream_errors(stream_id: str, result: Any) -> None:
    """Log one line of JSON for a stream that had errors (not a stream at all, malformed chunks, a limit, …)."""
    errors = getattr(result, "errors", None)
    if not errors:
        return
    line = {"stream": stream_id, "errors": [str(e) for e in errors[:_LOGGED_ERRORS]]}
    if len(errors) > _LOGGED_ERRORS:
        line["more_errors"] = len(errors) - _LOGGED_ERRORS
    log.warning("stream errors %s", to_json(line).decode())


class _Relay(StreamingResponse):
    """A StreamingResponse that closes its body and the upstream response however the stream ends."""

    def __init__(self, upstream: httpx.Response, body: AsyncIterable[bytes], stream_id: str) -> None:
        # Keep the async generator itself, so that it can be closed (Starlette only iterates it).
        self._tap = body
        self._body = aiter(body)
        super().__init__(self._body, status_code=upstream.status_code)
        self.raw_headers = _forwardable(upstream.headers.raw, RESPONSE_DROP)
        self._upstream = upstream
        self._stream_id = stream_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except httpx.HTTPError as exc:
            # The upstream hung up (or stalled past the read timeout) mid-stream. Returning without
            # ending the response makes the server drop the client's connection, so the client sees
            # the stream cut short too, as it was; the calls in flight are handed over below.
            log.warning("upstream failed mid-stream for stream %s: %r", self._stream_id, exc)
        finally:
            # The client may have left mid-stream: Starlette then cancels the send loop and drops the
            # generator. Close it here rather than whenever the garbage collector gets to it: that
            # finishes the tee (its result, the last on_call) and lets the upstream connection go now.
            aclose = getattr(self._body, "aclose", None)
            try:
                if aclose is not None:
                    await aclose()
            finally:
                await self._upstream.aclose()
            log_stream_errors(self._stream_id, getattr(self._tap, "result", None))


class _BodyTooLarge(Exception):
    """The client's request body went past the gateway's cap while it was being forwarded."""


def _declared_length(request: Request) -> int | None:
    """Return the request's Content-Length (the HTTP server has checked it is one number), or None when chunked."""
    value = request.headers.get("content-length")
    if value is not None:
        return int(value)
    # Neither header: the request has no body (RFC 9112 section 6.3). Forwarded as chunked, it would
    # reach the upstream in a framing the client never chose, which some servers refuse.
    return None if "transfer-encoding" in request.headers else 0


async def _capped(chunks: AsyncIterable[bytes], limit: int | None, read: asyncio.Event) -> AsyncIterator[bytes]:
    """Yield the request body as it arrives; raise _BodyTooLarge as soon as it goes past limit bytes.

    ``read`` is set once the whole body has been yielded.
    """
    seen = 0
    async for chunk in chunks:
        seen += len(chunk)
        if limit is not None and seen > limit:
            raise _BodyTooLarge(seen)
        if chunk:
            yield chunk
    read.set()


async def _answer_or_leave(client: httpx.AsyncClient, outgoing: httpx.Request, receive: Receive,
                           body_read: asyncio.Event) -> httpx.Response | None:
    """Send the request upstream; return its response, or None when the client leaves before it comes.

    An upstream may take minutes to send its headers (a model thinking). A client that leaves
    meanwhile is only seen here: Starlette watches for it once the response has begun.
    """
    sending = asyncio.ensure_future(client.send(outgoing, stream=True))

    async def client_left() -> None:
        await body_read.wait()  # until then the body's reader owns receive()
        while (await receive())["type"] != "http.disconnect":
            pass

    watching = asyncio.ensure_future(client_left())
    try:
        await asyncio.wait((sending, watching), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watching.cancel()
        if not sending.done():  # the client left, or this request is itself cancelled
            sending.cancel()  # cancelling the send drops the upstream connection
        await asyncio.gather(sending, watching, return_exceptions=True)
    if sending.cancelled():
        return None
    return sending.result()  # the response, or what went wrong sending the request


async def _guarded(pending: Any, stream_id: str) -> None:
    """Await an async on_call's result (atee shields it from a client that left); log what it raises."""
    try:
        await pending
    except Exception:  # a failing handler must never break the client's stream
        log.exception("on_call failed for stream %s", stream_id)


def _upstream_target(path: bytes, query: bytes) -> str | None:
    """Return the path and query to append to the upstream's base URL, as sent; None for a path that leaves it.

    A "." or ".." segment (%-escaped too) would take the request out of the base path: httpx
    removes dot segments from the joined URL, and a server may do it after decoding, so
    "/../admin" under "https://host/base" would reach "https://host/admin". A "#" is legal in a
    request target but would end the URL's path as a fragment: it is sent escaped, as %23.
    """
    if any(unquote_to_bytes(segment) in (b".", b"..") for segment in path.split(b"/")):
        return None
    target = path + (b"?" + query if query else b"")
    return target.replace(b"#", b"%23").decode("latin-1")


def _too_large(stream_id: str, limit: int, size: int | None) -> JSONResponse:
    told = f"{size} bytes" if size is not None else "a chunked body"
    log.warning("request body over the limit for stream %s: %s, the limit is %d bytes", stream_id, told, limit)
    message = (f"the request body ({told}) is larger than this gateway accepts: at most {limit} bytes "
               "(CALLSTITCH_GATEWAY_MAX_BODY_BYTES)")
    # The rest of the body is not read: the connection cannot carry another request.
    return JSONResponse({"error": {"message": message, "type": "request_too_large", "limit_bytes": limit}},
                        status_code=413, headers={"connection": "close"})


def _max_body_bytes(value: int | None) -> int | None:
    if value is not None:
        return None if value < 0 else value
    env = os.environ.get("CALLSTITCH_GATEWAY_MAX_BODY_BYTES")
    if env is None or not env.strip():
        return MAX_BODY_BYTES
    try:
        limit = int(env)
    except ValueError:
        raise ValueError(f"CALLSTITCH_GATEWAY_MAX_BODY_BYTES must be a number of bytes, not {env!r}") from None
    return None if limit < 0 else limit


def create_app(upstream_url: str | None = None, on_call: OnCall | None = None, *,
               tee: TeeFactory | None = callstitch.atee, timeout: httpx.Timeout | None = None,
               max_connections: int = 1000, max_body_bytes: int | None = None) -> Starlette:
    """Return the gateway as an ASGI app forwarding POST requests to `upstream_url` (a base URL).

    on_call(stream_id, call) runs once per tool call, as soon as the protocol completes it;
    by default log_call. It may be an async function: atee awaits it, and it still runs to its end
    for the calls in flight when the client leaves. ``tee`` is what wraps the upstream chunks
    (callstitch.atee; None passes them through plainly, which is how the benchmark measures what
    accumulation costs).
    ``max_body_bytes`` caps a request body (default: CALLSTITCH_GATEWAY_MAX_BODY_BYTES, else
    MAX_BODY_BYTES; a negative number: no cap). Bodies are streamed to the upstream as they
    arrive, never held whole; one over the cap gets a 413, up front when its Content-Length says
    so, else as soon as the bytes counted go past it (the upstream then sees the request broken
    off, never complete).
    """
    upstream_url = (upstream_url or os.environ.get("CALLSTITCH_GATEWAY_UPSTREAM") or "https://api.openai.com").rstrip("/")
    handler = on_call if on_call is not None else log_call
    max_body = _max_body_bytes(max_body_bytes)
    timeout = timeout or httpx.Timeout(30.0, read=600.0)  # models may think for minutes between events
    clients: list[httpx.AsyncClient] = []

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections // 10)
        async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
            # httpx's own defaults would reach the upstream as if the client had sent them.
            for name in ("user-agent", "accept"):
                del client.headers[name]
            clients.append(client)
            log.info("gateway: upstream %s, callstitch %s (%s)", upstream_url, callstitch.__version__,
                     callstitch.IMPLEMENTATION if tee is callstitch.atee else "custom tee" if tee else "no tee")
            try:
                yield
            finally:
                clients.remove(client)

    async def forward(request: Request) -> Response:
        stream_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        declared = _declared_length(request)
        if max_body is not None and declared is not None and declared > max_body:
            return _too_large(stream_id, max_body, declared)  # before a byte of it is read
        headers = _forwardable(request.headers.raw, REQUEST_DROP) + [(b"accept-encoding", b"identity")]
        if declared is not None:  # streamed with its length, as the client framed it (else chunked)
            headers.append((b"content-length", str(declared).encode()))
        path = request.scope.get("raw_path") or request.url.path.encode()  # as sent, %-escapes and all
        target = _upstream_target(path, request.scope.get("query_string", b""))
        if target is None:
            log.warning("request path with a dot segment refused for stream %s: %r", stream_id, path)
            return JSONResponse({"error": {"message": "the request path has a '.' or '..' segment, which this "
                                           "gateway does not forward", "type": "invalid_request_path"}},
                                status_code=400)
        url = upstream_url + target
        body_read = asyncio.Event()
        body = _capped(request.stream(), max_body, body_read)
        outgoing = clients[0].build_request("POST", url, headers=headers, content=body)
        try:
            upstream = await _answer_or_leave(clients[0], outgoing, request.receive, body_read)
        except _BodyTooLarge:
            return _too_large(stream_id, max_body, None)  # type: ignore[arg-type]
        except ClientDisconnect:
            log.warning("client left while sending the request body for stream %s", stream_id)
            return Response(status_code=400)  # nobody is there to read it
        except httpx.HTTPError as exc:
            log.warning("upstream unreachable for stream %s: %r", stream_id, exc)
            return JSONResponse({"error": {"message": f"upstream unreachable: {exc!r}", "type": "bad_gateway"}},
                                status_code=502)
        if upstream is None:
            log.warning("client left before the upstream answered for stream %s", stream_id)
            return Response(status_code=400)  # nobody is there to read it

        def hand_over(call: callstitch.ToolCall) -> Any:
            try:
                value = handler(stream_id, call)
            except Exception:  # a failing handler must never break the client's stream
                log.exception("on_call failed for stream %s", stream_id)
                return None
            # An async handler's coroutine goes back to atee, which awaits it: dropped here, it
            # would never run.
            return _guarded(value, stream_id) if inspect.isawaitable(value) else None

        relayed: AsyncIterable[bytes] = upstream.aiter_raw()  # the bytes as received: no decoding, no re-chunking
        if tee is not None:
            relayed = tee(relayed, "auto", hand_over)  # the one line a gateway adds
        return _Relay(upstream, relayed, stream_id)

    return Starlette(routes=[Route("/{path:path}", forward, methods=["POST"])], lifespan=lifespan)


def _log_to_stderr() -> None:
    """Give the call log a handler when nobody configured one (uvicorn configures only its own loggers)."""
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


_log_to_stderr()
app = create_app()
