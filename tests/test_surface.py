"""The library's surface, both twins: defaults, telling a body that is no stream, misnamed formats, honest errors."""

from __future__ import annotations

import asyncio
import bz2
import functools
import gc
import gzip
import inspect
import lzma
import os
import random
import subprocess
import sys
import warnings

import orjson
import pytest

import _formats as F
import callstitch
from _formats import CALLS
from _streams import DONE, chunk, dumps, random_cuts, tool_delta
from callstitch import _accumulator_c, _accumulator_py
from callstitch._formats import registry
from callstitch._tee import ATee, Tee

# nginx's own page, as a load balancer in front of a model server sends it
BAD_GATEWAY = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
               b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
FORMATS = list(registry.names())
NAMED = FORMATS[:-1]


def chat_body(calls=CALLS):
    return b"".join(chunk([tool_delta(k, id=c.id, name=c.name, arguments=c.arguments)])
                    for k, c in enumerate(calls)) + DONE


# Each format's body, and its events as parsed chunks (what an SDK's stream yields).
BODIES = {"openai-chat": chat_body(), **{F.format_of(v): F.build(v, CALLS) for v in
                                         ("openai-responses", "anthropic", "gemini", "bedrock-sse", "cohere", "ollama")}}


def errors_of(result):
    return [(e.kind, e.offset, e.detail) for e in result.errors]


def fed_in_pieces(impl, body, format, seed):
    acc = impl.Accumulator(format=format)
    last = 0
    for cut in random_cuts(len(body), seed) + [len(body)]:
        acc.feed(body[last:cut])
        last = cut
    return acc.finalize()


# ---------------------------------------------------------------- no call, no error


@pytest.mark.parametrize("format", FORMATS)
def test_an_html_error_page_is_no_stream_and_says_it_looks_like_html(impl, format):
    result = impl.reassemble(BAD_GATEWAY, format=format)
    assert result.tool_calls == [] and not result.complete
    what = "any known format" if format == "auto" else format
    said = ("not a stream", 0, f"no event of {what} was recognised: the body looks like HTML (an error page?), "
                               "not an event stream, near '<html>'")
    if format == "ollama":  # JSON lines: each line is reported as it fails, then what the body is
        assert errors_of(result)[-1] == said
        assert {e.kind for e in result.errors[:-1]} == {"malformed chunk"}
    else:
        assert errors_of(result) == [said]
    assert result.errors[-1].data == "<html>"
    for seed in range(3):  # however it is split
        assert errors_of(fed_in_pieces(impl, BAD_GATEWAY, format, seed)) == errors_of(result)


@pytest.mark.parametrize("format", FORMATS)
def test_random_bytes_are_no_stream(impl, format):
    rng = random.Random(18)
    noise = bytes([rng.randrange(1, 256)]) + bytes(rng.randrange(256) for _ in range(4095))
    result = impl.reassemble(noise, format=format)
    assert result.tool_calls == []
    assert result.errors, "random bytes must not read as a clean empty stream"
    if format not in ("bedrock", "auto") or noise[0] != 0:  # a zero first byte would mean the AWS event stream
        assert result.errors[0].kind in ("not a stream", "malformed chunk")


@pytest.mark.parametrize("compress, name", [(gzip.compress, "gzip"), (bz2.compress, "bzip2"), (lzma.compress, "xz")])
def test_a_compressed_body_says_so(impl, compress, name):
    # Found by review: a gateway forwards a response an upstream compressed anyway as it came; its
    # calls are lost, and the error said only "the body is not an event stream".
    result = impl.reassemble(compress(BODIES["openai-chat"]), format="openai-chat")
    assert [e.kind for e in result.errors] == ["not a stream"]
    assert f"the body is {name}-compressed (a Content-Encoding not undone?)" in result.errors[0].detail


