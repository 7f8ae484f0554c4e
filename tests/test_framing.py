"""SSE framing by the WHATWG rules, through feed() and reassemble(), against both twins."""

import json
import tracemalloc

import pytest

from _streams import DONE, bytewise, chunk, dumps, feed_split, finish, summary, tool_delta
from conftest import halted_run

from callstitch import Limits

ARGS = '{"city": "Paris", "note": "café ☕ 東京 😀"}'
PARSED = {"city": "Paris", "note": "café ☕ 東京 😀"}


def _body(eol=b"\n", done=True):
    """A small but complete stream: a role chunk, one call in three fragments, a finish, [DONE]."""
    events = [
        chunk([{"index": 0, "delta": {"role": "assistant", "content": None}, "finish_reason": None}]),
        chunk([tool_delta(0, id="call_1", name="get_weather", arguments="")]),
        chunk([tool_delta(0, arguments=ARGS[:9])]),
        chunk([tool_delta(0, arguments=ARGS[9:30])]),
        chunk([tool_delta(0, arguments=ARGS[30:])]),
        chunk([finish("tool_calls")]),
    ]
    if done:
        events.append(DONE)
    body = b"".join(events)
    return body.replace(b"\n", eol)


def _check(result):
    assert summary(result) == [("call_1", "get_weather", PARSED)]
    assert result.errors == []
    assert result.complete is True
    assert result.finish_reason == "tool_calls"


# ---------------------------------------------------------------- line ends


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_ends(impl, eol):
    _check(impl.reassemble(_body(eol)))


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_ends_bytewise(impl, eol):
    _check(bytewise(impl, _body(eol)))


def test_mixed_line_ends(impl):
    events = _body().split(b"\n\n")[:-1]
    # (line end, blank line) pairs; CR then LF would be one CRLF, so that pair is not used
    pairs = [(b"\n", b"\r"), (b"\r\n", b"\n"), (b"\r", b"\r\n"), (b"\n", b"\r\n"), (b"\r\n", b"\r"),
             (b"\r", b"\r"), (b"\n", b"\n")]
    body = b"".join(e + b"".join(pairs[i % len(pairs)]) for i, e in enumerate(events))
    _check(impl.reassemble(body))
    _check(bytewise(impl, body))


def test_lf_then_cr_is_two_line_ends(impl):
    # "\n\r" is two line ends (LF, then CR): a blank line, so the event is dispatched before the next.
    a = chunk([tool_delta(0, id="a", name="f", arguments='{"x": 1}')]).rstrip(b"\n")
    b = chunk([tool_delta(1, id="b", name="g", arguments='{"y": 2}')]).rstrip(b"\n")
    result = impl.reassemble(a + b"\n\r" + b + b"\r\n\r\n")
    assert summary(result) == [("a", "f", {"x": 1}), ("b", "g", {"y": 2})]
    assert result.errors == []


def test_crlf_counts_once(impl):
    # A CRLF is one line end, not a line end then a blank line: both data lines join into one event.
    body = b'data: {"choices": [\r\ndata: ' + dumps(tool_delta(0, id="a", name="f", arguments="{}")) + b"]}\r\n\r\n"
    result = impl.reassemble(body)
    assert summary(result) == [("a", "f", {})]
    assert result.errors == []


# ---------------------------------------------------------------- fields


def test_data_without_space(impl):
    body = _body().replace(b"data: ", b"data:")
    _check(impl.reassemble(body))


def test_only_one_leading_space_is_stripped(impl):
    # "data:  x" keeps the second space as part of the value; JSON allows leading whitespace.
    body = _body().replace(b"data: ", b"data:  ")
    _check(impl.reassemble(body))


def test_multiline_data_is_joined_with_lf(impl):
    payload = dumps({"choices": [tool_delta(0, id="call_1", name="get_weather", arguments=ARGS)]})
    cut = payload.index(b'"function"')
    body = b"data: " + payload[:cut] + b"\ndata: " + payload[cut:] + b"\n\n" + DONE
    result = impl.reassemble(body)
    assert summary(result) == [("call_1", "get_weather", PARSED)]
    assert result.errors == []


