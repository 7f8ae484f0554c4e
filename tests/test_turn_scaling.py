"""The whole-turn records cost a stream's length to keep, not its square, on streams built to make them reread.

Each test feeds one hostile shape at two sizes, n and 4n, through both twins and counts the work
the record does (items read, dict entries written): about four times as much for four times the
stream, where the quadratic record did about sixteen. Counted, never timed (benchmarks time).
"""

from __future__ import annotations

import sys

import pytest

from _streams import DONE, dumps

import callstitch._turns.anthropic as anthropic_turn
import callstitch._turns.openai_chat as chat_turn


def _sse(obj: dict, name: str | None = None) -> bytes:
    return (f"event: {name}\n".encode() if name else b"") + b"data: " + dumps(obj) + b"\n\n"


# ---------------------------------------------------------------- anthropic: message_delta fields


def _anthropic_new_keys(n: int) -> bytes:
    """Return a stream whose every one of n message_delta events brings a key none before it did."""
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude"}
    return b"".join([
        _sse({"type": "message_start", "message": start}, "message_start"),
        *(_sse({"type": "message_delta", "delta": {f"k{k}": k}}, "message_delta") for k in range(n)),
        _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
             "message_delta"),
        _sse({"type": "message_stop"}, "message_stop")])


def _entries_written(run, module_file: str) -> int:
    """Return how many entries the dict methods that module_file's code calls add to their dicts while run() runs."""
    written = 0
    before: list[int] = []

    def profile(frame, event, arg):
        nonlocal written
        if event.startswith("c_") and frame.f_code.co_filename == module_file:
            target = getattr(arg, "__self__", None)
            if type(target) is dict:
                if event == "c_call":
                    before.append(len(target))
                else:  # c_return, c_exception
                    written += len(target) - before.pop()

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return written


def test_anthropic_message_deltas_with_new_keys_cost_their_number_not_its_square(impl):
    # Every FOLD_AT message_delta events the turn folded them into a new object, copying every key
    # folded before: a stream whose each message_delta brings a new key cost the square of their
    # number (30 MB took 13 s). The fold now adds to one object; count the entries it writes.
    def feed(n: int) -> None:
        result = impl.reassemble(_anthropic_new_keys(n), format="anthropic")
        response = result.to_response()
        assert [response[f"k{k}"] for k in (0, n // 2, n - 1)] == [0, n // 2, n - 1]
        assert (response["stop_reason"], result.errors) == ("end_turn", [])

    small = _entries_written(lambda: feed(500), anthropic_turn.__file__)
    large = _entries_written(lambda: feed(2000), anthropic_turn.__file__)
    assert 500 <= small and large < 6 * small  # about four times the entries (about sixteen before the fix)


# ---------------------------------------------------------------- openai-chat: a list field merged by index


def _chat(delta: dict, finish: str | None = None) -> bytes:
    return _sse({"id": "c", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _chat_list_then_entries(n: int) -> tuple[bytes, list]:
    """Return a stream extending an unknown list field by n scalars, then n objects by index; and the list."""
    chunks = [_chat({"role": "assistant", "content": ""})]
    chunks += [_chat({"content": "x", "raw": [0]}) for _ in range(n)]  # a list of scalars, extended
    chunks.append(_chat({"raw": [{}]}))  # now it holds an object: merged by index from here on
    chunks += [_chat({"raw": [{"index": n + 1 + k, "v": k}]}) for k in range(n)]  # each appended at its index
    chunks.append(_chat({}, "stop"))
    return b"".join(chunks) + DONE, [0] * n + [{}] + [{"index": n + 1 + k, "v": k} for k in range(n)]


def _chat_long_list_then_short_deltas(n: int) -> tuple[bytes, list]:
    """Return a stream whose first chunk sends a list of n scalars and an object, then n chunks add nothing to it."""
    chunks = [_chat({"role": "assistant", "content": "", "raw": [0] * n + [{}]})]
    chunks += [_chat({"content": "x", "raw": []}) for _ in range(n)]
    chunks.append(_chat({}, "stop"))
    return b"".join(chunks) + DONE, [0] * n + [{}]


@pytest.mark.parametrize("shape", [_chat_list_then_entries, _chat_long_list_then_short_deltas])
def test_a_chat_list_field_merged_by_index_is_read_once_not_per_delta(impl, monkeypatch, shape):
    # Once such a list held an object it stayed a plain list, and every later delta to it read it
    # whole again to tell whether it held scalars alone, as the SDK does: n deltas after n items
    # cost n squared (5 MB of chunks took 40 s). Count the items that check reads.
    visited = 0
    scalars = chat_turn._scalars

    def counting(held: list) -> bool:
        nonlocal visited
        for item in held:
            visited += 1
            if type(item) not in (str, int, float):
                break
        return scalars(held)

    monkeypatch.setattr(chat_turn, "_scalars", counting)

    def items_read(n: int) -> int:
        nonlocal visited
        body, sent = shape(n)
        visited = 0
        result = impl.reassemble(body, format="openai-chat")
        assert result.errors == []
        assert result.to_response()["choices"][0]["message"]["raw"] == sent
        return visited

    small, large = items_read(300), items_read(1200)
    assert 300 <= small and large < 6 * small  # about four times the items (about sixteen before the fix)
