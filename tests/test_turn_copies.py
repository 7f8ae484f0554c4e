"""to_response() and to_message() give the caller objects of its own (issue 20).

A gateway edits the response it logs, an agent appends the message and then edits its history: none
of that may reach the Result or the next call's answer. Each object given back is taken apart in
place (every dict and list in it emptied), and the next call must give back what the first gave
before that. Its leaves are JSON's own types (and bytes, for Bedrock's redactedContent), so that no
other mutable object can be shared unseen.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from _formats import CALLS, VARIANTS, build
from _streams import DONE, chunk, finish, text_delta, tool_delta

CAPTURES = sorted(p for p in (Path(__file__).parent / "fixtures" / "captures").iterdir()
                  if p.suffix not in (".json", ".md"))
LEAVES = (str, int, float, bool, type(None), bytes)


def _chat_body() -> bytes:
    out = [chunk([text_delta(content="Looking it up.")])]
    for i, call in enumerate(CALLS[:2]):
        out.append(chunk([tool_delta(i, id=call.id, name=call.name, arguments="")]))
        out += [chunk([tool_delta(i, arguments=piece)]) for piece in call.pieces()]
    return b"".join(out + [chunk([finish("tool_calls")], usage={"prompt_tokens": 3, "completion_tokens": 5,
                                                               "prompt_tokens_details": {"cached_tokens": 0}}),
                            DONE])


def _take_apart(value) -> None:
    """Empty every dict and list in value, innermost first; fail on a leaf of no JSON type."""
    if type(value) is dict:
        for inner in value.values():
            _take_apart(inner)
        value.clear()
    elif type(value) is list:
        for inner in value:
            _take_apart(inner)
        value.clear()
    else:
        assert isinstance(value, LEAVES), type(value)


def _check_owned(make) -> None:
    given = make()
    kept = copy.deepcopy(given)
    _take_apart(given)
    again = make()
    assert again == kept
    _take_apart(again)  # and the second is the caller's too
    assert make() == kept


def _check_result(result) -> None:
    usage = copy.deepcopy(result.usage)
    _check_owned(result.to_response)
    for choice in result.choices or [None]:
        index = 0 if choice is None else choice.index
        _check_owned(lambda: result.to_message(index))
    assert result.usage == usage


@pytest.mark.parametrize("variant", ["openai-chat", *VARIANTS])
def test_each_format_gives_objects_of_the_callers_own(impl, variant):
    if variant == "openai-chat":
        fmt, body = "openai-chat", _chat_body()
    else:
        fmt, body = VARIANTS[variant][0], build(variant, CALLS[:2], text="Looking it up.", reasoning="First think.")
    result = impl.reassemble(body, format=fmt)
    assert result.tool_calls and not result.errors
    _check_result(result)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_each_capture_gives_objects_of_the_callers_own(impl, path):
    result = impl.reassemble(path.read_bytes())
    if result.format is None or not result.choices and result._turn is None:
        pytest.skip("no turn: the body is no stream of a known format")
    _check_result(result)
