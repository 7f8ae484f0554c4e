"""Generate realistic OpenAI chat-completion SSE response bodies that carry streamed tool calls.

Everything is deterministic for a seed. ``responses()`` gives a list of (body, expected calls);
``long_call()`` / ``long_call_pieces()`` give one call of a chosen argument size, the latter
without ever holding the whole body (for streams of gigabytes).
"""

from __future__ import annotations

import json
import random
import string
from typing import Iterable, Iterator, NamedTuple

__all__ = ["Call", "responses", "long_call", "long_call_pieces", "reads", "count_events"]

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
