"""The compiled twin's Gemini repeat shortcut: a string piece's chunk again, only the piece's text changed.

The shortcut (``_gemini_repeat`` in ``_c/fast_gemini.pxi``) applies such a chunk without reading it,
on the grounds that every byte outside the piece is the last piece's. These tests hold it to being
taken where that is so, and to giving what the pure twin gives where something between the two
chunks changed what the second one means: a call closed, an envelope or usage sent between, a
piece whose text is escaped, not valid JSON or not valid UTF-8.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from callstitch import _accumulator_c as compiled

START = {"functionCall": {"name": "create_note", "willContinue": True}, "thoughtSignature": "c2ln"}
CLOSE = {"functionCall": {}}


def chunk(parts, index=0, usage=None, model="gemini-2.5-flash", finish=None):
    """Return one Gemini chunk, in the key order and spacing Vertex AI sends."""
    candidate = {"content": {"parts": parts, "role": "model"}, "index": index}
    if finish:
        candidate["finishReason"] = finish
    top = {"candidates": [candidate], "usageMetadata": usage or {"trafficType": "ON_DEMAND"},
           "modelVersion": model, "responseId": "r-1"}
    if usage is False:
        del top["usageMetadata"]
    return top


def piece(text, path="$.note", more=True, **fields):
    """Return a part carrying one partialArgs string piece."""
    entry = {"jsonPath": path, "stringValue": text, **({"willContinue": True} if more else {})}
    return {"functionCall": {"partialArgs": [entry], "willContinue": True}, **fields}


def sse(*chunks, raw=()):
    """Return an SSE body of the chunks (dicts dumped, bytes as they are)."""
    out = []
    for c in chunks:
        out.append(b"data: " + (c if isinstance(c, bytes) else json.dumps(c).encode()) + b"\r\n\r\n")
    return b"".join(out)


def both_turns(both, body):
    """Reassemble body with both twins; check they agree on everything; return the compiled twin's path counts."""
    seen = []
    compiled._reset_path_counts()
    for impl in both:
        acc = impl.Accumulator(format="gemini")
        early = acc.feed(body)
        result = acc.finalize()
        seen.append((result, [str(e) for e in result.errors], [(c.id, c.name, c.raw_arguments) for c in early],
                     result.to_response(), result.to_message()))
        if impl.module is compiled:
            counts = compiled._path_counts()
    assert seen[0] == seen[1]
    return counts, seen[0][0]


def stream(*middle):
    return sse(chunk([START]), *middle, chunk([CLOSE]), chunk([{"text": ""}], finish="STOP"))


def test_the_next_pieces_of_a_string_take_the_repeat_path(both):
    body = stream(*(chunk([piece(t)]) for t in ("Buy ", "milk, ", "eggs ", "and tea")),
                  chunk([piece("", more=False)]))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] == 3, counts  # the first piece is read, the three after it repeat it
    assert result.tool_calls[0].arguments == {"note": "Buy milk, eggs and tea"}


def test_escaped_and_non_ascii_pieces_repeat_and_decode(both):
    texts = ["a", 'quote \\" and \\\\', "caf\\u00e9 ", "\\ud83d\\ude80 ", "naïve 🚀", "\\n\\t"]
    body = stream(*(b'{"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [{"jsonPath": '
                    b'"$.note","stringValue": "' + t.encode() + b'","willContinue": true}],"willContinue": true}}],'
                    b'"role": "model"},"index": 0}],"modelVersion": "m","responseId": "r"}' for t in texts),
                  chunk([piece("", more=False)]))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] == len(texts) - 1, counts
    assert result.tool_calls[0].arguments == {"note": json.loads('"' + "".join(texts) + '"')}


def test_a_piece_that_is_not_a_json_string_is_not_repeated(both):
    good = chunk([piece("one ")])
    template = json.dumps(chunk([piece("@@")])).encode()
    bad = [template.replace(b"@@", text) for text in (b"\x01raw control", b"bad \\x escape", b"\xff\xfe", b"\\ud800 lone")]
    counts, result = both_turns(both, stream(good, *bad, chunk([piece("two")])))
    assert counts["gemini-repeat"] <= 2, counts  # only the well-formed ones (the lone surrogate is valid JSON)
    assert result.tool_calls


def test_a_repeat_after_the_call_closed_is_read_again(both):
    body = sse(chunk([START]), chunk([piece("a")]), chunk([CLOSE]), chunk([piece("b")]), chunk([piece("c")]))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] == 0, counts
    assert result.errors  # pieces with no call open are reported, in both twins alike


def test_an_envelope_or_usage_sent_between_is_kept(both):
    body = stream(chunk([piece("a")]), chunk([piece("b")]),
                  chunk([piece("x", path="$.other")], model="gemini-3-pro"),  # a new envelope between
                  chunk([piece("c")]),
                  chunk([{"text": ""}], usage={"promptTokenCount": 5}),  # new usage, same envelope
                  chunk([piece("d")]), chunk([piece("e")]))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] >= 2, counts
    assert result.usage is not None and result.to_response()["usageMetadata"] == {"trafficType": "ON_DEMAND"}
    assert result.to_response()["modelVersion"] == "gemini-2.5-flash"


def test_the_usage_a_repeat_carries_is_the_last_one(both):
    # Usage sent between two pieces, then the repeat's own again and none after it: the repeat's is kept.
    body = sse(chunk([START]), chunk([piece("a")]), chunk([{"text": ""}], usage={"promptTokenCount": 5}),
               chunk([piece("b")]), chunk([piece("", more=False)], usage=False), chunk([CLOSE], usage=False),
               chunk([{"text": ""}], finish="STOP", usage=False))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] == 1, counts
    assert result.to_response()["usageMetadata"] == {"trafficType": "ON_DEMAND"}


def test_a_piece_of_another_candidate_or_path_is_not_taken_for_a_repeat(both):
    body = stream(chunk([piece("a")]), chunk([piece("b", path="$.notf")]), chunk([piece("c", path="$.note")]),
                  chunk([piece("d")], index=1), chunk([piece("e")]))
    counts, result = both_turns(both, body)
    assert counts["gemini-repeat"] == 0, counts  # each chunk differs from the last outside its piece
    assert result.tool_calls


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.sampled_from(["$.note", "$.tag"]), st.booleans(),
                          st.booleans()), min_size=1, max_size=12))
def test_any_run_of_pieces_gives_what_the_pure_twin_gives(both, pieces):
    middle = []
    for text, path, more, ascii_only in pieces:
        part = chunk([piece(text, path=path, more=more)])
        middle.append(json.dumps(part, ensure_ascii=ascii_only).encode())
    both_turns(both, stream(*middle))  # (both_turns holds the twins to the same results, turn and errors)
