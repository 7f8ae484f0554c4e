"""Generate realistic streamed response bodies that carry tool calls, in every wire format.

Everything is deterministic for a seed. ``responses()`` gives a list of (body, expected calls)
in OpenAI chat layout; ``format_responses(fmt, n)`` does the same for the other formats
(openai-responses, anthropic, gemini, bedrock, cohere, ollama); ``long_call()`` /
``long_call_pieces()`` give one call of a chosen argument size, the latter without ever holding
the whole body (for streams of gigabytes).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import string
import struct
import zlib
from typing import Iterable, Iterator, NamedTuple

__all__ = ["Call", "responses", "long_call", "long_call_pieces", "reads", "count_events", "FORMATS",
           "format_responses", "count_format_events", "eventstream_message"]

MODEL = "gpt-4o-2024-08-06"
CREATED = 1733000000
ALNUM = string.ascii_letters + string.digits

# Argument text mixes ASCII, CJK, emoji, quotes, backslashes, tabs and newlines, so that the
# wire carries every kind of JSON escape, and some calls use \uXXXX escapes for non-ASCII.
PLACES = ["Paris", "東京", "北京市海淀区", "Zürich", "São Paulo", "Москва", "서울", "القاهرة", "Kraków", "Reykjavík"]
VOCAB = ("stream tool call fragment 参数 解析 数据库 ツール 呼び出し 🚀 🧪 ✅ 👩‍💻 naïve façade "
         "\"quoted\" C:\\Users\\me tab\there x<y&z {braces} [list] 42 3.14 -1e-3 null").split(" ")
TOOLS = ["get_weather", "search_web", "write_file", "run_sql", "create_invoice", "send_email", "list_tasks"]


class Call(NamedTuple):
    """One expected tool call; compares equal to the (id, name, arguments) tuples contenders return."""

    id: str
    name: str
    arguments: object


def _words(r: random.Random, n: int) -> str:
    return " ".join(r.choice(VOCAB) for _ in range(n))


def _arguments(r: random.Random, name: str) -> dict:
    """Return plausible arguments for a tool: short lookups are common, big file writes occasional."""
    if name == "get_weather":
        return {"location": r.choice(PLACES), "unit": r.choice(["celsius", "fahrenheit"]), "days": r.randint(1, 7)}
    if name == "search_web":
        return {"query": _words(r, r.randint(2, 15)), "max_results": r.randint(1, 20),
                "filters": {"lang": r.choice(["en", "zh", "ja", "de"]), "since": "2024-06-01", "safe": True}}
    if name == "write_file":
        body = "\n".join("    " * r.randint(0, 3) + _words(r, r.randint(1, 10)) for _ in range(r.randint(5, 60)))
        return {"path": r.choice(["src/main.py", "docs/说明.md", "web/app.tsx"]), "content": body,
                "mode": r.choice(["create", "overwrite"])}
    if name == "run_sql":
        return {"sql": f"SELECT id, name FROM users WHERE city = '{r.choice(PLACES)}' AND note LIKE '%\\_%' "
                       f"LIMIT {r.randint(1, 500)};", "readonly": r.random() < 0.8, "timeout_ms": None}
    if name == "create_invoice":
        return {"customer": {"id": r.randint(1, 10**7), "name": _words(r, 2)}, "currency": "EUR",
                "lines": [{"sku": "SKU-" + "".join(r.choices(ALNUM, k=8)), "qty": r.randint(1, 9),
                           "unit_price": round(r.uniform(0.5, 999), 2), "note": _words(r, r.randint(0, 4))}
                          for _ in range(r.randint(1, 15))]}
    if name == "send_email":
        return {"to": ["ops@example.com"] * r.randint(1, 3), "subject": _words(r, 4),
                "body": _words(r, r.randint(10, 80))}
    return {}  # list_tasks takes no arguments


def _fragments(r: random.Random, text: str, sizes: tuple[int, ...]) -> list[str]:
    """Cut text into token-sized pieces (by characters, so escapes like \\n may be cut in two)."""
    out, i = [], 0
    while i < len(text):
        n = r.choice(sizes)
        out.append(text[i:i + n])
        i += n
    return out


class _Writer:
    """Render the chunks of one response the way OpenAI lays them out."""

    def __init__(self, r: random.Random, ascii_only: bool) -> None:
        self.r = r
        self.ascii_only = ascii_only
        self.id = "chatcmpl-" + "".join(r.choices(ALNUM, k=29))
        self.fingerprint = "fp_" + "".join(r.choices("0123456789abcdef", k=10))

    def chunk(self, choices: list, usage: dict | None = None) -> str:
        d = {"id": self.id, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
             "service_tier": "default", "system_fingerprint": self.fingerprint, "choices": choices, "usage": usage,
             # OpenAI pads every chunk with random text so its size does not leak token lengths
             "obfuscation": "".join(self.r.choices(ALNUM, k=self.r.randint(1, 16)))}
        return "data: " + json.dumps(d, ensure_ascii=self.ascii_only, separators=(",", ":")) + "\n\n"

    def delta(self, delta: dict, finish: str | None = None) -> str:
        return self.chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])


def _response(r: random.Random) -> tuple[bytes, list[Call]]:
    # A quarter of the servers (OpenAI-compatible ones) escape all non-ASCII in the chunk JSON.
    w = _Writer(r, ascii_only=r.random() < 0.25)
    out = []
    role = {"role": "assistant", "content": None, "refusal": None}
    if r.random() < 0.2:  # some models say something before calling tools
        role["content"] = ""
        out.append(w.delta(role))
        for piece in _fragments(r, "Let me look that up for you — 少々お待ちください.", (2, 3, 4, 5)):
            out.append(w.delta({"content": piece}))
        role = None
    calls = []
    for index in range(r.choice([1, 1, 1, 2, 2, 3, 4])):
        name = r.choice(TOOLS)
        args = _arguments(r, name)
        call_id = "call_" + "".join(r.choices(ALNUM, k=24))
        calls.append(Call(call_id, name, args))
        # The model writes the JSON itself: mostly compact, sometimes spaced or \u-escaped, and a
        # call without arguments may stream nothing at all.
        if not args and r.random() < 0.5:
            text = ""
        else:
            spaced = r.random() < 0.3
            text = json.dumps(args, ensure_ascii=r.random() < 0.15,
                              separators=(", ", ": ") if spaced else (",", ":"))
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        if role is not None:  # the first call usually rides in the role chunk
            out.append(w.delta({**role, "tool_calls": [head]}))
            role = None
        else:
            out.append(w.delta({"tool_calls": [head]}))
        for piece in _fragments(r, text, (1, 2, 3, 3, 4, 4, 4, 5, 6, 7, 8)):
            if r.random() < 0.005:
                out.append(": keep-alive\n\n")
            out.append(w.delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(w.delta({}, finish="tool_calls"))
    prompt, completion = r.randint(50, 4000), r.randint(10, 2000)
    out.append(w.chunk([], usage={
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                      "rejected_prediction_tokens": 0}}))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode("utf-8"), calls


def responses(n: int, seed: int = 7) -> list[tuple[bytes, list[Call]]]:
    """Return n response bodies, each with the calls it must reassemble to."""
    r = random.Random(seed)
    return [_response(r) for _ in range(n)]


def long_call_pieces(size_bytes: int, seed: int = 1) -> tuple[Iterator[bytes], Call]:
    """Return (pieces of a body, its call): one call whose arguments are exactly size_bytes of UTF-8.

    The arguments arrive in 1-4 character fragments, one chunk each. A block of rendered
    chunks is repeated, so a body of gigabytes is cheap to produce and never held at once.
    """
    r = random.Random(seed)
    w = _Writer(r, ascii_only=False)
    call_id = "call_" + "".join(r.choices(ALNUM, k=24))
    opening, closing = '{"path":"notes/长文.md","content":"', '"}'
    unit = "\n".join(_words(r, 12) for _ in range(40))   # ~4 KB of decoded text, repeated
    unit_text = json.dumps(unit, ensure_ascii=False)[1:-1]   # as it appears inside the argument JSON
    unit_size = len(unit_text.encode())
    room = size_bytes - len((opening + closing).encode())
    if room < 0:
        raise ValueError(f"size_bytes must be at least {size_bytes - room}")
    repeats, pad = divmod(room, unit_size)

    def events(text: str) -> bytes:
        return "".join(w.delta({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
                       for p in _fragments(r, text, (1, 2, 3, 4))).encode()

    head = (w.delta({"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"index": 0, "id": call_id, "type": "function", "function": {"name": "write_file", "arguments": ""}}]})
        .encode() + events(opening))
    block = events(unit_text)
    tail = events("x" * pad + closing) + w.delta({}, finish="tool_calls").encode() + b"data: [DONE]\n\n"

    def pieces() -> Iterator[bytes]:
        yield head
        for _ in range(repeats):
            yield block
        yield tail

    return pieces(), Call(call_id, "write_file", {"path": "notes/长文.md", "content": unit * repeats + "x" * pad})


def long_call(size_bytes: int, seed: int = 1) -> tuple[bytes, list[Call]]:
    """Return one body holding one call whose arguments are size_bytes long, and that call."""
    pieces, call = long_call_pieces(size_bytes, seed)
    return b"".join(pieces), [call]


def reads(pieces: Iterable[bytes], size: int = 65536) -> Iterator[bytes]:
    """Re-cut a stream of pieces into reads of exactly size bytes (the last may be shorter), like a socket."""
    buf = bytearray()
    for piece in pieces:
        buf += piece
        while len(buf) >= size:
            yield bytes(buf[:size])
            del buf[:size]  # cheap: a bytearray drops its head without moving the rest
    if buf:
        yield bytes(buf)


def count_events(body: bytes) -> int:
    """Return the number of data events in a body (keep-alive comments excluded)."""
    return body.count(b"\ndata:") + body.startswith(b"data:")


# ================================================================ the other wire formats
#
# One generator per format, in the same spirit as the OpenAI chat one above: the envelope each
# provider really sends (ids, padding, usage, text before the calls), 1-4 calls per response,
# argument text cut into 1-8 character fragments where the format streams it, CJK, emoji and
# escapes throughout. format_responses(fmt, n, seed) gives (body, expected calls) pairs.

FORMATS = ("openai-responses", "anthropic", "gemini", "bedrock", "cohere", "ollama")
ARG_SIZES = (1, 2, 3, 3, 4, 4, 4, 5, 6, 7, 8)   # characters per argument fragment
TEXT_SIZES = (2, 3, 4, 5, 6)                      # characters per text / reasoning delta
TEXTS = ["Let me look that up for you — 少々お待ちください.",
         "I'll check that first 🚀, then \"run\" the rest.",
         "Sure! Calling the tools now:\n- weather\n- search",
         "好的，我来查一下数据库里的记录。",
         "Ich prüfe das kurz für Sie."]
REASONING = ["The user wants several things; I should call the tools in parallel and not guess values.",
             "ユーザーは天気を知りたい。get_weather を呼ぶ。",
             "Need the invoice lines first, then the email — order matters here."]
HEX = "0123456789abcdef"


def _id(r: random.Random, k: int, chars: str = ALNUM) -> str:
    return "".join(r.choices(chars, k=k))


def _compact(obj: object, sort_keys: bool = False) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)


def _calls(r: random.Random, make_id) -> list[tuple[Call, str]]:
    """Return 1-4 calls with the argument text the model writes for each (mostly compact, some spaced/escaped)."""
    out = []
    for _ in range(r.choice([1, 1, 1, 2, 2, 3, 4])):
        name = r.choice(TOOLS)
        args = _arguments(r, name)
        spaced = r.random() < 0.3
        text = json.dumps(args, ensure_ascii=r.random() < 0.15, separators=(", ", ": ") if spaced else (",", ":"))
        out.append((Call(make_id(name), name, args), text))
    return out


def _sse_event(name: str | None, obj: object, sort_keys: bool = False) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {_compact(obj, sort_keys)}\n\n"


# ---------------------------------------------------------------- OpenAI Responses


def _responses_tools(names: list[str]) -> list[dict]:
    return [{"type": "function", "description": f"Run {n}.", "name": n, "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}}, "required": [], "additionalProperties": False},
        "strict": False} for n in names]


def _response_responses(r: random.Random) -> tuple[bytes, list[Call]]:
    resp_id = "resp_" + _id(r, 50, HEX)
    seq = itertools.count()
    calls = _calls(r, lambda name: "call_" + _id(r, 24))
    tools = _responses_tools(sorted({c.name for c, _ in calls} | {r.choice(TOOLS)}))
    out = []

    def response(status: str, output: list, usage: dict | None) -> dict:
        return {"id": resp_id, "object": "response", "created_at": CREATED, "status": status, "background": False,
                "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
                "max_tool_calls": None, "model": "gpt-4.1-2025-04-14", "output": output,
                "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None,
                "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "default",
                "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"},
                "tool_choice": "auto", "tools": tools, "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled",
                "usage": usage, "user": None, "metadata": {}}

    def add(kind: str, **fields) -> None:
        obj = {"type": kind, "sequence_number": next(seq), **fields}
        if kind.endswith(".delta"):
            obj["obfuscation"] = _id(r, r.randint(1, 15))  # pads each delta so its size leaks nothing
        out.append(_sse_event(kind, obj))

    add("response.created", response=response("in_progress", [], None))
    add("response.in_progress", response=response("in_progress", [], None))
    done_items = []
    position = 0
    if r.random() < 0.3:  # a reasoning model: an (encrypted) reasoning item first
        item = {"id": "rs_" + _id(r, 50, HEX), "type": "reasoning", "summary": []}
        add("response.output_item.added", output_index=position, item=item)
        done = dict(item, encrypted_content="gAAAAA" + _id(r, r.randint(100, 600)))
        add("response.output_item.done", output_index=position, item=done)
        done_items.append(done)
        position += 1
    if r.random() < 0.3:  # some text before the calls
        text = r.choice(TEXTS)
        item_id = "msg_" + _id(r, 50, HEX)
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        add("response.output_item.added", output_index=position, item=item)
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        add("response.content_part.added", item_id=item_id, output_index=position, content_index=0, part=part)
        for piece in _fragments(r, text, TEXT_SIZES):
            add("response.output_text.delta", item_id=item_id, output_index=position, content_index=0, delta=piece,
                logprobs=[])
        add("response.output_text.done", item_id=item_id, output_index=position, content_index=0, text=text,
            logprobs=[])
        part = dict(part, text=text)
        add("response.content_part.done", item_id=item_id, output_index=position, content_index=0, part=part)
        done = dict(item, status="completed", content=[part])
        add("response.output_item.done", output_index=position, item=done)
        done_items.append(done)
        position += 1
    for call, text in calls:
        item_id = "fc_" + _id(r, 50, HEX)
        text = text or "{}"
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call.id, "name": call.name}
        add("response.output_item.added", output_index=position, item=item)
        for piece in _fragments(r, text, ARG_SIZES):
            add("response.function_call_arguments.delta", item_id=item_id, output_index=position, delta=piece)
        add("response.function_call_arguments.done", item_id=item_id, output_index=position, arguments=text)
        done = dict(item, status="completed", arguments=text)
        add("response.output_item.done", output_index=position, item=done)
        done_items.append(done)
        position += 1
    prompt, completion = r.randint(50, 4000), r.randint(10, 2000)
    add("response.completed", response=response("completed", done_items, {
        "input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + completion}))
    return "".join(out).encode(), [c for c, _ in calls]


# ---------------------------------------------------------------- Anthropic Messages


def _response_anthropic(r: random.Random) -> tuple[bytes, list[Call]]:
    calls = _calls(r, lambda name: "toolu_01" + _id(r, 22))
    out = []

    def add(kind: str, **fields) -> None:
        out.append(_sse_event(kind, {"type": kind, **fields}))

    add("message_start", message={
        "id": "msg_01" + _id(r, 22), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": {
            "input_tokens": r.randint(300, 5000), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 1, "service_tier": "standard"}})
    index = 0
    pinged = False

    def ping() -> None:
        nonlocal pinged
        if not pinged:  # one ping, right after the first block opens
            out.append('event: ping\ndata: {"type": "ping"}\n\n')
            pinged = True

    if r.random() < 0.2:  # extended thinking
        add("content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""})
        ping()
        for piece in _fragments(r, r.choice(REASONING), TEXT_SIZES):
            add("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": piece})
        add("content_block_delta", index=index, delta={"type": "signature_delta",
                                                      "signature": "Eq" + _id(r, r.randint(200, 400))})
        add("content_block_stop", index=index)
        index += 1
    if r.random() < 0.5:
        add("content_block_start", index=index, content_block={"type": "text", "text": ""})
        ping()
        for piece in _fragments(r, r.choice(TEXTS), TEXT_SIZES):
            add("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        add("content_block_stop", index=index)
        index += 1
    for call, text in calls:
        add("content_block_start", index=index,
            content_block={"type": "tool_use", "id": call.id, "name": call.name, "input": {}})
        ping()
        # The first delta is always empty; a call without arguments streams nothing else.
        for piece in [""] + (_fragments(r, text, ARG_SIZES) if call.arguments else []):
            add("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": piece})
        add("content_block_stop", index=index)
        index += 1
    add("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None},
        usage={"output_tokens": r.randint(20, 2000)})
    add("message_stop")
    return "".join(out).encode(), [c for c, _ in calls]


# ---------------------------------------------------------------- Gemini / Vertex AI

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _leaves(value: object, path: str = "$") -> Iterator[tuple[str, object]]:
    """Yield (JSON path, scalar) for every leaf of an arguments object, in order."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if _PLAIN_KEY.match(k) else f"{path}['{k}']")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _partial_args(r: random.Random, args: dict) -> list[list[dict]]:
    """Return Vertex partialArgs parts for a call: one entry per scalar, long strings continued over several."""
    parts = []
    for path, value in _leaves(args):
        if isinstance(value, str):
            pieces = _fragments(r, value, (4, 8, 12, 16, 24, 32)) if len(value) > 16 else [value]
            for piece in pieces:
                parts.append([{"jsonPath": path, "stringValue": piece, "willContinue": True}])
            parts.append([{"jsonPath": path, "stringValue": ""}])  # closes the string
        elif value is None:
            parts.append([{"jsonPath": path, "nullValue": "NULL_VALUE"}])
        elif isinstance(value, bool):
            parts.append([{"jsonPath": path, "boolValue": value}])
        else:
            parts.append([{"jsonPath": path, "numberValue": value}])
    return parts


