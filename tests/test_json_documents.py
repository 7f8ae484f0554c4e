"""A pretty-printed JSON document (an error body, a non-streamed response) is read as the same document on one line.

OpenAI indents its error bodies and its non-streamed responses; Google indents its responses. A
"{" alone on the first line opens such a document (framing "json-documents"): each document is
read whole, as one event, by both twins, however the reads cut it; in a batch source each one is
a response of its own, told by depth from the source's start, never by where a "}" stands.
"""

import json
import random

import orjson
import pytest

import callstitch
from callstitch._batch import settings
from conftest import agree

DOCUMENTS = {
    "openai-chat": {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "a } b\n}\\\"",
                                 "tool_calls": [{"id": "call_1", "type": "function", "function": {
                                     "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                 "finish_reason": "tool_calls"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}},
    "error": {"error": {"message": "Incorrect API key provided: sk-***}", "type": "invalid_request_error",
                        "param": None, "code": "invalid_api_key"}},
    "anthropic": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                  "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}],
                  "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 2}},
    "gemini": {"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather",
                                                                       "args": {"city": "Paris"}}}],
                                           "role": "model"}, "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 1}, "responseId": "r1"},
    "openai-responses": {"id": "resp_1", "object": "response", "status": "completed",
                         "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
                                     "arguments": "{\"city\": \"Paris\"}", "status": "completed"}]},
    "ollama": {"model": "llama3", "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, "done": True},
    "no format": {"foo": [1, {"bar": "}"}]},
}


# Google writes two spaces, OpenAI two or four; a tab and CRLF line ends for the rest.
INDENTS = {"2": lambda d: json.dumps(d, indent=2).encode(),
           "4-crlf": lambda d: json.dumps(d, indent=4).replace("\n", "\r\n").encode(),
           "tab": lambda d: json.dumps(d, indent="\t").encode(),
           "0": lambda d: json.dumps(d, indent=0).encode()}  # every nested "}" at a line start too


def seen_of(result) -> tuple:
    """Return what a result says, but for where its errors are (a document's layout moves them)."""
    return ([(c.id, c.name, c.arguments, c.error) for c in result.tool_calls], result.format,
            [(e.kind, e.detail) for e in result.errors], result.finish_reason)


@pytest.mark.parametrize("indent", list(INDENTS))
@pytest.mark.parametrize("name", list(DOCUMENTS))
def test_a_pretty_printed_document_reads_as_it_does_on_one_line(both, name, indent):
    document = DOCUMENTS[name]
    pretty = INDENTS[indent](document)
    assert pretty.startswith(b"{\n") or pretty.startswith(b"{\r\n")
    one_line = orjson.dumps(document)
    result = agree(both, pretty, "auto")  # both twins, whole and cut at random: the same, offsets too
    assert seen_of(result) == seen_of(callstitch.reassemble(one_line))
    if name in ("openai-chat", "gemini", "ollama"):
        assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"city": "Paris"})]


@pytest.mark.parametrize("name", ["openai-chat", "gemini", "ollama", "error"])
def test_a_document_of_a_named_format_reads_as_auto_does(both, name):
    pretty = INDENTS["2"](DOCUMENTS[name])
    fmt = "openai-chat" if name == "error" else name
    assert seen_of(agree(both, pretty, fmt)) == seen_of(callstitch.reassemble(orjson.dumps(DOCUMENTS[name]), format=fmt))


def test_a_document_over_the_event_limit_is_cut_and_reported(both):
    document = dict(DOCUMENTS["openai-chat"], padding="x" * 5000)
    pretty = INDENTS["2"](document)
    limits = callstitch.Limits(event_bytes=4096)
    result = agree(both, pretty, "auto", limits=limits)
    assert result.tool_calls == []
    assert [(e.kind, e.detail, e.offset) for e in result.errors] == [
        ("limit", "Limits.event_bytes (4096) exceeded by a JSON document; the JSON document is dropped", 0)]


