"""Hostile and broken input: no crash, no hang, a clear error where the input is bad, twins equal."""

import gc
import json
import os
import random
import threading

import pytest

from _formats import CALLS, build, whole_call_bodies
from _streams import chunk, tool_delta

from callstitch import Limits
from callstitch._formats import registry

FORMATS = list(registry.names())


def both_agree(both, body, fmt="openai-chat", limits=None):
    """Reassemble body with both twins, whole and in pieces; they must agree; return the result."""
    results = []
    for impl in both:
        whole = impl.reassemble(body, format=fmt, limits=limits)
        acc = impl.Accumulator(format=fmt, limits=limits)
        rng = random.Random(len(body))
        pos = 0
        while pos < len(body):
            step = rng.randint(1, 4096)
            acc.feed(body[pos:pos + step])
            pos += step
        assert acc.finalize() == whole
        results.append(whole)
    assert results[0] == results[1]
    assert [str(e) for e in results[0].errors] == [str(e) for e in results[1].errors]
    return results[0]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("fmt", FORMATS)
def test_random_bytes(both, fmt, seed):
    rng = random.Random(seed)
    body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 3000)))
    both_agree(both, body, fmt)


def test_invalid_and_truncated_utf8(both):
    good = chunk([tool_delta(0, id="c", name="f", arguments='{"a": "é"}')])
    bad = good.replace("é".encode(), b"\xc3")  # a lone lead byte
    result = both_agree(both, bad + good.replace(b'"c"', b'"d"') + b"\xff\xfe\n\n")
    assert any(e.kind == "malformed chunk" for e in result.errors)
    assert [c.id for c in result.tool_calls] == ["d"]


def test_nul_bytes(both):
    body = chunk([tool_delta(0, id="c", name="f", arguments='{"a": "\\u0000"}')]) + b"data: \x00\x00\n\n"
    result = both_agree(both, body)
    assert result.tool_calls[0].arguments == {"a": "\x00"}
    assert result.errors[0].kind == "malformed chunk"


def test_nesting_100000_deep(both):
    deep = "[" * 100_000 + "]" * 100_000
    body = (b"data: " + deep.encode() + b"\n\n"
            + chunk([tool_delta(0, id="c", name="f", arguments=deep)]) + b"data: [DONE]\n\n")
    result = both_agree(both, body)
    assert result.errors[0].kind == "malformed chunk"
    call, = result.tool_calls
    # First seen after an event that could not be read, its arguments do not parse (too deep for
    # the parser, like that event): it reads as cut, saying its start may have been in that event.
    assert call.arguments is None and call.error.kind == "truncated" and "could not be read" in call.error.detail


def test_numbers_with_10000_digits(both):
    digits = "9" * 10_000
    body = (b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": null}], "n": ' + digits.encode()
            + b"}\n\n" + chunk([tool_delta(0, id="c", name="f", arguments='{"n": ' + digits + '}')]))
    result = both_agree(both, body)
    assert [c.id for c in result.tool_calls] == ["c"]


@pytest.mark.parametrize("index", [2**63, -2**63, 2**63 - 1, 2**64, -1, 10**30])
def test_extreme_indices(both, index):
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":' + str(index).encode()
            + b',"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}\n\n')
    result = both_agree(both, body)
    # An integer is read as one whatever its size (orjson alone read 2**64 and 10**30 as floats).
    assert [(c.id, c.index) for c in result.tool_calls] == [("c", 0)]


def test_a_megabyte_id_and_name(both):
    big = "i" * (1 << 20)
    result = both_agree(both, chunk([tool_delta(0, id=big, name=big, arguments="{}")]))
    assert result.tool_calls[0].id == big and result.tool_calls[0].name == big


def test_a_megabyte_of_unicode_escapes(both):
    text = "\\u00e9\\ud83d\\ude00" * 50_000
    body = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f",' \
           b'"arguments":"{\\"t\\": \\"' + text.encode() + b'\\"}"}}]}}]}\n\n'
    result = both_agree(both, body)
    assert result.tool_calls[0].arguments == {"t": "é😀" * 50_000}


@pytest.mark.parametrize("escape", [b"\\x41", b"\\u12", b"\\uZZZZ", b"\\", b"\\ud800", b"\\udc00x"])
def test_invalid_escapes(both, escape):
    body = (b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f",'
            b'"arguments":"' + escape + b'"}}]}}]}\n\n')
    both_agree(both, body)