def _response_gemini(r: random.Random) -> tuple[bytes, list[Call]]:
    vertex = r.random() < 0.25  # Vertex AI with streamFunctionCallArguments: arguments built from partialArgs
    with_ids = not vertex and r.random() < 0.5  # Gemini 3 sends call ids; 2.5 and Vertex do not
    calls = _calls(r, lambda name: _id(r, 8, string.ascii_lowercase + string.digits) if with_ids else None)
    response_id = _id(r, 23, ALNUM + "-_")
    model = r.choice(["gemini-2.5-flash", "gemini-3-flash-preview"])
    out = []
    signature = "Ep" + _id(r, r.randint(200, 700), ALNUM + "+/")

    def chunk(parts: list | None, finish: str | None = None, usage: dict | None = None) -> None:
        candidate: dict = {}
        if parts is not None:
            candidate["content"] = {"parts": parts, "role": "model"}
        if finish:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        obj = {"candidates": [candidate], "usageMetadata": usage or {"trafficType": "ON_DEMAND"},
               "modelVersion": model, "responseId": response_id}
        # The Gemini API writes ": " but "," (no space after commas), and frames events with CRLF.
        out.append("data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ": ")) + "\r\n\r\n")

    if r.random() < 0.2:
        for piece in _fragments(r, r.choice(REASONING), (8, 16, 24)):
            chunk([{"text": piece, "thought": True}])
    if r.random() < 0.4:
        for piece in _fragments(r, r.choice(TEXTS), (4, 8, 12)):
            chunk([{"text": piece}])
    if vertex:
        for n, (call, _) in enumerate(calls):
            first: dict = {"functionCall": {"name": call.name}}
            if call.arguments:
                first["functionCall"]["willContinue"] = True
            if n == 0:
                first["thoughtSignature"] = signature
            chunk([first])
            if not call.arguments:
                continue
            for entries in _partial_args(r, call.arguments):
                chunk([{"functionCall": {"partialArgs": entries, "willContinue": True}}])
                if r.random() < 0.05:
                    chunk([{"functionCall": {"willContinue": True}}])
            if n < len(calls) - 1 or r.random() < 0.8:  # the last close is sometimes left out
                chunk([{"functionCall": {}}])
    else:
        parts = []
        for call, _ in calls:
            fc: dict = {"name": call.name, "args": call.arguments}
            if call.id:
                fc["id"] = call.id
            parts.append({"functionCall": fc})
        parts[0]["thoughtSignature"] = signature
        if r.random() < 0.7:  # parallel calls usually come in one chunk
            chunk(parts)
        else:
            for part in parts:
                chunk([part])
    prompt, completion = r.randint(20, 3000), r.randint(5, 500)
    chunk([{"text": ""}], finish="STOP", usage={
        "promptTokenCount": prompt, "candidatesTokenCount": completion, "totalTokenCount": prompt + completion,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]})
    return "".join(out).encode(), [c for c, _ in calls]


