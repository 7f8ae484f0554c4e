"""The Gemini turn's record costs a hostile stream its length, not its square: counted, never timed.

Three shapes were quadratic, both twins alike (the record is one module): a fold of the changed
envelopes read the whole log again (a stream of many parts, then many changing envelopes: 400,000
of each took 13 s, ten times 100,000's), a signature on a call's continuation walked back over the
candidate's parts (40,000 took 17 s, eighteen times 10,000's), and citations nested past 20 levels
were each compared with every earlier one (8,000 took 44 s, fourteen times 2,000's). Each test
counts the work at n and 4n, which grows 4 times when linear and 16 when quadratic.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

import callstitch._turns.gemini as gemini_turn
from callstitch._turns.gemini import GeminiCandidate


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\r\n\r\n"


def reassembled(impl, body: bytes):
    acc = impl.Accumulator(format="gemini")
    acc.feed(body)
    return acc.finalize()


def lines_run(code, work: Callable[[], Any]) -> tuple[int, Any]:
    """Run work(); return how many lines ran in frames of code and in the frames they called, and what it returned.

    A count of the Python lines the turn's record ran, the same on every machine: whatever loop a
    version of it has, in the function or in what it calls (a comprehension, a helper), is counted.
    """
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        for _ in range(3):  # code's frame, or one it called, or one that one called
            if frame is None:
                return None
            if frame.f_code is code:
                return local
            frame = frame.f_back
        return None

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        out = work()
    finally:
        sys.settrace(before)
    return count, out


def grows_linearly(counts: list[int]) -> bool:
    """Tell whether work counted at n and 4n grew as n did (4 times, some slack), not as its square (16)."""
    small, large = counts
    return 0 < small and large <= 5 * small


# ---------------------------------------------------------------- folding the envelopes


def _parts_then_envelopes(n: int) -> bytes:
    """n part entries (text runs of alternating kinds, 100 a chunk), then n chunks that each change the envelope."""
    parts = [{"text": "x"}, {"text": "y", "thought": True}] * 50
    head = b"".join(sse({"candidates": [{"content": {"role": "model", "parts": parts}}]}) for _ in range(n // 100))
    return head + b"".join(sse({"candidates": [{"safetyRatings": [{"k": k}]}], "modelVersion": "g"})
                           for k in range(n))


def test_a_fold_reads_only_what_was_logged_since_the_last_one(impl, monkeypatch):
    # Each fold read the whole log, part entries included: every FOLD_AT envelopes, the log's
    # length again. FOLD_AT made 4 so that a small stream folds often; the result is that of no fold.
    counts = []
    for n in (200, 800):
        body = _parts_then_envelopes(n)
        unfolded = reassembled(impl, body).to_response()  # (fewer envelopes than FOLD_AT: never folded)
        monkeypatch.setattr(gemini_turn, "FOLD_AT", 4)
        count, result = lines_run(gemini_turn.GeminiTurn.fold.__code__, lambda body=body: reassembled(impl, body))
        monkeypatch.undo()
        counts.append(count)
        response = result.to_response()
        assert response == unfolded
        (candidate,) = response["candidates"]
        assert candidate["safetyRatings"] == [{"k": n - 1}] and len(candidate["content"]["parts"]) == n
    assert grows_linearly(counts), counts


# ---------------------------------------------------------------- a signature on a call's continuation


def _call_then_signatures(n: int) -> bytes:
    """A call, then n chunks of a signed text part and a signature on a continuation of the call."""
    head = sse({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]}}]})
    return head + b"".join(sse({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "x", "thoughtSignature": f"s{k}"},
        {"functionCall": {"willContinue": True}, "thoughtSignature": f"t{k}"}]}}]}) for k in range(n))


def test_a_signature_finds_its_call_without_walking_back_over_the_parts(impl):
    # Reading the turn walked back from every continuation's signature to the last call part.
    counts = []
    for n in (200, 800):
        result = reassembled(impl, _call_then_signatures(n))
        count, response = lines_run(gemini_turn.read.__code__, result.to_response)
        counts.append(count)
        parts = response["candidates"][0]["content"]["parts"]
        # The call takes the first signature sent after it; the signed texts keep theirs, one part each.
        assert parts[0] == {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "t0"}
        assert parts[1:] == [{"text": "x", "thoughtSignature": f"s{k}"} for k in range(n)]
    assert grows_linearly(counts), counts


def test_a_signature_goes_to_the_last_call_of_its_candidate_only(impl):
    # (what the walk back did, kept: the last call part, only when it has none; other candidates apart)
    def chunk(index: int, *parts: dict) -> bytes:
        return sse({"candidates": [{"index": index, "content": {"role": "model", "parts": list(parts)}}]})
    body = b"".join([
        chunk(1, {"functionCall": {"willContinue": True}, "thoughtSignature": "none-yet"}),
        chunk(0, {"functionCall": {"name": "a", "args": {}}}),
        chunk(0, {"functionCall": {"name": "b", "args": {}}, "thoughtSignature": "own"}),
        chunk(1, {"functionCall": {"name": "c", "args": {}}}),
        chunk(0, {"text": "x"}, {"functionCall": {"willContinue": True}, "thoughtSignature": "late"}),
        chunk(1, {"inlineData": {"mimeType": "image/png", "data": ""}}),
        chunk(1, {"functionCall": {"willContinue": True}, "thoughtSignature": "c1"}),
        chunk(1, {"functionCall": {"willContinue": True}, "thoughtSignature": "c2"}),
    ])
    zero, one = reassembled(impl, body).to_response()["candidates"]
    assert zero["content"]["parts"] == [{"functionCall": {"name": "a", "args": {}}},
                                        {"functionCall": {"name": "b", "args": {}}, "thoughtSignature": "own"},
                                        {"text": "x"}]
    assert one["content"]["parts"] == [{"functionCall": {"name": "c", "args": {}}, "thoughtSignature": "c1"},
                                       {"inlineData": {"mimeType": "image/png", "data": ""}}]


# ---------------------------------------------------------------- citations nested deep


class _Counted:
    """A citation's innermost value that counts how often it is compared (hashable, as a JSON value is)."""

    compared = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        _Counted.compared += 1
        return isinstance(other, _Counted) and other.n == self.n

    def __hash__(self) -> int:
        return hash(self.n)


