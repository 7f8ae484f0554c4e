"""Gemini's streamGenerateContent without alt=sse: one JSON array, element by element. Both twins.

Google writes the array pretty-printed, `[{` … `}` `\\r\\n,\\r\\n` `{` … `}` `\\r\\n]`. Each element is
one chunk, read as soon as it is whole, in any split; `auto` tells the framing from the first
bytes; the closing `]` ends the stream (and is where batch splitting cuts bodies stored back to
back); Limits.event_bytes applies to one element. Before, such a body gave no call and no error.
"""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import callstitch
from _streams import feed_pieces

HERE = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
STEM = os.path.join(HERE, "gemini__callstitch-made__json-array-two-calls")
ARRAY = open(STEM + ".json", "rb").read()
SSE_FORM = open(STEM + ".sse", "rb").read()
EXPECTED = json.load(open(STEM + ".expected.json", encoding="utf-8"))
TEXT = "I'll look up the weather in Zürich and Tokyo <both cities>."
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def feed_split(impl, body, cuts, format="gemini", limits=None):
    acc = impl.Accumulator(format=format, limits=limits)
    feed_pieces(acc, body, cuts)
    return acc.finalize()


def _calls(result):
    return [(c.id, c.name, c.arguments) for c in result.tool_calls]


def _check(result):
    assert result.errors == []
    assert _calls(result) == [(c["id"], c["name"], c["arguments"]) for c in EXPECTED["tool_calls"]]
    assert (result.text, result.finish_reason, result.complete, result.format) == (TEXT, "STOP", True, "gemini")
    assert result.usage["totalTokenCount"] == 207


def _chunk(text=None, call=None, finish=None, rid="r1"):
    part = {"text": text} if call is None else {"functionCall": call}
    candidate = {"content": {"parts": [part], "role": "model"}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": rid}


def _array(elements, sep=b"\r\n,\r\n", end=b"\r\n]", indent=2):
    return b"[" + sep.join(json.dumps(e, indent=indent).encode() for e in elements) + end


def _elements(rid="r1", n=1):
    return [_chunk(text="Checking } ] \" \\ now."), _chunk(call={"name": "get_weather", "args": {"city": "Paris", "n": n}}),
            _chunk(call={"name": "get_time", "args": {"tz": ["CET", {"dst": True}]}}, finish="STOP", rid=rid)]


def test_fixture_named_and_auto(impl):
    for fmt in ("gemini", "auto"):
        _check(impl.reassemble(ARRAY, format=fmt))
        _check(feed_split(impl, ARRAY, range(1, len(ARRAY)), fmt))


def test_fixture_same_as_its_sse_form(impl):
    array, sse = (impl.reassemble(b, format="gemini") for b in (ARRAY, SSE_FORM))
    assert (array.tool_calls, array.text, array.usage, array.finish_reason) == (
        sse.tool_calls, sse.text, sse.usage, sse.finish_reason)
    assert array.complete  # the closing bracket ends the stream (the SSE form has the finish reason too)


@SETTINGS
@given(data=st.data())
def test_any_split_gives_the_same_result(impl, data):
    body = data.draw(st.sampled_from([ARRAY, _array(_elements()), _array(_elements(), sep=b",", end=b"]", indent=None)]))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=60))))
    fmt = data.draw(st.sampled_from(["gemini", "auto"]))
    assert feed_split(impl, body, cuts, fmt) == impl.reassemble(body, format=fmt)


@pytest.mark.parametrize("layout", ["crlf", "lf", "compact", "spaces", "comma-after", "bom", "leading-ws",
                                    "trailing-ws"])
def test_layouts(impl, layout):
    elements = _elements()
    body = {
        "crlf": _array(elements),
        "lf": _array(elements, sep=b"\n,\n", end=b"\n]"),
        "compact": _array(elements, sep=b",", end=b"]", indent=None),
        "spaces": b"[ " + b" ,  ".join(json.dumps(e).encode() for e in elements) + b" ]",
        "comma-after": _array(elements, sep=b",\r\n", end=b"\r\n]"),
        "bom": b"\xef\xbb\xbf" + _array(elements),
        "leading-ws": b"\r\n  \n" + _array(elements),
        "trailing-ws": _array(elements) + b"\r\n\r\n",
    }[layout]
    for fmt in ("gemini", "auto"):
        result = impl.reassemble(body, format=fmt)
        assert result.errors == [] and result.format == "gemini" and result.complete
        assert _calls(result) == [(None, "get_weather", {"city": "Paris", "n": 1}),
                                  (None, "get_time", {"tz": ["CET", {"dst": True}]})]
        assert result.text == 'Checking } ] " \\ now.'
        # a byte at a time: a BOM cut by the reads does not hide the framing
        assert feed_split(impl, body, range(1, len(body)), fmt) == result


