"""Build streamed response bodies for every wire format other than OpenAI chat.

Each format has small event builders (real-shaped payloads, as the providers send them) and a
``*_body(calls, ...)`` builder that lays out a whole response: optional reasoning and text, the
calls with their arguments cut into pieces, the finish and the usage. ``build(variant, calls,
...)`` picks the builder by variant name (a format, plus the framing for Bedrock).

Common options of the body builders:
  text, reasoning   message text and reasoning text, sent before the calls
  cut               stop the stream after this many argument pieces of the LAST call
                    (no closing events, no finish): a stream cut mid-arguments
  error             end the stream (after the calls) with an in-band error instead of a finish
  interleave        send the argument pieces of all calls interleaved (where the format keys
                    pieces by call: Responses item ids, Bedrock/Cohere indices)
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from typing import Any, Iterable

from _streams import dumps


@dataclass(frozen=True)
class Call:
    """One call as the tests send it: id, name, and the argument JSON text as the model wrote it."""

    id: str | None
    name: str
    arguments: str

    @property
    def value(self) -> Any:
        """The parsed arguments ({} for empty text)."""
        return json.loads(self.arguments) if self.arguments.strip() else {}

    def pieces(self, size: int = 5) -> list[str]:
        """The argument text cut into pieces of (about) size characters, sizes varying."""
        out, pos, k = [], 0, 0
        while pos < len(self.arguments):
            n = size + (k % 3) - 1
            out.append(self.arguments[pos:pos + n])
            pos += n
            k += 1
        return out


CALLS = (
    Call("call_w1", "get_weather", '{"city": "Paris", "units": "celsius"}'),
    Call("call_s2", "get_stock", '{"symbol": "AAPL", "note": "café ☕ 東京 😀 \\"q\\" \\n"}'),
    Call("call_t3", "get_time", '{"tz": "Europe/Paris", "n": [1, 2.5, true, null]}'),
)


def compact(value: Any) -> str:
    """Return value as compact JSON text (how callstitch serialises argument objects)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- SSE


def sse(events: Iterable[tuple[str | None, Any]], eol: bytes = b"\n") -> bytes:
    """Return an SSE body: per event an optional ``event:`` line and one ``data:`` line."""
    out = []
    for name, obj in events:
        data = obj if isinstance(obj, bytes) else dumps(obj)
        head = b"event: " + name.encode() + eol if name is not None else b""
        out.append(head + b"data: " + data + eol + eol)
    return b"".join(out)


def _interleave(calls: list[Call], cut: int | None, interleave: bool) -> list[tuple[int, str]]:
    """Return (call position, piece) in sending order; with cut, the last call stops after cut pieces."""
    per = [c.pieces() for c in calls]
    if cut is not None:
        per[-1] = per[-1][:cut]
    if not interleave:
        return [(i, p) for i, ps in enumerate(per) for p in ps]
    out = []
    for k in range(max((len(p) for p in per), default=0)):
        for i, ps in enumerate(per):
            if k < len(ps):
                out.append((i, ps[k]))
    return out


# ---------------------------------------------------------------- OpenAI Responses

