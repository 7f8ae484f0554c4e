"""Hostile input against the whole-turn layer: what a mangled, cut or oversized stream does to the turn.

Each test here pins a defect found by mutating real captures and generated streams event by event
(cut at every boundary, events dropped, repeated, swapped, fields given every JSON type) and by
feeding streams of many small pieces: the turn must not crash, must not change when read twice,
and must cost no more than the stream's length to keep.
"""

from __future__ import annotations

import copy
import pickle
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionAssistantMessageParam, ChatCompletionChunk
from pydantic import TypeAdapter

import _formats as F
from _streams import DONE, chunk_obj, choice_obj, dumps

MESSAGE_PARAM = TypeAdapter(ChatCompletionAssistantMessageParam)


def sse(*chunks: dict, done: bool = True) -> bytes:
    return b"".join(b"data: " + dumps(c) + b"\n\n" for c in chunks) + (DONE if done else b"")


def sdk_message(chunks: list[dict], index: int = 0) -> dict:
    """Return choice index's message from openai-python's own accumulation of the chunks."""
    state = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    final = state.get_final_completion().model_dump(mode="json", exclude_unset=True)
    return final["choices"][index]["message"]


def python_lines(run) -> int:
    """Return how many Python lines run() executes: a measure of work that no machine's speed changes."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        count += 1
        return trace

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


# ---------------------------------------------------------------- openai-chat: merged delta fields


def _list_field_body(n: int) -> bytes:
    return sse(*[chunk_obj([choice_obj({"content": "x", "annotations_raw": [1, 2, 3, 4]})]) for _ in range(n)])


def test_a_list_field_extended_by_many_deltas_costs_its_length_not_its_square(impl):
    # The SDK's merge scans the whole list held before extending it with each delta's piece: n
    # deltas cost n squared, 335 KB of chunks took 8 s to feed. Counted in Python lines, not timed.
    small = python_lines(lambda: impl.reassemble(_list_field_body(200), format="openai-chat"))
    large = python_lines(lambda: impl.reassemble(_list_field_body(800), format="openai-chat"))
    assert large < 6 * small  # four times the deltas: about four times the work (sixteen before the fix)


def test_a_string_field_joined_over_many_deltas_is_held_as_pieces_until_read(impl):
    # Joining on every delta copies all that came before: 9 MB of a field the SDK joins (Groq's
    # "channel") took 15 s to feed. The record keeps the pieces; the turn joins them once, when read.
    from callstitch._turns.openai_chat import Growing

    n = 2000
    body = sse(*[chunk_obj([choice_obj({"content": "x", "channel": "analysis"})]) for _ in range(n)])
    result = impl.reassemble(body, format="openai-chat")
    held = result._turn.choices[0].message["channel"]
    assert type(held) is Growing and len(held.pieces) == n
    assert result.to_response()["choices"][0]["message"]["channel"] == "analysis" * n
    assert pickle.loads(pickle.dumps(result)).to_response() == result.to_response()


def test_merged_delta_fields_equal_the_sdks_merge(impl):
    # Strings joined, lists extended, nested in an object too: as openai-python merges them.
    chunks = [
        chunk_obj([choice_obj({"role": "assistant", "content": "a", "channel": "ana", "tags": [1, "t"],
                               "audio": {"id": "au_1", "data": "AA", "transcript": "he", "expires_at": 5}})]),
        chunk_obj([choice_obj({"channel": "lysis", "tags": [2], "audio": {"data": "BB", "transcript": "llo"}})]),
        chunk_obj([choice_obj({"channel": "!", "tags": [3.5], "audio": {"transcript": "!"}}, finish_reason="stop")]),
    ]
    result = impl.reassemble(sse(*chunks), format="openai-chat")
    got = result.to_response()
    ChatCompletion.model_validate(got)
    ours, sdk = got["choices"][0]["message"], sdk_message(chunks)
    for key in ("channel", "tags", "audio", "content"):
        assert ours[key] == sdk[key], key
    # Each answer is the caller's own, and the record is read, never changed.
    ours["audio"]["data"] = "changed"
    ours["tags"].append("changed")
    assert result.to_response() == got | {"choices": result.to_response()["choices"]}
    assert result.to_response()["choices"][0]["message"]["tags"] == sdk["tags"]


@pytest.mark.parametrize("first", ["reasoning_content", "reasoning"])
def test_reasoning_sent_under_both_names_in_one_delta_is_the_choices_once(impl, first):
    # Some servers and proxies send a delta's reasoning under both names (the older reasoning_content
    # and vLLM's reasoning). Each is the text once: result.reasoning was both joined ("ababcdcd").
    # The name the choice's reasoning first came under is its reasoning; the other is kept as sent,
    # as the SDK keeps both.
    other = "reasoning" if first == "reasoning_content" else "reasoning_content"
    chunks = [chunk_obj([choice_obj({"role": "assistant", first: "ab"})]),
              chunk_obj([choice_obj({"reasoning_content": "cd", "reasoning": "cd"})]),
              chunk_obj([choice_obj({"reasoning_content": "ef", "reasoning": "ef", "content": "ok"},
                                    finish_reason="stop")])]
    result = impl.reassemble(sse(*chunks), format="openai-chat")
    assert (result.reasoning, result.text, result.errors) == ("abcdef", "ok", [])
    message = result.to_response()["choices"][0]["message"]
    ChatCompletion.model_validate(result.to_response())
    sdk = sdk_message(chunks)
    assert (message[first], message[other]) == (sdk[first], sdk[other]) == ("abcdef", "cdef")
    assert result.to_message()[first] == "abcdef"


def test_a_calls_extra_fields_over_pieces_with_and_without_its_id_merge_as_the_sdks(impl):
    # The first piece of a call carries its id, the later ones only its index: their extra fields
    # were kept under two keys and only the first piece's came out ("s1" where the SDK gives "s1s2").
    def call(index, arguments, sig, call_id=None, name=None):
        piece = {"index": index, "function": {"arguments": arguments},
                 "extra_content": {"google": {"thought_signature": sig}}}
        if call_id is not None:
            piece |= {"id": call_id, "type": "function"}
            piece["function"]["name"] = name
        return piece

    chunks = [chunk_obj([choice_obj({"role": "assistant", "tool_calls": [call(0, '{"a"', "s1", "c1", "f")]})]),
              chunk_obj([choice_obj({"tool_calls": [call(0, ': 1}', "s2")]})]),
              chunk_obj([choice_obj({"tool_calls": [call(1, "{}", "t1", "c2", "g")]})]),
              chunk_obj([choice_obj({"tool_calls": [call(1, "", "t2")]})]),
              chunk_obj([choice_obj({}, finish_reason="tool_calls")])]
    result = impl.reassemble(sse(*chunks), format="openai-chat")
    assert [(c.id, c.arguments) for c in result.tool_calls] == [("c1", {"a": 1}), ("c2", {})]
    ours = result.to_response()["choices"][0]["message"]["tool_calls"]
    ChatCompletion.model_validate(result.to_response())
    sdk = sdk_message(chunks)["tool_calls"]
    assert [c["extra_content"] for c in ours] == [c["extra_content"] for c in sdk] == [
        {"google": {"thought_signature": "s1s2"}}, {"google": {"thought_signature": "t1t2"}}]
    assert [c["extra_content"] for c in result.to_message()["tool_calls"]] == [c["extra_content"] for c in sdk]


@pytest.mark.parametrize("body", [
    b"",
    sse(chunk_obj([choice_obj({"role": "assistant"})]), done=False),
    b'data: {"error":{"message":"boom","type":"server_error"}}\n\n',
], ids=["empty", "role-only-then-cut", "in-band-error-first"])
def test_to_message_of_a_chat_stream_that_said_nothing_is_an_empty_turn(impl, body):
    # Every other format gives an empty assistant message for a stream cut or failed before its
    # content; the chat turn raised IndexError from the default choice 0.
    result = impl.reassemble(body, format="openai-chat")
    message = result.to_message()
    assert message == {"role": "assistant", "content": None}
    MESSAGE_PARAM.validate_python(message)
    with pytest.raises(IndexError):
        result.to_message(1)


# ---------------------------------------------------------------- bedrock


def test_bedrock_reading_the_turn_twice_gives_the_same_turn(impl):
    # A block whose start and delta both carry a member callstitch does not know (an image): the
    # first to_response() merged them and took the delta's part out of the record, so the second
    # call and to_message() lost it.
    events = [("messageStart", {"role": "assistant"}),
              ("contentBlockStart", {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}),
              ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"image": {"source": {"bytes": "iVBORw0K"}}}}),
              ("contentBlockStop", {"contentBlockIndex": 0}),
              ("messageStop", {"stopReason": "end_turn"})]
    result = impl.reassemble(F.bedrock_sse(events), format="bedrock")
    want = [{"image": {"format": "png", "source": {"bytes": "iVBORw0K"}}}]
    assert result.to_response()["output"]["message"]["content"] == want
    assert result.to_response()["output"]["message"]["content"] == want
    assert result.to_message()["content"] == want


def _bedrock_many_deltas(n: int) -> bytes:
    events = [("messageStart", {"role": "assistant"})]
    for i in range(n):
        events.append(("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": {
            "title": "t", "location": {"documentChar": {"documentIndex": 0, "start": i, "end": i + 1}}}}}))
        events.append(("contentBlockDelta", {"contentBlockIndex": 1, "delta": {
            "reasoningContent": {"redactedContent": "QUJD"}}}))
        events.append(("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolResult": [{"text": "ab"}]}}))
    return F.bedrock_sse(events)


def test_bedrock_citations_redactions_and_tool_results_keep_their_lists_in_place(impl):
    # Each citation, redactedContent and toolResult delta made a new list of all before it: n
    # deltas cost n squared (6.5 MB of citations took 4 s). The lists now grow in place; what
    # they hold is unchanged.
    n = 300
    result = impl.reassemble(_bedrock_many_deltas(n), format="bedrock")
    blocks = result._turn.blocks
    assert len(blocks[0].citations) == n and len(blocks[1].redacted) == n and len(blocks[2].results) == n
    content = result.to_response()["output"]["message"]["content"]
    assert [c["location"]["documentChar"]["start"] for c in content[0]["citationsContent"]["citations"]] == list(
        range(n))
    assert content[1]["reasoningContent"]["redactedContent"] == "QUJD" * n  # base64 pieces of 3 bytes each
    assert content[2]["toolResult"]["content"] == [{"text": "ab"}] * n
    assert result.to_response() == copy.deepcopy(result.to_response())


def test_bedrock_each_delta_adds_to_the_list_its_block_holds():
    # What makes the cost linear: a delta appends to the block's list; no list is rebuilt from all
    # the earlier ones (the record's Block, as the adapter of either twin notes a delta into it).
    from callstitch._turns.bedrock import Block, note_other, note_reasoning

    block = Block(0)
    note_other(block, {"citation": {"title": "a"}})
    note_other(block, {"toolResult": [{"text": "a"}]})
    note_reasoning(block, {"redactedContent": "QUJD"})
    lists = (block.citations, block.results, block.redacted)
    for k in range(50):
        note_other(block, {"citation": {"title": k}})
        note_other(block, {"toolResult": [{"text": k}]})
        note_other(block, {"toolResult": {"text": k}})
        note_reasoning(block, {"redactedContent": "QUJD"})
    assert (block.citations, block.results, block.redacted) == lists
    assert all(now is then for now, then in zip((block.citations, block.results, block.redacted), lists))
    assert len(block.citations) == 51 and len(block.results) == 101 and len(block.redacted) == 51


def test_bedrock_a_server_tools_input_pieces_are_added_to_one_list():
    # The adapter's own list (a server tool's input, which the turn keeps as sent): each piece is
    # appended, never a new list of all the earlier ones (a stream of n pieces cost n squared).
    from callstitch._accumulator_py import Accumulator
    from callstitch._formats import bedrock

    acc = Accumulator("bedrock")
    state = acc._state
    bedrock.handle(acc, state, None, {"contentBlockStart": {"contentBlockIndex": 0, "start": {"toolUse": {
        "toolUseId": "s1", "name": "nova_code_interpreter", "type": "server_tool_use"}}}}, 0)
    piece = {"contentBlockDelta": {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"a'}}}}
    bedrock.handle(acc, state, None, piece, 0)
    pieces = state.turn.block(0).pieces
    for _ in range(50):
        bedrock.handle(acc, state, None, piece, 0)
    assert state.turn.block(0).pieces is pieces and len(pieces) == 51 and not acc.finalize().tool_calls


# ---------------------------------------------------------------- gemini: citations over many chunks


def _merged_as_before(kept, new):
    """The citation merge as first written (each list rebuilt, each citation compared to all): the model."""
    if type(kept) is not dict:
        return new
    merged = {**kept, **new}
    for key in ("citationSources", "citations"):
        old, more = kept.get(key), new.get(key)
        if type(old) is list and type(more) is list:
            merged[key] = old + [item for item in more if item not in old]
    return merged


_CITED = st.one_of(st.sampled_from([1, 1.0, True, 0, -0.0, False, None, "a", 2 ** 70, 1.5]),
                   st.fixed_dictionaries({"startIndex": st.sampled_from([1, 1.0, True, 2]),
                                          "uri": st.sampled_from(["u", "v"])}),
                   st.lists(st.sampled_from([1, 1.0, "a"]), max_size=2))
_METADATA = st.dictionaries(st.sampled_from(["citations", "citationSources", "other"]),
                            st.one_of(st.lists(_CITED, max_size=4), st.sampled_from([None, "x", 3])), max_size=3)


@settings(max_examples=300, deadline=None)
@given(st.lists(_METADATA, min_size=1, max_size=6))
@example([{"citations": [1]}, {"citations": [2]}, {"citations": "x"}, {"citations": [3]}, {"citations": [4]}])
def test_gemini_citations_merge_as_the_model_does(metadata):
    # Equal-looking values (1, 1.0 and True; -0.0 and 0) are one citation, as == has them; a citation
    # repeated within one chunk stays; a list replaced by another value, and back, is merged anew.
    from callstitch._turns.gemini import GeminiCandidate

    sent = copy.deepcopy(metadata)
    record = GeminiCandidate()
    expected = None
    for first, each in enumerate(metadata):
        record.take({"citationMetadata": each})
        expected = each if not first else _merged_as_before(expected, each)
    assert record.fields["citationMetadata"] == expected
    assert metadata == sent  # the chunks (the turn's log) are never changed by reading them


class _Counted:
    """A citation that counts how often it is compared (hashable, as a JSON value is)."""

    compared = 0

    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        _Counted.compared += 1
        return isinstance(other, _Counted) and other.n == self.n

    def __hash__(self):
        return hash(self.n)


def test_gemini_citations_over_many_chunks_cost_their_number_not_its_square():
    # Each new citation was compared to every earlier one and the list rebuilt per chunk: 1.4 MB of
    # chunks that cite took 0.9 s to read, four times as long per doubling. Counted, not timed.
    from callstitch._turns.gemini import GeminiCandidate

    record = GeminiCandidate()
    _Counted.compared = 0
    for n in range(400):
        record.take({"citationMetadata": {"citations": [_Counted(n)]}})
    assert [c.n for c in record.fields["citationMetadata"]["citations"]] == list(range(400))
    assert _Counted.compared < 400  # compared only with the equal-looking ones (80,000 times before)


# ---------------------------------------------------------------- openai-chat: any delta fields, any depth

# (no booleans: the SDK adds them as numbers, false + true = 1; the record keeps the first)
_SCALAR = st.one_of(st.sampled_from(["a", "b", ""]), st.integers(-3, 3), st.sampled_from([1.5, None]))
_FIELD = st.recursive(_SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    # (-1: the last entry, or the first when none is held, as the SDK has it; further back the SDK
    # inserts at the front, which the record does not, see _merge_list)
    st.lists(st.fixed_dictionaries({"index": st.integers(-1, 2)}, optional={"v": inner, "type": st.just("t")}),
             max_size=3),
    # ("index" only as an integer: the record skips an entry whose index is no int, true included,
    # where the SDK takes true for 1)
    st.dictionaries(st.sampled_from(["x", "y", "type"]), inner, max_size=3)), max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["extra", "more"]), _FIELD, max_size=2), min_size=1, max_size=5))
@example([{"extra": [{"index": 0, "v": {"x": "a"}}]},  # two pieces for one object in one delta: in order
          {"extra": [{"index": 0, "v": {"x": "b"}}, {"index": 0, "v": {"x": "c"}}]}])
def test_merged_delta_fields_equal_the_sdks_accumulate_delta(deltas):
    # The record's merge (pieces held as Growing, objects from a queue) against openai-python's own,
    # on whatever the deltas hold; where the SDK raises, the record keeps what it had (no raise).
    from openai.lib.streaming._deltas import accumulate_delta

    from callstitch._turns.openai_chat import merge_delta, owned

    record, sdk = {}, {}
    for delta in deltas:
        merge_delta(record, copy.deepcopy(delta))
        try:
            accumulate_delta(sdk, copy.deepcopy(delta))
        except (TypeError, ValueError, IndexError, KeyError, RuntimeError):
            return  # a pairing the SDK refuses: nothing to compare with
    assert owned(record) == sdk


@pytest.mark.parametrize("first,joined", [([{"index": -1}], "b"), ([{"index": -7, "v": "a"}], "ab"),
                                          (["s", {"index": -1}], "b"), ([], "b")])
def test_a_negative_index_in_a_delta_list_never_stops_the_stream(impl, first, joined):
    # An IndexError out of feed() on both twins: -1 read an entry of an empty list. Now -1 is the
    # last entry (or the first, when none is held), as the SDK has it; further back, one more at the end.
    later = [{"index": -1, "v": "b"}, {"index": -9, "w": 1}]
    deltas = [{"content": "x", "extra": first}, {"content": "y", "extra": later}]
    body = sse(*(chunk_obj([choice_obj(delta)]) for delta in deltas))
    result = impl.reassemble(body, format="openai-chat")
    assert result.errors == [] and result.choices[0].text == "xy"
    extra = result.to_response()["choices"][0]["message"]["extra"]
    assert extra == [{"index": -1, "v": joined}, {"index": -9, "w": 1}]  # ("s": no object, kept out as before)


@pytest.mark.parametrize("where", ["delta", "choice", "envelope"])
@pytest.mark.parametrize("kind", ["object", "array"])
def test_unknown_fields_nested_as_deep_as_json_goes_never_stop_the_stream(impl, where, kind):
    # orjson reads 1,024 levels. The turn merged and copied them by recursion: a field nested 1,000
    # deep, sent twice, raised RecursionError out of feed(); 500 deep, out of to_response().
    deep = ('{"a":' * 1000 + "1" + "}" * 1000) if kind == "object" else "[" * 1000 + "]" * 1000

    def chunk(finish=""):
        field = f'"deep":{deep}'
        if where == "delta":
            return '{"choices":[{"index":0,"delta":{"content":"x",%s}%s}]}' % (field, finish)
        if where == "choice":
            return '{"choices":[{"index":0,"delta":{"content":"x"},%s%s}]}' % (field, finish)
        return '{%s,"choices":[{"index":0,"delta":{"content":"x"}%s}]}' % (field, finish)

    body = ("data: " + chunk() + "\n\ndata: " + chunk(',"finish_reason":"stop"') + "\n\ndata: [DONE]\n\n").encode()
    result = impl.reassemble(body, format="openai-chat")
    assert (result.text, result.finish_reason, result.errors) == ("xx", "stop", [])
    response, message = result.to_response(), result.to_message()
    choice = response["choices"][0]
    held = response if where == "envelope" else choice if where == "choice" else choice["message"]
    depth, value = 0, held["deep"]
    while type(value) in (dict, list) and value:  # kept whole, every level
        value = value["a"] if kind == "object" else value[0]
        depth += 1
    assert depth == (1000 if kind == "object" else 999)