def test_multiline_data_inside_a_string_keeps_the_lf(impl):
    # The "\n" joining the data lines is part of the payload: inside a JSON string it is a raw
    # control character, so the chunk is malformed (and reported, not dropped silently).
    payload = dumps({"choices": [tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')]})
    cut = payload.index(b"call_1") + 3
    body = b"data: " + payload[:cut] + b"\ndata: " + payload[cut:] + b"\n\n"
    result = impl.reassemble(body)
    assert result.tool_calls == []
    assert [e.kind for e in result.errors] == ["malformed chunk"]


def test_comment_lines_are_ignored(impl):
    body = b": OPENROUTER PROCESSING\n\n" + _body().replace(b"data: ", b": keep-alive\ndata: ") + b":bye\n"
    _check(impl.reassemble(body))


def test_event_id_retry_fields(impl):
    body = b"retry: 3000\n\n" + _body().replace(b"data: ", b"id: 17\nevent: message\nretry: 1000\ndata: ")
    _check(impl.reassemble(body))


def test_unknown_fields_and_field_without_colon(impl):
    body = _body().replace(b"data: ", b"foo: bar\nid\nretry\nx-thing:1\ndata: ")
    _check(impl.reassemble(body))


def test_field_name_data_without_colon_is_an_empty_data_line(impl):
    # "data" alone is the field "data" with an empty value: it adds an empty line to the data buffer.
    payload = dumps({"choices": [tool_delta(0, id="a", name="f", arguments='{"k": 1}')]})
    body = b"data: " + payload + b"\ndata\n\n"
    result = impl.reassemble(body)
    assert summary(result) == [("a", "f", {"k": 1})]  # '{...}\n' is still valid JSON
    assert result.errors == []


def test_data_field_name_is_case_sensitive(impl):
    body = b"Data: " + dumps({"choices": [tool_delta(0, id="a", name="f", arguments="{}")]}) + b"\n\n"
    result = impl.reassemble(body)
    assert result.tool_calls == []
    # "Data" is no SSE field: the line is ignored, and a body of nothing else is no stream
    assert [(e.kind, e.offset) for e in result.errors] == [("not a stream", 0)]
    assert "the body is not an event stream, near 'Data: " in result.errors[0].detail


def test_event_with_no_data_is_not_dispatched(impl):
    body = b"event: error\n\nid: 5\n\nevent: ping\nretry: 10\n\n" + _body()
    _check(impl.reassemble(body))


def test_event_name_does_not_leak_into_the_next_event(impl):
    # An event with no data resets the event name; the next data belongs to an unnamed event.
    body = b"event: error\n\n" + chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    result = impl.reassemble(body)
    assert summary(result) == [("a", "f", {})]
    assert result.errors == []


def test_event_with_empty_data_line_is_not_dispatched(impl):
    # WHATWG: a data buffer that is empty after removing the trailing LF is not dispatched.
    body = b"data:\n\ndata: \n\n" + _body()
    _check(impl.reassemble(body))


def test_last_event_needs_no_blank_line(impl):
    body = _body(done=False).rstrip(b"\n")
    result = impl.reassemble(body)
    assert summary(result) == [("call_1", "get_weather", PARSED)]
    assert result.errors == []
    assert result.finish_reason == "tool_calls"


def test_last_event_with_one_line_end(impl):
    body = _body(done=False)[:-1]
    result = impl.reassemble(body)
    assert summary(result) == [("call_1", "get_weather", PARSED)]
    assert result.finish_reason == "tool_calls"


def test_last_event_without_blank_line_bytewise(impl):
    body = chunk([tool_delta(0, id="a", name="f", arguments='{"q": "z"}')]).rstrip(b"\n")
    assert summary(bytewise(impl, body)) == [("a", "f", {"q": "z"})]


def test_done_sets_complete(impl):
    body = chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    assert impl.reassemble(body).complete is False
    assert impl.reassemble(body + DONE).complete is True
    assert impl.reassemble(body + b"data:[DONE]").complete is True
    assert impl.reassemble(body + DONE).errors == []


def test_done_alone(impl):
    result = impl.reassemble(DONE)
    assert result.complete is True
    assert result.tool_calls == []
    assert result.errors == []


def test_empty_body(impl):
    # An empty body is no stream either: it must not read as a clean empty Result.
    result = impl.reassemble(b"")
    assert result.tool_calls == []
    assert [(e.kind, e.offset, e.detail) for e in result.errors] == [
        ("not a stream", 0, "no event of any known format was recognised: the body is empty")]
    assert result.complete is False


# ---------------------------------------------------------------- BOM


def test_bom_at_start(impl):
    _check(impl.reassemble(b"\xef\xbb\xbf" + _body()))


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_bom_split_across_feeds(impl, cut):
    body = b"\xef\xbb\xbf" + _body()
    acc = impl.Accumulator()
    acc.feed(body[:cut])
    acc.feed(body[cut:])
    _check(acc.finalize())


def test_bom_fed_byte_by_byte(impl):
    _check(bytewise(impl, b"\xef\xbb\xbf" + _body(b"\r\n")))


def test_only_one_bom_is_removed(impl):
    # A second BOM is part of the first line: the field name becomes "\ufeffdata", which is ignored.
    body = b"\xef\xbb\xbf\xef\xbb\xbf" + chunk([tool_delta(0, id="a", name="f", arguments="{}")]) + _body()
    _check(impl.reassemble(body))


def test_bom_lookalike_is_not_removed(impl):
    # b"\xef\xbb" then something else: not a BOM, those bytes stay as (ignored) field text.
    body = b"\xef\xbbx: y\n" + _body()
    _check(impl.reassemble(body))
    acc = impl.Accumulator()
    acc.feed(b"\xef")
    acc.feed(b"\xbb")
    acc.feed(b"x: y\n" + _body())
    _check(acc.finalize())


# ---------------------------------------------------------------- splits and input types


def _reference(impl, body):
    return impl.reassemble(body)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_two_way_split(impl, eol):
    body = b"\xef\xbb\xbf" + _body(eol) + b": trailing comment"
    expected = _reference(impl, body)
    _check(expected)
    for k in range(len(body) + 1):
        acc = impl.Accumulator()
        acc.feed(body[:k])
        acc.feed(body[k:])
        assert acc.finalize() == expected, k


def test_every_two_way_split_mixed_with_errors(impl):
    # Malformed chunks report offsets: those too must not depend on where the bytes were cut.
    body = (b"data: {broken\r\n\r\n" + _body(b"\r\n") + b"data: [1,\n\ndata: {\"error\": {\"message\": \"x\"}}\r\n\r\n")
    expected = impl.reassemble(body)
    assert [e.kind for e in expected.errors] == ["malformed chunk", "malformed chunk", "in-band error"]
    for k in range(len(body) + 1):
        acc = impl.Accumulator()
        acc.feed(body[:k])
        acc.feed(body[k:])
        assert acc.finalize() == expected, k


def test_one_byte_pieces(impl):
    for eol in (b"\n", b"\r\n", b"\r"):
        body = _body(eol)
        assert bytewise(impl, body) == impl.reassemble(body)


def test_split_mid_utf8_character(impl):
    body = _body()
    k = body.index("😀".encode()) + 2
    result = feed_split(impl, body, [k, k + 1])
    _check(result)
    k = body.index("東".encode()) + 1
    _check(feed_split(impl, body, [k]))


def test_split_mid_crlf(impl):
    body = _body(b"\r\n")
    cuts = [i + 1 for i in range(len(body)) if body[i:i + 2] == b"\r\n"]
    _check(feed_split(impl, body, cuts))


def test_empty_feeds_change_nothing(impl):
    body = b"\xef\xbb\xbf" + _body(b"\r\n")
    acc = impl.Accumulator()
    for piece in (b"", body[:1], b"", body[1:5], b"", b"", body[5:50], b"", body[50:], b""):
        acc.feed(piece)
    _check(acc.finalize())


@pytest.mark.parametrize("kind", ["str", "bytearray", "memoryview"])
def test_input_types(impl, kind):
    body = _body(b"\r\n")
    convert = {"str": lambda b: b.decode("utf-8"), "bytearray": bytearray, "memoryview": memoryview}[kind]
    _check(impl.reassemble(convert(body)))
    acc = impl.Accumulator()
    if kind == "str":
        # str pieces hold whole characters; cut mid-line and between CR and LF
        text = body.decode("utf-8")
        for k in range(0, len(text), 5):
            acc.feed(text[k:k + 5])
    else:
        for k in range(0, len(body), 7):
            acc.feed(convert(body[k:k + 7]))
    _check(acc.finalize())


def test_memoryview_of_a_slice(impl):
    body = b"xxxx" + _body() + b"yyyy"
    view = memoryview(body)[4:-4]
    result = impl.reassemble(view)
    _check(result)


# ---------------------------------------------------------------- offsets


def test_offset_of_malformed_chunk_lf(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    body = good + b"data: {not json}\n\n" + good
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(good))]


def test_offset_is_that_of_the_first_data_line(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    prefix = good + b": comment\nevent: message\nid: 3\n"
    body = prefix + b"data: {not\ndata: json}\n\n" + good
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(prefix))]


def test_offset_with_crlf(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments="{}")]).replace(b"\n", b"\r\n")
    body = good + b": ka\r\n\r\n" + b"data: nope\r\n\r\n" + good + b"data:{\"choices\": [}\r\n\r\n"
    result = impl.reassemble(body)
    first = len(good) + len(b": ka\r\n\r\n")
    second = first + len(b"data: nope\r\n\r\n") + len(good)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", first), ("malformed chunk", second)]
    assert bytewise(impl, body) == result