def test_a_10_megabyte_data_line(both):
    body = b"data: " + b'{"x":"' + b"a" * 10_000_000 + b'"}\n\n' + chunk([tool_delta(0, id="c", name="f",
                                                                                     arguments="{}")])
    result = both_agree(both, body)
    assert [c.id for c in result.tool_calls] == ["c"]


def test_a_body_that_is_one_never_ending_comment(both):
    body = b": " + b"keep-alive " * 200_000
    result = both_agree(both, body, limits=Limits(event_bytes=100_000))
    assert [e.kind for e in result.errors] == ["limit"]


def test_mixed_formats_in_one_stream(both):
    body = build("anthropic", CALLS[:1]) + build("openai-responses", CALLS[1:2]) + build("cohere", CALLS[2:])
    for fmt in ("auto", "anthropic", "openai-chat"):
        result = both_agree(both, body, fmt)
        if fmt in ("auto", "anthropic"):
            assert result.tool_calls[0].name == CALLS[0].name


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic", "bedrock", "ollama"])
def test_mangled_captures(both, fmt):
    variant = {"openai-chat": "anthropic", "bedrock": "bedrock-eventstream"}.get(fmt, fmt)
    body = build(variant, CALLS) if fmt != "openai-chat" else b"".join(
        chunk([tool_delta(i, id=c.id, name=c.name, arguments=c.arguments)]) for i, c in enumerate(CALLS))
    rng = random.Random(fmt)
    for _ in range(40):
        mangled = bytearray(body)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(mangled))
            action = rng.random()
            if action < 0.3:
                mangled[pos] ^= 1 << rng.randrange(8)
            elif action < 0.6:
                del mangled[pos:pos + rng.randint(1, 30)]
            else:
                mangled[pos:pos] = mangled[rng.randrange(len(mangled)):][:rng.randint(1, 30)]
        both_agree(both, bytes(mangled), fmt)


def test_accumulators_in_many_threads(impl):
    bodies = [build(v, CALLS) for v in ("anthropic", "openai-responses", "cohere", "gemini", "ollama")]
    expected = [impl.reassemble(b, format="auto") for b in bodies]
    failures = []

    def worker(k):
        for i in range(60):
            j = (k + i) % len(bodies)
            acc = impl.Accumulator(format="auto")
            body = bodies[j]
            for pos in range(0, len(body), 97):
                acc.feed(body[pos:pos + 97])
            if acc.finalize() != expected[j]:
                failures.append((k, i))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_no_leak_over_200000_streams(impl):
    body = (chunk([tool_delta(0, id="c", name="f", arguments='{"a": ')]) + chunk([tool_delta(0, arguments="1}")])
            + b"data: [DONE]\n\n")
    reassemble = impl.reassemble
    for _ in range(20_000):
        reassemble(body)
    gc.collect()
    before = _rss()
    for _ in range(200_000 if impl.name == "c" else 60_000):
        reassemble(body)
    gc.collect()
    assert _rss() - before < 8 << 20


def test_no_leak_on_calls_that_come_whole(impl):
    # Their arguments kept as sent, re-encoded when asked for or when a limit needs the count.
    runs = [(fmt, body, limits) for fmt, body in whole_call_bodies()
            for limits in (None, Limits(stream_bytes=len(body)), Limits(stream_bytes=200))]
    for rounds in (3_000, 30_000):
        if rounds == 30_000:
            gc.collect()
            before = _rss()
        for k in range(rounds):
            fmt, body, limits = runs[k % len(runs)]
            result = impl.reassemble(body, format=fmt, limits=limits)
            if k % 2:
                [call.raw_arguments for call in result.tool_calls]
    gc.collect()
    assert _rss() - before < 2 << 20


