"""The whole Anthropic turn (issue 20): to_response() is the SDK's own Message, to_message() its request param.

Every Anthropic capture in tests/fixtures/captures goes through both twins and is checked against
the anthropic SDK's own accumulation of the same events (anthropic.lib.streaming accumulate_event,
what MessageStream.get_final_message() returns), validated with anthropic.types.Message, and its
to_message() with a pydantic TypeAdapter of anthropic.types.MessageParam. The one field where they
differ by design: the SDK sets stop_details to null from every message_delta, also when the stream
never sent it (its model's default is assigned, so it counts as set); to_response() carries only
what the stream sent.
"""

import glob
import json
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _formats as F
from _servers import fake_server
from callstitch import Limits
from callstitch._turns.partial_json import complete_part

anthropic = pytest.importorskip("anthropic")
from anthropic.lib.streaming._messages import accumulate_event  # noqa: E402
from anthropic.types import Message, MessageParam  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
CAPTURES = sorted(glob.glob(os.path.join(HERE, "anthropic__*.sse")))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _body(path):
    return open(path, "rb").read()


def _events(body):
    """Return the data payloads of an SSE body, parsed."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:] for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            out.append(json.loads(b"\n".join(data)))
    return out


def sdk_message(body):
    """Return the SDK's Message for the events of body, as JSON (what get_final_message() holds)."""
    snapshot, bufs = None, {}
    for event in _events(body):
        if event.get("type") not in ("ping", "error"):
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)
    return snapshot.to_dict(mode="json")


def _as_json(d):
    return json.loads(json.dumps(d))


def _without_sdk_stop_details(ours, sdk):
    """Drop the SDK's stop_details where the stream never sent one (the one difference, see the module doc)."""
    if "stop_details" not in ours and sdk.get("stop_details") is None:
        sdk.pop("stop_details", None)
    return sdk


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: os.path.basename(p).split(".")[0])
def test_capture_equals_the_sdks_message(impl, path):
    body = _body(path)
    result = impl.reassemble(body, format="anthropic")
    ours = result.to_response()
    Message.model_validate(ours)
    assert _as_json(ours) == _without_sdk_stop_details(ours, sdk_message(body))
    assert result.to_response() == ours and result.to_response() is not ours  # a new dict each time


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: os.path.basename(p).split(".")[0])
def test_capture_message_is_a_request_param(impl, path):
    body = _body(path)
    result = impl.reassemble(body, format="anthropic")
    message = result.to_message()
    TypeAdapter(MessageParam).validate_python(message)
    assert message == {"role": "assistant", "content": result.to_response()["content"]}


def test_the_captures_cover_thinking_signatures_redaction_citations_and_unknown_blocks():
    kinds, deltas = set(), set()
    for path in CAPTURES:
        for event in _events(_body(path)):
            if event.get("type") == "content_block_start":
                kinds.add(event["content_block"]["type"])
            elif event.get("type") == "content_block_delta":
                deltas.add(event["delta"]["type"])
    assert {"thinking", "redacted_thinking", "text", "tool_use", "server_tool_use", "web_search_tool_result",
            "bash_code_execution_tool_result"} <= kinds
    assert {"signature_delta", "citations_delta", "thinking_delta", "input_json_delta"} <= deltas


def test_blocks_in_order_with_signature_citations_and_redacted_data_byte_for_byte(impl):
    body = _body(os.path.join(HERE, "anthropic__pydantic-ai__thinking-web-search-citations.sse"))
    content = impl.reassemble(body).to_response()["content"]
    starts = [e["content_block"] for e in _events(body) if e["type"] == "content_block_start"]
    assert [b["type"] for b in content] == [s["type"] for s in starts]
    signature = [e["delta"]["signature"] for e in _events(body) if e["type"] == "content_block_delta"
                 and e["delta"]["type"] == "signature_delta"]
    assert content[0]["signature"] == signature[0] and len(signature[0]) > 100
    cited = [b for b in content if b.get("citations")]
    assert len(cited) >= 3 and all(c["type"] == "web_search_result_location" for b in cited for c in b["citations"])
    assert content[2] == starts[2]  # web_search_tool_result: its start object as sent, encrypted_content and all
    redacted = _body(os.path.join(HERE, "anthropic__pydantic-ai__redacted-thinking.sse"))
    blocks = impl.reassemble(redacted).to_message()["content"]
    sent = [e["content_block"]["data"] for e in _events(redacted) if e["type"] == "content_block_start"
            and e["content_block"]["type"] == "redacted_thinking"]
    assert [b["data"] for b in blocks if b["type"] == "redacted_thinking"] == sent and len(sent) == 2