@pytest.mark.parametrize("format", ["auto", "openai-chat", "anthropic", "openai-responses", "cohere"])
def test_a_pretty_printed_error_body_gives_its_message(both, format):
    # Found by review: once every "{" meant JSON lines, OpenAI's indented error bodies were read
    # line by line: a malformed chunk per line, then "not a stream". A "{" alone on the first line
    # is a JSON document, whatever the reads: read whole, as the same document on one line is.
    document = orjson.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}},
                            option=orjson.OPT_INDENT_2)
    for body, at in ((document, 0), (b"\xef\xbb\xbf\n\n{  \r\n" + document[2:], 5)):
        seen = set()
        for impl in both:
            for size in (len(body), 1, 2, 5):
                acc = impl.Accumulator(format=format)
                for i in range(0, len(body), size):
                    acc.feed(body[i:i + size])
                result = acc.finalize()
                seen.add(str([(e.kind, e.detail, e.offset) for e in result.errors]))
                assert [(e.kind, e.detail, e.offset) for e in result.errors] == [
                    ("in-band error", "invalid_request_error: Incorrect API key provided", at)], (impl.name, size)
        assert len(seen) == 1


def test_a_brace_alone_is_no_stream(both):
    for impl in both:
        result = impl.reassemble(b"{")
        assert [e.kind for e in result.errors] == ["not a stream"]
        assert "the body looks like a JSON document" in result.errors[0].detail


def test_a_framing_callstitch_does_not_know_is_no_stream(impl):
    body = b"message: {\"choices\": []}\r\nmessage: {\"choices\": []}\r\n"
    result = impl.reassemble(body, format="openai-chat")
    assert [e.kind for e in result.errors] == ["not a stream"]
    assert "the body is not an event stream, near " in result.errors[0].detail
    assert result.errors[0].offset == 0


@pytest.mark.parametrize("format", FORMATS)
def test_a_json_document_is_read_as_a_line_of_json_whatever_the_format(impl, format):
    # A body starting with "{" is JSON lines whatever the format named (as "auto" reads it): an
    # error body gives its message, any other JSON document of no format is no stream.
    error = impl.reassemble(b'{"error": {"message": "Rate limit reached", "type": "requests"}}', format=format)
    assert [(e.kind, e.detail, e.offset) for e in error.errors] == [
        ("in-band error", "requests: Rate limit reached", 0)]
    other = impl.reassemble(b'{"foo": 1}', format=format)
    assert other.tool_calls == [] and other.errors
    if format != "auto":
        assert other.errors[-1].kind == "not a stream" and "its events are of no known format" in other.errors[-1].detail


def test_json_lines_of_another_format_name_it(impl):
    result = impl.reassemble(BODIES["ollama"], format="openai-chat")
    assert [(e.kind, e.detail) for e in result.errors] == [
        ("wrong format", "the events look like ollama, not openai-chat; pass format='ollama' or 'auto'")]


def test_the_offset_is_where_the_first_stray_line_starts(impl):
    body = b"\xef\xbb\xbf: keep-alive\n\n\n<!DOCTYPE html>\n<html>\n"
    result = impl.reassemble(body)
    assert [(e.kind, e.offset) for e in result.errors] == [("not a stream", 18)]
    assert "'<!DOCTYPE html>'" in result.errors[0].detail


@pytest.mark.parametrize("format", FORMATS)
def test_an_empty_body_is_no_stream(impl, format):
    result = impl.reassemble(b"", format=format)
    what = "any known format" if format == "auto" else format
    assert errors_of(result) == [("not a stream", 0, f"no event of {what} was recognised: the body is empty")]
    acc = impl.Accumulator(format=format)
    acc.feed(b"")
    assert errors_of(acc.finalize()) == errors_of(result)


@pytest.mark.parametrize("body", [b": keep-alive\n\n" * 3, b"\n\n\r\n", b"event: ping\n\nid: 7\nretry: 10\n\n"])
def test_keep_alives_alone_are_no_stream(impl, body):
    # A stream that sent only keep-alives (comments, blank lines, events without data) carried no
    # event: it is reported like an empty body, so a gateway sees that nothing came.
    result = impl.reassemble(body, format="openai-chat")
    assert errors_of(result) == [("not a stream", 0, "no event of openai-chat was recognised: the body holds no "
                                                     "event, only blank lines or comments (keep-alives)")]


@pytest.mark.parametrize("body", [b'data: {}\n\ndata: {"id": "x", "object": "list"}\n\n', b'data: {"foo": 1}\n\n'])
def test_events_the_compiled_fast_path_takes_do_not_bypass_it(impl, body):
    # The compiled twin's chat scanner accepts these chunks (no choices, nothing to do): they
    # still are no chat event, and the stream must say so in both twins.
    result = impl.reassemble(body, format="openai-chat")
    assert [(e.kind, e.offset) for e in result.errors] == [("not a stream", 0)]
    assert result.errors[0].detail == "no event of openai-chat was recognised: its events are of no known format"