RESPONSES_USAGE = {"input_tokens": 81, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 42,
                   "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 123}


def _response(status: str, usage: Any = None, error: Any = None, incomplete: Any = None) -> dict:
    return {"id": "resp_0a1b2c", "object": "response", "created_at": 1743082657, "status": status,
            "error": error, "incomplete_details": incomplete, "model": "gpt-4.1-2025-04-14", "output": [],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage}


def fc_item(call: Call, item_id: str, *, done: bool = False) -> dict:
    """Return a Responses function_call output item."""
    return {"id": item_id, "type": "function_call", "status": "completed" if done else "in_progress",
            "arguments": call.arguments if done else "", "call_id": call.id, "name": call.name}


def responses_body(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                   cut: int | None = None, error: str | None = None, interleave: bool = False,
                   extra_items: Iterable[dict] = ()) -> bytes:
    """Return a Responses API stream (event: lines, "type" in every payload, sequence numbers).

    error: "error" (an ``error`` event) or "failed" (``response.failed``).
    extra_items: output items (server-side tools) sent, added then done, before the calls.
    """
    calls = list(calls)
    seq = iter(range(10_000))
    ev: list[tuple[str, dict]] = []

    def add(kind: str, **fields: Any) -> None:
        ev.append((kind, {"type": kind, "sequence_number": next(seq), **fields}))

    add("response.created", response=_response("in_progress"))
    add("response.in_progress", response=_response("in_progress"))
    out = 0
    if reasoning is not None:
        item = {"id": "rs_01", "type": "reasoning", "summary": []}
        add("response.output_item.added", output_index=out, item=item)
        for k in range(0, len(reasoning), 7):
            add("response.reasoning_summary_text.delta", item_id="rs_01", output_index=out, summary_index=0,
                delta=reasoning[k:k + 7])
        add("response.output_item.done", output_index=out, item=item)
        out += 1
    for item in extra_items:
        add("response.output_item.added", output_index=out, item=dict(item, status="in_progress"))
        add("response.output_item.done", output_index=out, item=dict(item, status="completed"))
        out += 1
    if text is not None:
        item = {"id": "msg_01", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        add("response.output_item.added", output_index=out, item=item)
        for k in range(0, len(text), 7):
            add("response.output_text.delta", item_id="msg_01", output_index=out, content_index=0,
                delta=text[k:k + 7], logprobs=[])
        add("response.output_item.done", output_index=out, item=dict(item, status="completed"))
        out += 1
    ids = [f"fc_{i:02d}{c.name}" for i, c in enumerate(calls)]
    first = out
    order = _interleave(calls, cut, interleave)
    if interleave:
        for i, c in enumerate(calls):
            add("response.output_item.added", output_index=first + i, item=fc_item(c, ids[i]))
        for i, piece in order:
            add("response.function_call_arguments.delta", item_id=ids[i], output_index=first + i, delta=piece)
        if cut is None:
            for i, c in enumerate(calls):
                add("response.function_call_arguments.done", item_id=ids[i], output_index=first + i,
                    arguments=c.arguments)
                add("response.output_item.done", output_index=first + i, item=fc_item(c, ids[i], done=True))
    else:
        for i, c in enumerate(calls):
            add("response.output_item.added", output_index=first + i, item=fc_item(c, ids[i]))
            for j, piece in order:
                if j == i:
                    add("response.function_call_arguments.delta", item_id=ids[i], output_index=first + i,
                        delta=piece)
            if cut is not None and i == len(calls) - 1:
                break
            add("response.function_call_arguments.done", item_id=ids[i], output_index=first + i,
                arguments=c.arguments)
            add("response.output_item.done", output_index=first + i, item=fc_item(c, ids[i], done=True))
    if cut is not None:
        return sse(ev)
    if error == "error":
        add("error", code="server_error", message="The server had an error while processing your request.",
            param=None)
    elif error == "failed":
        add("response.failed", response=_response(
            "failed", error={"code": "server_error", "message": "The model failed to generate a response."}))
    else:
        add("response.completed", response=_response("completed", usage=RESPONSES_USAGE))
    return sse(ev)


# ---------------------------------------------------------------- Anthropic Messages

ANTHROPIC_USAGE = {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                   "output_tokens": 89}


def anthropic_body(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                   cut: int | None = None, error: bool = False, server_tools: Iterable[Call] = (),
                   start_input: Any = None, **_: Any) -> bytes:
    """Return a Messages stream: message_start, blocks one after another, message_delta, message_stop.

    server_tools: server_tool_use blocks (with input_json_delta) sent before the client calls.
    start_input: the ``input`` of each tool_use start block (default {}).
    """
    calls = list(calls)
    ev: list[tuple[str, dict]] = []

    def add(kind: str, **fields: Any) -> None:
        ev.append((kind, {"type": kind, **fields}))

    add("message_start", message={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}})
    index = 0
    if reasoning is not None:
        add("content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""})
        add("ping")
        for k in range(0, len(reasoning), 7):
            add("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": reasoning[k:k + 7]})
        add("content_block_delta", index=index, delta={"type": "signature_delta", "signature": "EqQBCgIYAhIM"})
        add("content_block_stop", index=index)
        index += 1
    if text is not None:
        add("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for k in range(0, len(text), 7):
            add("content_block_delta", index=index, delta={"type": "text_delta", "text": text[k:k + 7]})
        add("content_block_stop", index=index)
        index += 1
    for s in server_tools:
        add("content_block_start", index=index,
            content_block={"type": "server_tool_use", "id": s.id, "name": s.name, "input": {}})
        for piece in [""] + s.pieces():
            add("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        add("content_block_stop", index=index)
        index += 1
        add("content_block_start", index=index, content_block={
            "type": "web_search_tool_result", "tool_use_id": s.id,
            "content": [{"type": "web_search_result", "title": "Weather", "url": "https://example.com/w",
                         "encrypted_content": "EqgfCioIARgBIiQ3", "page_age": None}]})
        add("content_block_stop", index=index)
        index += 1
    for i, c in enumerate(calls):
        add("content_block_start", index=index, content_block={
            "type": "tool_use", "id": c.id, "name": c.name, "input": {} if start_input is None else start_input})
        pieces = c.pieces()
        last = i == len(calls) - 1
        if cut is not None and last:
            pieces = pieces[:cut]
        for piece in [""] + pieces if pieces else []:
            add("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        if cut is not None and last:
            return sse(ev)
        add("content_block_stop", index=index)
        index += 1
    if error:
        ev.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
        return sse(ev)
    add("message_delta", delta={"stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None},
        usage={"output_tokens": 89})
    add("message_stop")
    return sse(ev)


# ---------------------------------------------------------------- Gemini / Vertex AI

GEMINI_USAGE = {"promptTokenCount": 29, "candidatesTokenCount": 12, "totalTokenCount": 110,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 29}], "thoughtsTokenCount": 69}


def gemini_chunk(parts: list[dict] | None, *, finish: str | None = None, usage: Any = None,
                 candidate: int | None = None) -> dict:
    """Return one streamGenerateContent response chunk with one candidate."""
    cand: dict = {}
    if parts is not None:
        cand["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        cand["finishReason"] = finish
    if candidate is not None:
        cand["index"] = candidate
    obj: dict = {"candidates": [cand]}
    obj["usageMetadata"] = usage if usage is not None else {"trafficType": "ON_DEMAND"}
    obj["modelVersion"] = "gemini-2.5-flash"
    obj["responseId"] = "g1P6aZnMMZq5qtsPj9fyuQ8"
    return obj


def gemini_sse(chunks: Iterable[Any]) -> bytes:
    """Return the chunks as Gemini sends them with alt=sse: ``data:`` lines framed by CRLF."""
    return b"".join(b"data: " + (c if isinstance(c, bytes) else dumps(c)) + b"\r\n\r\n" for c in chunks)


def function_call(name: str | None = None, args: Any = None, id: str | None = None, **extra: Any) -> dict:
    """Return a functionCall part (keys left out when None)."""
    call: dict = {}
    if name is not None:
        call["name"] = name
    if args is not None:
        call["args"] = args
    if id is not None:
        call["id"] = id
    call.update(extra)
    return {"functionCall": call}


def vertex_open(name: str, id: str | None = None) -> dict:
    """Return the part that opens a streamed (partialArgs) call."""
    return function_call(name, id=id, willContinue=True)


def vertex_args(*entries: dict, will_continue: bool = True) -> dict:
    """Return a part carrying partialArgs entries."""
    call: dict = {"partialArgs": list(entries)}
    if will_continue:
        call["willContinue"] = True
    return {"functionCall": call}


def pa(path: str, value: Any = None, *, kind: str | None = None, cont: bool = False) -> dict:
    """Return one partialArgs entry: jsonPath and a typed value (kind picked from the value's type)."""
    if kind is None:
        kind = {str: "stringValue", bool: "boolValue", int: "numberValue", float: "numberValue",
                type(None): "nullValue"}[type(value)]
    entry = {"jsonPath": path, kind: value if kind != "nullValue" else "NULL_VALUE"}
    if cont:
        entry["willContinue"] = True
    return entry


VERTEX_CLOSE = {"functionCall": {}}


def gemini_body(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                error: bool = False, with_ids: bool = False, one_chunk: bool = False, **_: Any) -> bytes:
    """Return a Gemini stream: thought parts, text parts, whole functionCall parts, a finish with usage."""
    calls = list(calls)
    chunks: list[Any] = []
    if reasoning is not None:
        for k in range(0, len(reasoning), 9):
            chunks.append(gemini_chunk([{"text": reasoning[k:k + 9], "thought": True}]))
    if text is not None:
        for k in range(0, len(text), 9):
            chunks.append(gemini_chunk([{"text": text[k:k + 9]}]))
    parts = [function_call(c.name, c.value, id=c.id if with_ids else None) for c in calls]
    if parts:
        parts[0]["thoughtSignature"] = "EpIDCo8DAQw51scL+dHffCC+bznOIyXjDPleN5"
    if one_chunk and parts:
        chunks.append(gemini_chunk(parts))
    else:
        chunks.extend(gemini_chunk([p]) for p in parts)
    if error:
        chunks.append({"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}})
        return gemini_sse(chunks)
    chunks.append(gemini_chunk([{"text": ""}], finish="STOP", usage=GEMINI_USAGE))
    return gemini_sse(chunks)


# ---------------------------------------------------------------- AWS event stream and Bedrock


def eventstream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """Encode one AWS event-stream message: prelude (lengths, CRC), string headers, payload, message CRC."""
    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
                    for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def es_event(name: str, obj: Any) -> bytes:
    """Return one event message (``:message-type`` event) with a JSON payload."""
    return eventstream_message({":event-type": name, ":content-type": "application/json", ":message-type": "event"},
                               obj if isinstance(obj, bytes) else dumps(obj))


def es_exception(name: str, message: str) -> bytes:
    """Return one exception message (``:message-type`` exception), as Bedrock sends a mid-stream failure."""
    return eventstream_message({":exception-type": name, ":content-type": "application/json",
                                ":message-type": "exception"}, dumps({"message": message}))


BEDROCK_USAGE = {"inputTokens": 471, "outputTokens": 91, "totalTokens": 562}
BEDROCK_ERROR = ("modelStreamErrorException", "Model produced invalid sequence as part of ToolUse.")


def bedrock_events(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                   cut: int | None = None, error: bool = False, interleave: bool = False,
                   server_tools: Iterable[Call] = (), **_: Any) -> list[tuple[str, Any]]:
    """Return ConverseStream events as (event type, payload); an exception is ("<name>Exception", payload)."""
    calls = list(calls)
    ev: list[tuple[str, Any]] = [("messageStart", {"p": "abcdefghijklmnopqrs", "role": "assistant"})]
    index = 0
    if reasoning is not None:
        for k in range(0, len(reasoning), 8):
            ev.append(("contentBlockDelta", {"contentBlockIndex": index,
                                             "delta": {"reasoningContent": {"text": reasoning[k:k + 8]}},
                                             "p": "abcdef"}))
        ev.append(("contentBlockDelta", {"contentBlockIndex": index,
                                         "delta": {"reasoningContent": {"signature": "EqoBCkgIARABGAIiQ"}}}))
        ev.append(("contentBlockStop", {"contentBlockIndex": index, "p": "abc"}))
        index += 1
    if text is not None:
        for k in range(0, len(text), 8):
            ev.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": text[k:k + 8]},
                                             "p": "abcdefghij"}))
        ev.append(("contentBlockStop", {"contentBlockIndex": index, "p": "abcdefg"}))
        index += 1
    for s in server_tools:
        ev.append(("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": {
            "name": s.name, "toolUseId": s.id, "type": "server_tool_use"}}}))
        ev.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": s.arguments}}}))
        ev.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
        ev.append(("contentBlockStart", {"contentBlockIndex": index, "start": {"toolResult": {
            "status": "success", "toolUseId": s.id, "type": "nova_code_interpreter_result"}}}))
        ev.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolResult": [
            {"json": {"stdOut": "7006652", "stdErr": "", "exitCode": 0, "isError": False}}]}}))
        ev.append(("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    first = index
    order = _interleave(calls, cut, interleave)

    def start(i: int, c: Call) -> None:
        ev.append(("contentBlockStart", {"contentBlockIndex": first + i, "p": "abcdefghijklmnopqrstuv", "start": {
            "toolUse": {"name": c.name, "toolUseId": c.id, "type": "tool_use"}}}))

    def delta(i: int, piece: str) -> None:
        ev.append(("contentBlockDelta", {"contentBlockIndex": first + i, "delta": {"toolUse": {"input": piece}},
                                         "p": "abcdefghijklm"}))

    def stop(i: int) -> None:
        ev.append(("contentBlockStop", {"contentBlockIndex": first + i, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGH"}))

    if interleave:
        for i, c in enumerate(calls):
            start(i, c)
        for i, piece in order:
            delta(i, piece)
        if cut is not None:
            return ev
        for i, _c in enumerate(calls):
            stop(i)
    else:
        for i, c in enumerate(calls):
            start(i, c)
            for j, piece in order:
                if j == i:
                    delta(i, piece)
            if cut is not None and i == len(calls) - 1:
                return ev
            stop(i)
    if error:
        ev.append((BEDROCK_ERROR[0], {"message": BEDROCK_ERROR[1]}))
        return ev
    ev.append(("messageStop", {"p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO",
                               "stopReason": "tool_use" if calls else "end_turn"}))
    ev.append(("metadata", {"metrics": {"latencyMs": 422}, "p": "abcdefghijklm", "usage": BEDROCK_USAGE}))
    return ev


def bedrock_eventstream(events: Iterable[tuple[str, Any]]) -> bytes:
    """Return Bedrock events in the binary AWS event-stream framing (exceptions as exception messages)."""
    return b"".join(es_exception(name, obj["message"]) if name.endswith("Exception") else es_event(name, obj)
                    for name, obj in events)


def bedrock_sse(events: Iterable[tuple[str, Any]]) -> bytes:
    """Return Bedrock events as SSE with the event type as the event name."""
    return sse(events)


def bedrock_body(calls: Iterable[Call] = (), *, framing: str = "eventstream", **options: Any) -> bytes:
    """Return a ConverseStream body in the given framing ("eventstream" or "sse")."""
    events = bedrock_events(calls, **options)
    return bedrock_eventstream(events) if framing == "eventstream" else bedrock_sse(events)


# ---------------------------------------------------------------- Cohere v2

COHERE_USAGE = {"billed_units": {"input_tokens": 119, "output_tokens": 44},
                "tokens": {"input_tokens": 1549, "output_tokens": 95}, "cached_tokens": 1504}


def cohere_body(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                cut: int | None = None, error: bool = False, interleave: bool = False, **_: Any) -> bytes:
    """Return a Cohere v2 chat stream (event: lines, "type" in every payload); reasoning is the tool plan."""
    calls = list(calls)
    ev: list[tuple[str, dict]] = []

    def add(kind: str, **fields: Any) -> None:
        ev.append((kind, {"type": kind, **fields} if kind != "message-start" else
                   {"id": "2941521a-b87a-45f6-9b0d-235fd66c3025", "type": kind, **fields}))

    add("message-start", delta={"message": {"role": "assistant", "content": [], "tool_plan": "", "tool_calls": [],
                                            "citations": []}})
    if reasoning is not None:
        for k in range(0, len(reasoning), 6):
            add("tool-plan-delta", delta={"message": {"tool_plan": reasoning[k:k + 6]}})
    if text is not None:
        add("content-start", index=0, delta={"message": {"content": {"type": "text", "text": ""}}})
        for k in range(0, len(text), 6):
            add("content-delta", index=0, delta={"message": {"content": {"text": text[k:k + 6]}}})
        add("content-end", index=0)
    order = _interleave(calls, cut, interleave)

    def start(i: int, c: Call) -> None:
        add("tool-call-start", index=i, delta={"message": {"tool_calls": {
            "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}}})

    def delta(i: int, piece: str) -> None:
        add("tool-call-delta", index=i, delta={"message": {"tool_calls": {"function": {"arguments": piece}}}})

    if interleave:
        for i, c in enumerate(calls):
            start(i, c)
        for i, piece in order:
            delta(i, piece)
        if cut is not None:
            return sse(ev)
        for i, _c in enumerate(calls):
            add("tool-call-end", index=i)
    else:
        for i, c in enumerate(calls):
            start(i, c)
            for j, piece in order:
                if j == i:
                    delta(i, piece)
            if cut is not None and i == len(calls) - 1:
                return sse(ev)
            add("tool-call-end", index=i)
    if error:
        add("message-end", delta={"finish_reason": "ERROR", "error": "internal server error: model overloaded"})
        return sse(ev)
    add("message-end", delta={"finish_reason": "TOOL_CALL" if calls else "COMPLETE", "usage": COHERE_USAGE})
    return sse(ev)


# ---------------------------------------------------------------- Ollama (NDJSON)

OLLAMA_USAGE = {"prompt_eval_count": 212, "eval_count": 38}


def ollama_line(message: dict | None = None, *, done: bool = False, reason_first: bool = False, **extra: Any) -> dict:
    """Return one /api/chat stream line.

    Go writes a struct's fields in order: older servers put done_reason before done, newer ones
    (those that give each call an id) after it.
    """
    obj: dict = {"model": "qwen3:8b", "created_at": "2025-06-01T10:00:00.123456Z"}
    if message is not None:
        obj["message"] = {"role": "assistant", "content": "", **message}
    if reason_first and "done_reason" in extra:  # as older servers write it
        obj["done_reason"] = extra.pop("done_reason")
    obj["done"] = done
    obj.update(extra)
    return obj


def ndjson(lines: Iterable[Any]) -> bytes:
    """Return the objects as NDJSON, one per line."""
    return b"".join((line if isinstance(line, bytes) else dumps(line)) + b"\n" for line in lines)


def ollama_body(calls: Iterable[Call] = (), *, text: str | None = None, reasoning: str | None = None,
                error: bool = False, with_ids: bool = False, one_line: bool = False, **_: Any) -> bytes:
    """Return an Ollama chat stream: thinking, content, each call whole (arguments as an object), done."""
    calls = list(calls)
    lines: list[Any] = []
    if reasoning is not None:
        for k in range(0, len(reasoning), 8):
            lines.append(ollama_line({"thinking": reasoning[k:k + 8]}))
    if text is not None:
        for k in range(0, len(text), 8):
            lines.append(ollama_line({"content": text[k:k + 8]}))

    def tool(i: int, c: Call) -> dict:
        call: dict = {"function": {"index": i, "name": c.name, "arguments": c.value}}
        if with_ids:
            call = {"id": c.id, **call}
        return call

    if one_line and calls:
        lines.append(ollama_line({"tool_calls": [tool(i, c) for i, c in enumerate(calls)]}))
    else:
        lines.extend(ollama_line({"tool_calls": [tool(i, c)]}) for i, c in enumerate(calls))
    if error:
        lines.append({"error": "an error was encountered while running the model: unexpected EOF"})
        return ndjson(lines)
    lines.append(ollama_line({}, done=True, reason_first=not with_ids, done_reason="stop", total_duration=4883583458,
                             load_duration=1334875, prompt_eval_count=212, prompt_eval_duration=342546000,
                             eval_count=38, eval_duration=4535599000))
    return ndjson(lines)


# ---------------------------------------------------------------- by variant

# variant -> (format name, builder, builder options)
VARIANTS = {
    "openai-responses": ("openai-responses", responses_body, {}),
    "anthropic": ("anthropic", anthropic_body, {}),
    "gemini": ("gemini", gemini_body, {}),
    "bedrock-eventstream": ("bedrock", bedrock_body, {"framing": "eventstream"}),
    "bedrock-sse": ("bedrock", bedrock_body, {"framing": "sse"}),
    "cohere": ("cohere", cohere_body, {}),
    "ollama": ("ollama", ollama_body, {}),
}
# Formats that stream argument text in pieces (and so can be cut mid-arguments).
STREAMING = ("openai-responses", "anthropic", "bedrock-eventstream", "bedrock-sse", "cohere")
# Formats that key argument pieces by call, so the pieces of several calls may interleave.
INTERLEAVING = ("openai-responses", "bedrock-eventstream", "bedrock-sse", "cohere")
# Formats that send each call whole, its arguments as an object.
WHOLE = ("gemini", "ollama")

USAGE = {"openai-responses": RESPONSES_USAGE, "anthropic": ANTHROPIC_USAGE, "gemini": GEMINI_USAGE,
         "bedrock-eventstream": BEDROCK_USAGE, "bedrock-sse": BEDROCK_USAGE, "cohere": COHERE_USAGE,
         "ollama": OLLAMA_USAGE}
FINISH = {"openai-responses": "completed", "anthropic": "tool_use", "gemini": "STOP",
          "bedrock-eventstream": "tool_use", "bedrock-sse": "tool_use", "cohere": "TOOL_CALL", "ollama": "stop"}


def format_of(variant: str) -> str:
    """Return the callstitch format name of a variant."""
    return VARIANTS[variant][0]


def build(variant: str, calls: Iterable[Call] = (), **options: Any) -> bytes:
    """Return the body of a variant's stream (see the module docstring for the options)."""
    _fmt, builder, fixed = VARIANTS[variant]
    return builder(list(calls), **fixed, **options)


def expected_id(variant: str, call: Call) -> str | None:
    """Return the id a call comes back with: Gemini and Ollama send none by default."""
    return None if variant in WHOLE else call.id


def expected_raw(variant: str, call: Call) -> str:
    """Return the raw_arguments a complete call comes back with."""
    if variant in WHOLE:
        return compact(call.value)
    return call.arguments


# ---------------------------------------------------------------- calls taken whole, their arguments as sent

# Arguments sent shorter than orjson writes them (1e15 becomes 1000000000000000.0) and longer
# (Go's \u003c escapes): calls taken whole are counted against the limits by their compact text.
SENT_ARGUMENTS = '{"s":"\\u003ctag\\u003e \\u00e9","v":[' + ",".join(["1e15"] * 6) + "]}"


def _sent_ollama_line(message: str = "", done: bool = False) -> str:
    """Return one Ollama line, written by hand so its arguments stay as sent."""
    head = '{"model":"m","created_at":"2025-06-01T10:00:00.1Z","message":{"role":"assistant",'
    end = '"done_reason":"stop","done":true}\n' if done else '"done":false}\n'
    return head + (message or '"content":""') + "}," + end


def whole_call_bodies() -> list[tuple[str, bytes]]:
    """Return (format, body) of streams whose calls come whole, with text after them."""
    call = '{"function":{"index":%d,"name":"f%d","arguments":' + SENT_ARGUMENTS + "}}"
    line = _sent_ollama_line
    ollama = (line('"content":"","tool_calls":[' + call % (0, 0) + "," + call % (1, 1) + "]")
              + line('"content":"' + "x" * 40 + '"')
              + line('"content":"","tool_calls":[' + call % (2, 2) + "]")
              + line('"content":"' + "y" * 40 + '"') + line(done=True))
    part = '{"functionCall":{"name":"f%d","args":' + SENT_ARGUMENTS + "}}"
    gemini = "".join("data: " + chunk + "\r\n\r\n" for chunk in (
        '{"candidates":[{"content":{"role":"model","parts":[' + part % 0 + "," + part % 1 + "]}}]}",
        '{"candidates":[{"content":{"role":"model","parts":[{"text":"' + "x" * 40 + '"}]}}]}',
        '{"candidates":[{"content":{"role":"model","parts":[' + part % 2 + "]},\"finishReason\":\"STOP\"}]}"))
    return [("ollama", ollama.encode()), ("gemini", gemini.encode())]