def _deep(k: int, depth: int = 25) -> dict:
    value: dict = {"n": k}
    for _ in range(depth):
        value = {"a": value}
    return value


def _counting(value: Any) -> Any:
    """Return a citation as read, its numbers made _Counted."""
    if type(value) is dict:
        return {key: _counting(inner) for key, inner in value.items()}
    if type(value) is list:
        return [_counting(inner) for inner in value]
    return _Counted(value) if type(value) is int else value


def _innermost(value: Any) -> Any:
    while type(value) is dict and "a" in value:
        value = value["a"]
    return value


def test_citations_nested_deep_are_never_compared_with_every_earlier_one(impl, monkeypatch):
    # Past 20 levels a citation had no hashable form and was compared with each earlier one of its
    # kind. Every citation is sent twice, n chunks apart (the second is dropped, as a repeat is), and
    # each chunk changes the envelope, so that they are folded too; how often the citations' innermost
    # values are compared is counted, through the record's take() (as both twins reach it), from
    # reading to the response.
    take = GeminiCandidate.take

    def counting_take(self: GeminiCandidate, candidate: dict) -> None:
        metadata = candidate.get("citationMetadata")
        if type(metadata) is dict and type(metadata.get("citations")) is list:
            candidate = {**candidate, "citationMetadata": {**metadata, "citations": _counting(metadata["citations"])}}
        take(self, candidate)

    monkeypatch.setattr(GeminiCandidate, "take", counting_take)
    counts = []
    for n in (150, 600):
        body = b"".join(sse({"candidates": [{"content": {"role": "model", "parts": [{"text": "x"}]},
                                             "citationMetadata": {"citations": [_deep(k % n)]}}]})
                        for k in range(2 * n))
        _Counted.compared = 0
        citations = reassembled(impl, body).to_response()["candidates"][0]["citationMetadata"]["citations"]
        counts.append(_Counted.compared)
        assert [_innermost(citation)["n"].n for citation in citations] == list(range(n))
    assert grows_linearly(counts), counts


def _cited(value: str) -> bytes:
    return (b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"x"}]},'
            b'"citationMetadata":{"citations":[' + value.encode() + b"]}}]}\r\n\r\n")


def _nest(inner: str, depth: int) -> str:
    return '{"a":' * depth + inner + "}" * depth


def test_deep_citations_equal_as_json_are_one(impl):
    # (equal as == has them, as before: 1, 1.0 and true; -0.0 and 0; keys in any order)
    sent = [_nest('{"n":1,"z":0}', 30), _nest('{"z":-0.0,"n":1.0}', 30), _nest('{"n":true,"z":0}', 30),
            _nest('{"n":2,"z":0}', 30), _nest('{"n":1,"z":0}', 3), _nest('{"n":1.0,"z":false}', 3)]
    citations = reassembled(impl, b"".join(_cited(value) for value in sent)).to_response()[
        "candidates"][0]["citationMetadata"]["citations"]
    assert [_innermost(citation) for citation in citations] == [{"n": 1, "z": 0}, {"n": 2, "z": 0}, {"n": 1, "z": 0}]


def test_a_chunk_nested_as_deep_as_orjson_reads_is_no_crash(impl):
    # Comparing its envelope with the last one recursed past Python's limit (RecursionError out of
    # feed); a citation that deep is merged by its flat key, which no depth makes recurse.
    depth = 1010  # (the chunk's own levels on top: 1,016 of orjson's 1,024)
    sent = [_nest('{"n":1}', depth), _nest('{"n":1.0}', depth), _nest('{"n":2}', depth), _nest('{"n":1}', 3)]
    result = reassembled(impl, b"".join(_cited(value) for value in sent))
    assert not result.errors
    citations = result.to_response()["candidates"][0]["citationMetadata"]["citations"]
    assert [_innermost(citation) for citation in citations] == [{"n": 1}, {"n": 2}, {"n": 1}]
