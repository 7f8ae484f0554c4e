"""Early hand-over: each call is handed over once, when the protocol says it is complete, never before."""

import asyncio
import pickle

import orjson
import pytest

from _formats import CALLS, SENT_ARGUMENTS, VARIANTS, build, format_of, whole_call_bodies
from _streams import chunk, tool_delta

import callstitch
from callstitch._tee import ATee, Tee


def feed_bytewise(acc, body):
    """Feed body one byte at a time; return [(byte position, call)] for every call handed over."""
    handed = []
    for pos in range(len(body)):
        for call in acc.feed(body[pos:pos + 1]):
            handed.append((pos, call))
    return handed


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_call_handed_over_once_with_parsed_arguments(impl, variant):
    body = build(variant, CALLS[:2])
    acc = impl.Accumulator(format=format_of(variant))
    handed = feed_bytewise(acc, body)
    result = acc.finalize()
    assert [c.name for _, c in handed] == [c.name for c in CALLS[:2]]
    assert [c.arguments for _, c in handed] == [c.value for c in CALLS[:2]]
    # The final Result lists the very calls that were handed over.
    assert [id(c) for c in result.tool_calls] == [id(c) for _, c in handed]


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_call_handed_over_before_its_arguments_are_all_there(impl, variant):
    body = build(variant, CALLS[:1])
    acc = impl.Accumulator(format=format_of(variant))
    (position, call), = feed_bytewise(acc, body)
    assert call.arguments == CALLS[0].value
    # Everything the call needed had arrived by then: the bytes so far hold the whole arguments.
    upto = impl.reassemble(body[:position + 1], format=format_of(variant)).tool_calls[0]
    assert upto.arguments == CALLS[0].value


def test_openai_chat_prefix_that_parses_is_not_complete(impl):
    # '{"a": 1}' parses on its own, but more comes: only the finish reason completes the call.
    body = (chunk([tool_delta(0, id="call_1", name="f", arguments='{"a": 1}')])
            + chunk([tool_delta(0, arguments=' ')])
            + chunk([tool_delta(1, id="call_2", name="g", arguments='{}')])
            + chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]) + b"data: [DONE]\n\n")
    acc = impl.Accumulator()
    events = body.split(b"\n\n")
    for event in events[:3]:
        assert acc.feed(event + b"\n\n") == []  # a new index is no completion either
    done = acc.feed(events[3] + b"\n\n")
    assert [(c.id, c.arguments) for c in done] == [("call_1", {"a": 1}), ("call_2", {})]
    assert acc.feed(b"data: [DONE]\n\n") == []  # once only
    assert [c.id for c in acc.finalize().tool_calls] == ["call_1", "call_2"]


def test_openai_chat_choices_complete_separately(impl):
    body = (chunk([tool_delta(0, id="a", name="f", arguments="{}", choice=0)])
            + chunk([tool_delta(0, id="b", name="g", arguments="{}", choice=1)])
            + chunk([{"index": 1, "delta": {}, "finish_reason": "tool_calls"}]))
    acc = impl.Accumulator()
    assert [c.id for c in acc.feed(body)] == ["b"]
    assert [c.id for c in acc.feed(b"data: [DONE]\n\n")] == ["a"]


def test_truncated_call_is_not_handed_over_by_feed(impl):
    body = build("anthropic", CALLS[:1], cut=3)
    acc = impl.Accumulator(format="anthropic")
    assert acc.feed(body) == []
    call, = acc.finalize().tool_calls
    assert call.error is not None and call.error.kind == "truncated"


