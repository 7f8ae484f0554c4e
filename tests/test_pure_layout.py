"""The pure twin's reused chunk layout: a chat chunk laid out as the last one read inline.

After the inline path takes a chunk that continues a call, the pure twin notes its bytes around
the arguments' text (and around OpenAI's random ``obfuscation`` text). A later chunk of exactly
those bytes around other valid string text is taken without parsing all of it
(``_same_layout``). These tests see that path taken on the common stream, and hold the pure twin
to the compiled twin's results, hand-overs and errors on the layouts near it: escapes, split
surrogates, text that looks like the layout's own bytes, a second string smuggled in, bad text,
other tails, other calls, limits.
"""

import pytest
from conftest import agree

from callstitch import Limits
from callstitch import _accumulator_py
from callstitch._exactjson import long_digit_run

ENVELOPE = b'"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp"'
TAIL = b'"}}]},"logprobs":null,"finish_reason":null}],"usage":null'


def piece(arguments: bytes, index: int = 0, obfuscation: bytes | None = b"Ab3", tail: bytes = TAIL) -> bytes:
    """One continuation chunk, its arguments' JSON string text given raw (escapes as sent)."""
    end = tail + (b',"obfuscation":"' + obfuscation + b'"' if obfuscation is not None else b"") + b"}"
    return (b"data: {" + ENVELOPE + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":' + str(index).encode()
            + b',"function":{"arguments":"' + arguments + end + b"\n\n")


def start(index: int = 0, name: bytes = b"get_weather") -> bytes:
    """The first chunk of a call: its id and name, no arguments yet."""
    return (b"data: {" + ENVELOPE + b',"choices":[{"index":0,"delta":{"tool_calls":[{"index":' + str(index).encode()
            + b',"id":"call_' + str(index).encode() + b'","type":"function","function":{"name":"' + name
            + b'","arguments":""}}]},"logprobs":null,"finish_reason":null}]}\n\n')


END = (b"data: {" + ENVELOPE + b',"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}'
       b"\n\ndata: [DONE]\n\n")


def stream(*pieces: bytes) -> bytes:
    return start() + b"".join(pieces) + END


def whole_pure(body: bytes) -> None:
    """Feed body whole to the pure twin (the count below then holds for one reading)."""
    acc = _accumulator_py.Accumulator("openai-chat")
    acc.feed(body)
    acc.finalize()


@pytest.fixture
def taken(monkeypatch):
    """Count the chunks the pure twin takes by their layout."""
    seen = []
    real = _accumulator_py.Accumulator._same_layout

    def counting(self, payload):
        took = real(self, payload)
        seen.append(took)
        return took

    monkeypatch.setattr(_accumulator_py.Accumulator, "_same_layout", counting)
    return seen


@pytest.mark.parametrize("obfuscation", [b"Ab3", None], ids=["obfuscated", "plain"])
def test_the_layout_is_taken_on_the_common_stream(both, taken, obfuscation):
    texts = [b'{\\"city', b'\\": \\"Par', b"is", b", Fr", b"an", b"ce", b'\\"}']
    body = stream(*[piece(t, obfuscation=obfuscation + bytes([65 + k]) if obfuscation else None)
                    for k, t in enumerate(texts)])
    result = agree(both, body, "openai-chat")
    assert result.tool_calls[0].arguments == {"city": "Paris, France"}
    taken.clear()
    whole_pure(body)
    # The first piece goes the general way (the call's first arguments), the second inline (it
    # teaches the layout); every later one takes the layout.
    assert taken == [True] * (len(texts) - 2), taken


def test_each_call_learns_its_own_layout(both, taken):
    pieces = [b'{\\"a\\":', b"1", b"2", b"3", b"4}"]
    body = start(0) + b"".join(piece(t) for t in pieces) + start(1, b"other") \
        + b"".join(piece(t.replace(b"a", b"b"), 1) for t in pieces) + END
    result = agree(both, body, "openai-chat")
    assert [c.arguments for c in result.tool_calls] == [{"a": 1234}, {"b": 1234}]
    taken.clear()
    whole_pure(body)
    assert taken == [True, True, True] * 2, taken


LEARNT = (piece(b'{\\"q'), piece(b'\\": \\"'), piece(b"a"))  # learnt from the second, taken by the third

