"""Property tests: any split gives the same Result; generated calls come back exactly; the twins agree."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _streams import DONE, chunk_obj, choice_obj, dumps, feed_split

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.data_too_large])

_SPECIAL = list('abcxyz XYZ019"\\/{}[]:,\n\t\r\x00\x1féñü東京タワー😀🎉🇫🇷\u2028\u00a0')
_TEXT = st.text(alphabet=st.one_of(st.sampled_from(_SPECIAL), st.characters(blacklist_categories=("Cs",))),
                max_size=24)
_KEYS = st.text(alphabet=st.one_of(st.sampled_from(_SPECIAL), st.characters(blacklist_categories=("Cs",))),
                min_size=1, max_size=8)
_SCALARS = st.one_of(_TEXT, st.integers(-10 ** 12, 10 ** 12), st.booleans(), st.none())
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(_KEYS, _SCALARS, max_size=2))
_ARGUMENTS = st.dictionaries(_KEYS, _VALUES, max_size=4)
_IDENT = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,15}", fullmatch=True)


def _cut(draw, text: str, max_piece: int) -> list[str]:
    """Cut text into pieces of random sizes (at least one piece)."""
    pieces = []
    k = 0
    while k < len(text):
        n = draw(st.integers(1, max_piece))
        pieces.append(text[k:k + n])
        k += n
    return pieces or [""]


@st.composite
def clean_streams(draw, quirky=False):
    """Return (body bytes, expectation dict) for a clean OpenAI chat stream.

    With quirky=True some calls are sent the way non-OpenAI servers send them (cumulative
    arguments, resent id and name, no index, arguments as an object); the expectation then
    no longer holds, the bytes are only for comparing the twins.
    """
    n_choices = draw(st.sampled_from([1, 1, 1, 2, 3]))
    n_calls = draw(st.integers(1, 4))
    calls = []          # (choice, id, name, value)
    queues = []         # one list of items per call / text stream: (choice, kind, payload)
    per_choice: dict[int, int] = {}
    starts = []         # per call queue: (choice, index), for the order in which calls may start
    max_piece = draw(st.sampled_from([1, 3, 8, 40]))
    for k in range(n_calls):
        choice = draw(st.integers(0, n_choices - 1))
        index = per_choice.get(choice, 0)
        per_choice[choice] = index + 1
        value = draw(_ARGUMENTS)
        text = json.dumps(value, ensure_ascii=draw(st.booleans()))
        call_id = "call_" + draw(st.from_regex(r"[A-Za-z0-9]{4,24}", fullmatch=True)) + str(k)
        name = draw(_IDENT)
        calls.append((choice, index, call_id, name, value))
        pieces = _cut(draw, text, max_piece)
        first_args = "" if draw(st.booleans()) else pieces.pop(0)
        items = [(choice, "call", {"index": index, "id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": first_args}})]
        items += [(choice, "call", {"index": index, "function": {"arguments": p}}) for p in pieces]
        style = draw(st.sampled_from(["clean", "cumulative", "resent", "no-index", "object"])) if quirky else "clean"
        if style == "cumulative":
            sofar = first_args
            for _, _, payload in items[1:]:
                sofar += payload["function"]["arguments"]
                payload["function"]["arguments"] = sofar
        elif style == "resent":
            for _, _, payload in items[1:]:
                payload["id"] = call_id
                payload["function"]["name"] = name
        elif style == "no-index":
            for _, _, payload in items:
                if draw(st.booleans()):
                    payload["index"] = None
                else:
                    del payload["index"]
        elif style == "object":
            items[0][2]["function"]["arguments"] = value
            del items[1:]
        queues.append(items)
        starts.append((choice, index))
    texts = {}
    for choice in range(n_choices):
        for field in ("content", "reasoning_content"):
            if draw(st.integers(0, 3)) == 0:
                text = draw(_TEXT)
                texts[(choice, field)] = text
                queues.append([(choice, field, p) for p in _cut(draw, text, max_piece)])
                starts.append(None)
    # Interleave: a call may start only after the calls before it in its choice have started.
    started: set[tuple[int, int]] = set()
    order = []
    positions = [0] * len(queues)
    while True:
        ready = []
        for q, items in enumerate(queues):
            if positions[q] >= len(items):
                continue
            if positions[q] == 0 and starts[q] is not None and starts[q][1] and (
                    (starts[q][0], starts[q][1] - 1) not in started):
                continue
            ready.append(q)
        if not ready:
            break
        q = draw(st.sampled_from(ready))
        choice, kind, payload = queues[q][positions[q]]
        if positions[q] == 0 and starts[q] is not None:
            started.add(starts[q])
        positions[q] += 1
        order.append((choice, kind, payload))
    # Group items into chunks: sometimes several fragments (or choices) share one chunk.
    chunks = []
    role = draw(st.booleans())
    if role:
        chunks.append(chunk_obj([choice_obj({"role": "assistant", "content": ""}, c) for c in range(n_choices)]))
    i = 0
    while i < len(order):
        choice, kind, payload = order[i]
        deltas: dict[int, dict] = {choice: _delta_for(kind, payload)}
        i += 1
        while i < len(order) and draw(st.integers(0, 4)) == 0:
            c2, k2, p2 = order[i]
            d = deltas.get(c2)
            if d is None:
                deltas[c2] = _delta_for(k2, p2)
            elif k2 == "call" and "tool_calls" in d:
                d["tool_calls"].append(p2)
            else:
                break
            i += 1
        chunks.append(chunk_obj([choice_obj(d, c) for c, d in deltas.items()]))
    finishes = {}
    for choice in range(n_choices):
        if draw(st.booleans()):
            finishes[choice] = "tool_calls" if per_choice.get(choice) else "stop"
            chunks.append(chunk_obj([choice_obj({}, choice, finish_reason=finishes[choice])]))
    usage = None
    if draw(st.booleans()):
        usage = {"prompt_tokens": draw(st.integers(0, 9999)), "completion_tokens": 7, "total_tokens": 8}
        chunks.append(chunk_obj([], usage=usage))
    if draw(st.integers(0, 2)) == 0:
        _add_turn_extras(draw, chunks)
    events = [b"data: " + dumps(c) + b"\n\n" for c in chunks]
    done = draw(st.booleans())
    if done:
        events.append(DONE)
    for _ in range(draw(st.integers(0, 3))):
        events.insert(draw(st.integers(0, len(events))), draw(st.sampled_from(
            [b": keep-alive\n\n", b":\n\n", b": OPENROUTER PROCESSING\n\n", b"event: ping\n\n"])))
    body = b"".join(events)
    eol = draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"]))
    if eol != b"\n":
        body = body.replace(b"\n", eol)
    if draw(st.integers(0, 9)) == 0:
        body = b"\xef\xbb\xbf" + body
    expect = {"calls": sorted(calls, key=lambda c: (c[0], c[1])), "texts": texts, "role": role,
              "finishes": finishes, "usage": usage, "complete": done or bool(finishes), "n_choices": n_choices}
    return body, expect


_LOGPROBS = {"content": [{"token": "a", "logprob": -0.25, "bytes": [97], "top_logprobs": []}], "refusal": None}


def _add_turn_extras(draw, chunks):
    """Sprinkle what only the turn keeps over some chunks: extras at every level, logprobs, envelope changes."""
    for chunk in chunks:
        if draw(st.integers(0, 3)):
            continue
        place = draw(st.sampled_from(["top", "envelope", "choice", "logprobs", "delta", "call"]))
        if place == "top":
            chunk["x_extra"] = draw(st.sampled_from([{"id": "req_1"}, {"usage": {"queue_time": 0.5}}, "padding", 3]))
        elif place == "envelope":
            key = draw(st.sampled_from(["id", "model", "system_fingerprint", "service_tier", "created"]))
            chunk[key] = draw(st.sampled_from([None, "late", 17]))
        for choice in chunk["choices"] or []:
            delta = choice.get("delta")
            if place == "choice":
                choice["stop_reason"] = draw(st.sampled_from([None, 7, "eos"]))
            elif place == "logprobs":
                choice["logprobs"] = _LOGPROBS
            elif place == "delta" and delta is not None:
                delta[draw(st.sampled_from(["channel", "annotations", "role"]))] = draw(
                    st.sampled_from(["analysis", [], [{"type": "x"}], "assistant"]))
            elif place == "call" and delta is not None:
                for call in delta.get("tool_calls") or []:
                    call["extra_content"] = {"google": {"thought_signature": "sig=="}}


def _delta_for(kind, payload):
    if kind == "call":
        return {"tool_calls": [payload]}
    return {kind: payload}


@st.composite
def cuts_for(draw, body: bytes):
    n = len(body)
    if n < 2:
        return []
    return sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=min(60, n - 1)))))


# ---------------------------------------------------------------- clean streams


@SETTINGS
@given(stream=clean_streams(), data=st.data())
def test_any_split_gives_the_same_result(impl, stream, data):
    body, _ = stream
    whole = impl.reassemble(body)
    cuts = data.draw(cuts_for(body))
    split = feed_split(impl, body, cuts)
    assert split == whole
    assert _turn(split) == _turn(whole)


@SETTINGS
@given(stream=clean_streams())
def test_generated_calls_come_back_exactly(impl, stream):
    body, expect = stream
    result = impl.reassemble(body)
    assert result.errors == []
    got = [(c.choice, c.index, c.id, c.name, c.arguments) for c in result.tool_calls]
    assert got == expect["calls"]
    for call in result.tool_calls:
        assert call.quirks == ()
        assert call.error is None
        assert json.loads(call.raw_arguments) == call.arguments
    assert result.complete == expect["complete"]
    assert result.usage == expect["usage"]
    by_index = {c.index: c for c in result.choices}
    for choice in range(expect["n_choices"]):
        ch = by_index.get(choice)
        content = expect["texts"].get((choice, "content"))
        reasoning = expect["texts"].get((choice, "reasoning_content"))
        if expect["role"]:
            content = "" if content is None else content
        if ch is None:
            assert content is None and reasoning is None and choice not in expect["finishes"]
            continue
        assert ch.text == content
        assert ch.reasoning == reasoning
        assert ch.refusal is None
        assert ch.finish_reason == expect["finishes"].get(choice)
        assert [c.id for c in ch.tool_calls] == [c[2] for c in expect["calls"] if c[0] == choice]


@SETTINGS
@given(stream=clean_streams(), data=st.data())
def test_twins_agree_on_clean_streams(both, stream, data):
    body, _ = stream
    cuts = data.draw(cuts_for(body))
    c, py = both
    assert c.reassemble(body) == py.reassemble(body)
    assert feed_split(c, body, cuts) == feed_split(py, body, cuts)
    assert _turn(feed_split(c, body, cuts)) == _turn(py.reassemble(body)) == _turn(c.reassemble(body))


def _turn(result):
    """Return a Result's to_response() and every choice's to_message(), or the error that says it has none."""
    try:
        return result.to_response(), [result.to_message(ch.index) for ch in result.choices]
    except ValueError as e:
        return str(e)


# ---------------------------------------------------------------- mangled streams


@st.composite
def mangled_streams(draw):
    """Return a clean stream's bytes after some damage: drops, duplicates, flips, reordering, a cut."""
    body, _ = draw(clean_streams(quirky=True))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["drop", "dup", "flip", "reorder", "cut", "insert"]))
        n = len(body)
        if n == 0:
            break
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a, min(n, a + 16)))
        if op == "drop":
            body = body[:a] + body[b:]
        elif op == "dup":
            body = body[:b] + body[a:b] + body[b:]
        elif op == "flip":
            body = body[:a] + bytes([body[a] ^ draw(st.integers(1, 255))]) + body[a + 1:]
        elif op == "cut":
            body = body[:a]
        elif op == "insert":
            body = body[:a] + draw(st.sampled_from([b"\n", b"\r", b"\r\n", b"\n\n", b"data: ", b'"', b"\\",
                                                    b"\\ud83d", b"{", b"}", b"\xff", b"\xf0\x9f", b"event: error\n",
                                                    b'"index":null,', b'"id":3,', b"1e999"])) + body[a:]
        else:
            sep = b"\r\n\r\n" if b"\r\n\r\n" in body else (b"\n\n" if b"\n\n" in body else b"\r\r")
            events = body.split(sep)
            perm = draw(st.permutations(range(len(events))))
            body = sep.join(events[i] for i in perm)
    return body