@pytest.mark.parametrize("format", NAMED)
def test_real_streams_and_short_ones_are_streams(impl, format):
    assert impl.reassemble(BODIES[format], format=format).errors == []
    assert impl.reassemble(BODIES[format]).errors == []  # the default, auto
    # the first event alone (a stream cut right after it) is still a stream of its format
    assert [e.kind for e in impl.reassemble(b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n')
            .errors] == []
    assert impl.reassemble(DONE, format="openai-chat").errors == []


def test_calls_given_as_fragments_need_no_event(impl):
    acc = impl.Accumulator(format="openai-chat")
    acc.add(0, id="a", name="f", arguments="{}")
    assert acc.finalize().errors == []
    acc = impl.Accumulator()
    acc.feed_chunk(orjson.loads(chat_body().split(b"\n\n")[0][6:]))
    assert acc.finalize().errors == []


def test_the_cli_exits_1_on_an_error_page(tmp_path):
    page = tmp_path / "capture.sse"
    page.write_bytes(BAD_GATEWAY)
    proc = subprocess.run([sys.executable, "-m", "callstitch", "reassemble", str(page)], capture_output=True,
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == b""
    err = proc.stderr.decode()
    assert f"{page} (stream 0, byte 0): not a stream: no event of any known format was recognised: the body " \
           "looks like HTML" in err
    assert "errors: 1 not a stream" in err


# ---------------------------------------------------------------- the default format and misnamed streams


def test_auto_is_the_default_everywhere(impl):
    from callstitch import spark
    for fn in (callstitch.reassemble, impl.reassemble, impl.Accumulator, callstitch.reassemble_many, spark.reassemble,
               callstitch.tee, callstitch.atee):
        assert inspect.signature(fn).parameters["format"].default == "auto", fn


@pytest.mark.parametrize("format", NAMED)
def test_an_unnamed_body_of_any_format_yields_its_calls(impl, format):
    for result in (impl.reassemble(BODIES[format]), fed_in_pieces(impl, BODIES[format], "auto", 1)):
        assert [c.name for c in result.tool_calls] == [c.name for c in CALLS]
        assert result.format == format and result.errors == []
    assert [c.name for c in callstitch.reassemble(BODIES[format]).tool_calls] == [c.name for c in CALLS]


@pytest.mark.parametrize("named", NAMED)
@pytest.mark.parametrize("sent", NAMED)
def test_a_misnamed_stream_names_the_format_it_looks_like_once(impl, named, sent):
    if named == sent:
        return
    result = impl.reassemble(BODIES[sent], format=named)
    assert result.tool_calls == []
    hint = f"pass format={sent!r} or 'auto'"
    if named == "ollama" and BODIES[sent].lstrip()[:1] not in (b"{", b"["):
        # SSE against ollama, whose framing, when the first bytes do not tell, is JSON lines: not
        # events of that framing at all; the last error says what they look like. (Any format's
        # JSON lines are read as JSON lines: their events are then plainly another format's.)
        *lines, said = result.errors
        assert said.kind == "not a stream" and {e.kind for e in lines} <= {"malformed chunk"}
        assert hint in said.detail or (sent != "openai-chat" and "the body looks like server-sent events, not JSON "
                                       "lines; pass format='auto', near 'event: " in said.detail), said.detail
        return
    wrong = [e for e in result.errors if e.kind == "wrong format"]
    assert len(wrong) == 1, result.errors  # once per stream, not per event
    assert wrong[0].detail == f"the events look like {sent}, not {named}; {hint}"
    assert result.errors == wrong  # the events it skipped are not misread into other errors
    for seed in range(2):
        assert errors_of(fed_in_pieces(impl, BODIES[sent], named, seed)) == errors_of(result)


def test_strict_raises_on_a_misnamed_stream(impl):
    with pytest.raises(callstitch.StreamError, match="look like anthropic, not openai-chat; pass format='anthropic' or 'auto'"):
        impl.reassemble(BODIES["anthropic"], format="openai-chat", strict=True)
    with pytest.raises(callstitch.StreamError, match="looks like HTML"):
        impl.reassemble(BAD_GATEWAY, strict=True)


def test_misnamed_chunk_objects_are_reported_too(impl):
    events = [orjson.loads(line[6:]) for line in BODIES["anthropic"].split(b"\n") if line.startswith(b"data: ")]
    acc = impl.Accumulator(format="openai-chat")
    for obj in events:
        acc.feed_chunk(obj)
    result = acc.finalize()
    assert [(e.kind, e.offset) for e in result.errors] == [("wrong format", None)]
    assert result.usage is None  # Anthropic's message_delta usage is not read as a chat chunk's


# ---------------------------------------------------------------- honest surfaces


def test_reassemble_has_its_real_signature():
    params = inspect.signature(callstitch.reassemble).parameters
    assert [(p.name, p.kind, p.default) for p in params.values()] == [
        ("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("format", inspect.Parameter.POSITIONAL_OR_KEYWORD, "auto"),
        ("strict", inspect.Parameter.KEYWORD_ONLY, False),
        ("limits", inspect.Parameter.KEYWORD_ONLY, None)]


def test_dir_lists_only_public_names():
    names = dir(callstitch)
    for helper in ("TYPE_CHECKING", "import_module", "make_reassemble"):
        assert helper not in names
    assert [n for n in names if not n.startswith("__")] == sorted(n for n in callstitch.__all__ if n[:2] != "__")
    assert set(callstitch.__all__) <= set(names)


def test_a_call_repr_shows_its_arguments_as_arguments(impl):
    result = impl.reassemble(chat_body(CALLS[:1]))
    assert repr(result.tool_calls[0]) == ("ToolCall(id='call_w1', name='get_weather', choice=0, index=0, "
                                          "arguments={'city': 'Paris', 'units': 'celsius'})")
    cut = impl.reassemble(chunk([tool_delta(0, id="c", name="f", arguments='{"a": ')]))
    assert repr(cut.tool_calls[0]) == ("ToolCall(id='c', name='f', choice=0, index=0, arguments=None, "
                                       "raw_arguments='{\"a\": ', error='truncated')")
    custom = callstitch.ToolCall("k", "grep", 0, 0, "a|b", "a|b", kind="custom")
    assert repr(custom).endswith("arguments='a|b', kind='custom')")
    huge = impl.reassemble(chunk([tool_delta(0, id="h", name="f", arguments=dumps({"s": "x" * 10000}).decode())]))
    assert len(repr(huge.tool_calls[0])) < 200


def test_a_choice_repr_shows_no_text_as_none(impl):
    result = impl.reassemble(chat_body(CALLS[:1]))
    assert repr(result.choices[0]) == "Choice(index=0, finish_reason=None, tool_calls=1, text=None)"
    assert "text=''" in repr(callstitch.Choice(0, "", None, None, None, []))


@pytest.mark.parametrize("format", ["openai-chat", "auto", "bedrock"])
@pytest.mark.parametrize("value", [{"choices": []}, 5, None, 1.5, ["data: x"]])
def test_feed_of_a_parsed_chunk_points_to_feed_chunk(impl, format, value):
    acc = impl.Accumulator(format=format)
    with pytest.raises(TypeError) as info:
        acc.feed(value)
    assert str(info.value) == (f"feed() takes bytes or str as read from the network, not {type(value).__name__}; "
                               "for a parsed chunk use feed_chunk()")
    for ok in (b"", bytearray(b""), memoryview(b""), ""):
        assert acc.feed(ok) == []


# ---------------------------------------------------------------- an async on_call


def anthropic_pieces():
    body = BODIES["anthropic"]
    return [body[i:i + 50] for i in range(0, len(body), 50)]


async def _source(pieces):
    for piece in pieces:
        await asyncio.sleep(0)
        yield piece


def test_atee_awaits_an_async_on_call(impl):
    seen = []

    async def record(call):
        await asyncio.sleep(0)  # a real suspension: the handler finishes only when awaited
        seen.append(call.name)

    async def main():
        t = ATee(_source(anthropic_pieces()), on_call=record, accumulator=impl.Accumulator())
        out = [piece async for piece in t]
        return out, t.result

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would fail here
        out, result = asyncio.run(main())
        gc.collect()
    assert b"".join(out) == BODIES["anthropic"]
    assert seen == [c.name for c in CALLS] == [c.name for c in result.tool_calls]


def test_atee_awaits_an_async_on_call_for_calls_left_at_the_end(impl):
    seen = []

    async def record(call):
        await asyncio.sleep(0)
        seen.append((call.name, call.error.kind if call.error else None))

    body = F.build("anthropic", CALLS, cut=2)  # the last call cut mid-arguments: never closed by the protocol

    async def main():
        t = callstitch.atee(_source([body]), on_call=record)
        async for _ in t:
            pass
        return t.result

    result = asyncio.run(main())
    assert seen == [(c.name, None) for c in CALLS[:2]] + [(CALLS[2].name, "truncated")]
    assert len(result.tool_calls) == 3


def test_atee_still_takes_a_sync_on_call(impl):
    seen = []

    async def main():
        t = ATee(_source(anthropic_pieces()), on_call=seen.append, accumulator=impl.Accumulator())
        async for _ in t:
            pass

    asyncio.run(main())
    assert [c.name for c in seen] == [c.name for c in CALLS]


def test_tee_refuses_an_async_on_call_when_called():
    async def record(call):
        pass

    class Handler:
        async def __call__(self, call):
            pass

        async def method(self, call):
            pass

    for handler in (record, Handler(), Handler().method, functools.partial(record)):
        with pytest.raises(TypeError, match="coroutine function.*use atee"):
            callstitch.tee([BODIES["anthropic"]], on_call=handler)


def test_tee_takes_an_on_call_that_returns_a_value(impl):
    # Only an awaitable is refused: a sync on_call may return anything (list.append's None, a count, a dict).
    seen = []
    for handler in (seen.append, lambda call: seen.append(call) or len(seen), lambda call: {"id": call.id}):
        t = Tee([BODIES["anthropic"]], on_call=handler, accumulator=impl.Accumulator())
        assert list(t) == [BODIES["anthropic"]]
        assert len(t.result.tool_calls) == len(CALLS)
    assert [c.name for c in seen] == [c.name for c in CALLS] * 2


def test_tee_refuses_an_on_call_that_returns_an_awaitable(impl):
    async def record(call):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = Tee([BODIES["anthropic"]], on_call=lambda call: record(call), accumulator=impl.Accumulator())
        with pytest.raises(TypeError, match="returned an awaitable: use atee"):
            list(t)
        gc.collect()


# ---------------------------------------------------------------- a pure install


def test_a_pure_install_imports_as_the_pure_twin_without_the_variable(tmp_path):
    import shutil
    root = os.path.join(os.path.dirname(__file__), "..")
    if not os.path.exists(os.path.join(root, "setup.py")):
        pytest.skip("needs the source tree")
    source = tmp_path / "src-tree"
    source.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy(os.path.join(root, name), source / name)
    shutil.copytree(os.path.join(root, "src"), source / "src",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = dict(os.environ)
    env.pop("CALLSTITCH_NO_EXTENSIONS", None)
    env.pop("PYTHONPATH", None)
    pip = [python, "-m", "pip", "install", "-q", "--no-input"]
    subprocess.run(pip + ["orjson", "setuptools>=77"], check=True, env=env, timeout=600, capture_output=True)
    out = subprocess.run(pip + ["--no-build-isolation", str(source)], env={**env, "CALLSTITCH_NO_EXTENSIONS": "1"},
                         timeout=600, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    code = ("import callstitch; r = callstitch.reassemble(open(0, 'rb').read()); "
            "print(callstitch.IMPLEMENTATION, callstitch.Accumulator.__module__, [c.name for c in r.tool_calls])")
    # the variable is not set at this run: the install itself says it is pure
    ran = subprocess.run([python, "-c", code], input=chat_body(), env=env, cwd=tmp_path, capture_output=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout.decode().split(None, 2) == ["python", "callstitch._accumulator_py",
                                                  str([c.name for c in CALLS]) + "\n"]
    # without the marker the same install is a normal one missing its compiled twin: an error, never a fallback
    site = subprocess.run([python, "-c", "import callstitch, os; print(os.path.dirname(callstitch.__file__))"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    os.remove(os.path.join(site, "_pure_build.py"))
    broken = subprocess.run([python, "-c", "import callstitch"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert broken.returncode != 0
    assert "compiled extension is not available" in broken.stderr and "CALLSTITCH_NO_EXTENSIONS=1" in broken.stderr
