"""The Gemini turn: to_response() is a GenerateContentResponse, to_message() a Content, both twins alike.

Checked against google-genai (the official SDK): its response and Content models validate every
capture's turn, and its client sends to_message() back as history to a local server, signatures
byte for byte.
"""

import base64
import glob
import json
import os
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import callstitch
from _servers import ServerThread

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
BODIES = sorted(path for pattern in ("gemini__*", "vertex__*") for path in glob.glob(os.path.join(CAPTURES, pattern))
                if not path.endswith(".expected.json"))

genai_types = pytest.importorskip("google.genai.types")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def turn(impl, body, cuts=(), limits=None):
    acc = impl.Accumulator(format="gemini", limits=limits) if limits else impl.Accumulator(format="gemini")
    start = 0
    for cut in [*cuts, len(body)]:
        acc.feed(body[start:cut])
        start = cut
    return acc.finalize()


def chunks_of(body):
    """Return the chunks of an SSE or JSON-array capture, parsed (what the API sent)."""
    text = body.decode()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def signatures_sent(body):
    """Return (signature, what its part was: call name or text kind) for every part that carried one."""
    found = []
    for chunk in chunks_of(body):
        for candidate in chunk.get("candidates", ()):
            for part in candidate.get("content", {}).get("parts", ()):
                if "thoughtSignature" in part:
                    found.append((part["thoughtSignature"], part.get("functionCall", {}).get("name")))
    return found


@pytest.mark.parametrize("path", BODIES, ids=os.path.basename)
def test_every_capture_gives_the_sdks_response_and_content(impl, path):
    body = read(path)
    result = turn(impl, body)
    response = result.to_response()
    validated = genai_types.GenerateContentResponse.model_validate(response)
    assert validated.candidates[0].content.role == "model"
    message = result.to_message()
    genai_types.Content.model_validate(message)
    assert message == {"role": "model", "parts": response["candidates"][0]["content"]["parts"]}
    # Every call whole, in order, with its id; every signature on the part that carried it.
    calls = [part["functionCall"] for part in message["parts"] if "functionCall" in part]
    assert [(c.get("id"), c["name"], c["args"]) for c in calls] == [(c.id, c.name, c.arguments) for c in result.tool_calls]
    kept = [(part["thoughtSignature"], part.get("functionCall", {}).get("name")) for part in message["parts"]
            if "thoughtSignature" in part]
    assert kept == signatures_sent(body)
    # The last chunk's fields: usage is cumulative, modelVersion and responseId as sent.
    last = chunks_of(body)[-1]
    assert response["usageMetadata"] == last["usageMetadata"]
    assert response["modelVersion"] == last["modelVersion"] and response["responseId"] == last["responseId"]
    assert response["candidates"][0]["finishReason"] == "STOP"
    text = "".join(p["text"] for p in message["parts"] if "text" in p and not p.get("thought"))
    assert text == (result.text or "")
    assert validated.text == (result.text or None) or not result.text


PAIRS = [(path, path[:-5] + ".sse") for path in BODIES if path.endswith(".json") and path[:-5] + ".sse" in BODIES]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda pair: os.path.basename(pair[0]))
def test_the_sse_and_the_json_array_of_the_same_chunks_give_the_same_turn(impl, pair):
    assert PAIRS
    assert turn(impl, read(pair[0])).to_response() == turn(impl, read(pair[1])).to_response()


@pytest.mark.parametrize("path", BODIES, ids=os.path.basename)
def test_the_compiled_fast_path_takes_the_captures_chunks(both, path):
    c = both[0].module
    c._reset_path_counts()
    turn(both[0], read(path))
    counts = c._path_counts()
    assert counts["gemini"] + counts["gemini-piece"] > 0  # the turn did not push every chunk the general way
    assert turn(both[0], read(path)).to_response() == turn(both[1], read(path)).to_response()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(BODIES), st.data())
def test_any_split_gives_the_same_turn_in_both_twins(both, path, data):
    body = read(path)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(body) - 1), max_size=40))))
    expected = turn(both[1], body)
    for impl in both:
        result = turn(impl, body, cuts)
        assert result.to_response() == expected.to_response()
        assert result.to_message() == expected.to_message()


def sse(*chunks):
    return "".join("data: " + json.dumps(chunk) + "\r\n\r\n" for chunk in chunks).encode()


