"""The pure twin's inline chat path: a chunk that only ends its choice is taken without the general adapter.

``Accumulator._ends_choice`` records the finish reason and hands the choice's calls over, which is
all the general adapter (``_formats/openai_chat``) does with a one-choice chunk whose delta is
empty and which gives the turn nothing. These tests see it taken on the common last chunk, see it
decline every near shape that carries something more, and hold its result, hand-overs, errors
and turn to what the general adapter gives and to the compiled twin.
"""

import pytest
from conftest import agree

from callstitch import _accumulator_py

ENVELOPE = b'"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp"'
START = (b'data: {' + ENVELOPE + b',"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,'
         b'"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},'
         b'"logprobs":null,"finish_reason":null}]}\n\n')
PIECE = (b'data: {' + ENVELOPE + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
         b'"function":{"arguments":"{\\"city\\": \\"Paris\\"}"}}]},"logprobs":null,"finish_reason":null}]}\n\n')
COMMON_END = b'{' + ENVELOPE + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}'
TINY_END = b'{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}'


def body(end: bytes, start: bytes = START) -> bytes:
    return start + PIECE + b"data: " + end + b"\n\ndata: [DONE]\n\n"


@pytest.fixture
def ended(monkeypatch):
    """Record, per call of _ends_choice, whether it took the chunk."""
    seen = []
    real = _accumulator_py.Accumulator._ends_choice

    def counting(self, *args):
        took = real(self, *args)
        seen.append(took)
        return took

    monkeypatch.setattr(_accumulator_py.Accumulator, "_ends_choice", counting)
    return seen


def inline(data: bytes):
    """The pure twin's result and the calls its feed handed over, the inline end allowed."""
    acc = _accumulator_py.Accumulator("openai-chat")
    early = acc.feed(data)
    result = acc.finalize()
    return result, [(c.id, c.name, c.raw_arguments) for c in early]


def general(data: bytes, monkeypatch):
    """The same with the inline end declined: the general adapter takes every such chunk."""
    with monkeypatch.context() as m:
        m.setattr(_accumulator_py.Accumulator, "_ends_choice", lambda self, *args: False)
        return inline(data)


def assert_as_general(data: bytes, result, early, monkeypatch) -> None:
    """Hold the result, its errors, the calls handed over and the turn to what the general adapter gives."""
    expected, expected_early = general(data, monkeypatch)
    assert (result, [str(e) for e in result.errors], early, result.to_response()) == (
        expected, [str(e) for e in expected.errors], expected_early, expected.to_response())


@pytest.mark.parametrize("end", [COMMON_END, TINY_END], ids=["with-envelope", "bare"])
def test_the_common_last_chunk_is_taken_inline(both, ended, monkeypatch, end):
    data = body(end)
    ended.clear()
    result, early = inline(data)
    assert ended == [True]
    assert early == [("call_1", "get_weather", '{"city": "Paris"}')]
    acc = _accumulator_py.Accumulator("openai-chat")
    assert [c.id for c in acc.feed(data[:data.index(b"[DONE]")])] == ["call_1"]  # by the end chunk, before [DONE]
    assert result.finish_reason == "tool_calls" and result.complete
    assert_as_general(data, result, early, monkeypatch)
    agree(both, data, "openai-chat")


NEAR = {
    # each carries something the adapter does more with than finish and hand over
    "logprobs": b'{"choices":[{"index":0,"delta":{},"logprobs":{"content":[]},"finish_reason":"tool_calls"}]}',
    "unknown choice key": b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop","matched_stop":7}]}',
    "unknown top key": b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"provider":"x"}',
    "usage in it": b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"total_tokens":3}}',
    "new envelope field": b'{"service_tier":"default","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    "content filter": b'{"object":"","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
    "message too": b'{"choices":[{"index":0,"delta":{},"message":{"content":"x"},"finish_reason":"stop"}]}',
    "two choices": (b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},'
                    b'{"index":1,"delta":{},"finish_reason":"stop"}]}'),
    "reason not a string": b'{"choices":[{"index":0,"delta":{},"finish_reason":7}]}',
    "index not an integer": b'{"choices":[{"index":"0","delta":{},"finish_reason":"stop"}]}',
    "error in it": b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"error":{"message":"boom"}}',
}


def asked_and_as_general(both, ended, monkeypatch, end: bytes) -> list:
    """Read body(end) with the inline end allowed, held to the general adapter and to the compiled twin.

    Return what _ends_choice answered on that reading (empty: it was not asked).
    """
    data = body(end)
    ended.clear()
    result, early = inline(data)
    answers = list(ended)
    assert_as_general(data, result, early, monkeypatch)
    agree(both, data, "openai-chat")
    return answers


@pytest.mark.parametrize("end", list(NEAR.values()), ids=list(NEAR))
def test_a_near_shape_goes_the_general_way_with_the_same_result(both, ended, monkeypatch, end):
    assert True not in asked_and_as_general(both, ended, monkeypatch, end)


SHAPES_NOT_ASKED = {
    # not an empty delta: the chunk is no chunk that only ends its choice
    "text in the delta": b'{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}',
    "no delta": b'{"choices":[{"index":0,"finish_reason":"stop"}]}',
    "delta not an object": b'{"choices":[{"index":0,"delta":[],"finish_reason":"stop"}]}',
}


@pytest.mark.parametrize("end", list(SHAPES_NOT_ASKED.values()), ids=list(SHAPES_NOT_ASKED))
def test_a_chunk_with_more_than_an_end_is_not_read_as_one(both, ended, monkeypatch, end):
    assert asked_and_as_general(both, ended, monkeypatch, end) == []


def test_a_stream_that_begins_with_its_end_goes_the_general_way(both, ended):
    # The first event is read by the general adapter (recognition, the turn begins there).
    data = b"data: " + TINY_END + b"\n\ndata: [DONE]\n\n"
    ended.clear()
    result, early = inline(data)
    assert ended == [] and early == []
    assert result.finish_reason == "tool_calls" and result.tool_calls == []
    agree(both, data, "openai-chat")


def test_two_ends_of_one_choice_hand_each_call_over_once(both, ended):
    data = START + PIECE + b"data: " + COMMON_END + b"\n\ndata: " + TINY_END + b"\n\ndata: [DONE]\n\n"
    ended.clear()
    result, early = inline(data)
    assert ended == [True, True]
    assert len(early) == 1 and len(result.tool_calls) == 1
    agree(both, data, "openai-chat")
