"""Call ids and names count against Limits.stream_bytes: memory stays bounded by the limits, whatever their size.

Before, an id or a name was held whatever its length: a stream of calls each named with an
event's worth of bytes held Limits.calls times Limits.event_bytes (4,096 x 64 MiB by default),
and each limit error repeated the name in full. Now each id and name is counted, past its first
256 characters (ordinary ones cost nothing), when a call takes it; one that does not fit is not
kept, and its call is cut there, as a call whose arguments reach the limit is. Errors name a
call by the first 100 characters of each.
"""

from __future__ import annotations

import json
import tracemalloc

from _cutcheck import is_cut

from callstitch import Limits

MIB = 1 << 20


def _chat_call(index: int, name: str, call_id: str | None = None, arguments: str = "{}") -> bytes:
    call = {"index": index, "id": call_id or f"call_{index}", "type": "function",
            "function": {"name": name, "arguments": arguments}}
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).encode() + b"\n\n"


def test_a_name_that_does_not_fit_is_not_kept_and_its_call_is_cut(impl):
    big = "n" * 600_000
    body = b"".join(_chat_call(i, big + str(i)) for i in range(4)) + b"data: [DONE]\n\n"
    result = impl.reassemble(body, limits=Limits(stream_bytes=1_500_000))
    kept, cut = result.tool_calls[:2], result.tool_calls[2:]
    assert [(c.id, c.name, c.arguments) for c in kept] == [("call_0", big + "0", {}), ("call_1", big + "1", {})]
    assert [(c.id, c.name) for c in cut] == [("call_2", None), ("call_3", None)] and all(map(is_cut, cut))
    (error,) = result.errors
    assert error.kind == "limit" and "Limits.stream_bytes" in error.detail and len(str(error)) < 600
    # With room, the same stream keeps every name.
    assert [c.name for c in impl.reassemble(body).tool_calls] == [big + str(i) for i in range(4)]


def test_an_id_that_does_not_fit_is_not_kept(impl):
    body = _chat_call(0, "f", call_id="i" * 5000) + b"data: [DONE]\n\n"
    (call,) = impl.reassemble(body, limits=Limits(stream_bytes=4000)).tool_calls
    assert call.id is None and call.name == "f" and is_cut(call)  # (only what still fits is kept after it)
    (call,) = impl.reassemble(body, limits=Limits(stream_bytes=6000)).tool_calls
    assert call.id == "i" * 5000 and call.name == "f" and call.arguments == {}


def test_memory_stays_within_the_limits_however_large_the_names(impl):
    # Forty calls, each named with a MiB, fed an event at a time under stream_bytes of 4 MiB:
    # before, all forty names stayed (40 MiB); now what is held is the limit and an event or two.
    acc = impl.Accumulator(format="openai-chat", limits=Limits(stream_bytes=4 * MIB, event_bytes=2 * MIB))
    tracemalloc.start()
    try:
        for i in range(40):
            acc.feed(_chat_call(i, chr(97 + i % 26) * MIB))
        acc.feed(b"data: [DONE]\n\n")
        result = acc.finalize()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(c.name is not None for c in result.tool_calls) == 4  # each costs a MiB less its first 256 characters
    # Before: 40 MiB held, a peak of 42 (compiled) and 56 (pure); now 4 MiB held. The peak is mostly the parse of
    # one event: orjson takes ~13 times a long string's size while it reads one (the pure twin).
    assert held < 7 * MIB and peak < 30 * MIB, (held / MIB, peak / MIB)


def test_a_name_given_by_a_later_item_counts_too(impl):
    # A Responses call may learn its name from output_item.done (identify): it is counted there.
    def event(kind, **fields):
        return b"event: " + kind.encode() + b"\ndata: " + json.dumps({"type": kind, **fields}).encode() + b"\n\n"
    item = {"id": "fc_1", "type": "function_call", "call_id": "call_A", "arguments": ""}
    body = (event("response.output_item.added", output_index=0, item=item)
            + event("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta="{}")
            + event("response.output_item.done", output_index=0,
                    item=dict(item, name="x" * 5000, arguments="{}", status="completed"))
            + event("response.completed", response={"id": "r", "object": "response", "status": "completed"}))
    (call,) = impl.reassemble(body, format="openai-responses", limits=Limits(stream_bytes=3000)).tool_calls
    assert call.id == "call_A" and call.name is None and is_cut(call)
    (call,) = impl.reassemble(body, format="openai-responses").tool_calls
    assert call.name == "x" * 5000 and call.arguments == {}


def test_a_whole_call_counts_its_name(impl):
    # Ollama sends each call whole: its name is counted as a streamed call's is.
    line = {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "y" * 5000, "arguments": {"a": 1}}}]}, "done": False}
    body = json.dumps(line).encode() + b"\n" + b'{"model":"m","message":{"role":"assistant","content":""},"done":true}\n'
    (call,) = impl.reassemble(body, format="ollama", limits=Limits(stream_bytes=3000)).tool_calls
    assert call.name is None and is_cut(call)
    (call,) = impl.reassemble(body, format="ollama").tool_calls
    assert call.name == "y" * 5000 and call.arguments == {"a": 1}


def test_ordinary_names_cost_nothing(impl):
    # 256 characters of each id and name are free: a cut call still takes its late id and name.
    body = _chat_call(0, "f" * 256, call_id="i" * 256) + b"data: [DONE]\n\n"
    (call,) = impl.reassemble(body, limits=Limits(stream_bytes=0)).tool_calls
    assert (call.id, call.name) == ("i" * 256, "f" * 256) and is_cut(call)  # (its "{}" did not fit)
    (call,) = impl.reassemble(_chat_call(0, "f" * 257) + b"data: [DONE]\n\n", limits=Limits(stream_bytes=0)).tool_calls
    assert call.name is None and is_cut(call)


def test_the_twins_agree_on_names_past_the_limit(both):
    big = "n" * 3000
    body = b"".join(_chat_call(i, big) for i in range(5)) + b"data: [DONE]\n\n"
    for limit in (0, 2999, 3010, 6020, 9000):
        c, py = (impl.reassemble(body, limits=Limits(stream_bytes=limit)) for impl in both)
        assert c == py, limit


def test_the_batch_and_the_command_line_keep_names_within_the_limit(tmp_path, every_twin):
    import subprocess
    import sys

    import callstitch
    path = tmp_path / "names.sse"
    path.write_bytes(b"".join(_chat_call(i, "n" * 5000) for i in range(3)) + b"data: [DONE]\n\n")
    records = [r for r in callstitch.reassemble_many([str(path)], limits=Limits(stream_bytes=10_000)) if "index" in r]
    assert [r["name"] is None for r in records] == [False, False, True] and records[2]["arguments"] is None
    out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(path), "--max-stream-bytes", "10000"],
                         capture_output=True, check=False)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["name"] is None for r in rows] == [False, False, True] and b"Limits.stream_bytes" in out.stderr, out
    assert max(map(len, out.stderr.splitlines())) < 1000  # the error names the call by 100 characters