def test_message_fields_merged_container_usage_unknown_fields(impl):
    body = _body(os.path.join(HERE, "anthropic__pydantic-ai__code-execution-container.sse"))
    d = impl.reassemble(body).to_response()
    assert d["container"]["id"] == "container_011CaNRFAbjdPf4rmBarZzqQ"
    assert d["stop_reason"] == "end_turn" and "stop_details" in d
    assert d["usage"]["inference_geo"] == "global"  # message_start's, unknown to callstitch, kept
    assert d["usage"]["output_tokens"] == 304 and d["usage"]["server_tool_use"] == {
        "web_search_requests": 0, "web_fetch_requests": 0}  # message_delta's


@pytest.mark.parametrize("repeats", [1, 70], ids=["one", "past-a-fold"])
def test_a_null_container_in_a_later_message_delta_keeps_the_earlier_one(impl, repeats):
    # Found by review: the deltas were folded with dict.update, so a message_delta after a
    # pause_turn that says "container": null erased the container an earlier one named; the SDK
    # sets it only from a delta whose container is not null.
    start = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
             "model": "claude-sonnet-4-5", "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {"input_tokens": 10, "output_tokens": 1}}}
    named = {"type": "message_delta", "delta": {"stop_reason": "pause_turn", "stop_sequence": None,
             "container": {"id": "container_011", "expires_at": "2026-04-24T11:13:36Z"}},
             "usage": {"output_tokens": 5}}
    null = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None, "container": None},
            "usage": {"output_tokens": 9}}
    events = [start, named] + [null] * repeats + [{"type": "message_stop"}]
    body = b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events)
    got = impl.reassemble(body).to_response()
    assert got["container"] == {"id": "container_011", "expires_at": "2026-04-24T11:13:36Z"}
    assert got["stop_reason"] == "end_turn"
    want = sdk_message(body)
    assert got["container"] == want["container"]


# ---------------------------------------------------------------- any split, both twins


@SETTINGS
@given(k=st.integers(0, len(CAPTURES) - 1), seed=st.integers(0, 2**32 - 1))
def test_any_split_gives_the_same_turn(both, k, seed):
    body = _body(CAPTURES[k])
    whole = [impl.reassemble(body).to_response() for impl in both]
    assert whole[0] == whole[1]
    rng = random.Random(seed)
    for impl in both:
        acc = impl.Accumulator(format="anthropic")
        i = 0
        while i < len(body):
            n = rng.randint(1, 200)
            acc.feed(body[i:i + n])
            i += n
        result = acc.finalize()
        assert result.to_response() == whole[0] and result.to_message() == impl.reassemble(body).to_message()


def test_fed_as_objects_the_same_turn(impl):
    for path in CAPTURES:
        body = _body(path)
        acc = impl.Accumulator(format="anthropic")
        for event in _events(body):
            acc.feed_chunk(event)
        assert acc.finalize().to_response() == impl.reassemble(body).to_response()


def test_the_turn_pickles(impl):
    result = impl.reassemble(_body(os.path.join(HERE, "anthropic__pydantic-ai__thinking-web-search-citations.sse")))
    again = pickle.loads(pickle.dumps(result))
    assert again.to_response() == result.to_response() and again.to_message() == result.to_message()


# ---------------------------------------------------------------- cut streams


def _sse(events):
    """Return an SSE body of events: dicts, or the JSON text of one as it is to be sent."""
    out = []
    for e in events:
        text = e if type(e) is str else json.dumps(e)
        out.append(b"event: x\ndata: %s\n\n" % text.encode())
    return b"".join(out)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: os.path.basename(p).split(".")[0])
