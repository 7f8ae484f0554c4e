"""Real servers for the gateway tests: uvicorn on 127.0.0.1 in a thread, an httpx client, the example loaded."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import uvicorn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"


def _load_gateway():
    spec = importlib.util.spec_from_file_location("callstitch_example_gateway", os.path.join(ROOT, "examples", "gateway.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gateway = _load_gateway()


class ServerThread:
    """A uvicorn server on 127.0.0.1, a free port, its own event loop in a daemon thread."""

    def __init__(self, app):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((HOST, 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{HOST}:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="auto", loop="asyncio", http="h11",
                                ws="none", timeout_graceful_shutdown=2, backlog=1024)
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.serve(sockets=[self.sock]))
        finally:
            self.loop.close()

    def start(self):
        self.thread.start()
        wait_until(lambda: self.server.started, 10, "server start")
        self.idle_tasks = self.task_count()  # no request yet: the server's own tasks only
        return self

    def wait_idle(self, timeout=5):
        """Wait until every request task has ended: the task count is back to that of the idle server."""
        wait_until(lambda: self.task_count() == self.idle_tasks, timeout, "the server's tasks to return to baseline")

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def run(self, coro_fn, timeout=10):
        """Run coro_fn() on the server's loop; return its result."""
        return asyncio.run_coroutine_threadsafe(coro_fn(), self.loop).result(timeout)

    def task_count(self):
        async def count():
            return len(asyncio.all_tasks()) - 1  # not this one
        return self.run(count)


async def lifespan(receive, send):
    """Answer an ASGI server's lifespan messages (an upstream written as a bare ASGI app has nothing to start)."""
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def new_client():
    """An httpx client for 127.0.0.1: no proxies from the environment, no keep-alive, no TLS (plain http,
    so there are no certificates to load: that alone takes ~50 ms a client)."""
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    return httpx.AsyncClient(trust_env=False, verify=False, timeout=httpx.Timeout(20.0), limits=limits)


async def fetch(client, url, rid, spec, headers=()):
    async with client.stream("POST", url + "/v1/chat/completions", content=json.dumps(spec).encode(),
                             headers=[("x-request-id", rid), ("content-type", "application/json"), *headers]) as r:
        chunks = [c async for c in r.aiter_raw()]
        return r, b"".join(chunks)


def run(coro, timeout=30):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def gateway_process(env, log_path):
    """Run `uvicorn examples.gateway:app` in a subprocess logging to log_path; yield (proc, url) once it listens."""
    port = free_port()
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "examples.gateway:app", "--host", HOST,
                                 "--port", str(port), "--log-level", "warning", "--no-access-log"],
                                cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        def up():
            if proc.poll() is not None:
                raise AssertionError("gateway exited: " + log_path.read_text())
            try:
                socket.create_connection((HOST, port), timeout=0.2).close()
                return True
            except OSError:
                return False
        wait_until(up, 15, "the gateway subprocess to listen")
        yield proc, f"http://{HOST}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class FakeServer:
    """What fake_server yields: its base URL, the body it answers with (set it to change the answer), the requests."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.url = ""
        self.body = body
        self.content_type = content_type
        self.received: list = []


@contextlib.contextmanager
def fake_server(body=b"", content_type="text/event-stream", parse=lambda raw: raw):
    """Answer every POST on 127.0.0.1 with a fixed body; yield the FakeServer, each request body kept as parse(bytes).

    A provider's fake for the tests that drive a real SDK client: the client sends its request here
    and reads a recorded (or built) response back.
    """
    fake = FakeServer(body, content_type)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            fake.received.append(parse(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self.send_response(200)
            self.send_header("Content-Type", fake.content_type)
            self.send_header("Content-Length", str(len(fake.body)))
            self.end_headers()
            self.wfile.write(fake.body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@contextlib.contextmanager
def json_server(answer):
    """Answer every POST on 127.0.0.1 with answer as JSON; yield (base URL, the request bodies received, parsed)."""
    with fake_server(json.dumps(answer).encode(), "application/json", json.loads) as fake:
        yield fake.url, fake.received