NEAR = {
    "escapes": piece(b'\\\\ \\/ \\n \\t \\u00e9 \\u20ac'),
    "surrogate pair": piece(b"\\ud83d\\ude00"),
    "pair split across chunks": piece(b"\\ud83d") + piece(b"\\ude00"),
    "lone surrogate": piece(b"\\udc00"),
    "utf-8 text": piece("caf\u00e9 \u2603".encode()),
    "the layout's own bytes as text": piece(b'\\"}}]},\\"logprobs\\":null,\\"obfuscation\\":\\"'),
    "a second string smuggled in": piece(b'x","name":"evil'),
    "an unescaped quote": piece(b'a"b'),
    "a trailing backslash": piece(b"ab\\"),
    "a raw control byte": piece(b"a\x01b"),
    "invalid utf-8": piece(b"a\xffb"),
    "empty text": piece(b""),
    "obfuscation with escapes": piece(b"x", obfuscation=b'\\"q\\\\'),
    "obfuscation empty": piece(b"x", obfuscation=b""),
    "obfuscation smuggling a key": piece(b"x", obfuscation=b'a","usage":{"total_tokens":1},"z":"'),
    "obfuscation missing": piece(b"x", obfuscation=None),
    "a finish reason in the tail": piece(b"x", tail=TAIL.replace(b'"finish_reason":null', b'"finish_reason":"stop"')),
    "usage in the tail": piece(b"x", tail=TAIL.replace(b'"usage":null', b'"usage":{"total_tokens":9}')),
    "another call's index": piece(b"x", index=1),
    "a name after the arguments": piece(b"x", tail=b'","name":"other' + TAIL),
    "not a string": piece(b"x").replace(b'"arguments":"x"', b'"arguments":7'),
    "a long number in the obfuscation": piece(b"x", obfuscation=b"1" * 40),
    "cut short": piece(b"x")[:-8] + b"\n\n",
}


@pytest.mark.parametrize("after", list(NEAR.values()), ids=list(NEAR))
def test_near_layouts_agree_with_the_compiled_twin(both, taken, after):
    body = stream(*LEARNT, after, piece(b'1\\"}'))
    agree(both, body, "openai-chat")
    taken.clear()
    whole_pure(body)
    if not long_digit_run(body):  # (a read with one is read without layouts: exact integers)
        assert taken[0] is True  # the layout was learnt before the near one came


@pytest.mark.parametrize("limits", [Limits(call_bytes=12), Limits(stream_bytes=14)], ids=["call_bytes", "stream_bytes"])
def test_limits_cut_a_call_read_by_its_layout_as_they_cut_any(both, limits):
    body = stream(*LEARNT, piece(b"abcdef"), piece(b"ghijkl"), piece(b"mnopqr"))
    result = agree(both, body, "openai-chat", limits=limits)
    assert result.tool_calls[0].error is not None and result.errors


def test_a_stream_whose_chunks_never_share_a_layout_stops_learning(taken):
    acc = _accumulator_py.Accumulator("openai-chat")
    acc.feed(start() + b"".join(piece(b"x", tail=TAIL.replace(b"null", b"null" + b" " * k)) for k in range(40)) + END)
    assert acc._layout_tries == 0 and acc.finalize().tool_calls[0].raw_arguments == "x" * 40


def test_a_layout_is_learnt_only_where_its_two_texts_are(both, taken):
    # Here the first "arguments" text is the fingerprint's: a layout around it would append the
    # fingerprint to the call (the probe in _learn_layout refuses it).
    def odd(text: bytes) -> bytes:
        return piece(text).replace(b'"system_fingerprint":"fp"', b'"system_fingerprint":{"arguments":"9,"}')

    body = stream(odd(b'{\\"a\\":['), *[odd(b"1,")] * 6, odd(b"1]}"))
    result = agree(both, body, "openai-chat")
    assert result.tool_calls[0].arguments == {"a": [1] * 7}
    taken.clear()
    whole_pure(body)
    assert True not in taken


def test_a_chunk_before_any_layout_is_never_taken_for_one(both):
    # The fuzzer's find: a payload that began with the bytes once used to say "no layout yet".
    for junk in (b"\xff\xff", b"\xff\xffjunk", b"", b"{", b'{"choices":[]}'):
        agree(both, start() + b"data: " + junk + b"\n\n" + piece(b"x") + END, "openai-chat")
