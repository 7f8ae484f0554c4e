"""An error keeps the event it is about whole only while small: Limits.errors counts errors, not their size.

Before, each error kept its event parsed whole: fifty bad events of 1 MB held 1.2 GB (both twins).
Now an event's data is kept whole up to 4 KiB of its JSON text, else the start of that text.
"""

from __future__ import annotations

import pickle

import pytest

from callstitch import Limits
from callstitch._state import DATA_EXCERPT, DATA_KEPT


def _body(events: list[bytes]) -> bytes:
    head = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    return head + b"".join(b"data: " + e + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_a_big_bad_event_is_kept_as_the_start_of_its_text(both):
    big = b"[" + b",".join([b"{}"] * 20_000) + b"]"  # a JSON array, not a chunk: an unexpected shape
    body = _body([big] * 30)
    results = [impl.reassemble(body, format="openai-chat") for impl in both]
    assert results[0] == results[1]
    errors = results[0].errors
    assert len(errors) == 30 and {e.kind for e in errors} == {"unexpected shape"}
    assert all(e.data == big.decode()[:DATA_EXCERPT] for e in errors)
    assert len(pickle.dumps(errors)) < 30 * (DATA_EXCERPT + 400)  # not 30 times 40 KB
    assert results[0].text == "hi"


@pytest.mark.parametrize("size", [10, DATA_KEPT - 20])
def test_a_small_bad_event_is_kept_whole(both, size):
    event = b'{"choices":"' + b"x" * size + b'"}'
    for impl in both:
        (error,) = impl.reassemble(_body([event]), format="openai-chat").errors
        assert error.data == {"choices": "x" * size}


def test_the_limit_on_errors_still_counts_the_rest(both):
    body = _body([b"[1]"] * 50)
    for impl in both:
        errors = impl.reassemble(body, format="openai-chat", limits=Limits(errors=10)).errors
        assert len(errors) == 11 and errors[-1].data == {"unexpected shape": 40}