def test_offset_with_cr_only(impl):
    body = b"data: [\r\r" + b"\r" + b"data: ]\r\r"
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", 0), ("malformed chunk", 10)]


def test_offset_with_bom(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    body = b"\xef\xbb\xbf" + b"data: oops\n\n" + good + b"data: {{\n\n"
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [
        ("malformed chunk", 3), ("malformed chunk", 3 + len(b"data: oops\n\n") + len(good))]
    # "oops" is no JSON and cuts nothing; "{{" is JSON cut short and may have held a piece: "a" is cut.
    assert summary(result) == [("a", "f", None)] and result.tool_calls[0].raw_arguments == "{}"
    for k in range(len(body) + 1):
        assert feed_split(impl, body, [k]) == result, k


def test_offset_of_last_event_without_blank_line(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments="{}")])
    body = good + b"\r\n" + b"data: {"
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(good) + 2)]


def test_offset_counts_utf8_bytes_not_characters(impl):
    good = chunk([tool_delta(0, id="a", name="f", arguments=json.dumps({"t": "東京😀"}, ensure_ascii=False))])
    body = good + b"data: bad\n\n"
    assert len(good) != len(good.decode())
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", len(good))]
    assert result.tool_calls[0].arguments == {"t": "東京😀"}


@pytest.mark.parametrize("step", [1, 7, 64, 4096, None])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_halting_at_the_terminator(impl, step, eol):
    # Batch reprocessing lets each accumulator stop right after its response's [DONE]; the rest
    # of the read is the next response's. Both twins must stop at the same byte, however fed.
    def response(k):
        body = (b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": f"c{k}", "function": {"name": "f", "arguments": '{"k": %d}' % k}}]}}]}).encode()
            + eol + eol + b": keep" + eol + eol + b"data: [DONE]" + eol + eol)
        return body
    blob = b"".join(response(k) for k in range(3))
    pieces = [blob] if step is None else [blob[i:i + step] for i in range(0, len(blob), step)]
    results, acc = [], None
    for piece in pieces:
        pos = 0
        while pos < len(piece):
            if acc is None:
                if not piece[pos:].strip():
                    break  # the LF of a CRLF after [DONE]: no response starts here (as the batch splitter skips it)
                acc = impl.Accumulator()
                acc.halt_at_end()
            acc.feed(piece[pos:])
            used = acc.halted()
            if used < 0:
                break
            results.append(acc.finalize())
            acc, pos = None, pos + used
    if acc is not None:
        results.append(acc.finalize())
    calls = [[(c.id, c.arguments) for c in r.tool_calls] for r in results if r.tool_calls or r.errors]
    assert calls == [[(f"c{k}", {"k": k})] for k in range(3)]


