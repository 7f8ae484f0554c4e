"""The README's Python examples run as written, on both twins, each given the names it assumes."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import re
import shutil
import sys
import threading

import orjson
import pytest

import callstitch
from _servers import fake_server
from callstitch._batch import settings as _batch

ROOT = os.path.join(os.path.dirname(__file__), "..")
CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import workload  # noqa: E402

PARALLEL = "openai__openai-python__chat-parallel-weather-and-stock"


def _blocks() -> list[str]:
    """Return the README's python code blocks, in order."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def _block(marker: str) -> str:
    """Return the one python block of the README that contains marker."""
    found = [b for b in _blocks() if marker in b]
    assert len(found) == 1, f"{len(found)} README python blocks contain {marker!r}"
    return found[0]


# Each block, by a line only it holds; the API listing (signatures, not code) and Spark (which
# needs a cluster's paths; tests/test_spark.py runs the same call) are read, not run.
MARKERS = {"quickstart": 'callstitch.reassemble(body, format="openai-chat")',
           "sdk": "client.chat.completions.create(",
           "formats": 'callstitch.reassemble(ollama_ndjson, format="ollama")',
           "toolset": 'callstitch.Toolset(request["tools"])',
           "batch": "callstitch.reassemble_many(",
           "listing": "-> Result",
           "spark": "from callstitch.spark import reassemble",
           "spark-turns": 'emit="turns")\nturns.selectExpr(',  # test_spark.py runs emit="turns"
           "turn-openai-chat": "# a chat.completion dict",
           "turn-anthropic": "messages.append(result.to_message())               # thinking",
           "gemini-turn": "contents.append(result.to_message())",  # run by tests/test_turn_gemini.py
           "turn-cohere": "cohere_sse_stream",  # run by tests/test_turn_cohere.py
           "turn-ollama": "ollama_ndjson_stream",  # run by tests/test_turn_ollama.py
           "turn-openai-responses": "client.responses.with_streaming_response.create(",  # test_turn_openai_responses
           "turn-bedrock": "converse_stream_body"}  # run by tests/test_turn_bedrock.py


def _capture(name: str, ext: str = ".sse") -> bytes:
    return open(os.path.join(CAPTURES, name + ext), "rb").read()


def _expected(name: str) -> list[dict]:
    return json.load(open(os.path.join(CAPTURES, name + ".expected.json")))["tool_calls"]


@pytest.fixture
def on_twin(impl, monkeypatch):
    """Point the public names the README uses at one twin."""
    monkeypatch.setattr(callstitch, "Accumulator", impl.Accumulator)
    monkeypatch.setattr(callstitch, "reassemble", impl.reassemble)
    monkeypatch.setattr(_batch, "Accumulator", impl.Accumulator)
    return impl


def test_every_block_is_known():
    assert sorted(next(k for k, m in MARKERS.items() if m in b) for b in _blocks()) == sorted(MARKERS)


def test_quickstart(on_twin, capsys):
    import httpx
    body = _capture(PARALLEL)
    # A real httpx response whose iter_bytes yields the body in pieces, as from the network.
    response = httpx.Response(200, content=[body[i:i + 100] for i in range(0, len(body), 100)])
    names = {"body": body, "response": response}
    exec(_block(MARKERS["quickstart"]), names)
    want = _expected(PARALLEL)
    assert [(c.id, c.name, c.arguments) for c in names["result"].tool_calls] == [
        (c["id"], c["name"], c["arguments"]) for c in want]
    assert capsys.readouterr().out.splitlines() == [f"{c['id']} {c['name']} {c['arguments']}" for c in want]


def test_sdk_chunks(on_twin):
    openai = pytest.importorskip("openai")
    with fake_server(_capture(PARALLEL)) as upstream:  # answers every POST with the recorded stream
        client = openai.OpenAI(base_url=upstream.url + "/v1", api_key="test", max_retries=0)
        # "..." stands for the request's own arguments.
        code = _block(MARKERS["sdk"]).replace("create(...,", 'create(model="gpt-4o", messages=[],')
        names = {"callstitch": callstitch, "client": client}
        exec(code, names)
    assert [(c.id, c.name, c.arguments) for c in names["calls"]] == [
        (c["id"], c["name"], c["arguments"]) for c in _expected(PARALLEL)]


