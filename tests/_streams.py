"""Build OpenAI-chat SSE bodies, chunks and fragments for the behaviour tests."""

from __future__ import annotations

import json
import random
from typing import Any, Iterable, Iterator

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()

DONE = b"data: [DONE]\n\n"

_ENVELOPE = {"id": "chatcmpl-abc123", "object": "chat.completion.chunk", "created": 1730000000,
             "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_1234"}


def dumps(obj: Any) -> bytes:
    """Serialise as compact JSON with non-ASCII kept as UTF-8 (as most servers send it).

    Text holding a lone UTF-16 surrogate cannot be UTF-8: it is sent \\u-escaped instead.
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def event(data: bytes | str, *, eol: bytes = b"\n", event_name: str | None = None) -> bytes:
    """Return one SSE event carrying data on one data line."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    head = b"event: " + event_name.encode() + eol if event_name is not None else b""
    return head + b"data: " + data + eol + eol


def chunk_obj(choices: Iterable[dict] | None = (), **extra: Any) -> dict:
    """Return one chat.completion.chunk as a dict."""
    obj = dict(_ENVELOPE)
    obj["choices"] = list(choices) if choices is not None else None
    obj.update(extra)
    return obj


def chunk(choices: Iterable[dict] | None = (), **extra: Any) -> bytes:
    """Return one chat.completion.chunk as an SSE event: b"data: " + json + b"\\n\\n"."""
    return b"data: " + dumps(chunk_obj(choices, **extra)) + b"\n\n"


def call_obj(index: Any = MISSING, id: Any = MISSING, name: Any = MISSING, arguments: Any = MISSING,
             **extra: Any) -> dict:
    """Return one entry of delta.tool_calls; keys given as MISSING are left out."""
    call: dict = {}
    if index is not MISSING:
        call["index"] = index
    if id is not MISSING:
        call["id"] = id
        call["type"] = "function"
    function = {}
    if name is not MISSING:
        function["name"] = name
    if arguments is not MISSING:
        function["arguments"] = arguments
    if function:
        call["function"] = function
    call.update(extra)
    return call


def choice_obj(delta: Any = MISSING, choice: int = 0, finish_reason: Any = None, **extra: Any) -> dict:
    """Return one choice of a chunk."""
    obj: dict = {"index": choice}
    if delta is not MISSING:
        obj["delta"] = delta
    obj["logprobs"] = None
    obj["finish_reason"] = finish_reason
    obj.update(extra)
    return obj


def tool_delta(index: Any = MISSING, id: Any = None, name: Any = None, arguments: Any = None, choice: int = 0,
               **call_extra: Any) -> dict:
    """Return a choice whose delta carries one tool-call fragment (None means: key absent)."""
    return choice_obj({"tool_calls": [call_obj(index, *_present(id, name, arguments), **call_extra)]}, choice)


def _present(*values: Any) -> tuple:
    return tuple(MISSING if v is None else v for v in values)


def tool_deltas(*calls: dict, choice: int = 0) -> dict:
    """Return a choice whose delta carries several tool-call fragments (from call_obj)."""
    return choice_obj({"tool_calls": list(calls)}, choice)


def text_delta(choice: int = 0, **fields: Any) -> dict:
    """Return a choice whose delta carries text fields (content, reasoning_content, refusal, role …)."""
    return choice_obj(dict(fields), choice)


def finish(reason: str = "tool_calls", choice: int = 0) -> dict:
    """Return a choice that finishes with reason and an empty delta."""
    return choice_obj({}, choice, finish_reason=reason)


# ---------------------------------------------------------------- fragments three ways


def frag(index: Any = MISSING, id: Any = MISSING, name: Any = MISSING, arguments: Any = MISSING,
         choice: int = 0) -> dict:
    """Return one abstract fragment, to be sent as a chunk, fed as a dict or added."""
    return {"index": index, "id": id, "name": name, "arguments": arguments, "choice": choice}


def frag_chunk(f: dict) -> dict:
    """Return the chunk dict that carries fragment f."""
    call = call_obj(f["index"], f["id"], f["name"], f["arguments"])
    return chunk_obj([choice_obj({"tool_calls": [call]}, f["choice"])])


def frag_add(acc: Any, f: dict) -> None:
    """Add fragment f with Accumulator.add."""
    def value(key: str) -> Any:
        return None if f[key] is MISSING else f[key]

    acc.add(value("index"), id=value("id"), name=value("name"), arguments=value("arguments"), choice=f["choice"])


def frags_body(frags: Iterable[dict], *, head: bytes = b"", tail: bytes = b"", eol: bytes = b"\n") -> bytes:
    """Return an SSE body carrying the fragments, one chunk each."""
    out = [head]
    for f in frags:
        out.append(b"data: " + dumps(frag_chunk(f)) + eol + eol)
    out.append(tail)
    return b"".join(out)