def test_no_leak_on_error_paths(impl):
    # Each error path: malformed chunk, in-band error, unexpected shape, bad arguments, limits,
    # event-stream CRC, lone surrogates, an over-long line.
    bodies = [
        b"data: {not json\n\n",
        b'data: {"error": {"message": "boom", "type": "server_error"}}\n\n',
        b'data: {"choices": [{"index": 0.5}]}\n\n',
        chunk([tool_delta(0, id="c", name="f", arguments='{"a": tru')]),
        chunk([tool_delta(i, id=f"c{i}", name="f", arguments="{}") for i in range(3)][0:1]) * 3,
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"arguments":"\\ud83d"}}]}}]}\n\n',
        b"data: " + b"x" * 5000 + b"\n\n",
    ]
    stream = build("bedrock-eventstream", CALLS[:1])
    bodies.append(stream[:20] + bytes([stream[20] ^ 1]) + stream[21:])
    limits = Limits(call_bytes=4, calls=1, event_bytes=1000)
    for rounds in (2_000, 20_000):
        if rounds == 20_000:
            gc.collect()
            before = _rss()
        for _ in range(rounds // len(bodies)):
            for body in bodies:
                impl.reassemble(body, format="auto", limits=limits)
    gc.collect()
    assert _rss() - before < 4 << 20


@pytest.mark.parametrize("fmt", FORMATS)
def test_unhashable_values_where_names_are_expected(both, fmt):
    # Found by the fuzzer: an event whose "type" (or item id, or block index) is an object must be
    # reported or ignored, never raise (set and dict lookups cannot take a JSON object).
    events = [
        b'data: {"type":{"torguments":"","status":"in_progress"}}\n\n',
        b'data: {"type":"response.function_call_arguments.delta","item_id":{"a":1},"delta":"x"}\n\n',
        b'data: {"type":"response.function_call_arguments.done","item_id":[1],"arguments":"{}"}\n\n',
        b'data: {"type":"response.output_item.added","item":{"type":"function_call","id":{"x":1},"name":"f"}}\n\n',
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":{"i":0}}\n\n',
        b'data: {"type":"content_block_start","index":0,"content_block":{"type":{"t":1}}}\n\n',
        b'event: contentBlockStop\ndata: {"contentBlockIndex":[0]}\n\n',
        b'data: {"type":["tool-call-start"]}\n\n',
    ]
    for event in events:
        both_agree(both, event, fmt)
    both_agree(both, b"".join(events), fmt)


def test_fuzzer_finding_53282d09(both):
    body = bytes.fromhex(
        "610a223a22746f53616e227d7d7d7d7d0a0a6576656e01000000000000ad63616c6c2d64656c74610a646174613a207b"
        "2274797065223a7b22746f7267756d656e7473223a22222c22737461747573223a22696e5f655f73746f53616e227d7d"
        "202020202020202020207d0a0a")
    for fmt in FORMATS:
        both_agree(both, body, fmt)


def test_deferred_arguments_made_by_hand_raise_rather_than_crash():
    # The compiled twin keeps a whole call's arguments as sent in an object of its own; one made
    # outside the accumulator has no text, and asking it for the compact JSON must not crash.
    from callstitch._accumulator_c import _SentArguments

    with pytest.raises(TypeError, match="no arguments text"):
        _SentArguments().compact()


def _chunk_objects(body: bytes) -> list:
    """Return the JSON objects of an SSE body's data lines, or of an NDJSON body's lines."""
    lines = [line[5:].strip() if line.startswith(b"data:") else line.strip() for line in body.splitlines()]
    return [json.loads(line) for line in lines if line.startswith(b"{")]


NOT_CHUNKS = [None, 7, 1.5, True, False]  # (a list may be chunks wrapped: it cuts, test_unreadable_cuts.py)


@pytest.mark.parametrize("variant", ["openai-chat", "openai-responses", "anthropic", "gemini", "cohere", "ollama"])
def test_json_values_that_are_no_chunk_are_reported_and_the_chunks_around_them_go_on(both, variant):
    # A logged list of chunks may hold a null or a number: before, feed_chunk raised TypeError on
    # them, and the batch layer and Spark then dropped every call of the body.
    if variant == "openai-chat":
        body = (chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": ')]) + chunk([tool_delta(0, arguments="1}")])
                + chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    else:
        body = build(variant, CALLS)
    objects = _chunk_objects(body)
    results = []
    for impl in both:
        acc = impl.Accumulator(format=variant)
        for n, obj in enumerate(objects):  # one after each of the first chunks
            acc.feed_chunk(obj)
            if n < len(NOT_CHUNKS):
                acc.feed_chunk(NOT_CHUNKS[n])
        result = acc.finalize()
        assert result.tool_calls == impl.reassemble(body, format=variant).tool_calls and result.tool_calls
        assert [e.kind for e in result.errors] == ["unexpected shape"] * min(len(objects), len(NOT_CHUNKS))
        results.append(result)
    assert results[0] == results[1]
    assert [str(e) for e in results[0].errors] == [str(e) for e in results[1].errors]


# A str fed holds text decoded from the wire; a lone surrogate in it (decoded with
# errors="surrogatepass", or cut out of UTF-16) is no character a UTF-8 stream can hold.
_CALL = 'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"%s","type":"function","function":{"name":"f","arguments":"%s"}}]}}]}\n\n'
_MORE = 'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"%s"}}]}}]}\n\n'
_END = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'
LONE_SURROGATE_TEXTS = {
    "in-content": 'data: {"choices":[{"index":0,"delta":{"content":"\ud800"}}]}\n\n' + _CALL % ("call_1", "{}") + _END,
    "in-arguments": _CALL % ("call_1", '{\\"a\\": \\"') + _MORE % "\udc80x" + _MORE % '\\"}' + _END,
    "in-an-id": _CALL % ("call_\udfff", "{}") + _CALL % ("call_2", "{}") + _END,
    "in-a-comment": ": keep \ud800 alive\n\n" + _CALL % ("call_1", "{}") + _END,
    "in-an-event-name": "event: x\ud800\ndata: {}\n\n" + _CALL % ("call_1", "{}") + _END,
}


@pytest.mark.parametrize("name", list(LONE_SURROGATE_TEXTS))
def test_a_str_with_a_lone_surrogate_is_reported_where_it_is_and_the_stream_goes_on(both, name):
    # Before: feed() raised UnicodeEncodeError (and tee() with it, losing the chunk and the stream).
    text = LONE_SURROGATE_TEXTS[name]
    rng = random.Random(name)
    seen = []
    for pieces in [[text]] + [[text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
                              for cuts in (sorted(rng.sample(range(1, len(text)), 9)) for _ in range(3))]:
        for impl in both:
            acc = impl.Accumulator(format="auto")
            for piece in pieces:
                assert acc.feed(piece) is not None
            result = acc.finalize()
            seen.append(([(c.id, c.raw_arguments, c.error and c.error.kind) for c in result.tool_calls],
                         [(e.kind, e.offset) for e in result.errors]))
    assert all(s == seen[0] for s in seen)  # both twins, whatever the cuts
    calls, errors = seen[0]
    if name not in ("in-a-comment", "in-an-event-name"):  # (the text is skipped there, as any comment or stray event)
        bad = text.index("data: " if name != "in-arguments" else _MORE % "\udc80x")
        assert ("malformed chunk", len(text[:bad].encode())) in errors
    assert any(call_id in ("call_1", "call_2") for call_id, _, _ in calls)  # the calls after it are there


def test_tee_passes_a_str_chunk_with_a_lone_surrogate_on_and_hands_the_calls_over():
    from callstitch import tee
    chunks = ['data: {"choices":[{"index":0,"delta":{"content":"\ud800"}}]}\n\n', _CALL % ("call_1", "{}"), _END]
    seen = []
    tapped = tee(iter(chunks), on_call=seen.append)
    assert list(tapped) == chunks
    assert [c.id for c in seen] == ["call_1"]
    assert [e.kind for e in tapped.result.errors] == ["malformed chunk"]


# An input sent as a JSON object (a tool_use block's start, a Converse toolUse, Gemini's args) that
# holds an integer beyond 64 bits is read exactly, by the standard library's parser, which keeps a
# lone surrogate escape as a lone surrogate in the str: orjson refuses to write that back.
_BIG = "1" * 30
WHOLE_INPUTS_WITH_A_LONE_SURROGATE = {
    "anthropic-start": ('event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":'
                        '{"type":"tool_use","id":"t1","name":"f","input":{"a":"\\ud800","n":%s}}}\n\n'
                        'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' % _BIG),
    "anthropic-not-streamed": ('{"type":"message","content":[{"type":"tool_use","id":"t1","name":"f",'
                               '"input":{"a":"\\ud800","n":%s}}],"stop_reason":"tool_use"}' % _BIG),
    "converse-not-streamed": ('{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1",'
                              '"name":"f","input":{"a":"\\ud800x\\udfff","\\udc00k":%s}}}]}},"stopReason":"tool_use"}' % _BIG),
    "gemini-args": ('data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":'
                    '{"a":"\\ud800","n":%s}}}]},"finishReason":"STOP"}]}\n\n' % _BIG),
}


@pytest.mark.parametrize("name", list(WHOLE_INPUTS_WITH_A_LONE_SURROGATE))
def test_a_whole_input_with_a_big_integer_and_a_lone_surrogate_keeps_its_text(both, name):
    # Before: feed() raised TypeError ("str is not valid UTF-8") from orjson.dumps of the input.
    body = WHOLE_INPUTS_WITH_A_LONE_SURROGATE[name].encode()
    seen = []
    for impl in both:
        result = impl.reassemble(body, format="auto")
        seen.append([(c.id, c.raw_arguments, c.error and c.error.kind) for c in result.tool_calls])
    assert seen[0] == seen[1]
    (_, raw, _), = seen[0]
    assert "\\ud800" in raw and _BIG in raw  # the text as sent, the escape and the integer exact
