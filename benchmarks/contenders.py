"""The ways to reassemble streamed tool calls that the benchmarks compare.

Each contender takes the raw bytes of one whole response and returns
[(id, name, arguments), ...] for choice 0; a floor does part of the work and returns None.
Libraries are imported only when a contender is first used, so this module imports with
nothing but orjson installed; ``unavailable(name)`` says why a contender cannot run.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import struct
import zlib
from typing import Callable, NamedTuple

import orjson

__all__ = ["CONTENDERS", "Contender", "get", "unavailable", "check", "twin", "FORMAT_CONTENDERS", "get_format",
           "unavailable_format"]


class Contender(NamedTuple):
    """A way to reassemble: its runner factory, its kind, and whether it is too slow for the full workload."""

    make: Callable[[], Callable[[bytes], list | None]]
    kind: str   # "callstitch", "baseline", "floor" or "peer"
    slow: bool = False


def _events(raw: bytes):
    """Yield the data payloads of a body; enough framing for the hand-written loops (one data line per event)."""
    for event in raw.split(b"\n\n"):
        if event[:6] == b"data: ":
            yield event[6:]


# ---------------------------------------------------------------- callstitch


def twin(impl: str):
    """Return the module of one callstitch twin: impl is "c" or "py"."""
    module = {"c": "callstitch._accumulator_c", "py": "callstitch._accumulator_py"}[impl]
    try:
        return importlib.import_module(module)
    except ImportError:
        if impl != "py" or os.environ.get("CALLSTITCH_NO_EXTENSIONS"):
            raise
        # The package refuses to import without its compiled twin; the Python twin is still worth
        # timing, so ask the package for it explicitly.
        os.environ["CALLSTITCH_NO_EXTENSIONS"] = "1"
        return importlib.import_module(module)


def _twin(impl: str, fmt: str = "openai-chat") -> Callable[[bytes], list]:
    accumulator = twin(impl).Accumulator

    def run(raw: bytes) -> list:
        acc = accumulator(format=fmt)
        acc.feed(raw)
        return [(c.id, c.name, c.arguments) for c in acc.finalize().tool_calls]

    return run


# ---------------------------------------------------------------- hand-written baselines


def _seed_loop(loads: Callable) -> Callable[[bytes], list]:
    """The loop the project grew from: group fragments by index, += the argument text, parse at the end."""

    def run(raw: bytes) -> list:
        slots: dict[int, list] = {}
        for payload in _events(raw):
            if payload == b"[DONE]":
                break
            choices = loads(payload).get("choices")
            if not choices:
                continue
            for tc in choices[0].get("delta", {}).get("tool_calls") or ():
                slot = slots.setdefault(tc.get("index", 0), [None, None, ""])
                fn = tc.get("function") or {}
                slot[0] = tc.get("id") or slot[0]
                slot[1] = fn.get("name") or slot[1]
                slot[2] += fn.get("arguments") or ""
        return [(i, n, loads(a) if a else {}) for i, n, a in slots.values()]

    return run


def _floor_orjson() -> Callable[[bytes], None]:
    def run(raw: bytes) -> None:
        loads = orjson.loads
        for payload in _events(raw):
            if payload != b"[DONE]":
                loads(payload)

    return run


def _floor_split() -> Callable[[bytes], None]:
    def run(raw: bytes) -> None:
        raw.split(b"\n\n")

    return run


# ---------------------------------------------------------------- what people use today


def _calls_of(choices) -> list:
    """Return (id, name, arguments) of an SDK completion's choices, choice by choice."""
    out = []
    for choice in sorted(choices, key=lambda c: c.index):
        for t in choice.message.tool_calls or ():
            out.append((t.id, t.function.name, json.loads(t.function.arguments) if t.function.arguments else {}))
    return out


def _openai_sdk() -> Callable[[bytes], list]:
    from openai._models import construct_type
    from openai._streaming import SSEDecoder
    from openai.lib.streaming.chat._completions import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    def run(raw: bytes) -> list:
        # What client.chat.completions.stream() does per event, minus the HTTP.
        state = ChatCompletionStreamState()
        for sse in SSEDecoder().iter_bytes(iter([raw])):
            if sse.data.startswith("[DONE]"):
                break
            state.handle_chunk(construct_type(type_=ChatCompletionChunk, value=sse.json()))
        return _calls_of(state.get_final_completion().choices)

    return run


