"""The compiled twin's byte-by-byte reader of the commonest Bedrock event, a block's next piece.

``_bedrock_delta`` (``_c/fast_bedrock.pxi``) reads ``{"contentBlockIndex":N,"delta":{"toolUse":
{"input":…}},"p":…}`` and its ``text`` twin exactly as Bedrock lays them out (``p`` is its
padding, present or not), and leaves every other layout to the extractor. These tests hold it to
being taken on that layout and to the pure twin's results (turn included) on layouts close to it.
"""

import pytest
from _formats import es_event
from _streams import near_pieces
from conftest import agree_whole


PAD = b',"p":"abcdefghijklmnop"}'


def piece(text, index=b"1", tail=b'"}}' + PAD):
    """A contentBlockDelta payload in Bedrock's layout; text is the raw JSON string content."""
    return b'{"contentBlockIndex":' + index + b',"delta":{"toolUse":{"input":"' + text + tail


def words(text, index=b"0", tail=b'"}' + PAD):
    return b'{"contentBlockIndex":' + index + b',"delta":{"text":"' + text + tail


def stream(texts, pieces):
    out = [es_event("messageStart", {"role": "assistant", "p": "abc"})]
    out += [es_event("contentBlockDelta", t) for t in texts]
    out += [es_event("contentBlockStop", {"contentBlockIndex": 0}),
            es_event("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolUse": {
                "toolUseId": "tooluse_1", "name": "f"}}})]
    out += [es_event("contentBlockDelta", p) for p in pieces]
    out += [es_event("contentBlockStop", {"contentBlockIndex": 1}),
            es_event("messageStop", {"stopReason": "tool_use"}),
            es_event("metadata", {"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7},
                                  "metrics": {"latencyMs": 10}})]
    return b"".join(out)


def both_ways(both, body):
    return agree_whole(both, body, "bedrock")


def test_bedrocks_layout_is_read_by_the_delta_reader(both):
    body = stream([words(b"Let me "), words(b"look.", tail=b'"}}')],  # the padding is not always there
                  [piece(b'{\\"city'), piece(b'\\": \\"Paris\\"}', tail=b'"}}}')])
    counts, result = both_ways(both, body)
    assert counts["bedrock-delta"] == 4, counts
    assert result.text == "Let me look."
    assert result.tool_calls[0].arguments == {"city": "Paris"}


@pytest.mark.parametrize("payload, taken", near_pieces(piece) + [
    (piece(b"x", tail=b'"}} ,"p":"a"}'), False),
    (piece(b"x", tail=b'"}},"p":"a"} '), False),
    (piece(b"x", tail=b'"}},"p":"a"}}'), False),
    (piece(b"x", tail=b'"}},"p":7}'), False),
    (piece(b"x", tail=b'"}},"p":"a","q":1}'), False),
    (piece(b"x", tail=b'"}}'), False),  # cut
    (piece(b"x", tail=b'"}}]'), False),  # one byte after the delta, not the closing brace
    (piece(b"x", tail=b'","extra":1}}}'), False),
    (piece(b"x", tail=b'"}},"p":"\xff"}'), False),  # bad UTF-8 in the padding
])
def test_a_near_layout_gives_the_pure_twins_result(both, payload, taken):
    body = stream([words(b"hi")], [piece(b'{\\"a\\":\\"'), payload, piece(b'\\"}')])
    counts, result = both_ways(both, body)
    assert counts["bedrock-delta"] == 3 + taken, (payload, counts)


def test_text_before_any_event_made_the_turn_goes_the_general_way(both):
    body = b"".join(es_event("contentBlockDelta", words(b"early")) for _ in range(2)) + stream([words(b"a")], [])
    counts, result = both_ways(both, body)
    assert result.text.startswith("early")