def test_cut_after_any_event_never_invents(both, path):
    events = _events(_body(path))
    full = sdk_message(_body(path))
    for k in range(1, len(events) + 1):
        body = _sse(events[:k])
        turns = [impl.reassemble(body, format="anthropic") for impl in both]
        ours = turns[0].to_response()
        assert ours == turns[1].to_response() and turns[0].to_message() == turns[1].to_message()
        Message.model_validate(ours)
        if not any(e["type"] == "message_delta" for e in events[:k]):
            assert ours["stop_reason"] is None
        # The SDK's snapshot at this point is the same (it too keeps what came, closes nothing)
        assert _as_json(ours) == _without_sdk_stop_details(ours, sdk_message(body))
        for got, want in zip(ours["content"], full["content"]):
            for field in ("text", "thinking"):
                if field in want:
                    assert want[field].startswith(got[field])


def test_cut_body_mid_event_and_mid_tool_input(both):
    body = _body(os.path.join(HERE, "anthropic__anthropic-sdk-python__text-then-tool.sse"))
    cut = body[:body.index(b'"partial_json":"is') + 18]  # inside the tool's input, mid-event
    turns = [impl.reassemble(cut, format="anthropic").to_response() for impl in both]
    assert turns[0] == turns[1]
    assert turns[0]["stop_reason"] is None
    assert turns[0]["content"][1]["input"] == {}  # '{"location": "P' : no value came whole
    assert turns[0]["content"][0]["text"] == "I'll check the current weather in Paris for you."


def test_max_tokens_tool_input_is_the_complete_part_as_the_sdk_leaves_it(impl):
    body = _body(os.path.join(HERE, "anthropic__anthropic-sdk-python__truncated-max-tokens.sse"))
    result = impl.reassemble(body)
    tool = result.to_response()["content"][1]
    assert result.to_response()["stop_reason"] == "max_tokens"
    assert result.tool_calls[0].error.kind == "truncated"  # the call says it was cut …
    assert tool["input"] == {"filename": "taxes.txt", "lines_of_text": [  # … the block holds what came whole
        "# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s", "", "## INTRODUCTION", ""]}
    assert "Filing taxes" not in json.dumps(tool)


def test_a_stream_bytes_limit_shortens_the_text_never_adds(both):
    body = _body(os.path.join(HERE, "anthropic__pydantic-ai__thinking-web-search-citations.sse"))
    full = both[0].reassemble(body).to_response()["content"]
    for limit in (0, 10, 200, 400, 900, 2000, 100_000):
        turns = [impl.reassemble(body, limits=Limits(stream_bytes=limit)).to_response() for impl in both]
        assert turns[0] == turns[1]
        # (past the budget no block is listed: the blocks listed are the first ones, as far as it went)
        texts = [[b for b in content if "text" in b or "thinking" in b] for content in (turns[0]["content"], full)]
        assert len(texts[0]) <= len(texts[1]) and (len(texts[0]) == len(texts[1])) is (limit == 100_000)
        for got, want in zip(*texts):
            for field in ("text", "thinking"):
                if field in want:
                    assert want[field].startswith(got[field])


def test_no_message_start_no_invented_id(impl):
    body = _sse([{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                 {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}])
    d = impl.reassemble(body, format="anthropic").to_response()
    assert d == {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "Hi"}],
                 "stop_reason": None, "stop_sequence": None}


def test_choice_other_than_0_is_refused(impl):
    result = impl.reassemble(_body(CAPTURES[0]))
    with pytest.raises(IndexError):
        result.to_message(1)


# ---------------------------------------------------------------- mangled streams: the SDK's merge, both twins

_TEXT = {"type": "text", "text": ""}
_THINK = {"type": "thinking", "thinking": "", "signature": ""}