def _langchain() -> Callable[[bytes], list]:
    from langchain_core.messages import AIMessageChunk

    def run(raw: bytes) -> list:
        # The documented pattern: turn each chunk into an AIMessageChunk and add them up.
        total = None
        for payload in _events(raw):
            if payload == b"[DONE]":
                break
            choices = json.loads(payload).get("choices")
            if not choices:
                continue
            delta = choices[0].get("delta", {})
            pieces = [{"index": t.get("index"), "id": t.get("id"), "name": (t.get("function") or {}).get("name"),
                       "args": (t.get("function") or {}).get("arguments")} for t in delta.get("tool_calls") or ()]
            msg = AIMessageChunk(content=delta.get("content") or "", tool_call_chunks=pieces)
            total = msg if total is None else total + msg
        return [(t["id"], t["name"], t["args"]) for t in total.tool_calls]

    return run


def _litellm() -> Callable[[bytes], list]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else it fetches a price list at import
    import litellm

    def run(raw: bytes) -> list:
        chunks = []
        for payload in _events(raw):
            if payload == b"[DONE]":
                break
            d = json.loads(payload)
            if d.get("choices"):
                chunks.append(litellm.ModelResponseStream(**d))
        return _calls_of(litellm.stream_chunk_builder(chunks).choices)

    return run


CONTENDERS: dict[str, Contender] = {
    "callstitch-c": Contender(lambda: _twin("c"), "callstitch"),
    "callstitch-py": Contender(lambda: _twin("py"), "callstitch"),
    "seed_json": Contender(lambda: _seed_loop(json.loads), "baseline"),
    "seed_orjson": Contender(lambda: _seed_loop(orjson.loads), "baseline"),
    "floor_orjson_each_chunk": Contender(_floor_orjson, "floor"),
    "floor_split": Contender(_floor_split, "floor"),
    "openai_sdk": Contender(_openai_sdk, "peer", slow=True),
    "langchain": Contender(_langchain, "peer", slow=True),
    "litellm": Contender(_litellm, "peer", slow=True),
}

_made: dict[str, Callable] = {}
_failed: dict[str, str] = {}


def get(name: str) -> Callable[[bytes], list | None]:
    """Return the runner of a contender; raise ImportError when it cannot run here."""
    if name in _failed:
        raise ImportError(_failed[name])
    if name not in _made:
        try:
            _made[name] = CONTENDERS[name].make()
        except ImportError as exc:
            hint = ""
            if isinstance(exc, ModuleNotFoundError):  # not installed, rather than broken
                hint = " (" + {"callstitch-c": "the compiled twin is not built: pip install -e .",
                               "openai_sdk": "pip install openai", "langchain": "pip install langchain-core",
                               "litellm": "pip install litellm"}.get(name, "pip install -e .") + ")"
            _failed[name] = f"{name} unavailable: {exc}{hint}"
            raise ImportError(_failed[name]) from None
    return _made[name]


def unavailable(name: str) -> str | None:
    """Return why a contender cannot run here, or None when it can."""
    try:
        get(name)
    except ImportError as exc:
        return str(exc)
    return None


def check(fn: Callable[[bytes], list | None], work: list) -> str | None:
    """Return None when fn reassembles every body of work to its expected calls, else what went wrong."""
    for n, (body, expected) in enumerate(work):
        got = fn(body)
        if got != expected:
            return f"response {n}: got {got!r:.200} want {expected!r:.200}"
    return None



# ================================================================ the other wire formats
#
# Per format: both callstitch twins with format=<name>, and the loop a competent developer writes
# by hand for that format with orjson: minimal framing (split on blank lines, lines, or for
# Bedrock a struct-based event-stream reader that checks both CRCs, as any real reader must),
# orjson.loads per payload, a dict of per-call buffers, += the fragments, orjson.loads the
# arguments at the end. The whole-call formats (Gemini, Ollama) need no buffers: the loop keeps
# the argument objects orjson already built.


def _sse_payloads(raw: bytes, sep: bytes = b"\n\n"):
    """Yield the data of each event (one data line per event; an event: line before it is skipped)."""
    for event in raw.split(sep):
        i = event.find(b"data: ")
        if i >= 0:
            yield event[i + 6:]