WAYS = ("feed", "feed-split", "feed_chunk", "add")


def run_way(impl: Any, way: str, frags: list[dict], *, seed: int = 0, tail: bytes = b"") -> Any:
    """Run the fragments through one way in and return the Result."""
    acc = impl.Accumulator()
    if way == "feed":
        acc.feed(frags_body(frags, tail=tail))
    elif way == "feed-split":
        # several seeded random splits: all must give the same Result as the whole body
        body = frags_body(frags, tail=tail)
        whole = run_way(impl, "feed", frags, tail=tail)
        for k in range(5):
            split = feed_split(impl, body, random_cuts(len(body), seed * 100 + k))
            assert split == whole, (seed * 100 + k, split, whole)
        feed_pieces(acc, body, random_cuts(len(body), seed))
    elif way == "feed_chunk":
        for f in frags:
            acc.feed_chunk(frag_chunk(f))
    elif way == "add":
        for f in frags:
            frag_add(acc, f)
    else:  # pragma: no cover
        raise ValueError(way)
    return acc.finalize()


# ---------------------------------------------------------------- splitting bytes


def random_cuts(n: int, seed: int, max_cuts: int = 40) -> list[int]:
    """Return sorted cut positions (0 < k < n) chosen by a seeded RNG."""
    rng = random.Random(seed)
    if n < 2:
        return []
    k = rng.randint(1, min(max_cuts, n - 1))
    return sorted(rng.sample(range(1, n), k))


def pieces(data: bytes, cuts: Iterable[int]) -> Iterator[bytes]:
    """Cut data at the given positions."""
    last = 0
    for c in cuts:
        yield data[last:c]
        last = c
    yield data[last:]


def feed_pieces(acc: Any, data: bytes, cuts: Iterable[int]) -> None:
    """Feed data to acc cut at the given positions."""
    for piece in pieces(data, cuts):
        acc.feed(piece)


def feed_split(impl: Any, data: bytes, cuts: Iterable[int]) -> Any:
    """Return the Result of feeding data cut at the given positions."""
    acc = impl.Accumulator()
    feed_pieces(acc, data, cuts)
    return acc.finalize()


def bytewise(impl: Any, data: bytes) -> Any:
    """Return the Result of feeding data one byte at a time."""
    return feed_split(impl, data, range(1, len(data)))


def summary(result: Any) -> list[tuple]:
    """Return the calls of a Result as (id, name, arguments) tuples."""
    return [(c.id, c.name, c.arguments) for c in result.tool_calls]


_JUNK = (b"", b"\n", b"}", b"x", b'"', b"{", b"1", b"\n\n")


def damaged(body: bytes, seed: Any, step: int | None = None, copies: int = 30) -> list[bytes]:
    """Return body cut short at every step bytes (about 150 places by default) and copies randomly damaged."""
    r = random.Random(seed)
    variants = [body[:k] for k in range(0, len(body), step or max(1, len(body) // 150))]
    for _ in range(copies):
        data = bytearray(body)
        for _ in range(r.randint(1, 4)):
            pos = r.randrange(len(data))
            data[pos:pos + r.randint(0, 3)] = r.choice(_JUNK)
        variants.append(bytes(data))
    return variants


def assert_twins_give_the_same_turn(both: Any, bodies: Iterable[bytes], fmt: str) -> None:
    """Fail unless both twins give the same to_response() and to_message() for every body."""
    c, py = both
    for data in bodies:
        rc, rp = c.reassemble(data, format=fmt), py.reassemble(data, format=fmt)
        assert rc.to_response() == rp.to_response(), data
        assert rc.to_message() == rp.to_message(), data


def near_pieces(piece: Any) -> list[tuple[bytes, bool]]:
    """Return the payloads every byte reader of one event layout must get right, each with whether it reads it.

    piece(text, index=...) makes the layout's payload: text is the raw JSON string content, index
    the digits of its number field.
    """
    return [
        (piece(b"caf\\u00e9 \\ud83d\\ude80 na\xc3\xafve \\\\"), True),  # escapes and UTF-8 in the piece
        (piece(b"x", index=b"123456789012345678"), True),  # 18 digits, the most read (no such call: the general way)
        (piece(b"x", index=b"1234567890123456789"), False),  # 19: the extractor's
        (piece(b"x", index=b"01"), False),  # a leading zero: not JSON
        (piece(b"x", index=b"-1"), False),
        (piece(b"bad \\x escape"), False),
        (piece(b"raw \x01 control"), False),
        (piece(b"bad utf-8 \xff"), False),
    ]