def test_a_document_the_stream_leaves_unfinished_is_malformed(both):
    pretty = INDENTS["2"](DOCUMENTS["openai-chat"])
    for end in (len(pretty) - 1, len(pretty) // 2, 3):
        result = agree(both, pretty[:end], "auto")
        assert result.tool_calls == [] and result.errors, end


def test_mangled_documents_never_stop_the_twins(both):
    pretty = INDENTS["2"](DOCUMENTS["openai-chat"])
    rng = random.Random(7)
    for _ in range(60):
        body = bytearray(pretty)
        for _ in range(rng.randint(1, 6)):
            body[rng.randrange(2, len(body))] = rng.choice(b'{}[]",\\\n :x\x00')
        agree(both, bytes(body), "auto", seeds=range(2))


def _documents_file(tmp_path, layouts: list[str]) -> tuple[str, list]:
    """Write the documents back to back, each in its layout; return the path and what each reads as alone.

    A batch source is of one format, the first response's: the documents are OpenAI chat's.
    """
    names = ["openai-chat", "error", "openai-chat", "no format", "openai-chat"]
    bodies = [INDENTS[layout](DOCUMENTS[name]) for name, layout in zip(names, layouts)]
    path = tmp_path / "documents.json"
    path.write_bytes(b"\n".join(bodies) + b"\n")
    return str(path), [callstitch.reassemble(body, format="openai-chat") for body in bodies]


@pytest.mark.parametrize("layouts", [["2"] * 5, ["0", "tab", "4-crlf", "2", "0"]], ids=["indent-2", "mixed"])
def test_a_batch_source_of_documents_reads_each_as_a_response(every_twin, tmp_path, monkeypatch, layouts):
    monkeypatch.setattr(settings, "RANGE", 64)  # (a source of documents is one task whatever its size)
    path, alone = _documents_file(tmp_path, layouts)
    problems = []
    records = list(callstitch.reassemble_many([path], on_problem=lambda *a: problems.append(a)))
    assert [(r["stream"], r["id"], r["name"], r["arguments"]) for r in records] == [
        (i, c.id, c.name, c.arguments) for i, result in enumerate(alone) for c in result.tool_calls]
    assert len(records) == 3
    assert [(p[2], p[4]) for p in problems] == [
        (i, e.kind) for i, result in enumerate(alone) for e in result.errors]


def test_the_command_line_reads_a_source_of_documents(every_twin, tmp_path):
    import subprocess
    import sys
    path, alone = _documents_file(tmp_path, ["2"] * 5)
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path], capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["stream"], r["id"]) for r in records] == [(0, "call_1"), (2, "call_1"), (4, "call_1")]
    assert out.returncode == 1 and "in-band error" in out.stderr and "stream 1" in out.stderr


# -- found by review: what may follow documents in a batch source ------------------------------

ERROR_BODY = INDENTS["2"](DOCUMENTS["error"])


def _chat_sse(call_id: str) -> bytes:
    def event(delta):
        chunk = {"id": "x", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return (event({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                   "function": {"name": "g", "arguments": ""}}]})
            + event({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]})
            + event({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}) + b"data: [DONE]\n\n")


def _ollama_lines(name: str) -> bytes:
    """Return an Ollama response of three lines: two calls (cut per line, each would be a stream's call 0), done."""
    lines = [{"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": call, "arguments": {"a": 1}}}]}, "done": False} for call in (name, "h")]
    lines.append({"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"})
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _batch(path, block=None) -> tuple[list, list]:
    problems = []
    records = [(r["stream"], r["id"], r["name"], r["arguments"], r["error"])
               for r in callstitch.reassemble_many([str(path)], on_problem=lambda *a: problems.append(a))]
    return records, [(p[2], p[4]) for p in problems]


def _alone(bodies: list[bytes], fmt: str) -> tuple[list, list]:
    results = [callstitch.reassemble(body, format=fmt) for body in bodies]
    return ([(i, c.id, c.name, c.arguments, c.error and c.error.kind) for i, r in enumerate(results)
             for c in r.tool_calls],
            [(i, e.kind) for i, r in enumerate(results) for e in r.errors])


