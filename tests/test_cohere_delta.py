"""The compiled twin's byte-by-byte reader of the commonest Cohere event, a call's next arguments piece.

``_cohere_delta`` (``_c/fast_cohere.pxi``) reads
``{"type":"tool-call-delta","index":N,"delta":{"message":{"tool_calls":{"function":{"arguments":…}}}}}``
exactly as Cohere lays it out and leaves every other layout to the extractor. These tests hold it
to being taken on that layout and to the pure twin's results on layouts close to it.
"""

import pytest
from conftest import agree_whole
from _streams import near_pieces


HEAD = b'{"type":"tool-call-delta","index":'
MIDDLE = b',"delta":{"message":{"tool_calls":{"function":{"arguments":"'


def event(name, data):
    return b"event: " + name + b"\ndata: " + data + b"\n\n"


def delta(text, index=b"0", tail=b'"}}}}}'):
    """A tool-call-delta payload in Cohere's layout; text is the raw JSON string content."""
    return HEAD + index + MIDDLE + text + tail


def stream(*deltas, calls=1):
    out = [event(b"message-start", b'{"id":"m1","type":"message-start","delta":{"message":{"role":"assistant",'
                 b'"content":[],"tool_plan":"","tool_calls":[],"citations":[]}}}')]
    for k in range(calls):
        out.append(event(b"tool-call-start", b'{"type":"tool-call-start","index":%d,"delta":{"message":{"tool_calls":'
                         b'{"id":"call_%d","type":"function","function":{"name":"f","arguments":""}}}}}' % (k, k)))
    out += [event(b"tool-call-delta", d) for d in deltas]
    out += [event(b"tool-call-end", b'{"type":"tool-call-end","index":%d}' % k) for k in range(calls)]
    out.append(event(b"message-end", b'{"type":"message-end","delta":{"finish_reason":"TOOL_CALL","usage":'
                     b'{"billed_units":{"input_tokens":1,"output_tokens":2}}}}'))
    return b"".join(out)


def both_ways(both, body):
    return agree_whole(both, body, "cohere")


def test_cohere_layout_is_read_by_the_delta_reader(both):
    body = stream(delta(b'{\\"location'), delta(b'\\":\\"Paris'), delta(b'\\"}'))
    counts, result = both_ways(both, body)
    assert counts["cohere-delta"] == 3, counts
    assert result.tool_calls[0].arguments == {"location": "Paris"}


def test_pieces_of_parallel_calls_go_to_their_own_call(both):
    body = stream(delta(b'{\\"a\\":'), delta(b'{\\"b\\":', index=b"1"), delta(b"1}"), delta(b"2}", index=b"1"),
                  calls=2)
    counts, result = both_ways(both, body)
    assert counts["cohere-delta"] == 4, counts
    assert [c.arguments for c in result.tool_calls] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("payload, taken", near_pieces(delta) + [
    (delta(b"x", index=b"7"), True),  # a call never started: read here, reported the general way
    (delta(b"x", index=b"0.0"), False),
    (delta(b"x", index=b'"0"'), False),
    (delta(b"x", tail=b'"}}}}} '), False),
    (delta(b"x", tail=b'"}}}}}}'), False),
    (delta(b"x", tail=b'"}}}}'), False),
    (delta(b"x", tail=b'","name":"g"}}}}}'), False),
    (HEAD + b"0" + MIDDLE.replace(b'":{', b'": {', 1) + b'x"}}}}}', False),  # a space
])
def test_a_near_layout_gives_the_pure_twins_result(both, payload, taken):
    body = stream(delta(b'{\\"a\\":\\"'), payload, delta(b'\\"}'))
    counts, result = both_ways(both, body)
    assert counts["cohere-delta"] == 2 + taken, (payload, counts)