def chunk(parts=None, finish=None, index=0, **top):
    candidate = {"index": index}
    if parts is not None:
        candidate["content"] = {"parts": parts, "role": "model"}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-3-pro-preview", "responseId": "r-1", **top}


MIXED = sse(
    chunk([{"text": "Let me ", "thought": True}]),
    chunk([{"text": "think.", "thought": True}]),
    chunk([{"text": "", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="}]),
    chunk([{"text": "Sure: "}], promptFeedback={"safetyRatings": []}),
    chunk([{"text": "running it."}]),
    chunk([{"executableCode": {"language": "PYTHON", "code": "print(1)"}}]),
    chunk([{"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}}]),
    chunk([{"text": "Then "}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0="}}]),
    chunk([{"text": "a call."}, {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}},
                                  "thoughtSignature": "c2lnLWNhbGw="}]),
    chunk([{"functionCall": {"name": "lookup", "args": {"q": "y"}}}, {"futurePart": {"x": 1}}],
          someNewField={"kept": True}),
    chunk([{"text": ""}], finish="STOP", usageMetadata={"promptTokenCount": 3, "totalTokenCount": 9},
          createTime="2026-01-01T00:00:00Z"),
)


def test_parts_merge_the_way_the_non_streamed_response_has_them(impl):
    result = turn(impl, MIXED)
    assert result.to_response() == {
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Let me think.", "thought": True, "thoughtSignature": "c2lnLXRob3VnaHQ="},
                {"text": "Sure: running it."},
                {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
                {"text": "Then "},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0="}},
                {"text": "a call."},
                {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}}, "thoughtSignature": "c2lnLWNhbGw="},
                {"functionCall": {"name": "lookup", "args": {"q": "y"}}},
                {"futurePart": {"x": 1}},
            ]},
            "index": 0, "finishReason": "STOP"}],
        "modelVersion": "gemini-3-pro-preview", "responseId": "r-1", "promptFeedback": {"safetyRatings": []},
        "someNewField": {"kept": True}, "createTime": "2026-01-01T00:00:00Z",
        "usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 9},
    }
    assert result.text == "Sure: running it.Then a call."  # the inlineData chunk's text too
    assert result.reasoning == "Let me think."


def test_a_signed_text_part_ends_its_run(impl):
    body = sse(chunk([{"text": "One", "thoughtSignature": "QQ=="}]), chunk([{"text": " two"}]),
               chunk([{"text": " three", "thoughtSignature": "Qg=="}]), chunk([{"text": " four"}], finish="STOP"))
    assert turn(impl, body).to_message()["parts"] == [
        {"text": "One", "thoughtSignature": "QQ=="}, {"text": " two three", "thoughtSignature": "Qg=="},
        {"text": " four"}]


def test_candidate_fields_are_the_last_sent_and_citations_add_up(impl):
    cite = lambda *uris: {"citationSources": [{"uri": uri} for uri in uris]}  # noqa: E731
    first = chunk([{"text": "a"}])
    first["candidates"][0].update(safetyRatings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "LOW"}],
                                  citationMetadata=cite("u1"))
    last = chunk([{"text": "b"}], finish="MAX_TOKENS")
    last["candidates"][0].update(safetyRatings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "NEGLIGIBLE"}],
                                 citationMetadata=cite("u1", "u2"), finishMessage="cut", groundingMetadata={"webSearchQueries": ["q"]},
                                 avgLogprobs=-0.5)
    got = turn(impl, sse(first, last)).to_response()["candidates"][0]
    assert got["safetyRatings"] == last["candidates"][0]["safetyRatings"]
    assert got["citationMetadata"] == cite("u1", "u2")
    assert (got["finishReason"], got["finishMessage"], got["avgLogprobs"]) == ("MAX_TOKENS", "cut", -0.5)
    assert got["groundingMetadata"] == {"webSearchQueries": ["q"]}
    genai_types.GenerateContentResponse.model_validate(turn(impl, sse(first, last)).to_response())


def test_every_candidate_is_kept(impl):
    body = sse(chunk([{"text": "zero"}], index=0), chunk([{"text": "one"}], index=1),
               chunk([{"text": "!"}], index=0, finish="STOP"), chunk([{"functionCall": {"name": "f", "args": {}}}],
                                                                      index=1, finish="STOP"))
    result = turn(impl, body)
    response = result.to_response()
    assert [c["index"] for c in response["candidates"]] == [0, 1]
    assert result.to_message(0)["parts"] == [{"text": "zero!"}]
    assert result.to_message(1)["parts"] == [{"text": "one"}, {"functionCall": {"name": "f", "args": {}}}]
    with pytest.raises(IndexError):
        result.to_message(2)


