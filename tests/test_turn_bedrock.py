"""Bedrock's whole turn: to_response() is the Converse output, to_message() the assistant Message."""

import base64
import copy
import glob
import json
import os
import pickle

import botocore.session
import pytest
from botocore.validate import ParamValidator

from _formats import BEDROCK_USAGE, CALLS, Call, bedrock_body, bedrock_eventstream, bedrock_sse
from _servers import json_server
from _streams import assert_twins_give_the_same_turn, damaged, feed_split, random_cuts
from test_readme import _block, on_twin  # noqa: F401 - on_twin is a fixture

import callstitch

CAPTURES = os.path.join(os.path.dirname(__file__), "fixtures", "captures")
MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
OUTPUT = MODEL.operation_model("Converse").output_shape
MESSAGE = MODEL.operation_model("Converse").input_shape.members["messages"].member
REDACTED = base64.b64encode(b"\x00\xffsecret reasoning \xe2\x98\x95").decode()
CITATION = {"title": "Weather report", "source": "https://example.com/paris",
            "sourceContent": [{"text": "18°C in Paris"}], "location": {"web": {"url": "https://example.com/paris"}}}


def delta(index, **d):
    return "contentBlockDelta", {"contentBlockIndex": index, "delta": d, "p": "abcd"}


def everything():
    """Return events with reasoning + signature, redacted reasoning, cited text, a call and every output field."""
    call = CALLS[0]
    return [("messageStart", {"role": "assistant", "p": "ab"}),
            delta(0, reasoningContent={"text": "The user wants "}),
            delta(0, reasoningContent={"text": "the weather ☀."}),
            delta(0, reasoningContent={"signature": "EqoBCkgIARABGAIiQ+/=="}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            delta(1, reasoningContent={"redactedContent": REDACTED}),
            ("contentBlockStop", {"contentBlockIndex": 1}),
            delta(2, text="It is "),
            delta(2, text="18°C in 東京."),
            delta(2, citation=CITATION),
            ("contentBlockStop", {"contentBlockIndex": 2}),
            ("contentBlockStart", {"contentBlockIndex": 3, "start": {"toolUse": {
                "toolUseId": call.id, "name": call.name}}}),
            *[delta(3, toolUse={"input": piece}) for piece in call.pieces()],
            ("contentBlockStop", {"contentBlockIndex": 3}),
            delta(4, text="Done."),
            ("contentBlockStop", {"contentBlockIndex": 4}),
            ("messageStop", {"stopReason": "tool_use", "additionalModelResponseFields": {"stop_sequence": None},
                             "p": "abc"}),
            ("metadata", {"usage": BEDROCK_USAGE, "metrics": {"latencyMs": 422}, "p": "a",
                          "trace": {"guardrail": {"modelOutput": ["It is 18°C."]}},
                          "performanceConfig": {"latency": "optimized"}})]


def bodies():
    out = {os.path.basename(p): open(p, "rb").read()
           for p in sorted(glob.glob(os.path.join(CAPTURES, "bedrock__*"))) if not p.endswith(".json")}
    out["everything-es"] = bedrock_eventstream(everything())
    out["everything-sse"] = bedrock_sse(everything())
    out["text-reasoning-calls"] = bedrock_body(CALLS, text="Looking it up.", reasoning="I will call three tools.")
    out["interleaved"] = bedrock_body(CALLS, interleave=True, framing="sse")
    out["server-tool"] = bedrock_body(CALLS[:1], server_tools=[Call("tooluse_s1", "nova_code_interpreter",
                                                                    '{"snippet": "1+1"}')])
    out["error"] = bedrock_body(CALLS[:1], error=True)
    return out


BODIES = bodies()


def turn(impl, body, **kw):
    result = impl.reassemble(body, format="bedrock", **kw)
    return result, result.to_response(), result.to_message()


def blobs(value):
    """Return value with each redactedContent decoded to bytes, as botocore holds a blob."""
    value = copy.deepcopy(value)
    for block in value["content"]:
        reasoning = block.get("reasoningContent")
        if reasoning and "redactedContent" in reasoning and isinstance(reasoning["redactedContent"], str):
            reasoning["redactedContent"] = base64.b64decode(reasoning["redactedContent"])
    return value


def validate(shape, value):
    report = ParamValidator().validate(value, shape)
    assert not report.has_errors(), report.generate_report()


def test_a_capture_gives_the_converse_output():
    _, response, message = turn(callstitch, BODIES["bedrock__pydantic-ai__converse-nova-tool.eventstream"])
    assert response == {
        "output": {"message": {"role": "assistant", "content": [
            {"text": "<thinking> To find the temperature of the capital of France, I need to first determine the "
                     "capital of France and then get the current temperature in that city. The capital of France "
                     "is Paris. I will use the \"get_temperature\" tool to find the current temperature in "
                     "Paris.</thinking>\n"},
            {"toolUse": {"name": "get_temperature", "toolUseId": "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
                         "input": {"city": "Paris"}}}]}},
        "stopReason": "tool_use", "metrics": {"latencyMs": 422},
        "usage": {"inputTokens": 471, "outputTokens": 91, "totalTokens": 562}}
    assert message == response["output"]["message"]


def test_every_block_kind_in_index_order(impl):
    result, response, message = turn(impl, BODIES["everything-es"])
    content = response["output"]["message"]["content"]
    assert content == [
        {"reasoningContent": {"reasoningText": {"text": "The user wants the weather ☀.",
                                                "signature": "EqoBCkgIARABGAIiQ+/=="}}},
        {"reasoningContent": {"redactedContent": REDACTED}},
        {"citationsContent": {"content": [{"text": "It is 18°C in 東京."}], "citations": [CITATION]}},
        {"toolUse": {"toolUseId": CALLS[0].id, "name": CALLS[0].name, "input": CALLS[0].value}},
        {"text": "Done."}]
    assert response["additionalModelResponseFields"] == {"stop_sequence": None}
    assert response["trace"] == {"guardrail": {"modelOutput": ["It is 18°C."]}}
    assert response["performanceConfig"] == {"latency": "optimized"}
    assert "p" not in response  # Bedrock's padding is not part of the output
    assert result.text == "It is 18°C in 東京.Done." and result.reasoning == "The user wants the weather ☀."
    assert message["content"][1] == {"reasoningContent": {"redactedContent": base64.b64decode(REDACTED)}}
    assert blobs(response["output"]["message"]) == message


def test_the_server_tool_and_its_result_are_kept(impl):
    _, response, _ = turn(impl, BODIES["server-tool"])
    content = response["output"]["message"]["content"]
    assert content[0] == {"toolUse": {"name": "nova_code_interpreter", "toolUseId": "tooluse_s1",
                                      "type": "server_tool_use", "input": {"snippet": "1+1"}}}
    assert content[1]["toolResult"]["content"] == [{"json": {"stdOut": "7006652", "stdErr": "", "exitCode": 0,
                                                             "isError": False}}]
    assert content[2]["toolUse"]["input"] == CALLS[0].value


@pytest.mark.parametrize("name", sorted(BODIES))
def test_every_stream_validates_against_botocore(impl, name):
    result, response, message = turn(impl, BODIES[name])
    if "stopReason" in response:  # a stream that ended (the error one has none: see the cut tests)
        checked = {**response, "output": {"message": blobs(response["output"]["message"])}}
        # A capture's usage has serverToolUsage, newer than the installed botocore's model: carried, not checked.
        checked["usage"] = {k: v for k, v in checked["usage"].items() if k != "serverToolUsage"}
        validate(OUTPUT, checked)
    validate(MESSAGE, message)
    assert json.loads(json.dumps(response)) == response
    calls = [b["toolUse"] for b in message["content"] if "toolUse" in b and b["toolUse"].get("type") != "server_tool_use"]
    assert [(c["toolUseId"], c["input"]) for c in calls] == [(c.id, c.arguments) for c in result.tool_calls]


@pytest.mark.parametrize("cut, complete_part", [(3, {}), (6, {"symbol": "AAPL"})])
def test_a_cut_stream_invents_no_stop_reason(impl, cut, complete_part):
    result, response, message = turn(impl, bedrock_body(CALLS[:2], cut=cut))
    assert set(response) == {"output"}  # no stopReason, usage or metrics: nothing said how it ended
    call = result.tool_calls[-1]
    assert call.error is not None and CALLS[1].arguments.startswith(call.raw_arguments)
    # the cut input holds the complete part of its JSON: the value still arriving is left out
    assert message["content"][-1]["toolUse"]["input"] == complete_part
    assert message["content"][0]["toolUse"]["input"] == CALLS[0].value


def test_a_bedrock_stream_has_one_choice(impl):
    result = impl.reassemble(BODIES["everything-es"], format="bedrock")
    with pytest.raises(IndexError):
        result.to_message(1)


def test_a_body_truncated_inside_a_text_keeps_what_came(impl):
    body = BODIES["everything-sse"]
    cut = body[:body.index("東京".encode())]
    _, response, _ = turn(impl, cut)
    assert "stopReason" not in response
    assert response["output"]["message"]["content"][-1] == {"text": "It is "}  # the event cut off is not read


def test_a_failed_stream_has_no_stop_reason(impl):
    result, response, _ = turn(impl, BODIES["error"])
    assert "stopReason" not in response and result.errors


@pytest.mark.parametrize("budget", [30, 400, 2000])
def test_under_a_limit_the_blocks_hold_the_text_as_far_as_it_went(impl, budget):
    # The text is cut at stream_bytes; the blocks, counted apart against the same number, stop
    # being listed when they reach it: what they hold is a beginning of the text, never more.
    result, response, _ = turn(impl, BODIES["everything-es"], limits=callstitch.Limits(stream_bytes=budget))
    content = response["output"]["message"]["content"]
    texts = "".join(b.get("text") or b.get("citationsContent", {}).get("content", [{}])[0].get("text", "")
                    for b in content)
    assert (result.text or "").startswith(texts)
    assert (texts == result.text) is (budget >= 2000)


def test_the_turn_survives_pickling(impl):
    result = impl.reassemble(BODIES["everything-es"], format="bedrock")
    assert pickle.loads(pickle.dumps(result)).to_response() == result.to_response()


def test_text_of_two_blocks_interleaved_stays_apart(impl):
    ev = [("messageStart", {"role": "assistant"}), delta(0, text="a1 "), delta(1, text="b1 "), delta(0, text="a2"),
          delta(1, text="b2"), ("contentBlockStop", {"contentBlockIndex": 0}),
          ("contentBlockStop", {"contentBlockIndex": 1}), ("messageStop", {"stopReason": "end_turn"})]
    _, response, _ = turn(impl, bedrock_eventstream(ev))
    assert response["output"]["message"]["content"] == [{"text": "a1 a2"}, {"text": "b1 b2"}]


@pytest.mark.parametrize("name", sorted(BODIES))
def test_any_split_gives_the_same_turn(impl, name):
    body = BODIES[name]
    whole = impl.reassemble(body, format="bedrock").to_response()
    for seed in range(5):
        assert feed_split(impl, body, random_cuts(len(body), seed)).to_response() == whole


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_twins_give_the_same_turn_on_cut_and_mangled_streams(both, name):
    assert_twins_give_the_same_turn(both, damaged(BODIES[name], name), 'bedrock')


def test_the_twins_agree_on_mangled_event_shapes(both):
    ev = [("messageStart", {"role": "assistant"}), delta(0, text="a", citation=CITATION),
          delta(0, text="b", reasoningContent={"text": "r", "signature": "s"}), delta(1, text="c", toolUse=None),
          delta(1, image={"x": 1}), delta(1, image={"y": 2}), delta(2, toolResult={"text": "t"}),
          delta(0, text="d"), ("contentBlockStart", {"contentBlockIndex": 5, "start": {"image": {"format": "png"}}}),
          delta(5, image={"source": 1}), ("contentBlockStop", {"contentBlockIndex": 0}), delta(0, text="e"),
          delta(2 ** 64 - 1, text="huge index "), delta(0, text="f"), ("messageStop", {"stopReason": "end_turn"})]
    c, py = both
    for body in (bedrock_eventstream(ev), bedrock_sse(ev)):
        rc, rp = c.reassemble(body, format="bedrock"), py.reassemble(body, format="bedrock")
        assert rc.to_response() == rp.to_response() and rc.to_message() == rp.to_message()
    assert rc.to_response()["output"]["message"]["content"][0] == {"text": "abdef"}


@pytest.mark.parametrize("limits", [dict(event_bytes=120), dict(event_bytes=200), dict(stream_bytes=20),
                                    dict(call_bytes=10), dict(calls=1), dict(errors=1)], ids=str)
def test_the_twins_give_the_same_turn_under_limits(both, limits):
    c, py = both
    for body in BODIES.values():
        rc = c.reassemble(body, format="bedrock", limits=callstitch.Limits(**limits))
        rp = py.reassemble(body, format="bedrock", limits=callstitch.Limits(**limits))
        assert rc.to_response() == rp.to_response() and rc.to_message() == rp.to_message()


ANSWER = {"output": {"message": {"role": "assistant", "content": [{"text": "It is 18°C."}]}},
          "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3},
          "metrics": {"latencyMs": 5}}


def fake_bedrock():
    """Serve Converse on 127.0.0.1 with a fixed answer; yield (endpoint_url, the request bodies received)."""
    return json_server(ANSWER)


def client(url):
    return botocore.session.get_session().create_client(
        "bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id="test",
        aws_secret_access_key="test")


@pytest.mark.parametrize("name", ["everything-es", "bedrock__pydantic-ai__converse-nova-tool.sse",
                                  "server-tool"])
def test_to_message_goes_back_through_botocore_as_history(impl, name):
    result, response, message = turn(impl, BODIES[name])
    history = [{"role": "user", "content": [{"text": "Weather in Paris?"}]}, message,
               {"role": "user", "content": [{"toolResult": {"toolUseId": c.id, "content": [{"text": "18°C"}]}}
                                            for c in result.tool_calls]}]
    with fake_bedrock() as (url, received):
        reply = client(url).converse(modelId="amazon.nova-pro-v1:0", messages=history)
    assert reply["output"]["message"]["content"][0]["text"] == "It is 18°C."
    sent = received[0]["messages"][1]
    assert sent == response["output"]["message"]  # as given: signatures byte for byte, the blob as base64
    if name == "everything-es":
        assert sent["content"][0]["reasoningContent"]["reasoningText"]["signature"] == "EqoBCkgIARABGAIiQ+/=="
        assert base64.b64decode(sent["content"][1]["reasoningContent"]["redactedContent"]) == \
            base64.b64decode(REDACTED)


def test_the_readme_example_runs(on_twin):
    with fake_bedrock() as (url, received):
        names = {"callstitch": callstitch, "converse_stream_body": BODIES["everything-es"], "client": client(url),
                 "messages": [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]}
        exec(_block("converse_stream_body"), names)
    assert [m["role"] for m in received[0]["messages"]] == ["user", "assistant", "user"]
    assert received[0]["messages"][1]["content"][0]["reasoningContent"]["reasoningText"]["signature"]


def test_a_server_tools_input_keeps_big_integers_exact(impl):
    body = bedrock_body((), server_tools=[Call("tooluse_s1", "nova_code_interpreter", '{"n": 123456789012345678901234}')])
    _, response, _ = turn(impl, body)
    assert response["output"]["message"]["content"][0]["toolUse"]["input"] == {"n": 123456789012345678901234}