def _big_response(k, eol, size):
    """Return one response whose call's arguments are about size bytes, in many small fragments."""
    text = json.dumps({"k": k, "pad": "x" * size})
    events = [{"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": f"c{k}", "function": {"name": "f", "arguments": ""}}]}}]}]
    events += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": text[i:i + 5]}}]}}]}
               for i in range(0, len(text), 5)]
    return b"".join(b"data: " + json.dumps(e).encode() + eol + eol for e in events) + b"data: [DONE]" + eol + eol


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_halting_in_a_read_larger_than_the_framing_window(impl, eol):
    # The pure twin frames a huge read a window (64 KiB) at a time; where it halts must still be
    # counted from the start of the whole read, for a terminator in any window.
    blob = b"".join(_big_response(k, eol, 20_000 + 9_000 * k) for k in range(4))
    assert len(blob) > 4 * 65536
    results, pos = [], 0
    while pos < len(blob) and blob[pos:].strip():
        acc = impl.Accumulator()
        acc.halt_at_end()
        acc.feed(blob[pos:])
        used = acc.halted()
        if used < 0 and eol == b"\r" and len(results) == 3:
            used = len(blob) - pos  # the last ended at a CR that ends the blob: an LF may follow, it waits
        assert used > 0
        results.append(acc.finalize())
        pos += used
    assert [[(c.id, c.arguments["k"]) for c in r.tool_calls] for r in results] == [[(f"c{k}", k)] for k in range(4)]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_a_read_larger_than_the_framing_window_reads_as_small_reads(impl, eol):
    # Window boundaries fall mid-event, mid-line end and mid-character; the result must not show them.
    body = b"\xef\xbb\xbf" + b": ping" + eol + eol + _big_response(0, eol, 70_000).replace(b'"x', '"東'.encode())
    whole = impl.Accumulator()
    whole.feed(body)
    small = impl.Accumulator()
    for i in range(0, len(body), 4093):
        small.feed(body[i:i + 4093])
    a, b = whole.finalize(), small.finalize()
    assert len(body) > 3 * 65536 and not a.errors and a.complete
    assert [(c.id, c.raw_arguments) for c in a.tool_calls] == [(c.id, c.raw_arguments) for c in b.tool_calls]
    assert a.tool_calls[0].arguments["k"] == 0


