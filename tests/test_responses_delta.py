"""The compiled twin's byte-by-byte reader of the commonest Responses event, a call's next arguments piece.

``_responses_delta`` (``_c/fast_responses.pxi``) reads
``{"type":"response.function_call_arguments.delta","sequence_number":N,"item_id":…,"output_index":N,
"delta":…,"obfuscation":…}`` exactly as OpenAI lays it out, and leaves every other layout to the
extractor. These tests hold it to being taken on that layout and to the pure twin's results on
layouts close to it that it must leave alone or read with care.
"""

import json

import pytest
from conftest import agree_whole


ITEM = "fc_04041325ab8ae30400698c51c5468c8197a395f18875a5339f"
HEAD = b'{"type":"response.function_call_arguments.delta","sequence_number":'


def event(name, obj):
    return b"event: " + name.encode() + b"\ndata: " + obj + b"\n\n"


def stream(*deltas):
    """A Responses stream of one function call whose argument pieces are the given data payloads."""
    item = {"id": ITEM, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_1",
            "name": "get_weather"}
    done = dict(item, status="completed", arguments="")
    out = [event("response.created", b'{"type":"response.created","sequence_number":0,"response":{"id":"resp_1",'
                 b'"object":"response","status":"in_progress","output":[]}}'),
           event("response.output_item.added", json.dumps({"type": "response.output_item.added", "sequence_number": 1,
                                                           "output_index": 0, "item": item}).encode())]
    out += [event("response.function_call_arguments.delta", d) for d in deltas]
    out.append(event("response.output_item.done", json.dumps({"type": "response.output_item.done", "sequence_number": 99,
                                                             "output_index": 0, "item": done}).encode()))
    return b"".join(out)


def delta(text, seq=b"3", item=ITEM.encode(), index=b"0", tail=b',"obfuscation":"nWru1s"}'):
    """A delta payload in OpenAI's layout; text is the raw JSON string content."""
    return HEAD + seq + b',"item_id":"' + item + b'","output_index":' + index + b',"delta":"' + text + b'"' + tail


def both_ways(both, body):
    return agree_whole(both, body, "openai-responses")


def test_openais_layout_is_read_by_the_delta_reader(both):
    body = stream(delta(b'{\\"location'), delta(b'\\":\\"San', seq=b"4"), delta(b' Francisco\\"}', seq=b"5", tail=b"}"))
    counts, result = both_ways(both, body)
    assert counts["responses-delta"] == 3, counts
    assert result.tool_calls[0].arguments == {"location": "San Francisco"}


@pytest.mark.parametrize("payload, taken", [
    (delta(b"caf\\u00e9 \\ud83d\\ude80 na\xc3\xafve"), True),  # escapes and UTF-8 in the piece
    (delta(b"x", seq=b"123456789012345678"), True),  # 18 digits: the most read here
    (delta(b"x", seq=b"1234567890123456789"), False),  # 19: the extractor's
    (delta(b"x", seq=b"03"), False),  # a leading zero: not JSON
    (delta(b"x", seq=b"-3"), False),
    (delta(b"x", seq=b"3.5"), False),
    (delta(b"x", seq=b""), False),
    (delta(b"x", index=b"00"), False),
    (delta(b"x", item=b"fc_\\u0031"), False),  # an escaped item_id
    (delta(b"x", tail=b', "obfuscation":"a"}'), False),  # a space
    (delta(b"x", tail=b',"obfuscation":"a","extra":1}'), False),
    (delta(b"x", tail=b',"obfuscation":"a"} '), False),  # trailing space
    (delta(b"x", tail=b',"obfuscation":"a"}}'), False),
    (delta(b"x", tail=b',"obfuscation":7}'), False),
    (delta(b"x", tail=b',"obfuscation":"a'), False),  # cut
    (delta(b"x", tail=b""), False),
    (delta(b"x", tail=b"]"), False),
    (delta(b"bad \\x escape"), False),
    (delta(b"raw \x01 control"), False),
    (delta(b"bad utf-8 \xff"), False),
    (delta(b"lone \\ud800 surrogate"), False),  # orjson refuses it: so does the string reader
    (delta(b"x", item=b"fc_other"), True),  # an item no call has: read here, applied the general way
])
def test_a_near_layout_gives_the_pure_twins_result(both, payload, taken):
    body = stream(delta(b'{\\"a\\":\\"'), payload, delta(b'\\"}', seq=b"9"))
    counts, result = both_ways(both, body)
    assert counts["responses-delta"] == 2 + taken, (payload, counts)


def test_a_delta_before_its_item_is_announced_goes_the_general_way(both):
    body = event("response.function_call_arguments.delta", delta(b"{}")) + stream(delta(b"{}"))
    counts, result = both_ways(both, body)
    assert counts["responses-delta"] == 2, counts
    assert result.tool_calls[0].arguments == {}