# ---------------------------------------------------------------- AWS Bedrock ConverseStream

PADDING = string.ascii_lowercase + string.ascii_uppercase + string.digits


def eventstream_message(headers: dict[str, str], payload: bytes) -> bytes:
    """Encode one AWS event-stream message: prelude (lengths, CRC), string headers, payload, message CRC."""
    head = b"".join(bytes([len(k)]) + k.encode() + b"\x07" + struct.pack(">H", len(v.encode())) + v.encode()
                    for k, v in headers.items())
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _response_bedrock(r: random.Random) -> tuple[bytes, list[Call]]:
    calls = _calls(r, lambda name: "tooluse_" + _id(r, 22, ALNUM + "-_"))
    out = []

    def add(kind: str, **fields) -> None:
        # Bedrock pads every event with "p", a prefix of this alphabet, so sizes leak nothing.
        fields["p"] = PADDING[:r.randint(1, len(PADDING))]
        out.append(eventstream_message({":event-type": kind, ":content-type": "application/json",
                                        ":message-type": "event"}, _compact(fields, sort_keys=True).encode()))

    add("messageStart", role="assistant")
    index = 0
    if r.random() < 0.2:
        for piece in _fragments(r, r.choice(REASONING), TEXT_SIZES):
            add("contentBlockDelta", contentBlockIndex=index, delta={"reasoningContent": {"text": piece}})
        add("contentBlockDelta", contentBlockIndex=index,
            delta={"reasoningContent": {"signature": "Eq" + _id(r, r.randint(100, 300))}})
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    if r.random() < 0.5:
        for piece in _fragments(r, r.choice(TEXTS), TEXT_SIZES):
            add("contentBlockDelta", contentBlockIndex=index, delta={"text": piece})
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    for call, text in calls:
        add("contentBlockStart", contentBlockIndex=index, start={"toolUse": {"name": call.name,
                                                                             "toolUseId": call.id}})
        for piece in _fragments(r, text if call.arguments else "", ARG_SIZES):
            add("contentBlockDelta", contentBlockIndex=index, delta={"toolUse": {"input": piece}})
        add("contentBlockStop", contentBlockIndex=index)
        index += 1
    add("messageStop", stopReason="tool_use")
    prompt, completion = r.randint(50, 4000), r.randint(10, 2000)
    add("metadata", metrics={"latencyMs": r.randint(200, 9000)},
        usage={"inputTokens": prompt, "outputTokens": completion, "totalTokens": prompt + completion})
    return b"".join(out), [c for c, _ in calls]