RESPONSE = (chunk([tool_delta(0, id="c1", name="f", arguments='{"a": 1}')]) + chunk([finish("tool_calls")]) + DONE)
AFTER_DONE = {
    # what may follow a response's terminator in a file of back-to-back responses
    "a retry field": b"retry: 5\n\n",
    "a comment": b": ping\n\n",
    "a comment, then the next response": b": ping\n" + RESPONSE,
    "an id field, then the next response": b"id: 7\n\n" + RESPONSE,
    "the next response's event name": b"event: completion\n" + RESPONSE,
    "a stray line, then the next response": b"<html>\n" + RESPONSE,
    "the next response at once": RESPONSE,
}


@pytest.mark.parametrize("step", [None, 1, 5, 61], ids=["whole", "bytewise", "5", "61"])
@pytest.mark.parametrize("after", list(AFTER_DONE.values()), ids=list(AFTER_DONE))
def test_a_halt_stops_right_after_the_terminator_whatever_line_follows(both, after, step):
    # No line after [DONE] is read into the stream, even where it shares its framing with the
    # terminator's event (the pure twin frames such a stretch line by line).
    data = RESPONSE + after
    alone = both[0].reassemble(RESPONSE, format="openai-chat")
    seen = []
    size = step or len(data)
    for impl in both:
        used, result = halted_run(impl, [data[k:k + size] for k in range(0, len(data), size)])
        seen.append((used, result, [str(e) for e in result.errors]))
    assert seen[0] == seen[1]
    assert seen[0][:2] == (len(RESPONSE), alone)


@pytest.mark.parametrize("eol", [b"\r\n", b"\r"], ids=["CRLF", "CR"])
def test_a_halt_after_a_cr_that_ends_a_read_waits_for_its_lf(both, eol):
    # A read may end between the CR and the LF of the terminator's blank line: that LF is still this
    # stream's, so halted() says -1 until the next read shows whether one comes (then 1 or 0).
    first, second = RESPONSE.replace(b"\n", eol), RESPONSE.replace(b"\n", eol)
    data = first + second
    alone = both[0].reassemble(first, format="openai-chat")
    for impl in both:
        for cut in range(len(first) - 8, len(first) + 3):
            used, result = halted_run(impl, [data[:cut], data[cut:]])
            assert (used, result) == (len(first), alone), (impl.name, cut)
        acc = impl.Accumulator(format="openai-chat")
        acc.halt_at_end()
        acc.feed(first[:-1] if eol == b"\r\n" else first)
        assert acc.halted() == -1  # (ended at a CR: the next byte may be its LF)
        acc.feed(b"")
        assert acc.halted() == -1
        acc.feed(data[len(first) - (eol == b"\r\n"):])
        assert acc.halted() == (eol == b"\r\n")


