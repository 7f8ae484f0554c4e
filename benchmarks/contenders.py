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
from typing import Callable, NamedTuple

import orjson

__all__ = ["CONTENDERS", "Contender", "get", "unavailable", "check", "twin"]


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


def _twin(impl: str) -> Callable[[bytes], list]:
    accumulator = twin(impl).Accumulator

    def run(raw: bytes) -> list:
        acc = accumulator(format="openai-chat")
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
