"""A Responses call's item seen again (its done event, or added twice): the id and name it brings.

The call is registered by the first item event of its item id. A later one (output_item.done
always, output_item.added again in a mangled stream) may carry the call_id or name the first one
lacked: the call takes what it lacks, keeps what it has, and notes no quirk, in both twins. Found
by the fuzz harness: under Limits.event_bytes the bare first item event was dropped, the call was
registered by the second one, with its id and name, while the stream read whole kept a call with
neither, so the limit changed the call instead of cutting it.
"""

import json

import pytest
from _cutcheck import cut_or_whole
from conftest import agree, agree_whole

from callstitch import Limits

ITEM = "fc_0a1b2c3d4e5f"


def event(obj):
    return b"event: " + obj["type"].encode() + b"\ndata: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def item_event(kind, seq, **fields):
    item = {"id": ITEM, "type": "function_call", "status": "completed" if kind == "done" else "in_progress",
            "arguments": "", **fields}
    return event({"type": f"response.output_item.{kind}", "sequence_number": seq, "output_index": 0, "item": item})


def stream(first, *later, pieces=('{"city":', '"Paris"}')):
    """A Responses stream of one call: the item events first and later (each the item's fields), its pieces between."""
    out = [event({"type": "response.created", "sequence_number": 0,
                  "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
           item_event("added", 1, **first)]
    out += [event({"type": "response.function_call_arguments.delta", "sequence_number": 2 + k, "item_id": ITEM,
                   "output_index": 0, "delta": piece}) for k, piece in enumerate(pieces)]
    out += [item_event(kind, 10 + k, **fields) for k, (kind, fields) in enumerate(later)]
    out.append(event({"type": "response.completed", "sequence_number": 20,
                      "response": {"id": "resp_1", "object": "response", "status": "completed", "output": []}}))
    return b"".join(out)


WHOLE = {"call_id": "call_1", "name": "get_weather"}


@pytest.mark.parametrize("first, later, expected", [
    ({}, [("done", WHOLE)], ("call_1", "get_weather")),  # the added item had neither
    ({"name": "get_weather"}, [("done", WHOLE)], ("call_1", "get_weather")),  # no call_id
    ({"call_id": "call_1"}, [("done", WHOLE)], ("call_1", "get_weather")),  # no name
    ({}, [("added", WHOLE), ("done", WHOLE)], ("call_1", "get_weather")),  # added twice (the fuzz finding)
    ({}, [("done", {"call_id": "call_1", "name": ""})], ("call_1", None)),  # an empty name fills nothing
    (WHOLE, [("done", {"call_id": "call_2", "name": "other"})], ("call_1", "get_weather")),  # kept as first sent
    ({}, [("done", {"call_id": 7, "name": ["x"]})], (None, None)),  # not strings: nothing taken
])
def test_a_later_item_gives_the_call_what_it_lacks(both, first, later, expected):
    result = agree(both, stream(first, *later), "openai-responses", seeds=range(2))
    (call,) = result.tool_calls
    assert (call.id, call.name, call.arguments, call.quirks) == (*expected, {"city": "Paris"}, ())


def test_the_done_item_of_a_call_lacking_its_id_goes_the_general_way_only_then(both):
    counts, result = agree_whole(both, stream(WHOLE, ("done", WHOLE)), "openai-responses")
    assert [(c.id, c.name, c.quirks) for c in result.tool_calls] == [("call_1", "get_weather", ())]
    lacking, result = agree_whole(both, stream({}, ("done", WHOLE)), "openai-responses")
    assert [(c.id, c.name, c.quirks) for c in result.tool_calls] == [("call_1", "get_weather", ())]
    # The one event read differently is the done item: the fast path's when the call is whole, else the general way's.
    assert lacking["general"] == counts["general"] + 1, (counts, lacking)
    assert lacking["openai-responses"] == counts["openai-responses"] - 1, (counts, lacking)


@pytest.mark.parametrize("event_bytes", [230, 260, 300, None])
def test_a_dropped_bare_item_cuts_the_call_never_changes_it(impl, event_bytes):
    # The bare first added event is the longest (306 bytes, the next 214): a limit between drops it alone.
    body = stream({"status": "in_progress", "padding": "x" * 120}, ("added", WHOLE), ("done", WHOLE))
    unlimited = impl.reassemble(body, format="openai-responses")
    assert [(c.id, c.name) for c in unlimited.tool_calls] == [("call_1", "get_weather")]
    limits = Limits(event_bytes=event_bytes, stream_bytes=12)
    for cuts in ((), range(1, len(body))):
        acc = impl.Accumulator(format="openai-responses", limits=limits)
        last = 0
        for cut in [*cuts, len(body)]:
            acc.feed(body[last:cut])
            last = cut
        limited = acc.finalize()
        assert limited.tool_calls, event_bytes
        assert cut_or_whole(limited, unlimited, event_bytes is not None) == [], event_bytes


def test_identify_fills_only_what_a_known_call_lacks(impl):
    # The shared slot rule itself (_slots.SlotBook.identify), through the in-package Sink both twins are.
    acc = impl.Accumulator(format="openai-chat")
    acc.identify(0, 5, "call_x", "ghost")  # no call at that index: nothing starts
    acc.fragment(0, 0, None, "get_weather", '{"city":"Paris"}')
    acc.fragment(0, 1, "call_b", "lookup", "{}")
    acc.identify(0, 0, "call_a", "renamed")  # takes the id it lacks, keeps its name
    acc.identify(0, 1, "call_other", "other")  # has both: keeps both
    acc.identify(1, 0, "call_c", "x")  # no such choice
    calls = acc.finalize().tool_calls
    assert [(c.id, c.name, c.index, c.quirks) for c in calls] == [("call_a", "get_weather", 0, ()),
                                                                   ("call_b", "lookup", 1, ())]