@pytest.mark.parametrize("path", BODIES, ids=os.path.basename)
def test_a_cut_stream_invents_nothing(both, path):
    body = read(path)
    whole = turn(both[1], body).to_message()["parts"]
    full_text = "".join(p.get("text", "") for p in whole if not p.get("thought"))
    step = max(1, len(body) // 60)
    for end in range(1, len(body), step):
        results = [turn(impl, body[:end]) for impl in both]
        response = results[1].to_response()
        assert results[0].to_response() == response and results[0].to_message() == results[1].to_message()
        for candidate in response.get("candidates", ()):
            if "finishReason" in candidate:
                assert b'"finishReason"' in body[:end]  # as sent, never made up
            parts = candidate.get("content", {}).get("parts", [])
            assert full_text.startswith("".join(p.get("text", "") for p in parts if not p.get("thought")))
            for part in parts:
                if "functionCall" in part and "args" not in part["functionCall"]:
                    cut = [c for c in results[1].tool_calls if c.name == part["functionCall"]["name"] and c.error]
                    assert cut and cut[-1].error.kind == "truncated"


def test_a_stream_cut_inside_a_streamed_call_shows_it_as_built_and_unfinished(impl):
    body = read(os.path.join(CAPTURES, "vertex__vercel-ai__partialargs-nested.sse"))
    open_string = body.index(b'"willContinue":true}],', len(body) // 2)  # an entry whose string goes on
    cuts = [body.index(b"data:", len(body) // 2), body.index(b"data:", open_string)]
    for end in cuts:  # at a chunk's start (arguments as built so far) and inside a continued string (truncated)
        result = turn(impl, body[:end])
        part = result.to_message()["parts"][0]
        call = result.tool_calls[0]
        assert part["functionCall"].get("args") == call.arguments and "thoughtSignature" in part
        assert "finishReason" not in result.to_response()["candidates"][0]
    assert call.error is not None and call.error.kind == "truncated" and "args" not in part["functionCall"]


def test_a_limit_on_text_keeps_what_came_before(impl):
    first, second = "a" * 200, "b" * 200
    body = sse(chunk([{"text": first}]), chunk([{"text": second}]), chunk([{"text": "kl"}], finish="STOP"))
    # The text is cut at 380 bytes, and keeps nothing after; the part that holds it is listed (its
    # chunk, 354 bytes, counted apart against the same 380, fits).
    result = turn(impl, body, limits=callstitch.Limits(stream_bytes=380))
    assert result.text == first and result.to_message()["parts"] == [{"text": first}]
    # Under a budget its chunk does not fit, no part is listed: the text is in result.text only.
    result = turn(impl, body, limits=callstitch.Limits(stream_bytes=8))
    assert not result.text and result.to_message()["parts"] == []


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(BODIES + [None]), st.data())
def test_mangled_streams_give_the_same_turn_in_both_twins(both, path, data):
    body = read(path) if path else MIXED
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body) - 1))
        size = data.draw(st.integers(0, 12))
        body = body[:at] + data.draw(st.binary(max_size=6) | st.sampled_from(
            [b"", b'"x":1,', b"null", b'"thoughtSignature":"Zg==",', b"\n\n", b"}", b'{"inlineData":{}},']))\
            + body[at + size:]
    results = [turn(impl, body) for impl in both]
    assert results[0].to_response() == results[1].to_response()
    assert results[0].to_message() == results[1].to_message()


def test_the_turn_pickles(impl):
    result = turn(impl, MIXED)
    again = pickle.loads(pickle.dumps(result))
    assert again.to_response() == result.to_response()


class FakeGemini:
    """A local generateContent endpoint: keeps each request body, answers with a short text."""

    def __init__(self):
        self.bodies = []
        self.app = Starlette(routes=[Route("/{path:path}", self.answer, methods=["POST"])])

    async def answer(self, request: Request):
        self.bodies.append(await request.body())
        return JSONResponse({"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]},
                                             "finishReason": "STOP", "index": 0}], "modelVersion": "fake"})


@pytest.fixture(scope="module")
def fake_gemini():
    fake = FakeGemini()
    server = ServerThread(fake.app).start()
    yield fake, server.url
    server.stop()


