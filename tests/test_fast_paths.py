"""The compiled twin's fast paths are taken on each format's common events, and give what the pure twin gives.

Twin parity alone would pass if every fast path declined every event (the general path would do
the work in both twins). The compiled twin counts, per event, which way it went
(``_path_counts()``): these tests hold each fast path and each in-place framing to being taken on
realistic bodies (benchmarks/workload.py), and both twins to the same results on those bodies.
"""

import os
import sys

import orjson
import pytest

from callstitch import _accumulator_c as compiled

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import workload  # noqa: E402

BODIES = 30
# The general path takes what no fast path reads (a stream's first event, ends, rare shapes);
# the common events are at least this share of each workload.
FAST_SHARE = 0.85


def _sse_payloads(body: bytes) -> list[bytes]:
    """Return the data payloads of an SSE body, in order ([DONE] left out)."""
    lines = body.replace(b"\r\n", b"\n").split(b"\n")
    payloads = [line[5:].lstrip(b" ") for line in lines if line.startswith(b"data:")]
    return [p for p in payloads if p != b"[DONE]"]


def _as_json_array(body: bytes) -> bytes:
    """Return a Gemini SSE body as the one JSON array Gemini sends without alt=sse."""
    return b"[\r\n" + b",\r\n".join(_sse_payloads(body)) + b"\r\n]"


def _as_ndjson(body: bytes) -> bytes:
    """Return an SSE body's events as NDJSON lines."""
    return b"".join(p + b"\n" for p in _sse_payloads(body))


def _bodies(fmt: str) -> list[bytes]:
    if fmt == "openai-chat":
        return [b for b, _ in workload.responses(BODIES, seed=5)]
    return [b for b, _ in workload.format_responses(fmt, BODIES, seed=5)]


def _run(both, fmt: str, bodies: list[bytes]) -> dict[str, int]:
    """Reassemble every body with both twins (same results, with calls); return the compiled twin's path counts."""
    compiled_twin, pure_twin = both
    assert compiled_twin.module is compiled
    compiled._reset_path_counts()
    results = [compiled_twin.reassemble(body, format=fmt) for body in bodies]
    counts = compiled._path_counts()
    assert results == [pure_twin.reassemble(body, format=fmt) for body in bodies]
    assert all(result.tool_calls for result in results)
    return counts


def _assert_fast(counts: dict[str, int], path: str, framed: str) -> None:
    """The fast path took the common events, and every event was framed in place by the given framing."""
    events = counts[path] + counts["general"] + counts["sse-done"]
    assert counts[path] >= FAST_SHARE * events, counts
    assert counts[framed] == events, counts
    assert counts["framed-elsewhere"] == 0, counts


# format, the fast path's counter, the framing that hands its events over in place
CASES = [
    ("openai-chat", "openai-chat", "framed-sse-direct"),
    ("openai-responses", "openai-responses", "framed-sse-direct"),
    ("anthropic", "anthropic", "framed-sse-direct"),
    ("gemini", "gemini", "framed-sse-direct"),
    ("bedrock", "bedrock", "framed-eventstream"),
    ("cohere", "cohere", "framed-sse-direct"),
    ("ollama", "ollama", "framed-ndjson"),
]


@pytest.mark.parametrize("fmt, path, framed", CASES, ids=[case[0] for case in CASES])
@pytest.mark.parametrize("named", [True, False], ids=["named", "auto"])
def test_fast_path_takes_common_events(both, fmt, path, framed, named):
    counts = _run(both, fmt if named else "auto", _bodies(fmt))
    _assert_fast(counts, path, framed)


def test_gemini_pieces_take_their_own_fast_path(both):
    # Vertex AI streams arguments as partialArgs entries: most of those chunks are the next piece of a string.
    counts = _run(both, "gemini", _bodies("gemini"))
    # … and most pieces after the first of a string are that chunk again with other text (_gemini_repeat).
    assert counts["gemini-piece"] > 0 and counts["gemini-repeat"] > 0, counts
    # a piece or a repeat counts as a gemini fast event too
    assert counts["gemini-piece"] + counts["gemini-repeat"] <= counts["gemini"], counts


@pytest.mark.parametrize("fmt", ["openai-responses", "cohere", "anthropic", "bedrock"])
def test_a_formats_commonest_event_takes_its_byte_reader(both, fmt):
    # The provider's own layout of a call's (or block's) next piece is read byte by byte (_c/fast_*.pxi).
    counts = _run(both, fmt, _bodies(fmt))
    reader = {"openai-responses": "responses-delta"}.get(fmt, fmt + "-delta")
    assert counts[reader] >= FAST_SHARE * counts[fmt], counts


def test_a_chat_streams_usage_chunk_and_done_take_the_fast_path(both):
    # The chunk of include_usage (choices [], usage {...}) and [DONE] end every workload stream: neither
    # leaves C, so a plain chat stream takes the general path not once.
    bodies = _bodies("openai-chat")
    counts = _run(both, "openai-chat", bodies)
    assert counts["general"] == 0 and counts["sse-done"] == len(bodies), counts
    assert all(b'"usage":{' in body for body in bodies)


def test_json_array_is_framed_in_place(both):
    counts = _run(both, "gemini", [_as_json_array(body) for body in _bodies("gemini")])
    _assert_fast(counts, "gemini", "framed-jsonarray")


def test_ndjson_chat_is_framed_in_place(both):
    # Chat chunks as JSON lines: format="auto" recognises the framing and the format.
    counts = _run(both, "auto", [_as_ndjson(body) for body in _bodies("openai-chat")])
    _assert_fast(counts, "openai-chat", "framed-ndjson")


def test_sse_events_of_several_lines_are_framed_in_place(both):
    # Two data lines per event: gathered (copied) by the SSE framer, not read directly.
    bodies = [b"".join(b"data: " + p[:1] + b"\ndata: " + p[1:] + b"\n\n" for p in _sse_payloads(body))
              for body in _bodies("anthropic")]
    counts = _run(both, "anthropic", bodies)
    _assert_fast(counts, "anthropic", "framed-sse")
    assert counts["framed-sse-direct"] == 0, counts


def test_events_the_fast_path_cannot_read_take_the_general_path(both):
    # An escaped key is never read in place: every chunk of this stream goes the general way.
    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a": 1}'}}]}}]}
    escaped = orjson.dumps(chunk).replace(b'"choices"', b'"\\u0063hoices"')
    counts = _run(both, "openai-chat", [b"data: " + escaped + b"\n\ndata: [DONE]\n\n"])
    assert counts["openai-chat"] == 0, counts
    assert counts["general"] >= 1, counts


def test_reset_sets_every_counter_to_zero(both):
    _run(both, "openai-chat", _bodies("openai-chat")[:2])
    assert any(compiled._path_counts().values())
    compiled._reset_path_counts()
    assert set(compiled._path_counts().values()) == {0}


def test_the_accumulator_is_small_enough_for_mallocs_fast_path():
    # One Accumulator is made per response: at 1,016 bytes or less (GC header included, 1,032) glibc's
    # per-thread cache serves it in a few instructions; above, each response pays malloc's slow path
    # (some 400 instructions on a 90,000-instruction Ollama response). Scratch space goes on the stack.
    assert compiled.Accumulator.__basicsize__ <= 1016, compiled.Accumulator.__basicsize__
