"""A chat choice carrying both `delta` and `message`: the message repeats the delta, taken once. Both twins.

Some OpenAI-compatible servers put every fragment in each chunk twice, in `delta` and again in
`message`; read as two sources, every fragment was appended twice and the call came out malformed.
"""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _streams import DONE, bytewise, chunk, chunk_obj, feed_split

_DELTAS = [
    {"role": "assistant", "reasoning_content": "Let me "},
    {"reasoning_content": "look it up."},
    {"content": "Checking the "},
    {"content": "weather."},
    {"tool_calls": [{"index": 0, "id": "call_w1", "type": "function",
                     "function": {"name": "get_weather", "arguments": ""}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]},
    {"tool_calls": [{"index": 0, "function": {"arguments": 'is", "units": "c"}'}}]},
    {"tool_calls": [{"index": 1, "id": "call_t2", "type": "function",
                     "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]},
]


def _choices(twice, message_first=False):
    """The chunks' choices, each delta also sent as the choice's message when twice is set."""
    out = []
    for delta in _DELTAS:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        if twice:
            choice = ({"index": 0, "message": delta, "delta": delta, "finish_reason": None} if message_first
                      else dict(choice, message=delta))
        out.append([choice])
    last = {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    out.append([dict(last, message={}) if twice else last])
    return out


def _body(twice, message_first=False):
    return b"".join(chunk(c) for c in _choices(twice, message_first)) + DONE


def _check(result):
    assert result.errors == []
    assert [(c.id, c.name, c.arguments, c.error) for c in result.tool_calls] == [
        ("call_w1", "get_weather", {"city": "Paris", "units": "c"}, None),
        ("call_t2", "get_time", {"tz": "CET"}, None)]
    assert result.text == "Checking the weather."
    assert result.reasoning == "Let me look it up."
    assert result.finish_reason == "tool_calls"


def test_delta_and_message_read_once(impl):
    plain = impl.reassemble(_body(False), format="openai-chat")
    _check(plain)
    for message_first in (False, True):
        body = _body(True, message_first)
        for fmt in ("openai-chat", "auto"):
            got = impl.reassemble(body, format=fmt)
            _check(got)
            assert got.tool_calls == plain.tool_calls
        assert bytewise(impl, body) == impl.reassemble(body, format="openai-chat")


def test_delta_and_message_read_once_via_feed_chunk(impl):
    for as_text in (False, True):
        acc = impl.Accumulator(format="openai-chat")
        for choices in _choices(True):
            obj = chunk_obj(choices)
            acc.feed_chunk(json.dumps(obj) if as_text else obj)
        _check(acc.finalize())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_delta_and_message_any_split(impl, data):
    body = _body(True, data.draw(st.booleans()))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=40))))
    _check(feed_split(impl, body, cuts))


def test_message_alone_still_read(impl):
    """A whole response (message, no delta) and a chunk whose delta is null still give their content."""
    message = {"role": "assistant", "content": "Hi",
               "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    for choice in ({"index": 0, "message": message, "finish_reason": "tool_calls"},
                   {"index": 0, "delta": None, "message": message, "finish_reason": "tool_calls"}):
        result = impl.reassemble(chunk([choice]) + DONE, format="openai-chat")
        assert result.errors == []
        assert result.text == "Hi"
        assert [(c.id, c.name, c.arguments) for c in result.tool_calls] == [("call_1", "f", {"a": 1})]


def test_delta_and_message_twins_agree(both):
    for body in (_body(True), _body(True, True)):
        c, py = (twin.reassemble(body, format="openai-chat") for twin in both)
        assert c == py