def test_interleaved_and_misdirected_deltas(both):
    events = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "x",
                                                    "content": [], "stop_reason": None, "stop_sequence": None,
                                                    "usage": {"input_tokens": 1, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": _THINK},
              {"type": "content_block_start", "index": 1, "content_block": _TEXT},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "a"}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "B"}},
              {"type": "content_block_start", "index": 2, "content_block": _TEXT},
              {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "C"}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "D"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "E"}},
              {"type": "content_block_delta", "index": 9, "delta": {"type": "text_delta", "text": "F"}},
              {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "G"}},
              {"type": "content_block_stop", "index": 2},
              {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "H"}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "s"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "S"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {}}},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
               "usage": {"output_tokens": 9}}]
    body = _sse(events)
    turns = [impl.reassemble(body, format="anthropic") for impl in both]
    ours = turns[0].to_response()
    assert ours == turns[1].to_response()
    # Each delta lands in its own block, as the SDK puts it; a text delta aimed at no text block (E at
    # the thinking block, F at index 9: the SDK drops E and fails at F) goes to the open text block.
    sdk_events = [e for e in events if e.get("delta", {}).get("text") not in ("E", "F")]
    sdk_content = sdk_message(_sse(sdk_events))["content"]
    sdk_content[1]["text"] += "EF"
    assert _as_json(ours)["content"] == sdk_content
    assert [b.get("text", b.get("thinking")) for b in ours["content"]] == ["a", "BDEF", "CGH"]
    assert turns[0].text == "BCDEFGH"  # result.text keeps every text delta, as before
    assert [e.detail for e in turns[0].errors] == [
        "text_delta for block 0, a 'thinking' block: its text goes to the open text block (index 1)",
        "text_delta for index 9, no block: its text goes to the open text block (index 1)"]
    assert turns[0].errors == turns[1].errors


def test_text_delta_at_a_redacted_thinking_block_stays_in_the_open_text_block(both):
    # The saved example of the mangled-stream property: a text delta sent to the index of a
    # redacted_thinking block while a text block's text is arriving. Its text is in result.text; the
    # text block used to leave it out, so the block read "what kind of", which never came.
    events = [{"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "x",
                                                    "content": [], "stop_reason": None, "stop_sequence": None,
                                                    "usage": {"input_tokens": 1, "output_tokens": 1}}},
              {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "EqkE"}},
              {"type": "content_block_stop", "index": 0},
              {"type": "content_block_start", "index": 1, "content_block": _TEXT},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "sent what"}},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " appears to be some"}},
              {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " kind of test"}},
              {"type": "content_block_stop", "index": 1},
              {"type": "content_block_start", "index": 2, "content_block": _THINK},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}},
              {"type": "content_block_stop", "index": 2},
              {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
              {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
               "usage": {"output_tokens": 9}}]
    body = _sse(events)
    results = []
    for impl in both:
        for pieces in ([body], [body[i:i + 7] for i in range(0, len(body), 7)]):
            acc = impl.Accumulator(format="anthropic")
            for piece in pieces:
                acc.feed(piece)
            result = acc.finalize()
            assert result.text == "sent what appears to be some kind of test!"
            assert result.reasoning == "hm"
            content = result.to_response()["content"]
            assert content == [events[1]["content_block"], {"type": "text", "text": "sent what appears to be some kind of test"},
                               {**_THINK, "thinking": "hm"}]
            assert result.to_message()["content"] == content
            assert [e.detail for e in result.errors] == [
                "text_delta for block 0, a 'redacted_thinking' block: its text goes to the open text block (index 1)",
                "thinking_delta for block 0, a 'redacted_thinking' block: its text goes to the open thinking block"
                " (index 2)",
                "text_delta for block 0, a 'redacted_thinking' block, while no text block is open: its text is in"
                " result.text only"]
            results.append((content, result.errors))
    assert all(r == results[0] for r in results)


@st.composite
def mangled_anthropic(draw):
    """A capture or a generated stream, its events dropped, repeated, moved, re-indexed or cut."""
    if draw(st.booleans()):
        events = _events(_body(draw(st.sampled_from(CAPTURES))))
    else:
        events = _events(F.anthropic_body(F.CALLS[:draw(st.integers(0, 3))], text=draw(st.text(max_size=30)),
                                          reasoning=draw(st.one_of(st.none(), st.text(max_size=30)))))
    for _ in range(draw(st.integers(0, 6))):
        if not events:
            break
        op = draw(st.sampled_from(["drop", "dup", "move", "index", "cut", "dupkey", "dupkey"]))
        k = draw(st.integers(0, len(events) - 1))
        if op == "drop":
            del events[k]
        elif op == "dup":
            events.insert(draw(st.integers(0, len(events))), events[k])
        elif op == "move":
            events.insert(draw(st.integers(0, len(events) - 1)), events.pop(k))
        elif op == "index" and type(events[k]) is dict and "index" in events[k]:
            events[k] = {**events[k], "index": draw(st.integers(0, 4))}
        elif op == "cut":
            del events[k:]
        elif op == "dupkey" and type(events[k]) is dict and len(events[k]) > 1:
            # the same key twice (JSON readers keep the last): the twins must read it alike
            other = draw(st.sampled_from([e for e in events if type(e) is dict]))
            key = draw(st.sampled_from(sorted(events[k])))
            if key in other and key != "type":
                events[k] = json.dumps(events[k])[:-1] + ", " + json.dumps({key: other[key]})[1:]
    body = _sse(events)
    if draw(st.booleans()) and body:
        body = body[:draw(st.integers(0, len(body)))]
    return body