@pytest.mark.parametrize("then", ["sse", "sse-twice", "ollama"])
def test_a_stream_after_an_error_document_is_read_by_its_own_framing(every_twin, tmp_path, monkeypatch, then):
    # A capture of a 429 error body, then the retry's stream: the stream was cut at every "}" of it.
    streams = {"sse": [_chat_sse("call_9")], "sse-twice": [_chat_sse("call_8"), _chat_sse("call_9")],
               "ollama": [_ollama_lines("g")]}[then]
    fmt = "ollama" if then == "ollama" else "openai-chat"
    path = tmp_path / "capture.txt"
    path.write_bytes(ERROR_BODY + b"\n" + b"".join(streams))
    records, problems = _batch(path)
    want_records, want_problems = _alone([ERROR_BODY, *streams], fmt)
    assert [r[:4] for r in records] == [r[:4] for r in want_records]
    assert [(r[0], r[3]) for r in records if r[2] == "g"] == [(i + 1, {"a": 1}) for i in range(len(streams))]
    assert problems == want_problems
    for block in (1, 5, 64):  # however the batch reads it
        monkeypatch.setattr(settings, "BLOCK", block)
        assert _batch(path) == (records, problems), block


@pytest.mark.parametrize("between", [b"}\n", b"junk\n", b"]\n,\n", b"  42 \n"])
def test_what_comes_between_documents_stays_with_the_one_before(every_twin, tmp_path, between):
    first = INDENTS["2"](DOCUMENTS["openai-chat"])
    second = first.replace(b"call_1", b"call_2")
    path = tmp_path / "documents.json"
    path.write_bytes(first + b"\n" + between + second)
    records, problems = _batch(path)
    assert [r[:2] for r in records] == [(0, "call_1"), (1, "call_2")]
    assert problems == _alone([first + b"\n" + between, second], "openai-chat")[1]


def test_an_array_element_over_the_event_limit_in_a_document_source_is_named_so(both):
    body = b"{\n}\n[\n" + orjson.dumps({"padding": "x" * 200}) + b"\n]\n"
    result = agree(both, body, "auto", limits=callstitch.Limits(event_bytes=100))
    assert [e.detail for e in result.errors if e.kind == "limit"] == [
        "Limits.event_bytes (100) exceeded by a JSON array element; the JSON array element is dropped"]


@pytest.mark.parametrize("middle", [b'{"error": {"message": "Rate limit reached", "type": "requests"}}', b"{}"])
def test_one_line_of_json_between_documents_is_a_document(every_twin, tmp_path, middle):
    # Found by review: a compact error body among pretty-printed responses ended the documents,
    # and every later one was read as JSON lines (a malformed chunk per line).
    first = INDENTS["2"](DOCUMENTS["openai-chat"])
    third = first.replace(b"call_1", b"call_3")
    path = tmp_path / "documents.json"
    path.write_bytes(first + b"\n" + middle + b"\n" + third + b"\n")
    records, problems = _batch(path)
    assert [r[:2] for r in records] == [(0, "call_1"), (2, "call_3")]
    assert problems == [(1, e.kind) for e in callstitch.reassemble(middle, format="openai-chat").errors]


# -- the gateway's tee and atee ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai-chat", "error"])
def test_tee_passes_a_document_on_unchanged_and_reads_it(impl, name):
    import asyncio

    from callstitch._tee import ATee, Tee
    body = INDENTS["4-crlf"](DOCUMENTS[name])
    pieces = [body[i:i + 7] for i in range(0, len(body), 7)]
    want = callstitch.reassemble(orjson.dumps(DOCUMENTS[name]))
    seen = []
    t = Tee(pieces, "auto", seen.append, accumulator=impl.Accumulator())
    assert list(t) == pieces
    assert seen_of(t.result) == seen_of(want)
    assert [(c.id, c.arguments) for c in seen] == [(c.id, c.arguments) for c in want.tool_calls]

    async def source():
        for piece in pieces:
            yield piece

    async def through() -> list:
        a = ATee(source(), "auto", None, accumulator=impl.Accumulator())
        return [piece async for piece in a], a.result
    passed, result = asyncio.run(through())
    assert passed == pieces and seen_of(result) == seen_of(want)
