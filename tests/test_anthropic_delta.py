"""The compiled twin's byte-by-byte reader of the commonest Anthropic events, a block's next piece.

``_anthropic_delta`` (``_c/fast_anthropic.pxi``) reads
``{"type":"content_block_delta","index":N,"delta":{"type":"input_json_delta","partial_json":…}}``
and its ``text_delta`` twin exactly as Anthropic lays them out, and leaves every other layout to
the extractor. These tests hold it to being taken on that layout and to the pure twin's results
(turn included) on layouts close to it.
"""

import pytest
from conftest import agree_whole
from _streams import near_pieces


HEAD = b'{"type":"content_block_delta","index":'


def event(name, data):
    return b"event: " + name + b"\ndata: " + data + b"\n\n"


def piece(text, index=b"1", kind=b'input_json_delta","partial_json":"', tail=b'"}}'):
    """A content_block_delta payload in Anthropic's layout; text is the raw JSON string content."""
    return HEAD + index + b',"delta":{"type":"' + kind + text + tail


def words(text, index=b"0", tail=b'"}}'):
    return piece(text, index, b'text_delta","text":"', tail)


def stream(texts, pieces):
    out = [event(b"message_start", b'{"type":"message_start","message":{"id":"msg_1","type":"message","role":'
                 b'"assistant","model":"claude","content":[],"stop_reason":null,"stop_sequence":null,'
                 b'"usage":{"input_tokens":5,"output_tokens":1}}}'),
           event(b"content_block_start", b'{"type":"content_block_start","index":0,"content_block":'
                 b'{"type":"text","text":""}}')]
    out += [event(b"content_block_delta", t) for t in texts]
    out += [event(b"content_block_stop", b'{"type":"content_block_stop","index":0}'),
            event(b"content_block_start", b'{"type":"content_block_start","index":1,"content_block":'
                  b'{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}')]
    out += [event(b"content_block_delta", p) for p in pieces]
    out += [event(b"content_block_stop", b'{"type":"content_block_stop","index":1}'),
            event(b"message_delta", b'{"type":"message_delta","delta":{"stop_reason":"tool_use",'
                  b'"stop_sequence":null},"usage":{"output_tokens":9}}'),
            event(b"message_stop", b'{"type":"message_stop"}')]
    return b"".join(out)


def both_ways(both, body):
    return agree_whole(both, body, "anthropic")


def test_anthropics_layout_is_read_by_the_delta_reader(both):
    body = stream([words(b"Let me "), words(b"look.")], [piece(b'{\\"city'), piece(b'\\": \\"Paris\\"}')])
    counts, result = both_ways(both, body)
    assert counts["anthropic-delta"] == 4, counts
    assert result.text == "Let me look."
    assert result.tool_calls[0].arguments == {"city": "Paris"}
    assert result.to_message()["content"][0] == {"type": "text", "text": "Let me look."}


def test_text_for_a_block_not_open_goes_the_general_way(both):
    # Text for block 3 (never started): read here, then left to the adapter, which reports it.
    body = stream([words(b"a"), words(b"b", index=b"3")], [piece(b"{}")])
    counts, result = both_ways(both, body)
    assert counts["anthropic-delta"] == 3, counts


@pytest.mark.parametrize("payload, taken", near_pieces(piece) + [
    (piece(b"x", index=b"1e0"), False),
    (piece(b"x", tail=b'"} }'), False),
    (piece(b"x", tail=b'"}}}'), False),
    (piece(b"x", tail=b'"}'), False),
    (piece(b"x", tail=b'","extra":1}}'), False),
    (piece(b"x", kind=b'input_json_delta","partial_json" :"'), False),
    (piece(b"x", kind=b'signature_delta","signature":"'), False),
    (piece(b"x", kind=b'thinking_delta","thinking":"'), False),
])
def test_a_near_layout_gives_the_pure_twins_result(both, payload, taken):
    body = stream([words(b"hi")], [piece(b'{\\"a\\":\\"'), payload, piece(b'\\"}')])
    counts, result = both_ways(both, body)
    assert counts["anthropic-delta"] == 3 + taken, (payload, counts)