@pytest.mark.parametrize("path", BODIES, ids=os.path.basename)
def test_to_message_goes_back_through_the_sdk_client_signatures_intact(impl, fake_gemini, path):
    from google import genai

    fake, url = fake_gemini
    result = turn(impl, read(path))
    model_turn = result.to_message()
    replies = [genai_types.Part.from_function_response(name=call.name, response={"result": "done"})
               for call in result.tool_calls]
    history = [{"role": "user", "parts": [{"text": "go"}]}, model_turn,
               {"role": "user", "parts": [reply.model_dump(exclude_none=True) for reply in replies]}]
    client = genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(base_url=url))
    answer = client.models.generate_content(model="gemini-3-pro-preview", contents=history)
    assert answer.text == "ok"
    sent = json.loads(fake.bodies[-1])["contents"][1]
    assert sent["role"] == "model"
    assert len(sent["parts"]) == len(model_turn["parts"])
    for got, ours in zip(sent["parts"], model_turn["parts"]):
        # The SDK holds a signature as bytes and writes them back in URL-safe base64: the same bytes.
        assert ("thoughtSignature" in got) == ("thoughtSignature" in ours)
        if "thoughtSignature" in ours:
            assert base64.urlsafe_b64decode(got["thoughtSignature"]) == base64.b64decode(ours["thoughtSignature"])
        if "functionCall" in ours:
            assert got["functionCall"] == ours["functionCall"]
        else:
            assert got.get("text") == ours.get("text")


def test_the_readme_example_runs_through_the_sdk(impl, fake_gemini, monkeypatch):
    import httpx
    import re

    from google import genai

    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md"), encoding="utf-8").read()
    block = [b for b in re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M)
             if "contents.append(result.to_message())" in b]
    assert len(block) == 1
    fake, url = fake_gemini
    monkeypatch.setattr(callstitch, "Accumulator", impl.Accumulator)
    body = read(os.path.join(CAPTURES, "gemini__pydantic-ai__call-with-id.sse"))
    names = {"callstitch": callstitch, "model": "gemini-3-flash-preview",
             "http_response": httpx.Response(200, content=[body[i:i + 100] for i in range(0, len(body), 100)]),
             "contents": [{"role": "user", "parts": [{"text": "Where am I?"}]}],
             "run": lambda call: {"country": "Mexico"},
             "client": genai.Client(api_key="test-key", http_options=genai_types.HttpOptions(base_url=url))}
    exec(block[0], names)
    sent = json.loads(fake.bodies[-1])["contents"]
    assert sent[1]["parts"][0]["functionCall"] == {"id": "96c1su3s", "name": "get_user_country", "args": {}}
    assert sent[2]["parts"][0]["functionResponse"]["response"] == {"country": "Mexico"}


def test_a_text_part_after_a_large_other_part_is_kept(both):
    # Found by review: a chunk of a megabyte taken the general way folded the log, which shrank back
    # to the length the compiled twin's fast path had noted; it took the log as untouched since, and
    # the text run after the image went on in the run before it, unlisted.
    def chunk(part: bytes, end: bytes = b"") -> bytes:
        return (b'data: {"candidates":[{"index":0,"content":{"role":"model","parts":[' + part + b']}' + end
                + b'}],"modelVersion":"m"}\n\n')
    image = b'{"inlineData":{"mimeType":"image/png","data":"' + b"A" * (1 << 20) + b'"}}'
    body = chunk(b'{"text":"Here is the chart:"}') + chunk(image) + chunk(b'{"text":" Done."}', b',"finishReason":"STOP"')
    parts = [impl.reassemble(body, format="gemini").to_response()["candidates"][0]["content"]["parts"] for impl in both]
    assert parts[0] == parts[1]
    assert [p.get("text") for p in parts[0]] == ["Here is the chart:", None, " Done."]