@SETTINGS
@given(body=mangled_streams(), data=st.data())
def test_twins_agree_on_mangled_streams(both, body, data):
    c, py = both
    rc, rpy = c.reassemble(body), py.reassemble(body)
    assert rc == rpy
    # beyond Result.__eq__: the error details and calls' error messages agree too
    assert [(e.kind, e.offset, e.detail) for e in rc.errors] == [(e.kind, e.offset, e.detail) for e in rpy.errors]
    assert [str(x.error) for x in rc.tool_calls] == [str(x.error) for x in rpy.tool_calls]
    assert _turn(rc) == _turn(rpy)
    cuts = data.draw(cuts_for(body))
    assert feed_split(c, body, cuts) == rc
    assert feed_split(py, body, cuts) == rpy
    assert _turn(feed_split(c, body, cuts)) == _turn(rc)


@SETTINGS
@given(body=mangled_streams(), data=st.data())
def test_mangled_streams_split_anywhere(impl, body, data):
    whole = impl.reassemble(body)
    assert feed_split(impl, body, data.draw(cuts_for(body))) == whole


# ---------------------------------------------------------------- limits cut, never alter (issue 18)

from _cutcheck import cut_or_whole  # noqa: E402

from callstitch import Limits  # noqa: E402


@st.composite
def random_limits(draw, body: bytes):
    """Return Limits that bite somewhere in body: each limit absent, tiny, or anywhere up to the body's size.

    Limits.event_bytes too: a dropped event cuts every call still open and every text (cut_or_whole
    then matches the calls in order, as one dropped whole shifts the others' positions).
    """
    size = len(body)
    pick = lambda most: draw(st.one_of(st.none(), st.integers(0, 8), st.integers(0, max(most, 0))))  # noqa: E731
    return Limits(call_bytes=pick(size // 2), stream_bytes=pick(size // 2), calls=pick(5), choices=pick(3),
                  event_bytes=draw(st.one_of(st.none(), st.integers(0, 400), st.integers(0, max(size, 0)))))


def _check_limits(impl, body, data):
    unlimited = impl.reassemble(body)
    limits = data.draw(random_limits(body))
    limited = impl.reassemble(body, limits=limits)
    if limited.format != unlimited.format:  # auto read what the drops left as another format (fuzz/fuzz_accumulator.py)
        unlimited = impl.reassemble(body, format=limited.format)
    assert cut_or_whole(limited, unlimited, limits.event_bytes is not None) == [], limits
    acc = impl.Accumulator(limits=limits)
    for piece in _pieces(body, data.draw(cuts_for(body))):
        acc.feed(piece)
    assert acc.finalize() == limited
    return limits, limited


def _pieces(body, cuts):
    last = 0
    for c in cuts:
        yield body[last:c]
        last = c
    yield body[last:]


@SETTINGS
@given(stream=clean_streams(), data=st.data())
def test_a_limit_keeps_a_call_whole_or_marks_it_cut(impl, stream, data):
    body, _ = stream
    _check_limits(impl, body, data)


@SETTINGS
@given(stream=clean_streams(quirky=True), data=st.data())
def test_a_limit_keeps_a_quirky_call_whole_or_marks_it_cut(impl, stream, data):
    body, _ = stream
    _check_limits(impl, body, data)


@SETTINGS
@given(body=mangled_streams(), data=st.data())
def test_a_limit_keeps_a_call_of_a_mangled_stream_whole_or_marks_it_cut(impl, body, data):
    _check_limits(impl, body, data)


@SETTINGS
@given(body=mangled_streams(), data=st.data())
def test_twins_agree_under_random_limits(both, body, data):
    limits = data.draw(random_limits(body))
    c, py = (i.reassemble(body, limits=limits) for i in both)
    assert c == py
    assert _turn(c) == _turn(py)
    assert [(e.kind, e.offset, e.detail) for e in c.errors] == [(e.kind, e.offset, e.detail) for e in py.errors]