def _loads_args(text: str):
    return orjson.loads(text) if text else {}


def _loop_responses() -> Callable[[bytes], list]:
    loads = orjson.loads

    def run(raw: bytes) -> list:
        calls: dict[str, list] = {}  # item_id -> [call_id, name, arguments]
        for payload in _sse_payloads(raw):
            event = loads(payload)
            kind = event["type"]
            if kind == "response.function_call_arguments.delta":
                calls[event["item_id"]][2] += event["delta"]
            elif kind == "response.output_item.added":
                item = event["item"]
                if item["type"] == "function_call":
                    calls[item["id"]] = [item["call_id"], item["name"], ""]
        return [(i, n, _loads_args(a)) for i, n, a in calls.values()]

    return run


def _loop_anthropic() -> Callable[[bytes], list]:
    loads = orjson.loads

    def run(raw: bytes) -> list:
        calls: dict[int, list] = {}  # block index -> [id, name, input json]
        for payload in _sse_payloads(raw):
            event = loads(payload)
            kind = event["type"]
            if kind == "content_block_delta":
                delta = event["delta"]
                if delta["type"] == "input_json_delta":
                    calls[event["index"]][2] += delta["partial_json"]
            elif kind == "content_block_start":
                block = event["content_block"]
                if block["type"] == "tool_use":
                    calls[event["index"]] = [block["id"], block["name"], ""]
        return [(i, n, _loads_args(a)) for i, n, a in calls.values()]

    return run


_PATH_STEP = re.compile(r"\.(\w+)|\[(\d+)\]|\['([^']*)'\]")


