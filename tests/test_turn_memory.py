"""The turn keeps what the provider's response holds, not a copy of every event (issue 20).

Each format's turn record is measured pickled (what a batch job ships between processes, and near
what it holds) against the JSON of the to_response() it gives back, on streams whose texts and
arguments come in many small pieces. A record that kept every event, or the output twice (the
items' events beside the end event that repeats them all), is several times the response; what
may come on top of the response's size is the envelope of the one event the record keeps whole.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

from _formats import CALLS, VARIANTS, build
from _streams import DONE, chunk, finish, text_delta, tool_delta

TEXT = "A text that streams in many small pieces, long enough to count. " * 8


def _chat_body() -> bytes:
    out = [chunk([text_delta(content=TEXT[k:k + 4])]) for k in range(0, len(TEXT), 4)]
    for i, call in enumerate(CALLS[:3]):
        out.append(chunk([tool_delta(i, id=call.id, name=call.name, arguments="")]))
        out += [chunk([tool_delta(i, arguments=piece)]) for piece in call.pieces()]
    return b"".join(out + [chunk([finish("tool_calls")]), DONE])


def _stream(variant: str) -> tuple[str, bytes]:
    if variant == "openai-chat":
        return "openai-chat", _chat_body()
    return VARIANTS[variant][0], build(variant, CALLS[:3], text=TEXT, reasoning=TEXT)


CAPTURES = sorted(p for p in (Path(__file__).parent / "fixtures" / "captures").iterdir()
                  if p.suffix not in (".json", ".md"))


def _check(result) -> None:
    # Pickled before and after the turn is read (reading parses what it kept as text: the text must go).
    before = len(pickle.dumps(result._turn))
    response = len(orjson.dumps(result.to_response()))
    after = len(pickle.dumps(result._turn))
    # The slack: the pickle's class names and field tuples, and the envelope of the events kept whole.
    assert max(before, after) <= 1.1 * response + 512, (before, after, response)


@pytest.mark.parametrize("variant", ["openai-chat", *VARIANTS])
def test_the_turn_holds_about_what_the_response_holds(impl, variant):
    fmt, body = _stream(variant)
    result = impl.reassemble(body, format=fmt)
    assert result.tool_calls and not result.errors
    _check(result)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_the_turn_of_a_capture_holds_about_what_its_response_holds(impl, path):
    _check(impl.reassemble(path.read_bytes()))