def test_a_part_past_the_budget_is_not_listed_and_joins_no_text_runs(both):
    # Found by review: a text part with a field of its own, refused by Limits.stream_bytes, left the
    # run before it open: its text and the next part's joined the first part ([A, B+, C] read as [ABC]).
    def chunk(part: dict) -> bytes:
        return b"data: " + json.dumps({"candidates": [{"content": {"role": "model", "parts": [part]},
                                                        "index": 0}]}).encode() + b"\n\n"
    body = (chunk({"text": "A"}) + chunk({"text": "B", "extra": 1}) + chunk({"text": "B2", "extra": 2})
            + chunk({"text": "C"}))
    free = both[0].reassemble(body, format="gemini").to_response()["candidates"][0]["content"]["parts"]
    assert free == [{"text": "A"}, {"text": "B", "extra": 1}, {"text": "B2", "extra": 2}, {"text": "C"}]
    for budget in range(5, 600, 5):  # (the texts' 5 bytes fit: only the parts are cut)
        held = [impl.reassemble(body, format="gemini", limits=callstitch.Limits(stream_bytes=budget)) for impl in both]
        assert held[0] == held[1] and held[0].text == "ABB2C", budget
        parts = [r.to_response()["candidates"][0].get("content", {}).get("parts", []) for r in held]
        assert parts[0] == parts[1], budget
        # past the budget no part is listed from then on: the first ones, as sent, never joined
        assert parts[0] == free[:len(parts[0])], (budget, parts[0])
    assert parts[0] == free  # (the last budget holds them all)


@pytest.mark.parametrize("spelled", [b"1.0", b"true", b"1e0"])
def test_a_value_spelled_anew_keeps_its_first_spelling_in_both_twins(both, spelled):
    # Found by review: the compiled twin logs an envelope whose text changed, the pure twin one whose
    # value did; 1 then 1.0 (equal in value) gave the turn 1.0 in one and 1 in the other.
    def chunk(value: bytes, part: bytes = b'{"text":"a"}') -> bytes:
        return (b'data: {"candidates":[{"index":0,"content":{"role":"model","parts":[' + part + b']}}],'
                b'"serverFlag":' + value + b'}\n\n')
    image = b'{"inlineData":{"mimeType":"image/png","data":"QQ"}}'  # (taken the general way)
    for body in (chunk(b"1") + chunk(spelled), chunk(b"1") + chunk(spelled, image), chunk(b"1", image) + chunk(spelled)):
        flags = [impl.reassemble(body, format="gemini").to_response()["serverFlag"] for impl in both]
        assert flags == [1, 1] and [type(f) for f in flags] == [int, int], (body, flags)


def test_a_deep_value_spelled_anew_keeps_one_spelling_whatever_the_folds(both):
    # Found by review: a 1,015-deep envelope sent as 1 then 1.0; read by ==, which went past the
    # recursion limit, the second was taken (1.0), where a fold (by the flat key) had skipped it (1):
    # a stream long enough to fold in the compiled twin only gave the twins different values.
    depth = 1015

    def chunk(leaf: bytes, text: bytes = b"x") -> bytes:
        return (b'data: {"candidates":[{"content":{"parts":[{"text":"' + text + b'"}]},"index":0}],"deep":'
                + b'{"a":' * depth + leaf + b"}" * depth + b"}\n\n")

    def leaf(result) -> object:
        value = result.to_response()["deep"]
        for _ in range(depth):
            value = value["a"]
        return value
    short = chunk(b"1") + chunk(b"1.0")
    filler = b"".join(b'data: {"candidates":[{"content":{"parts":[{"text":"y"}]},"index":0}],"k":'
                      + (b"1" if k % 2 else b"1.0") + b"}\n\n" for k in range(1100))
    for body in (short, short + filler):
        for limits in (None, callstitch.Limits(stream_bytes=len(short) // 2 + 10)):
            values = [leaf(impl.reassemble(body, format="gemini", limits=limits)) for impl in both]
            assert values == [1, 1] and [type(v) for v in values] == [int, int], (len(body), limits)


def test_a_continued_string_piece_past_the_room_is_cut_alike_in_both_twins(both):
    # Found by review: the compiled twin's partialArgs reader appended the next piece of a continued
    # string without taking it off the call's room, where Builder.put does: under call_bytes the
    # twins kept different texts.
    def piece(path: str, value: str, finish: bool = False) -> dict:
        candidate: dict = {"content": {"parts": [{"functionCall": {"partialArgs": [
            {"jsonPath": path, "stringValue": value, "willContinue": True}]}}]}, "index": 0}
        if finish:
            candidate["finishReason"] = "STOP"
        return {"candidates": [candidate]}
    chunks = [{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "willContinue": True}}]},
                               "index": 0}]},
              piece("$.b", "x"), piece("$.a", "x"), piece("$.b", "x"), piece("$.b", "x", finish=True)]
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks)
    for size in range(0, 40):
        held = [impl.reassemble(body, format="gemini", limits=callstitch.Limits(call_bytes=size)) for impl in both]
        assert held[0] == held[1], size