def test_turn_openai_chat(on_twin):
    openai = pytest.importorskip("openai")
    with fake_server(_capture(PARALLEL)) as upstream:
        client = openai.OpenAI(base_url=upstream.url + "/v1", api_key="test", max_retries=0)
        code = _block(MARKERS["turn-openai-chat"]).replace("client = OpenAI()\n", "")
        names = {"client": client, "tools": [], "run": lambda call: "ok"}
        exec(code, names)
    openai.types.chat.ChatCompletion.model_validate(names["completion"])
    assistant, *results = names["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == [c["id"] for c in _expected(PARALLEL)]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in _expected(PARALLEL)]


class _Messages(http.server.BaseHTTPRequestHandler):
    """The Messages API: a recorded stream for a streamed request, a Message for the next; each body kept."""

    stream = b""
    received: list = []

    def do_POST(self):  # noqa: N802 - the handler's name
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.received.append(request)
        body = self.stream if request.get("stream") else json.dumps({
            "id": "msg_2", "type": "message", "role": "assistant", "model": request["model"], "stop_reason": "end_turn",
            "stop_sequence": None, "content": [{"type": "text", "text": "18 °C."}],
            "usage": {"input_tokens": 9, "output_tokens": 4}}).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream" if request.get("stream") else "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_turn_anthropic(on_twin, monkeypatch):
    anthropic = pytest.importorskip("anthropic")
    name = "anthropic__anthropic-sdk-python__text-then-tool"
    _Messages.stream, _Messages.received = _capture(name), []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Messages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    logged = []
    try:
        # anthropic.Anthropic() in the example: the client of the fake API
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        names = {"tools": [{"name": "get_weather", "input_schema": {"type": "object"}}], "log": logged.append,
                 "run": lambda call: f"18 °C in {call.arguments['location']}"}
        exec(_block(MARKERS["turn-anthropic"]), names)
    finally:
        server.shutdown()
        thread.join()
    assert logged[0]["content"][1]["input"] == {"location": "Paris"} and logged[0]["stop_reason"] == "tool_use"
    history = _Messages.received[1]["messages"]
    assert history[1] == names["result"].to_message() and history[2]["content"][0]["content"] == "18 °C in Paris"
    assert names["reply"].content[0].text == "18 °C."


def test_formats(on_twin):
    bodies = {
        "openai_chat_body": (_capture(PARALLEL), "openai-chat"),
        "responses_body": (_capture("openai__pydantic-ai__responses-single-call"), "openai-responses"),
        "anthropic_body": (_capture("anthropic__anthropic-sdk-python__text-then-tool"), "anthropic"),
        "gemini_body": (_capture("gemini__pydantic-ai__call-with-id"), "gemini"),
        "converse_stream_bytes": (_capture("bedrock__pydantic-ai__converse-nova-tool", ".eventstream"), "bedrock"),
        "cohere_body": (_capture("cohere__vercel-ai__v2-parallel"), "cohere"),
        "ollama_ndjson": (workload.format_responses("ollama", 1)[0][0], "ollama"),
    }
    names = {"callstitch": callstitch, **{k: body for k, (body, _) in bodies.items()},
             "any_of_them": bodies["anthropic_body"][0]}
    lines = [line.split("#")[0].strip() for line in _block(MARKERS["formats"]).splitlines()]
    results = [eval(line, names) for line in lines if line]
    assert results[-1] == "anthropic"
    assert len(results) == len(bodies) + 1
    for (body, fmt), result in zip(bodies.values(), results):
        assert result.format == fmt
        assert result.tool_calls and not result.errors, fmt


def test_toolset(on_twin):
    pytest.importorskip("jsonschema_rs")
    result = callstitch.reassemble(_capture(PARALLEL))
    request = {"tools": [{"type": "function", "function": {
        "name": "GetWeatherArgs", "parameters": {
            "type": "object", "required": ["city"],
            "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                           "units": {"type": "string", "default": "f"}, "days": {"type": "integer", "default": 1}}}}}]}
    ran = []
    names = {"callstitch": callstitch, "request": request, "result": result,
             "run_tool": lambda name, arguments: ran.append((name, arguments)) or "done"}
    exec(_block(MARKERS["toolset"]), names)
    # The weather call runs with the schema's default filled in; the stock call names no offered tool.
    assert ran == [("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c", "days": 1})]
    assert 'no tool named "get_stock_price"' in names["output"]


def test_batch(on_twin, tmp_path, monkeypatch):
    body = _capture(PARALLEL)
    (tmp_path / "captures").mkdir()
    shutil.copy(os.path.join(CAPTURES, PARALLEL + ".sse"), tmp_path / "captures" / "chat.sse")
    (tmp_path / "logs").mkdir()
    lines = b"".join(orjson.dumps({"response": {"body": body.decode()}}) + b"\n" for _ in range(3))
    (tmp_path / "logs" / "day.jsonl.gz").write_bytes(gzip.compress(lines))
    monkeypatch.chdir(tmp_path)
    names = {"callstitch": callstitch}
    exec(_block(MARKERS["batch"]), names)
    summary = names["batch"].summary
    assert (summary.calls, summary.errors) == (4 * len(_expected(PARALLEL)), {})