@pytest.mark.parametrize("eol", [b"\r\n", b"\r"], ids=["CRLF", "CR"])
def test_a_halt_near_the_end_of_a_framing_window(both, eol):
    # The pure twin frames a huge read a window (64 KiB) at a time. A stream whose terminator ends
    # at every byte around a window's end, CR or CRLF line ends: the halt is just past its blank
    # line. (A window stretched over a CR once ended on the next CR, and the rest of the read was
    # taken for the stream's: whole responses lost in a batch job.)
    tail = RESPONSE.replace(b"\n", eol)
    for end in range(65536 - 4, 65536 + 4):
        first = b": " + b"p" * (end - len(tail) - 2 - len(eol)) + eol + tail
        assert len(first) == end
        alone = both[0].reassemble(tail, format="openai-chat")
        for impl in both:
            used, result = halted_run(impl, [first + tail])
            assert (used, result) == (len(first), alone), (impl.name, end)


@pytest.mark.parametrize("start", [b"", b"\xef\xbb\xbf", b"\n", b": hi\n\n"], ids=["plain", "BOM", "LF", "comment"])
def test_a_halt_counts_only_the_last_reads_bytes_when_auto_held_the_first(both, start):
    # Under format="auto", a first read too short to tell the framing is held, and put in front of
    # the next read; the compiled twin's halted() counted those held bytes as the last read's.
    first = start + RESPONSE
    for impl in both:
        for lead in range(1, 8):
            used, _ = halted_run(impl, [first[:lead], first[lead:] + RESPONSE], fmt="auto")
            assert used == len(first), (impl.name, lead)


@pytest.mark.parametrize("more", [RESPONSE, b": ping\n\n" + RESPONSE, b"event: x\ndata: {}\n\n"])
def test_halt_at_end_asked_after_the_terminator_halts_at_once(both, more):
    alone = both[0].reassemble(RESPONSE, format="openai-chat")
    for impl in both:
        acc = impl.Accumulator(format="openai-chat")
        acc.feed(RESPONSE)
        assert acc.halted() == -1
        acc.halt_at_end()
        assert acc.halted() == 0  # none of what is fed from now on is this stream's
        assert acc.feed(more) == [] and acc.halted() == 0
        assert acc.finalize() == alone


@pytest.mark.parametrize("blank, first", [(b"\n", b""), (b"\r\n", b""), (b" ", b""), (b"\n", b"\xef\xbb\xbf")],
                         ids=["lf", "crlf", "space", "bom-lf"])
def test_blanks_before_the_first_event_are_not_held_past_the_event_limit(both, blank, first):
    # Found by review: while the first bytes did not tell the framing, every read was added to
    # the head and the whole head looked at again: 16 MiB of blank lines were held whatever
    # Limits.event_bytes said, and 1,000 one-byte reads after them took 35 s (a gateway's event
    # loop stalled). Past event_bytes of blanks the framing is the format's own; bounded and linear.
    limits = Limits(event_bytes=64 << 10)
    for impl in both:
        acc = impl.Accumulator(format="auto", limits=limits)
        acc.feed(first)  # (a BOM, then only blanks: the review saw a BOM repeated end the blanks at once)
        tracemalloc.start()
        for _ in range(16):
            acc.feed(blank * ((1 << 18) // len(blank)))
        held = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert held < 2 << 20, (impl.name, held)  # (each read is 256 KiB, copied a few times: 4 MiB were held before)
        for _ in range(1000):
            acc.feed(b"\n")
        acc.feed(_body())
        result = acc.finalize()
        assert [c.name for c in result.tool_calls] == ["get_weather"], (impl.name, result.errors)


@pytest.mark.parametrize("blanks", [100, 70_000])
def test_a_long_blank_start_frames_alike_whatever_the_reads(both, blanks):
    # JSON lines after blanks: read as JSON lines below Limits.event_bytes of blanks, as the
    # format's own framing past it, wherever the reads fall.
    lines = b"".join(line[6:] + b"\n" for line in _body().split(b"\n") if line.startswith(b"data: {"))
    body = b"\n" * blanks + lines
    limits = Limits(event_bytes=64 << 10)
    results = []
    for impl in both:
        for size in (len(body), 777, 1):
            acc = impl.Accumulator(format="auto", limits=limits)
            for i in range(0, len(body), size):
                acc.feed(body[i:i + size])
            results.append(acc.finalize())
    assert all(r == results[0] for r in results)
    assert bool(results[0].tool_calls) is (blanks < 64 << 10)
