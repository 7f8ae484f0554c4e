"""Limits.event_bytes cuts, never holes (issue 18): both twins, every format and framing.

An event dropped for its size may have held a piece of any call still open, or of a text. So on
any drop every call still open is cut (it reads as truncated, naming Limits.event_bytes, its raw
text as kept before the drop) and keeps nothing more, and every text keeps nothing more. A call
handed over whole before the drop stays whole (unless a piece of it still comes: the last section);
a call that starts after it is whole. Before the fix the
open call took the pieces after the drop and came out holed: wrong arguments, or none, with no
error of its own.

Each stream here is cut into its events and one event over the limit is put in at every place
between them in turn; what the result must be is worked out from the same stream without it:
fed up to that place, which calls were handed over, which were open, and the texts so far.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _cutcheck import is_cut
from _formats import CALLS, build, es_event
from _streams import DONE, chunk, dumps, finish, text_delta, tool_delta

from callstitch import Limits

TEXT = "Hello there: a text sent in pieces."


def _chat_body() -> bytes:
    out = [chunk([text_delta(content=TEXT[k:k + 9])]) for k in range(0, len(TEXT), 9)]
    for i, call in enumerate(CALLS[:2]):
        out.append(chunk([tool_delta(i, id=call.id, name=call.name, arguments="")]))
        out += [chunk([tool_delta(i, arguments=piece)]) for piece in call.pieces()]
    out += [chunk([finish("tool_calls")]), DONE]
    return b"".join(out)


def _sse_events(body: bytes) -> list[bytes]:
    events = re.findall(rb".*?(?:\r\n\r\n|\n\n)", body, re.S)
    assert b"".join(events) == body
    return events


def _lines(body: bytes) -> list[bytes]:
    return body.splitlines(keepends=True)


def _messages(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(body):
        total = int.from_bytes(body[pos:pos + 4], "big")
        out.append(body[pos:pos + total])
        pos += total
    return out


def _array_elements(sse_body: bytes) -> list[bytes]:
    return [e.strip()[len(b"data: "):] for e in _sse_events(sse_body)]


def _join_array(elements: list[bytes]) -> bytes:
    return b"[" + b"\r\n,\r\n".join(elements) + b"\r\n]"


def _capture(name: str) -> bytes:
    return (Path(__file__).parent / "fixtures" / "captures" / name).read_bytes()


def _pad(n: int) -> bytes:
    return dumps({"pad": "x" * n})


# name -> (format, the stream's events, how events are joined into a body, the event over the limit)
def _variants() -> dict:
    sse_line = lambda n: b"data: " + _pad(n) + b"\n\n"  # noqa: E731
    # An event whose data lines each fit but together do not: dropped as an event, not as a line.
    sse_lines = lambda n: b"data: " + _pad(n // 2) + b"\ndata: " + _pad(n // 2) + b"\n\n"  # noqa: E731
    streamed = dict(text=TEXT, reasoning="Let me think this over.")
    whole = dict(text=TEXT, reasoning="Let me think this over.")
    return {
        "openai-chat": ("openai-chat", _sse_events(_chat_body()), b"".join, sse_line),
        "openai-chat-lines": ("openai-chat", _sse_events(_chat_body()), b"".join, sse_lines),
        "openai-responses": ("openai-responses", _sse_events(build("openai-responses", CALLS[:2], **streamed)),
                             b"".join, sse_line),
        "anthropic": ("anthropic", _sse_events(build("anthropic", CALLS[:2], **streamed)), b"".join, sse_lines),
        "gemini-sse": ("gemini", _sse_events(build("gemini", CALLS[:2], **whole)), b"".join, sse_line),
        "gemini-array": ("gemini", _array_elements(build("gemini", CALLS[:2], **whole)), _join_array, _pad),
        "bedrock-eventstream": ("bedrock", _messages(build("bedrock-eventstream", CALLS[:2], **streamed)), b"".join,
                                lambda n: es_event("contentBlockDelta", {"pad": "x" * n})),
        "bedrock-sse": ("bedrock", _sse_events(build("bedrock-sse", CALLS[:2], **streamed)), b"".join, sse_line),
        "cohere": ("cohere", _sse_events(build("cohere", CALLS[:2], **streamed)), b"".join, sse_line),
        "ollama": ("ollama", _lines(build("ollama", CALLS[:2], **whole)), b"".join, lambda n: _pad(n) + b"\n"),
        # Vertex AI's partialArgs: a call's arguments assembled by the Gemini adapter, not in a slot.
        "vertex-partial-args": ("gemini", _sse_events(_capture("vertex__vercel-ai__partialargs-sequential-two-calls.sse")),
                                b"".join, sse_line),
    }


VARIANTS = _variants()


def _case(variant: str, at: int):
    """Return (format, limits, body with the big event put in before event at, the big event, the events)."""
    fmt, events, join, big = VARIANTS[variant]
    limit = max(map(len, events)) + 16
    dropped = big(limit + 64)
    body = join(events[:at] + [dropped] + events[at:])
    return fmt, Limits(event_bytes=limit), body, dropped, events


def _texts(result) -> dict:
    return {c.index: (c.text, c.reasoning, c.refusal) for c in result.choices
            if (c.text, c.reasoning, c.refusal) != (None, None, None)}


def _check(impl, variant: str, at: int, limited) -> None:
    _fmt, _limits, body, dropped, _events = _case(variant, at)
    limit_errors = [e for e in limited.errors if e.kind == "limit"]
    assert [e.offset for e in limit_errors] == [body.index(dropped)]
    assert "Limits.event_bytes" in limit_errors[0].detail
    cut_where_open(impl, variant, body, dropped, limited, _cut_by_the_drop)


def _cut_by_the_drop(call) -> bool:
    return is_cut(call) and "Limits.event_bytes" in call.error.detail


def cut_where_open(impl, variant: str, body: bytes, lost: bytes, got, cut) -> None:
    """Check got, variant's stream with the event lost put in: calls open there cut (cut(call)), the rest whole.

    What was open is the same stream fed up to the lost event: the calls not handed over by then.
    Texts keep what came before it, nothing after (cut, never holed). Shared with test_unreadable_cuts.
    """
    fmt, events, join, _big = VARIANTS[variant]
    full = impl.reassemble(join(events), format=fmt)
    before = impl.Accumulator(format=fmt, limits=None)
    prefix = body[:body.index(lost)]  # every event before it is whole there (an array element too)
    handed = {(c.choice, c.index) for c in before.feed(prefix)}
    so_far = before.finalize()
    open_then = {(c.choice, c.index): c for c in so_far.tool_calls if (c.choice, c.index) not in handed}
    assert len(got.tool_calls) == len(full.tool_calls)
    for call, want in zip(got.tool_calls, full.tool_calls):
        key = (want.choice, want.index)
        assert (call.choice, call.index, call.id, call.name) == (*key, want.id, want.name)
        if key in open_then:
            assert cut(call), call
            # As kept up to the event; partialArgs are assembled by the adapter, not kept: none is.
            kept = "" if variant == "vertex-partial-args" else open_then[key].raw_arguments
            assert call.raw_arguments == kept
        else:  # handed over before the event, or started after it: whole
            assert call == want and call.arguments == want.arguments and call.error is None
    assert _texts(got) == _texts(so_far)


def _places(variant: str) -> list[int]:
    return list(range(len(VARIANTS[variant][1]) + 1))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_dropped_event_cuts_what_is_open_wherever_it_comes(impl, variant):
    for at in _places(variant):
        fmt, limits, body, _dropped, _events = _case(variant, at)
        _check(impl, variant, at, impl.reassemble(body, format=fmt, limits=limits))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_dropped_event_cuts_the_same_fed_byte_by_byte(impl, variant):
    at = len(VARIANTS[variant][1]) // 2  # mid-stream: a call or a text is open there
    fmt, limits, body, _dropped, _events = _case(variant, at)
    whole = impl.reassemble(body, format=fmt, limits=limits)
    acc = impl.Accumulator(format=fmt, limits=limits)
    for k in range(len(body)):
        acc.feed(body[k:k + 1])
    assert acc.finalize() == whole
    _check(impl, variant, at, whole)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_twins_agree_on_every_drop(both, variant):
    c, py = both
    for at in _places(variant):
        fmt, limits, body, _dropped, _events = _case(variant, at)
        assert c.reassemble(body, format=fmt, limits=limits) == py.reassemble(body, format=fmt, limits=limits)


def test_something_is_cut_somewhere_in_every_variant(impl):
    # The tests above would pass on a stream where no drop cuts anything: each variant has places where one does.
    for variant in VARIANTS:
        cuts = 0
        for at in _places(variant):
            fmt, limits, body, _dropped, events = _case(variant, at)
            result = impl.reassemble(body, format=fmt, limits=limits)
            cuts += sum(map(is_cut, result.tool_calls)) + (_texts(result) != _texts(impl.reassemble(
                VARIANTS[variant][2](events), format=fmt)))
        assert cuts, variant



@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_dropped_event_cuts_the_same_split_in_two_anywhere_in_it(impl, variant):
    # Every drop path of the framers: the event whole in one read, its start held from an earlier
    # read, the read ending inside it or right at its line end.
    at = len(VARIANTS[variant][1]) // 2
    fmt, limits, body, dropped, _events = _case(variant, at)
    whole = impl.reassemble(body, format=fmt, limits=limits)
    start = body.index(dropped)
    for k in range(max(0, start - 3), min(len(body), start + len(dropped) + 3)):
        acc = impl.Accumulator(format=fmt, limits=limits)
        acc.feed(body[:k])
        acc.feed(body[k:])
        assert acc.finalize() == whole, k


# ---------------------------------------------------------------- calls a drop reaches after they were handed over

_BIG = b"data: " + _pad(600) + b"\n\n"  # over the limit of 400 below; every other event fits
_LIMIT = Limits(event_bytes=400)


def _start(index: int = 0, arguments: str = "") -> bytes:
    return chunk([tool_delta(index, id="call_A", name="lookup", arguments=arguments)])


def _piece(arguments: str, index: int = 0, **resent) -> bytes:
    return chunk([tool_delta(index, arguments=arguments, **resent)])


def test_a_whole_call_that_gets_a_piece_after_the_drop_is_cut_there(impl):
    # Closed by finish_reason and whole, then a piece of it comes after all: the dropped event may
    # have held pieces of it too, so it is cut, keeping what it had before the drop.
    body = _start(arguments='{"a": 1}') + chunk([finish("tool_calls")]) + _BIG + _piece(" ") + DONE
    (call,) = impl.reassemble(body, limits=_LIMIT).tool_calls
    assert impl.reassemble(body).tool_calls[0].arguments == {"a": 1}
    assert is_cut(call) and call.raw_arguments == '{"a": 1}' and (call.id, call.name) == ("call_A", "lookup")


def test_a_whole_call_with_nothing_after_the_drop_stays_whole(impl):
    body = _start(arguments='{"a": 1}') + chunk([finish("tool_calls")]) + _BIG + _piece("") + DONE
    (call,) = impl.reassemble(body, limits=_LIMIT).tool_calls
    assert call == impl.reassemble(body).tool_calls[0] and call.arguments == {"a": 1}


def test_a_whole_call_without_its_name_is_cut_at_a_later_drop(impl):
    # Found by fuzz_accumulator: a call built whole before its name came (a call may get it late)
    # stayed whole at a drop, with no name; unlimited, the name came in the event the limit dropped.
    big_named = chunk([tool_delta(0, id="call_A", name="lookup", arguments="")], padding="x" * 600)
    body = _piece('{"a": 1}') + chunk([finish("tool_calls")]) + big_named + DONE
    unlimited, = impl.reassemble(body).tool_calls
    assert (unlimited.id, unlimited.name, unlimited.arguments) == ("call_A", "lookup", {"a": 1})
    (call,) = impl.reassemble(body, limits=Limits(event_bytes=300)).tool_calls
    assert is_cut(call) and call.raw_arguments == '{"a": 1}' and "Limits.event_bytes" in call.error.detail


def test_a_call_handed_over_broken_is_cut_at_a_later_drop(impl):
    # [DONE] hands over every call, this one unfinished; the pieces after it (a mangled stream)
    # finish it unlimited. Under the limit the dropped event held some of them: cut, not "truncated
    # at the end of data" as if the stream had simply stopped.
    body = _start(arguments='{"a": ') + DONE + _BIG + _piece("1}")
    assert impl.reassemble(body).tool_calls[0].arguments == {"a": 1}
    (call,) = impl.reassemble(body, limits=_LIMIT).tool_calls
    assert is_cut(call) and call.raw_arguments == '{"a": ' and "Limits.event_bytes" in call.error.detail


def test_a_late_call_whose_arguments_do_not_parse_says_its_start_may_be_lost(impl):
    # Every piece resends the id and name, so a call whose first pieces were in the dropped event
    # looks as if it started after it: what came does not parse, and it reads as cut, kept as sent.
    resent = dict(id="call_A", name="lookup")
    body = _BIG + _piece('"q": "tea"}', **resent) + chunk([finish("tool_calls")]) + DONE
    (call,) = impl.reassemble(body, limits=_LIMIT).tool_calls
    assert is_cut(call) and call.raw_arguments == '"q": "tea"}' and (call.id, call.name) == ("call_A", "lookup")
    assert "first seen after an event went past Limits.event_bytes" in call.error.detail
    # Unlimited the same pieces are a malformed call, said so plainly: only a drop makes it late.
    assert impl.reassemble(body).tool_calls[0].error.kind == "trailing data"


def test_a_late_call_whose_arguments_parse_is_whole(impl):
    resent = dict(id="call_A", name="lookup")
    body = _BIG + _piece('{"q": ', **resent) + _piece('"tea"}', **resent) + chunk([finish("tool_calls")]) + DONE
    (call,) = impl.reassemble(body, limits=_LIMIT).tool_calls
    assert call.arguments == {"q": "tea"} and call.error is None and "resent-id" in call.quirks


def test_a_late_call_that_gets_no_arguments_says_they_may_be_lost(impl):
    # Found by the fuzzer (kept as seed mixed__callstitch-fuzz__named-after-its-pieces-dropped): a call
    # whose pieces came before its name, all in the dropped event, looked whole with no arguments ({}).
    pieces = _piece('{"q": "tea"}')  # no id, no name yet: a call may get them after its first pieces
    named = chunk([tool_delta(0, id="call_A", name="lookup", arguments="")])
    body = pieces + named + chunk([finish("tool_calls")]) + DONE
    assert impl.reassemble(body).tool_calls[0].arguments == {"q": "tea"}
    dropped = pieces.replace(b'"index":0,', b'"index":0,"pad":"' + b"x" * 400 + b'",', 1) + named + chunk(
        [finish("tool_calls")]) + DONE
    assert impl.reassemble(dropped).tool_calls[0].arguments == {"q": "tea"}
    (call,) = impl.reassemble(dropped, limits=_LIMIT).tool_calls
    assert is_cut(call) and call.raw_arguments == "" and (call.id, call.name) == ("call_A", "lookup")
    assert "first seen after an event went past Limits.event_bytes" in call.error.detail
    # A call with no arguments and no drop before it is whole, as ever.
    (call,) = impl.reassemble(named + chunk([finish("tool_calls")]) + DONE, limits=_LIMIT).tool_calls
    assert call.arguments == {} and call.error is None


def test_a_late_custom_call_that_gets_no_input_says_it_may_be_lost(impl):
    # A custom (free-form) tool call's input is never parsed: one first seen after a drop with no input
    # at all reads as cut too, as a late function call with no arguments does (make_call, _custom_call).
    item = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_C", "name": "shell", "input": ""}
    def event(kind, **fields):
        return b"event: " + kind.encode() + b"\ndata: " + dumps({"type": kind, **fields}) + b"\n\n"
    body = (event("response.output_item.added", output_index=0, item=item)
            + event("response.output_item.done", output_index=0, item=dict(item, status="completed"))
            + event("response.completed", response={"id": "r", "object": "response", "status": "completed"}))
    (call,) = impl.reassemble(body, format="openai-responses").tool_calls
    assert call.kind == "custom" and call.arguments == "" and call.error is None
    (call,) = impl.reassemble(_BIG + body, format="openai-responses", limits=_LIMIT).tool_calls
    assert is_cut(call) and call.raw_arguments == "" and call.name == "shell"
    assert "none came after it" in call.error.detail


def test_a_responses_call_first_seen_by_its_done_item_after_a_drop_keeps_nothing(both):
    # Found by the fuzzer: the call's added item was the event dropped, and with it the call_id and
    # the argument pieces the stream gave it; the done item after the drop said otherwise (a
    # call_id of its own, whole arguments). Taken whole, the call was not the stream's call.
    def event(kind, **fields):
        return b"event: " + kind.encode() + b"\ndata: " + dumps({"type": kind, **fields}) + b"\n\n"
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_A", "name": "lookup", "arguments": ""}
    added = event("response.output_item.added", output_index=0, item=dict(item, pad="x" * 400))
    rest = (event("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"q": ')
            + event("response.output_item.done", output_index=0,
                    item=dict(item, call_id="call_B", arguments='{"q": "coffee"}', status="completed"))
            + event("response.completed", response={"id": "r", "object": "response", "status": "completed"}))
    for impl in both:
        (free,) = impl.reassemble(added + rest, format="openai-responses").tool_calls
        assert free.id == "call_A" and free.raw_arguments == '{"q": '
        (call,) = impl.reassemble(added + rest, format="openai-responses", limits=_LIMIT).tool_calls
        assert is_cut(call) and call.raw_arguments == "" and call.name == "lookup"
        # With no drop before it, a call first seen by its done item is whole, as ever.
        (call,) = impl.reassemble(rest, format="openai-responses", limits=_LIMIT).tool_calls
        assert (call.id, call.name, call.arguments, call.error) == ("call_B", "lookup", {"q": "coffee"}, None)