def test_feed_chunk_returns_completed_calls(impl):
    acc = impl.Accumulator()
    assert acc.feed_chunk({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}}]}) == []
    done = acc.feed_chunk({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert [(c.id, c.arguments) for c in done] == [("c", {"x": 1})]


def test_fragments_after_completion_update_the_final_result(impl):
    acc = impl.Accumulator()
    acc.add(0, id="c", name="f", arguments='{"a": ')
    acc.complete(0, None)
    acc.add(0, arguments='1}')
    call, = acc.finalize().tool_calls
    assert call.arguments == {"a": 1}


@pytest.mark.parametrize("variant", VARIANTS)
def test_tee_yields_the_same_chunks_and_hands_over_each_call(variant, monkeypatch):
    body = build(variant, CALLS)
    chunks = [body[i:i + 29] for i in range(0, len(body), 29)]
    seen = []
    t = callstitch.tee(iter(chunks), format="auto", on_call=seen.append)
    out = list(t)
    assert all(a is b for a, b in zip(out, chunks)) and len(out) == len(chunks)
    assert [c.name for c in seen] == [c.name for c in CALLS]
    assert t.result.tool_calls == seen
    assert t.result.format == format_of(variant)


def test_tee_with_a_consumer_that_stops_early_keeps_what_it_saw():
    body = build("anthropic", CALLS)
    chunks = [body[i:i + 50] for i in range(0, len(body), 50)]
    seen = []
    t = callstitch.tee(chunks, on_call=seen.append)
    it = iter(t)
    for _ in range(len(chunks) // 2):
        next(it)
    it.close()  # the client went away
    names = [c.name for c in t.result.tool_calls]
    assert names and names == [c.name for c in seen]  # what was seen is handed over, once
    assert not t.result.complete


def test_atee_yields_the_same_chunks_and_hands_over_each_call():
    body = build("openai-responses", CALLS)
    chunks = [body[i:i + 64] for i in range(0, len(body), 64)]

    async def source():
        for piece in chunks:
            await asyncio.sleep(0)
            yield piece

    async def main():
        seen = []
        t = callstitch.atee(source(), on_call=seen.append)
        out = [piece async for piece in t]
        return out, seen, t.result

    out, seen, result = asyncio.run(main())
    assert out == chunks
    assert [c.name for c in seen] == [c.name for c in CALLS]
    assert result.tool_calls == seen


def test_tee_uses_the_implementation_accumulator(impl):
    body = build("cohere", CALLS)
    for wrapper in (Tee([body], accumulator=impl.Accumulator(format="cohere")),):
        assert list(wrapper) == [body]
        assert [c.name for c in wrapper.result.tool_calls] == [c.name for c in CALLS]
    assert isinstance(ATee([], accumulator=impl.Accumulator()), ATee)


def test_a_consumer_that_stops_early_closes_the_source():
    closed = []

    def source():
        try:
            yield from (b"data: {}\n\n" for _ in range(100))
        finally:
            closed.append(True)

    it = iter(callstitch.tee(source()))
    next(it)
    it.close()
    assert closed == [True]


def test_tee_takes_limits():
    body = build("anthropic", CALLS[:1])
    t = callstitch.tee([body], limits=callstitch.Limits(call_bytes=5))
    list(t)
    assert [e.kind for e in t.result.errors] == ["limit"]


@pytest.mark.parametrize("fmt", ["ollama", "gemini"])
def test_a_whole_calls_raw_arguments_are_what_came_not_what_the_caller_changed(impl, fmt):
    # Calls that come whole are handed over at once; the caller may change their arguments before
    # asking for the raw text, which stays the compact JSON of what the stream sent.
    body = dict(whole_call_bodies())[fmt]
    acc = impl.Accumulator(format=fmt)
    handed = acc.feed(body)
    assert len(handed) == 3
    sent = orjson.dumps(orjson.loads(SENT_ARGUMENTS)).decode()
    for call in handed:
        call.arguments["s"] = "changed"
    pickled = pickle.dumps(handed)  # raw text not yet asked for travels too, needing no compiled code
    assert b"_accumulator_c" not in pickled
    copies = pickle.loads(pickled)
    assert [c.raw_arguments for c in handed] == [sent] * 3
    assert [c.raw_arguments for c in copies] == [sent] * 3
    assert acc.finalize().tool_calls == handed


def test_chunks_after_result_was_read_pass_through_tee_unfed():
    # .result finishes the stream; the accumulator refuses feed() after finalize(), the tee must not.
    first, second = build("anthropic", CALLS[:1]), build("anthropic", CALLS[1:2])
    t = callstitch.tee([first, second])
    it = iter(t)
    assert next(it) == first
    assert [c.name for c in t.result.tool_calls] == [CALLS[0].name]
    assert list(it) == [second]
    assert [c.name for c in t.result.tool_calls] == [CALLS[0].name]