@SETTINGS
@given(body=mangled_anthropic(), seed=st.integers(0, 2**32 - 1))
def test_twins_agree_on_mangled_streams_split_anywhere(both, body, seed):
    turns = []
    rng = random.Random(seed)
    for impl in both:
        whole = impl.reassemble(body, format="anthropic")
        acc = impl.Accumulator(format="anthropic")
        i = 0
        while i < len(body):
            n = rng.randint(1, 300)
            acc.feed(body[i:i + n])
            i += n
        split = acc.finalize()
        if whole.format != "anthropic":
            continue
        turn = (whole.to_response(), whole.to_message())
        assert (split.to_response(), split.to_message()) == turn
        turns.append(turn)
    if len(turns) == 2:
        assert turns[0] == turns[1]
        result = both[0].reassemble(body, format="anthropic")
        text = result.text or ""
        blocks = [block["text"] for block in turns[0][0]["content"] if block.get("type") == "text"]
        for block in blocks:
            assert _in_order(block, text)  # never text that did not come
        # Every piece of text that came is in one text block, or the result says it is in none.
        unplaced = [e.data["delta"]["text"] for e in result.errors if e.detail.endswith("in result.text only")]
        assert sum(len(t.encode()) for t in blocks + unplaced) == len(text.encode())


def _in_order(part: str, text: str) -> bool:
    """Tell whether part's characters all occur in text, in order (the pieces of a block need not be adjacent)."""
    rest = iter(text)
    return all(ch in rest for ch in part)


# ---------------------------------------------------------------- the complete part of a cut input


@SETTINGS
@given(value=st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
                          | st.floats(allow_nan=False, allow_infinity=False),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=4), max_leaves=12),
       spaces=st.booleans())
def test_complete_part_is_what_the_sdk_parser_leaves(value, spaces):
    from jiter import from_json
    text = json.dumps(value, indent=1 if spaces else None, ensure_ascii=False)
    for k in range(len(text) + 1):
        try:
            want = from_json(text[:k].encode(), partial_mode=True)
        except ValueError:
            want = None
        assert complete_part(text[:k]) == want, text[:k]


# ---------------------------------------------------------------- round trip through the real client


@pytest.fixture()
def server():
    with fake_server() as fake:  # answers POST /v1/messages with a recorded stream, keeping each request
        yield fake


@pytest.mark.parametrize("name", ["anthropic__pydantic-ai__thinking-web-search-citations",
                                  "anthropic__pydantic-ai__redacted-thinking",
                                  "anthropic__anthropic-sdk-python__text-then-tool"])
def test_round_trip_through_the_real_client(impl, server, name):
    server.body = _body(os.path.join(HERE, name + ".sse"))
    client = anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)
    question = {"role": "user", "content": "Weather in Paris?"}
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024, messages=[question]) as stream:
        acc = impl.Accumulator()
        for event in stream:
            acc.feed_chunk(event)
        final = stream.get_final_message()
    result = acc.finalize(strict=True)
    assert _as_json(result.to_response()) == _without_sdk_stop_details(result.to_response(),
                                                                       final.to_dict(mode="json"))
    assistant = result.to_message()
    history = [question, assistant]
    calls = [b for b in assistant["content"] if b["type"] == "tool_use"]
    if calls:
        history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": c["id"], "content": "18°C"}
                                                    for c in calls]})
    client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, messages=history, stream=True).close()
    # … and the same history with the SDK's own Message.to_param(), as its docs suggest
    client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, stream=True,
                           messages=[question, final.to_param(), *history[2:]]).close()
    ours, theirs = (json.loads(body)["messages"] for body in server.received[1:3])
    assert ours[1] == assistant  # received as sent: every block, signature and data byte for byte
    assert ours[1] == theirs[1]  # what the SDK sends for its own Message
    assert json.dumps(ours, ensure_ascii=False) == json.dumps(theirs, ensure_ascii=False)