# ---------------------------------------------------------------- Cohere v2 chat


def _response_cohere(r: random.Random) -> tuple[bytes, list[Call]]:
    calls = _calls(r, lambda name: f"{name}_{_id(r, 12, string.ascii_lowercase + string.digits)}")
    out = []

    def add(kind: str, **fields) -> None:
        out.append(_sse_event(kind, {"type": kind, **fields}))

    uuid = "-".join(_id(r, k, HEX) for k in (8, 4, 4, 4, 12))
    out.append(_sse_event("message-start", {"id": uuid, "type": "message-start", "delta": {"message": {
        "role": "assistant", "content": [], "tool_plan": "", "tool_calls": [], "citations": []}}}))
    if r.random() < 0.8:  # Command models say what they plan to call first
        for piece in _fragments(r, r.choice(REASONING + TEXTS), TEXT_SIZES):
            add("tool-plan-delta", delta={"message": {"tool_plan": piece}})
    for index, (call, text) in enumerate(calls):
        add("tool-call-start", index=index, delta={"message": {"tool_calls": {
            "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}}})
        for piece in _fragments(r, text if call.arguments else "", ARG_SIZES):
            add("tool-call-delta", index=index, delta={"message": {"tool_calls": {"function": {"arguments": piece}}}})
        add("tool-call-end", index=index)
    prompt, completion = r.randint(50, 4000), r.randint(10, 2000)
    add("message-end", delta={"finish_reason": "TOOL_CALL", "usage": {
        "billed_units": {"input_tokens": prompt, "output_tokens": completion},
        "tokens": {"input_tokens": prompt + 1400, "output_tokens": completion + 50}, "cached_tokens": 0}})
    return "".join(out).encode(), [c for c, _ in calls]


# ---------------------------------------------------------------- Ollama /api/chat (NDJSON)


def _go_json(obj: object) -> str:
    """Return obj as Go's encoding/json writes it: compact, raw UTF-8, and <, >, & escaped."""
    return _compact(obj).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _response_ollama(r: random.Random) -> tuple[bytes, list[Call]]:
    with_ids = r.random() < 0.5  # newer servers give each call an id
    calls = _calls(r, lambda name: "call_" + _id(r, 8, string.ascii_lowercase + string.digits) if with_ids else None)
    model = r.choice(["qwen3:8b", "llama3.1:8b", "gpt-oss:20b"])
    out = []
    clock = itertools.count(r.randint(0, 10**6), 13_337)

    def line(message: dict | None, done: bool = False, **extra) -> None:
        obj: dict = {"model": model, "created_at": f"2025-06-01T10:00:{next(clock) % 60_000_000 / 1e6:09.6f}Z"}
        if message is not None:
            obj["message"] = {"role": "assistant", "content": "", **message}
        # Go writes a struct's fields in order: older servers put done_reason before done, newer ones
        # (those that give each call an id) after it.
        if not with_ids and "done_reason" in extra:
            obj["done_reason"] = extra.pop("done_reason")
        obj["done"] = done
        obj.update(extra)
        out.append(_go_json(obj) + "\n")

    if r.random() < 0.4:
        for piece in _fragments(r, r.choice(REASONING), TEXT_SIZES):
            line({"thinking": piece})
    if r.random() < 0.4:
        for piece in _fragments(r, r.choice(TEXTS), TEXT_SIZES):
            line({"content": piece})
    tool_calls = []
    for i, (call, _) in enumerate(calls):
        tc: dict = {"function": {"index": i, "name": call.name, "arguments": call.arguments}}
        if call.id:
            tc = {"id": call.id, **tc}
        tool_calls.append(tc)
    if r.random() < 0.7:  # all calls in one message, as Ollama usually sends them
        line({"tool_calls": tool_calls})
    else:
        for tc in tool_calls:
            line({"tool_calls": [tc]})
    line({}, done=True, done_reason="stop", total_duration=r.randint(10**8, 10**10), load_duration=r.randint(10**5, 10**7),
         prompt_eval_count=r.randint(50, 4000), prompt_eval_duration=r.randint(10**7, 10**9),
         eval_count=r.randint(10, 2000), eval_duration=r.randint(10**8, 10**10))
    return "".join(out).encode(), [c for c, _ in calls]


_GENERATORS = {"openai-responses": _response_responses, "anthropic": _response_anthropic,
               "gemini": _response_gemini, "bedrock": _response_bedrock, "cohere": _response_cohere,
               "ollama": _response_ollama}


def format_responses(fmt: str, n: int, seed: int = 7) -> list[tuple[bytes, list[Call]]]:
    """Return n response bodies of a wire format (one of FORMATS), each with the calls it must give."""
    r = random.Random(f"{fmt}/{seed}")
    make = _GENERATORS[fmt]
    return [make(r) for _ in range(n)]


def count_format_events(fmt: str, body: bytes) -> int:
    """Return the number of events in a body of a wire format."""
    if fmt == "ollama":
        return body.count(b"\n")
    if fmt == "bedrock":
        n = pos = 0
        while pos < len(body):
            pos += struct.unpack_from(">I", body, pos)[0]
            n += 1
        return n
    return count_events(body)