def _set_path(root: dict, path: str, value, append: bool) -> None:
    """Set (or, for a continued string, extend) the value at a Vertex jsonPath like $.a.b[2].c."""
    steps = [int(n) if n else k or q for k, n, q in _PATH_STEP.findall(path)]
    node = root
    for step, following in zip(steps, steps[1:]):
        empty = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            while len(node) <= step:
                node.append(None)
            if node[step] is None:
                node[step] = empty
        elif node.get(step) is None:
            node[step] = empty
        node = node[step]
    last = steps[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    if append:
        value = node[last] + value
    node[last] = value


def _loop_gemini() -> Callable[[bytes], list]:
    loads = orjson.loads

    def run(raw: bytes) -> list:
        out = []
        building = None  # a Vertex call whose arguments arrive as partialArgs: [id, name, args, open path]
        for payload in _sse_payloads(raw, b"\r\n\r\n"):
            chunk = loads(payload)
            for candidate in chunk.get("candidates", ()):
                for part in candidate.get("content", {}).get("parts", ()):
                    call = part.get("functionCall")
                    if call is None:
                        continue
                    if "name" in call:
                        if building:
                            out.append(tuple(building[:3]))
                            building = None
                        if call.get("willContinue"):
                            building = [call.get("id"), call["name"], {}, None]
                        else:
                            out.append((call.get("id"), call["name"], call.get("args", {})))
                    elif building is not None:
                        if "partialArgs" in call:
                            for entry in call["partialArgs"]:
                                path = entry["jsonPath"]
                                if "stringValue" in entry:
                                    _set_path(building[2], path, entry["stringValue"], building[3] == path)
                                    building[3] = path if entry.get("willContinue") else None
                                elif "nullValue" in entry:
                                    _set_path(building[2], path, None, False)
                                else:
                                    value = entry.get("numberValue", entry.get("boolValue"))
                                    _set_path(building[2], path, value, False)
                        elif not call:  # functionCall: {} closes the call
                            out.append(tuple(building[:3]))
                            building = None
                if "finishReason" in candidate and building:
                    out.append(tuple(building[:3]))
                    building = None
        return out

    return run


def _loop_bedrock() -> Callable[[bytes], list]:
    loads = orjson.loads
    crc32 = zlib.crc32
    unpack = struct.unpack_from

    def run(raw: bytes) -> list:
        calls: dict[int, list] = {}  # contentBlockIndex -> [toolUseId, name, input json]
        view = memoryview(raw)
        pos, end = 0, len(raw)
        while pos < end:
            total, headers_len, prelude_crc = unpack(">III", raw, pos)
            if crc32(view[pos:pos + 8]) != prelude_crc:
                raise ValueError(f"event-stream prelude CRC mismatch at {pos}")
            if crc32(view[pos:pos + total - 4]) != unpack(">I", raw, pos + total - 4)[0]:
                raise ValueError(f"event-stream message CRC mismatch at {pos}")
            headers = {}
            h, h_end = pos + 12, pos + 12 + headers_len
            while h < h_end:  # every header Bedrock sends is a string (type 7)
                n = raw[h]
                name = raw[h + 1:h + 1 + n]
                (size,) = unpack(">H", raw, h + 2 + n)
                headers[name] = raw[h + 4 + n:h + 4 + n + size]
                h += 4 + n + size
            if headers.get(b":message-type") != b"event":
                raise ValueError(f"{headers.get(b':exception-type')}: {raw[h_end:pos + total - 4]!r}")
            kind = headers[b":event-type"]
            if kind == b"contentBlockDelta":
                event = loads(view[h_end:pos + total - 4])
                tool = event["delta"].get("toolUse")
                if tool is not None:
                    calls[event["contentBlockIndex"]][2] += tool["input"]
            elif kind == b"contentBlockStart":
                event = loads(view[h_end:pos + total - 4])
                tool = event["start"].get("toolUse")
                if tool is not None:
                    calls[event["contentBlockIndex"]] = [tool["toolUseId"], tool["name"], ""]
            pos += total
        return [(i, n, _loads_args(a)) for i, n, a in calls.values()]

    return run


def _loop_cohere() -> Callable[[bytes], list]:
    loads = orjson.loads

    def run(raw: bytes) -> list:
        calls: dict[int, list] = {}  # index -> [id, name, arguments]
        for payload in _sse_payloads(raw):
            event = loads(payload)
            kind = event["type"]
            if kind == "tool-call-delta":
                calls[event["index"]][2] += event["delta"]["message"]["tool_calls"]["function"]["arguments"]
            elif kind == "tool-call-start":
                call = event["delta"]["message"]["tool_calls"]
                function = call["function"]
                calls[event["index"]] = [call["id"], function["name"], function.get("arguments") or ""]
        return [(i, n, _loads_args(a)) for i, n, a in calls.values()]

    return run


def _loop_ollama() -> Callable[[bytes], list]:
    loads = orjson.loads

    def run(raw: bytes) -> list:
        out = []
        for line in raw.split(b"\n"):
            if not line:
                continue
            message = loads(line).get("message")
            if message:
                for call in message.get("tool_calls") or ():
                    function = call["function"]
                    out.append((call.get("id"), function["name"], function.get("arguments") or {}))
        return out

    return run


_LOOPS = {"openai-responses": _loop_responses, "anthropic": _loop_anthropic, "gemini": _loop_gemini,
          "bedrock": _loop_bedrock, "cohere": _loop_cohere, "ollama": _loop_ollama}


def _format_contenders(fmt: str) -> dict[str, Contender]:
    return {"callstitch-c": Contender(lambda: _twin("c", fmt), "callstitch"),
            "callstitch-py": Contender(lambda: _twin("py", fmt), "callstitch"),
            "loop_orjson": Contender(_LOOPS[fmt], "baseline")}


# format -> contender name -> Contender; "loop_orjson" is the hand-written baseline of the target ratios.
FORMAT_CONTENDERS: dict[str, dict[str, Contender]] = {fmt: _format_contenders(fmt) for fmt in _LOOPS}


def get_format(fmt: str, name: str) -> Callable[[bytes], list]:
    """Return the runner of a contender for one wire format; raise ImportError when it cannot run here."""
    key = f"{fmt}:{name}"
    if key in _failed:
        raise ImportError(_failed[key])
    if key not in _made:
        try:
            _made[key] = FORMAT_CONTENDERS[fmt][name].make()
        except ImportError as exc:
            hint = " (the compiled twin is not built: pip install -e .)" if name == "callstitch-c" else ""
            _failed[key] = f"{name} unavailable: {exc}{hint}"
            raise ImportError(_failed[key]) from None
    return _made[key]


def unavailable_format(fmt: str, name: str) -> str | None:
    """Return why a format's contender cannot run here, or None when it can."""
    try:
        get_format(fmt, name)
    except ImportError as exc:
        return str(exc)
    return None
