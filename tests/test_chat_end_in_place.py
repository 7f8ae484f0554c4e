"""The end of a chat stream read in place: the include_usage chunk and [DONE] never leave C.

The chat scanner (``_c/chat.h``) reads a chunk's ``usage`` object as checked JSON text, kept until
the result is built (as Gemini's is), and the SSE reader ends the stream at a bare ``[DONE]`` as
``_dispatch.handle_event`` does. These tests hold both to the pure twin's results, turn included,
on the layouts near them: other types and shapes of usage, bad JSON in it, a usage twice, an
integer beyond 64 bits, a [DONE] with spaces or an event name, data after [DONE].
"""

import pytest
from conftest import agree, agree_whole, halted_run

from _streams import DONE, chunk, finish, tool_delta

USAGE = b'{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0}}'
ENVELOPE = (b'"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"system_fingerprint":"fp"')


def usage_chunk(usage: bytes, choices: bytes = b"[]") -> bytes:
    return b"data: {" + ENVELOPE + b',"choices":' + choices + b',"usage":' + usage + b"}\n\n"


def stream(*tail: bytes, finished: bool = True) -> bytes:
    """One call in three pieces, its finish_reason (unless not finished), then tail."""
    calls = [chunk([tool_delta(0, id="call_1", name="f", arguments="")]),
             chunk([tool_delta(0, arguments='{"a":')]), chunk([tool_delta(0, arguments="1}")])]
    if finished:
        calls.append(chunk([finish("tool_calls")]))
    return b"".join(calls) + b"".join(tail)


def test_the_usage_chunk_and_done_are_read_in_place(both):
    counts, result = agree_whole(both, stream(usage_chunk(USAGE), DONE), "openai-chat")
    assert counts["general"] == 0 and counts["sse-done"] == 1, counts
    assert result.usage["prompt_tokens_details"] == {"cached_tokens": 0} and result.complete
    assert result.tool_calls[0].arguments == {"a": 1}


NEAR = {
    "null": usage_chunk(b"null"),
    "empty object": usage_chunk(b"{}"),
    "number": usage_chunk(b"7"),
    "string": usage_chunk(b'"x"'),
    "list": usage_chunk(b"[1,2]"),
    "bad JSON inside": usage_chunk(b'{"a":}'),
    "cut": b"data: {" + ENVELOPE + b',"choices":[],"usage":{"a":1\n\n',
    "trailing comma": usage_chunk(b'{"a":1,}'),
    "bad escape": usage_chunk(b'{"a\\q":1}'),
    "lone surrogate": usage_chunk(b'{"a":"\\ud800"}'),
    "infinite number": usage_chunk(b'{"a":1e999}'),
    "beyond 64 bits": usage_chunk(b'{"prompt_tokens":123456789012345678901234567890}'),
    "key twice": usage_chunk(b'{"a":1,"a":2}'),
    "usage twice": b"data: {" + ENVELOPE + b',"choices":[],"usage":{"a":1},"usage":{"a":2}}\n\n',
    "with a choice": usage_chunk(USAGE, b'[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]'),
    "deep": usage_chunk(b'{"a":' + b"[" * 600 + b"]" * 600 + b"}"),
    "spaces": usage_chunk(b'{ "a" : 1 , "b" : { } }'),
    "then another usage": usage_chunk(b'{"a":1}') + usage_chunk(b'{"a":2}'),
    "then null": usage_chunk(b'{"a":1}') + usage_chunk(b"null"),
}


@pytest.mark.parametrize("tail", NEAR.values(), ids=NEAR.keys())
def test_near_usage_chunks_read_as_the_pure_twin_reads_them(both, tail):
    agree_whole(both, stream(tail, DONE), "openai-chat")


DONES = {
    "bare": stream(usage_chunk(USAGE), DONE),
    "spaces": stream(usage_chunk(USAGE), b"data:  [DONE] \n\n"),
    "named event": stream(usage_chunk(USAGE), b"event: done\ndata: [DONE]\n\n"),
    "lower case": stream(usage_chunk(USAGE), b"data: [done]\n\n"),
    "two lines": stream(usage_chunk(USAGE), b"data: [DONE]\ndata: x\n\n"),
    "then a chunk": stream(usage_chunk(USAGE), DONE, chunk([tool_delta(1, id="call_2", name="g", arguments="{}")])),
    "twice": stream(usage_chunk(USAGE), DONE, DONE),
    "no finish before it": stream(DONE, finished=False),
}


@pytest.mark.parametrize("body", DONES.values(), ids=DONES.keys())
@pytest.mark.parametrize("fmt", ["openai-chat", "auto"])
def test_done_ends_the_stream_as_the_pure_twin_ends_it(both, body, fmt):
    agree_whole(both, body, fmt)
    agree(both, body, fmt, seeds=range(2))  # fed in pieces too: the same calls handed over at the same feed


def test_done_hands_over_the_open_calls(both):
    # No finish_reason came: [DONE] is what closes the call, and feed() hands it over there.
    body = stream(finished=False)
    for impl in both:
        acc = impl.Accumulator(format="openai-chat")
        assert acc.feed(body) == []
        handed = acc.feed(DONE)
        assert [(c.id, c.arguments) for c in handed] == [("call_1", {"a": 1})], impl.name


@pytest.mark.parametrize("pieces", [1, 7], ids=["whole", "in pieces"])
def test_done_halts_a_batch_read_where_the_pure_twin_halts(both, pieces):
    # A batch job reading concatenated streams stops right after the terminator (halt_at_end).
    body = stream(usage_chunk(USAGE), DONE)
    data = body + b"data: {not json\n\n" + stream()
    seen = []
    step = -(-len(data) // pieces)
    for impl in both:
        fed, result = halted_run(impl, [data[k:k + step] for k in range(0, len(data), step)])
        seen.append((fed, result, [str(e) for e in result.errors], result.to_response()))
    assert seen[0] == seen[1]
    assert seen[0][0] == len(body) and not seen[0][2]