def test_error_object_inside_the_array(impl):
    error = {"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                       "status": "RESOURCE_EXHAUSTED"}}
    alone = _array([error], end=b"\n]")
    for fmt in ("gemini", "auto"):
        result = impl.reassemble(alone, format=fmt)
        assert [(e.kind, e.offset) for e in result.errors] == [("in-band error", 1)]
        assert "RESOURCE_EXHAUSTED" in str(result.errors[0]) or "429" in str(result.errors[0])
    after = _array(_elements()[:2] + [error])
    result = impl.reassemble(after, format="gemini")
    assert [e.kind for e in result.errors] == ["in-band error"]
    assert result.errors[0].offset == after.rindex(b'{\n  "error"')
    assert _calls(result) == [(None, "get_weather", {"city": "Paris", "n": 1})]


def test_truncated_array(impl):
    body = _array(_elements())
    no_bracket = body[:body.rindex(b"]")]
    result = impl.reassemble(no_bracket, format="gemini")
    assert result.errors == [] and len(result.tool_calls) == 2 and result.finish_reason == "STOP"
    third = body.index(b'{\n  "candidates"', body.index(b"get_weather"))
    cut = body[:third + 60]  # inside the third element: reported, the elements before it kept
    result = impl.reassemble(cut, format="gemini")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", third)]
    assert _calls(result) == [(None, "get_weather", {"city": "Paris", "n": 1})]
    assert not result.complete


def test_junk_between_elements_reported(impl):
    elements = [json.dumps(e).encode() for e in _elements()]
    body = b"[" + elements[0] + b",\r\n oops \r\n," + elements[1] + b"," + elements[2] + b"]"
    result = impl.reassemble(body, format="gemini")
    assert [(e.kind, e.offset) for e in result.errors] == [("malformed chunk", body.index(b"oops"))]
    assert len(result.tool_calls) == 2 and result.complete


def test_event_bytes_applies_to_one_element(impl):
    elements = _elements()
    big = _chunk(text="x" * 5000)
    body = _array([elements[0], big, elements[1], elements[2]])
    each = max(len(json.dumps(e, indent=2)) for e in elements)
    limits = callstitch.Limits(event_bytes=each + 10)  # every element fits but the big one; the body does not
    assert len(body) > 3 * (each + 10)
    for cuts in ([], range(1, len(body), 97)):
        result = feed_split(impl, body, cuts, limits=limits)
        assert [(e.kind, e.offset) for e in result.errors] == [("limit", body.index(b'{\n  "candidates"', 10))]
        assert len(result.tool_calls) == 2 and result.text == 'Checking } ] " \\ now.'


@SETTINGS
@given(data=st.data())
def test_twins_agree_on_mangled_arrays(both, data):
    body = bytearray(_array(_elements()))
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(0, len(body)))
        what = data.draw(st.sampled_from([b"", b"]", b"[", b"{", b"}", b'"', b"\\", b",", b"\r\n", b"x"]))
        if data.draw(st.booleans()) and at < len(body):
            del body[at:at + data.draw(st.integers(1, 20))]
        body[at:at] = what
    body = bytes(body)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=20))))
    c, py = (feed_split(twin, body, cuts, "gemini") for twin in both)
    assert c == py
    assert c == both[0].reassemble(body, format="gemini")


# ---------------------------------------------------------------- bodies back to back, in batch


def _bodies(n, glue):
    out = []
    for k in range(n):
        els = _elements(rid=f"resp-{k}", n=k)
        out.append(_array(els, sep=b",", end=b"]", indent=None) if glue == b"compact" else _array(els))
    return b"\n".join(out) + b"\n" if glue == b"compact" else glue.join(out)


@pytest.mark.parametrize("glue", [b"", b"\r\n", b"compact"], ids=["adjacent", "crlf", "compact-lines"])
def test_batch_cuts_each_array(tmp_path, glue):
    path = str(tmp_path / "bodies.json")
    open(path, "wb").write(_bodies(12, glue))
    records = list(callstitch.reassemble_many([path]))
    assert [(r["stream"], r["name"], r["arguments"].get("n")) for r in records] == [
        (k, name, k if name == "get_weather" else None) for k in range(12) for name in ("get_weather", "get_time")]


def test_batch_range_tasks_and_twins(tmp_path):
    """Range tasks (a small CALLSTITCH_RANGE_BYTES) over many bodies: every body once, whatever the jobs and twin."""
    path = str(tmp_path / "many.json")
    open(path, "wb").write(_bodies(150, b""))
    outputs = []
    for jobs in ("1", "2"):
        for pure in ("", "1"):
            env = dict(os.environ, CALLSTITCH_RANGE_BYTES="4096")
            if pure:
                env["CALLSTITCH_NO_EXTENSIONS"] = "1"
            out = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", path, "-j", jobs, "--quiet"],
                                 capture_output=True, env=env, timeout=300)
            assert out.returncode == 0, out.stderr
            outputs.append(out.stdout)
    records = [json.loads(line) for line in outputs[0].splitlines()]
    assert [(r["stream"], r["name"]) for r in records] == [
        (k, name) for k in range(150) for name in ("get_weather", "get_time")]
    assert all(o == outputs[0] for o in outputs)


def test_splitter_cuts_do_not_depend_on_reads():
    from callstitch._batch.split import Splitter
    body = _bodies(6, b"\r\n")
    want = None
    for step in (len(body), 1, 7, 64, 300):
        splitter = Splitter("gemini", "json-array")
        cuts, tail, base, pos = [], b"", 0, 0
        while True:
            data = body[pos:pos + step]
            pos += len(data)
            buf = tail + data
            found, safe = splitter.scan(buf, 0, not data)
            cuts += [base + c for c in found]
            if not data:
                break
            tail, base = buf[safe:], base + safe
        want = want or cuts
        assert cuts == want
    # after each body's closing bracket (the last one too, seen before the input is known to end)
    assert len(want) == 6 and want[-1] == len(body) and all(body[c - 1:c] == b"]" for c in want)
