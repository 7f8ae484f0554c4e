"""Toolset: tool definitions in every provider's shape, every kind of problem, defaults, retry messages."""

import copy
import json
import sys

import pytest

from _formats import Call, build, format_of
from _streams import DONE, chunk, finish, tool_delta

import callstitch
from callstitch import Problem, Toolset, ToolCall, Verdict

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "country": {"type": "string", "default": "GB"},
            },
            "required": ["street", "city"],
            "additionalProperties": False,
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}
STOCK = {"type": "object", "properties": {"symbol": {"type": "string"}, "note": {"type": "string"}},
         "required": ["symbol"]}
TIME = {"type": "object", "properties": {"tz": {"type": "string"}, "n": {"type": "array"}}}


def call(name, arguments, *, id="call_1", raw=None, error=None):
    """Return a ToolCall built directly, its raw text from the arguments."""
    if raw is None:
        raw = json.dumps(arguments) if arguments is not None else ""
    return ToolCall(id, name, 0, 0, arguments, raw, error)


def openai_body(*calls):
    """Return an OpenAI chat SSE body carrying calls given as (id, name, argument text)."""
    events = []
    for index, (id, name, text) in enumerate(calls):
        events.append(chunk([tool_delta(index, id=id, name=name, arguments="")]))
        for pos in range(0, len(text), 7):
            events.append(chunk([tool_delta(index, arguments=text[pos:pos + 7])]))
    events.append(chunk([finish("tool_calls")]))
    return b"".join(events) + DONE


def one(impl, name, text):
    """Return the one call reassembled (by the twin) from an OpenAI chat stream."""
    result = impl.reassemble(openai_body(("call_1", name, text)))
    assert len(result.tool_calls) == 1, result
    return result.tool_calls[0]


@pytest.fixture(scope="module")
def weather():
    return Toolset([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                    {"type": "function", "function": {"name": "get_stock", "parameters": STOCK}},
                    {"type": "function", "function": {"name": "get_time", "parameters": TIME}}])


def kinds(verdict):
    return [(p.path, p.kind) for p in verdict.problems]


# ---------------------------------------------------------------- tool shapes


SHAPES = {
    "openai-chat": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                      "parameters": WEATHER, "strict": False}}],
    "openai-responses": [{"type": "function", "name": "get_weather", "description": "Weather",
                          "parameters": WEATHER}],
    "anthropic": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER}],
    "anthropic-custom": [{"type": "custom", "name": "get_weather", "input_schema": WEATHER}],
    "gemini-json-schema": [{"functionDeclarations": [{"name": "get_weather", "parametersJsonSchema": WEATHER}]}],
    "gemini-snake-case": [{"function_declarations": [{"name": "get_weather", "parameters_json_schema": WEATHER}]}],
    "bedrock-tool-config": {"tools": [{"toolSpec": {"name": "get_weather", "description": "Weather",
                                                    "inputSchema": {"json": WEATHER}}}],
                            "toolChoice": {"auto": {}}},
    "bedrock-list": [{"toolSpec": {"name": "get_weather", "inputSchema": {"json": WEATHER}}}],
    "mapping": {"get_weather": WEATHER},
    "request-body": {"model": "m", "tools": [{"type": "function", "function": {"name": "get_weather",
                                                                               "parameters": WEATHER}}]},
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_gives_the_same_checks(shape):
    toolset = Toolset(SHAPES[shape])
    assert toolset.names == ("get_weather",)
    assert "get_weather" in toolset and len(toolset) == 1
    assert toolset.schema("get_weather") == WEATHER
    good = toolset.check(call("get_weather", {"city": "Paris"}))
    assert good.ok and good.arguments == {"city": "Paris", "units": "celsius"}
    bad = toolset.check(call("get_weather", {"city": 7, "units": "kelvin"}))
    assert sorted(kinds(bad)) == [("$.city", "type"), ("$.units", "enum")]


GEMINI_OPENAPI = {
    "type": "OBJECT",
    "properties": {
        "city": {"type": "STRING"},
        "units": {"type": "STRING", "enum": ["celsius", "fahrenheit"], "format": "enum"},
        "days": {"type": "INTEGER", "nullable": True},
        "stops": {"type": "ARRAY", "items": {"type": "OBJECT", "properties": {"name": {"type": "STRING"}},
                                             "required": ["name"]}},
        "mood": {"type": "STRING", "enum": ["calm", "wild"], "nullable": True},
        "anything": {"type": "TYPE_UNSPECIFIED"},
    },
    "required": ["city"],
    "propertyOrdering": ["city", "units", "days", "stops", "mood", "anything"],
}


def test_gemini_openapi_parameters_are_normalised():
    toolset = Toolset([{"functionDeclarations": [{"name": "get_weather", "parameters": GEMINI_OPENAPI}]},
                       {"googleSearch": {}}, {"codeExecution": {}}])
    schema = toolset.schema("get_weather")
    assert schema["type"] == "object"
    assert schema["properties"]["days"]["type"] == ["integer", "null"]
    assert schema["properties"]["mood"]["enum"] == ["calm", "wild", None]
    assert schema["properties"]["stops"]["items"]["properties"]["name"]["type"] == "string"
    assert "type" not in schema["properties"]["anything"]
    assert GEMINI_OPENAPI["type"] == "OBJECT"  # the caller's definition is left alone
    assert toolset.check(call("get_weather", {"city": "Rome", "days": None, "mood": None, "anything": [1]})).ok
    bad = toolset.check(call("get_weather", {"city": "Rome", "days": "3", "stops": [{"nom": "x"}]}))
    assert sorted(kinds(bad)) == [("$.days", "type"), ("$.stops[0].name", "required")]
    assert {p.path: p.message for p in bad.problems}["$.days"] == 'expected an integer or null, got a string ("3")'


@pytest.mark.parametrize("spelling", ["sdk", "rest", "sdk-object"])
def test_gemini_references_and_int64_counts_are_read(spelling):
    # Found by a hostile probe: google-genai's Schema spells a reference ref: "#/defs/Pet" with
    # defs, which were left as keywords unknown to JSON Schema: {"pet": 123} passed as valid.
    ref, defs = ("$ref", "$defs") if spelling == "rest" else ("ref", "defs")
    parameters = {"type": "OBJECT", "required": ["pet"], "properties": {
        "pet": {ref: f"#/{defs}/Pet"}, "pets": {"type": "ARRAY", "items": {ref: f"#/{defs}/Pet"}, "maxItems": "2"}},
        defs: {"Pet": {"type": "OBJECT", "required": ["name"], "properties": {
            "name": {"type": "STRING", "maxLength": "8"}, "kind": {"type": "STRING", "default": "cat"}}}}}
    tool = {"functionDeclarations": [{"name": "adopt", "parameters": parameters}]}
    if spelling == "sdk-object":
        tool = pytest.importorskip("google.genai.types").Tool.model_validate(tool)
    toolset = Toolset([tool])
    good = toolset.check(call("adopt", {"pet": {"name": "Tom"}}))
    assert good.ok and good.arguments == {"pet": {"name": "Tom", "kind": "cat"}}  # the default under the reference
    bad = toolset.check(call("adopt", {"pet": 123, "pets": [{"name": "a"}, {"name": "b"}, {"name": "much too long"}]}))
    assert sorted(kinds(bad)) == [("$.pet", "type"), ("$.pets", "maxItems"), ("$.pets[2].name", "maxLength")]


def test_gemini_tools_object_alone_and_sdk_objects():
    class Model:  # what the SDKs' pydantic models look like to read_tools
        def __init__(self, data):
            self.data = data

        def model_dump(self, exclude_none=False, by_alias=False):
            return self.data

    gemini = Toolset({"functionDeclarations": [{"name": "a", "parametersJsonSchema": STOCK},
                                               {"name": "b"}]})
    assert gemini.names == ("a", "b")
    sdk = Toolset([Model({"type": "function", "function": {"name": "get_stock", "parameters": STOCK}})])
    assert sdk.names == ("get_stock",)
    assert not sdk.check(call("get_stock", {})).ok


def test_non_function_tools_are_ignored():
    toolset = Toolset([
        {"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "custom", "name": "freeform", "format": {"type": "text"}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"googleSearch": {}}, {"cachePoint": {"type": "default"}},
        {"type": "function", "function": {"name": "get_stock", "parameters": STOCK}},
    ])
    # A custom (free-form) tool is the client's to run: allowed by name (issue 18), the rest ignored.
    assert toolset.names == ("freeform", "web_search", "get_stock")


def test_anthropic_client_builtin_tools_are_allowed_by_name():
    # bash_20250124, text_editor_…: the client runs them, their calls come as ordinary tool_use.
    toolset = Toolset([{"type": "bash_20250124", "name": "bash"},
                       {"name": "get_stock", "input_schema": STOCK}])
    assert toolset.check(call("bash", {"command": "ls"})).ok
    assert toolset.schema("bash") is None


def test_tools_without_parameters_check_the_name_and_the_object():
    toolset = Toolset([{"type": "function", "function": {"name": "list_orders"}},
                       {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}},
                       {"name": "noop", "input_schema": {"type": "object"}}])
    mapping = Toolset({"plain": None, "yes": True})
    assert toolset.names == ("list_orders", "ping", "noop") and mapping.names == ("plain", "yes")
    for ts in (toolset, mapping):
        for name in ts.names:
            verdict = ts.check(call(name, {"anything": 1}))
            assert verdict.ok and verdict.arguments == {"anything": 1}
            assert kinds(ts.check(call(name, [1]))) == [("$", "not an object")]


def test_duplicate_names_raise_naming_the_duplicate():
    with pytest.raises(ValueError, match=r"duplicate tool name 'get_weather': defined at tools\[0\] and again at "
                                         r"tools\[2\]"):
        Toolset([{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
                 {"name": "get_stock", "input_schema": STOCK},
                 {"name": "get_weather", "input_schema": STOCK}])
    with pytest.raises(ValueError, match=r"duplicate tool name 'x'.*functionDeclarations\[1\]"):
        Toolset([{"functionDeclarations": [{"name": "x"}, {"name": "x"}]}])


@pytest.mark.parametrize("tools, message", [
    ([{"type": "function", "function": {"parameters": STOCK}}], r"tools\[0\]: a function tool needs a non-empty "
                                                                 r"string name, got None"),
    ([{"description": "who knows"}], r"tools\[0\]: not a tool definition callstitch can read \(keys: description\)"),
    ([42], r"tools\[0\]: a tool definition must be an object, got int"),
    ([{"name": "x", "input_schema": "object"}], r"tools\[0\]: the parameters schema must be a JSON object, got str"),
    ("get_weather", r"tools must be a list of tool definitions"),
    ([{"functionDeclarations": {"name": "x"}}], r"tools\[0\]: functionDeclarations must be a list"),
])
def test_unreadable_definitions_say_where(tools, message):
    with pytest.raises(ValueError, match=message):
        Toolset(tools)


def test_an_invalid_schema_is_reported_at_construction():
    with pytest.raises(ValueError, match=r"tools\[0\]: tool 'bad' has parameters that are not a usable JSON Schema"):
        Toolset([{"name": "bad", "input_schema": {"type": "OBJECT"}}])  # uppercase types are Gemini's only


@pytest.mark.parametrize("schema", [
    {"type": "object", "required": 0}, {"type": "object", "title": 5},
    {"type": "object", "$schema": "http://example.com/not-a-metaschema"}, {"type": "object", "$schema": ["x"]},
    {"type": "object", "properties": {}, "description": ["x"]}, {"type": "object", "properties": None},
])
def test_a_schema_of_annotations_only_that_jsonschema_rs_refuses_is_refused(schema):
    # Found by review: schemas of annotation keywords only skipped compiling, so these were taken
    # (and every object passed); a non-empty "required" was compiled and refused.
    with pytest.raises(ValueError, match="not a usable JSON Schema"):
        Toolset({"f": schema})


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema",
                                   "http://json-schema.org/schema#"])
def test_a_schema_that_takes_any_object_needs_no_validator_whatever_draft_it_names(monkeypatch, draft):
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # import jsonschema_rs now raises ImportError
    toolset = Toolset({"f": {"type": "object", "$schema": draft, "title": "F", "properties": {}, "required": []}})
    assert toolset.check(call("f", {"any": 1})).ok


def test_remote_refs_are_never_fetched():
    with pytest.raises(ValueError, match="tool 'remote'"):
        Toolset({"remote": {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}}})


def test_draft_follows_dollar_schema_and_defaults_to_2020_12():
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                                      "additionalItems": False}}}
    toolset = Toolset({"old": draft7,
                       "new": {"type": "object", "properties": {"pair": {
                           "type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                           "items": False}}}})
    for name in ("old", "new"):
        assert toolset.check(call(name, {"pair": [1, "a"]})).ok
        assert not toolset.check(call(name, {"pair": [1, "a", 3]})).ok
        assert kinds(toolset.check(call(name, {"pair": ["a"]}))) == [("$.pair[0]", "type")]
    with pytest.raises(ValueError, match="not a usable JSON Schema"):  # array `items` is not 2020-12
        Toolset({"new": {k: v for k, v in draft7.items() if k != "$schema"}})


def test_without_jsonschema_rs(monkeypatch):
    monkeypatch.setitem(sys.modules, "jsonschema_rs", None)  # import jsonschema_rs now raises ImportError
    with pytest.raises(ImportError, match=r"tool 'get_weather' \(tools\[0\]\) has a parameters schema.*"
                                          r"needs jsonschema-rs: pip install 'callstitch\[validate\]'"):
        Toolset([{"name": "get_weather", "input_schema": WEATHER}])
    # No schema, or one that takes any object: the allowlist still works.
    toolset = Toolset([{"type": "function", "function": {"name": "list_orders"}},
                       {"name": "noop", "input_schema": {"type": "object", "properties": {}}}])
    assert toolset.check(call("list_orders", {})).ok
    assert kinds(toolset.check(call("list_ordres", {}))) == [("$", "unknown tool")]


# ---------------------------------------------------------------- verdicts


def test_a_valid_call_from_a_stream(impl, weather):
    c = one(impl, "get_weather", '{"city": "Paris", "units": "fahrenheit", "days": 3}')
    verdict = weather.check(c)
    assert isinstance(verdict, Verdict) and verdict.ok and bool(verdict)
    assert verdict.arguments == {"city": "Paris", "units": "fahrenheit", "days": 3}
    assert verdict.arguments is c.arguments  # nothing to fill: no copy
    assert verdict.problems == () and verdict.retry_message is None
    assert verdict.call is c


def test_check_all_keeps_call_order(impl, weather):
    result = impl.reassemble(openai_body(("c1", "get_stock", '{"symbol": "AAPL"}'),
                                         ("c2", "get_weather", '{"city": 1}'),
                                         ("c3", "get_wether", '{"city": "Oslo"}'),
                                         ("c4", "get_time", '{"tz": "UTC"}')))
    verdicts = weather.check_all(result)
    assert [v.call.id for v in verdicts] == ["c1", "c2", "c3", "c4"]
    assert [v.ok for v in verdicts] == [True, False, False, True]
    assert [v.call.id for v in weather.check_all(result.tool_calls[::-1])] == ["c4", "c3", "c2", "c1"]


def test_strict_tools_are_checked_the_same_way(impl):
    strict = {"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": ["string", "null"],
                                                                                     "enum": ["c", "f", None]}},
              "required": ["city", "units"], "additionalProperties": False}
    toolset = Toolset([{"type": "function", "function": {"name": "get_weather", "strict": True,
                                                         "parameters": strict}},
                       {"type": "function", "name": "resp", "strict": True, "parameters": strict}])
    for name in ("get_weather", "resp"):
        assert toolset.check(one(impl, name, '{"city": "Oslo", "units": null}')).ok
        verdict = toolset.check(one(impl, name, '{"city": "Oslo", "extra": 1}'))
        assert sorted(kinds(verdict)) == [("$.extra", "additionalProperties"), ("$.units", "required")]


def test_the_call_is_never_changed(weather):
    arguments = {"city": "Paris", "address": {"street": "1 Rue", "city": "Paris"}}
    before = copy.deepcopy(arguments)
    c = call("get_weather", arguments)
    verdict = weather.check(c)
    assert verdict.arguments["address"]["country"] == "GB"
    assert c.arguments is arguments and arguments == before


# ---------------------------------------------------------------- problems, one kind at a time


def test_unknown_tool_names_the_closest_and_the_tools(impl, weather):
    verdict = weather.check(one(impl, "get_wether", '{"city": "Paris"}'))
    assert not verdict.ok and verdict.arguments == {"city": "Paris"}
    (problem,) = verdict.problems
    assert (problem.path, problem.kind) == ("$", "unknown tool")
    assert problem.message == ('there is no tool named "get_wether". Did you mean "get_weather"? '
                               'The available tools are "get_weather", "get_stock", "get_time"')
    assert verdict.retry_message == ('Error: the tool call was not run: ' + problem.message +
                                     '. Call one of the available tools instead.')


def test_unknown_tool_without_a_close_match_or_a_name(weather):
    far = weather.check(call("launch_rocket", {}))
    assert "Did you mean" not in far.problems[0].message
    assert '"get_weather", "get_stock", "get_time"' in far.retry_message
    nameless = weather.check(call(None, {}))
    assert nameless.problems[0].message.startswith("the call names no tool.")
    empty = Toolset([]).check(call("x", {}))
    assert "No tools were offered" in empty.retry_message


def test_truncated_arguments(impl, weather):
    c = impl.reassemble(openai_body(("call_1", "get_weather", '{"city": "Par'))).tool_calls[0]
    assert c.error is not None and c.error.kind == "truncated"
    verdict = weather.check(c)
    assert kinds(verdict) == [("$", "truncated")] and verdict.arguments is None
    assert verdict.problems[0].message == "the arguments are incomplete JSON (cut off after 13 bytes)"
    assert verdict.retry_message == (
        'Error: the call to "get_weather" was not run: the arguments are incomplete JSON (cut off after 13 bytes). '
        'Call it again with the complete arguments as one JSON object with the properties '
        'city (required), units, days, address.')


def test_malformed_arguments(impl, weather):
    verdict = weather.check(one(impl, "get_weather", "{city: 'Paris'}"))
    assert kinds(verdict) == [("$", "malformed")]
    assert verdict.problems[0].message.startswith("the arguments are not valid JSON (at byte 1")
    assert "city (required)" in verdict.retry_message


def test_trailing_data(impl, weather):
    verdict = weather.check(one(impl, "get_weather", '{"city": "Paris"}{"city": "Rome"}x'))
    assert kinds(verdict) == [("$", "trailing data")]
    assert "extra text after the JSON object" in verdict.retry_message


def test_arguments_not_an_object(impl, weather):
    verdict = weather.check(one(impl, "get_weather", '["Paris"]'))
    assert kinds(verdict) == [("$", "not an object")]
    assert verdict.problems[0].message == "the arguments must be a JSON object, not an array"
    direct = weather.check(call("get_weather", "Paris", raw='"Paris"'))
    assert direct.problems[0].message == "the arguments must be a JSON object, not a string"


def test_arguments_missing(weather):
    verdict = weather.check(call("get_weather", None))
    assert kinds(verdict) == [("$", "missing")]
    assert verdict.retry_message.startswith('Error: the call to "get_weather" was not run: the call has no '
                                            'arguments; a JSON object is expected.')


def test_empty_arguments_are_an_empty_object(impl, weather):
    assert weather.check(one(impl, "get_time", "")).ok
    assert kinds(weather.check(one(impl, "get_weather", ""))) == [("$.city", "required")]


def test_required_property_missing_nested(impl, weather):
    verdict = weather.check(one(impl, "get_weather", '{"city": "Paris", "address": {"street": "1 Rue"}}'))
    assert kinds(verdict) == [("$.address.city", "required")]
    assert verdict.problems[0].message == 'required property missing (required here: "street", "city")'
    assert "- $.address.city: required property missing" in verdict.retry_message


def test_wrong_type(weather):
    verdict = weather.check(call("get_weather", {"city": ["Paris"], "days": 2.5}))
    assert sorted(str(p) for p in verdict.problems) == ['$.city: expected a string, got an array (["Paris"])',
                                                        "$.days: expected an integer, got a number (2.5)"]
    assert "expected a string, got an array" in verdict.retry_message


def test_value_not_in_enum(weather):
    verdict = weather.check(call("get_weather", {"city": "Paris", "units": "kelvin"}))
    assert verdict.problems == (Problem("$.units", "enum",
                                        '"kelvin" is not allowed; expected one of "celsius", "fahrenheit"'),)
    assert 'expected one of "celsius", "fahrenheit"' in verdict.retry_message


def test_unexpected_property(weather):
    verdict = weather.check(call("get_weather", {"city": "Paris", "country": "FR",
                                                 "address": {"street": "1", "city": "P", "zip": "75001"}}))
    assert sorted(kinds(verdict)) == [("$.address.zip", "additionalProperties"),
                                      ("$.country", "additionalProperties")]
    messages = {p.path: p.message for p in verdict.problems}
    assert messages["$.country"] == 'unexpected property; allowed properties: "city", "units", "days", "address"'


@pytest.mark.parametrize("schema, value, kind, message", [
    ({"type": "integer", "minimum": 1}, 0, "minimum", "must be at least 1, got 0"),
    ({"type": "integer", "maximum": 14}, 15, "maximum", "must be at most 14, got 15"),
    ({"exclusiveMinimum": 0}, 0, "exclusiveMinimum", "must be greater than 0, got 0"),
    ({"exclusiveMaximum": 1}, 1, "exclusiveMaximum", "must be less than 1, got 1"),
    ({"multipleOf": 5}, 7, "multipleOf", "must be a multiple of 5, got 7"),
    ({"minLength": 2}, "a", "minLength", "must be at least 2 characters long, got 1"),
    ({"maxLength": 2}, "abc", "maxLength", "must be at most 2 characters long, got 3"),
    ({"pattern": "^[A-Z]+$"}, "aapl", "pattern", '"aapl" does not match the pattern "^[A-Z]+$"'),
    ({"minItems": 2}, [1], "minItems", "must have at least 2 items, got 1"),
    ({"maxItems": 1}, [1, 2], "maxItems", "must have at most 1 items, got 2"),
    ({"uniqueItems": True}, [1, 1], "uniqueItems", "items must be unique; some are repeated"),
    ({"const": "v1"}, "v2", "const", 'must be exactly "v1", got "v2"'),
    ({"minProperties": 1}, {}, "minProperties", "must have at least 1 properties, got 0"),
    ({"maxProperties": 1}, {"a": 1, "b": 2}, "maxProperties", "must have at most 1 properties, got 2"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 3, "anyOf", "expected a string or null, got an integer (3)"),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, [], "oneOf",
     "expected a string or an integer, got an array ([])"),
    ({"oneOf": [{"minimum": 0}, {"maximum": 10}]}, 5, "oneOf",
     "5 matches more than one of the allowed forms; it must match exactly one"),
    ({"anyOf": [{"minimum": 10}, {"maximum": 0}]}, 5, "anyOf", "5 does not match any of the allowed forms"),
    ({"not": {"const": 0}}, 0, "not", "0 is a value this field must not have"),
    (False, 1, "false schema", "this property is not allowed"),
    ({"contains": {"type": "integer"}}, ["a"], "contains", "none of the items is of the kind this array must contain"),
    ({"type": "object", "propertyNames": {"maxLength": 2}}, {"abc": 1}, "propertyNames",
     'property name not allowed: "abc" is longer than 2 characters'),
    ({"type": "object", "properties": {}, "unevaluatedProperties": False}, {"x": 1}, "unevaluatedProperties",
     "unexpected property; no other properties are allowed"),
])
def test_other_keywords_are_described_plainly(schema, value, kind, message):
    toolset = Toolset({"t": {"type": "object", "properties": {"v": schema}}})
    verdict = toolset.check(call("t", {"v": value}))
    assert len(verdict.problems) == 1, verdict.problems
    problem = verdict.problems[0]
    assert problem.kind == kind and problem.message == message
    assert problem.path in ("$.v", "$.v.x")
    assert verdict.retry_message.count("\n- ") == 1 and message in verdict.retry_message


def test_format_is_an_annotation_in_2020_12_by_default():
    toolset = Toolset({"t": {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}})
    assert toolset.check(call("t", {"when": "yesterday"})).ok


def test_paths_into_arrays_and_odd_keys():
    toolset = Toolset({"order": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}},
                                             "required": ["sku"]}},
        "a b": {"type": "integer"}, "ключ": {"type": "integer"}}}})
    verdict = toolset.check(call("order", {"items": [{"sku": "A"}, {"sku": 2}, {}], "a b": "x", "ключ": "y"}))
    assert sorted(p.path for p in verdict.problems) == ['$.items[1].sku', '$.items[2].sku', '$["a b"]', '$["ключ"]']


def test_problems_are_listed_up_to_a_few_and_the_message_is_capped():
    props = {f"field_{i}": {"type": "integer"} for i in range(30)}
    toolset = Toolset({"wide": {"type": "object", "properties": props, "required": list(props)}})
    verdict = toolset.check(call("wide", {f"field_{i}": "not a number " * 20 for i in range(30)}))
    assert len(verdict.problems) == 30
    message = verdict.retry_message
    assert len(message) <= 600
    listed = [line for line in message.splitlines() if line.startswith("- $")]
    assert 1 <= len(listed) <= 4
    assert f"- and {30 - len(listed)} more problems" in message
    assert message.endswith('Correct the arguments and call "wide" again.')


def test_a_long_tool_list_is_capped_too():
    toolset = Toolset({f"tool_number_{i}_with_a_long_name": None for i in range(100)})
    message = toolset.check(call("nope", {})).retry_message
    assert len(message) <= 600 and message.endswith(" more). Call one of the available tools instead.")
    assert '"tool_number_0_with_a_long_name", "tool_number_1_with_a_long_name"' in message


# ---------------------------------------------------------------- defaults


def test_defaults_fill_top_level_and_nested(weather):
    arguments = {"city": "Paris", "address": {"street": "1 Rue", "city": "Paris"}}
    verdict = weather.check(call("get_weather", arguments))
    assert verdict.arguments == {"city": "Paris", "units": "celsius",
                                 "address": {"street": "1 Rue", "city": "Paris", "country": "GB"}}
    assert arguments == {"city": "Paris", "address": {"street": "1 Rue", "city": "Paris"}}


def test_defaults_never_overwrite_and_never_create_parents(weather):
    verdict = weather.check(call("get_weather", {"city": "Paris", "units": "fahrenheit"}))
    assert verdict.arguments == {"city": "Paris", "units": "fahrenheit"}  # no "address" made up


def test_copy_on_write_shares_what_did_not_change():
    toolset = Toolset({"t": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"x": {"default": 1}}},
        "b": {"type": "object", "properties": {"y": {"default": 2}}},
        "c": {"type": "array", "items": {"type": "object", "properties": {"z": {"default": 3}}}}}}})
    arguments = {"a": {"x": 0}, "b": {}, "c": [{"z": 9}, {}], "d": {"keep": True}}
    filled = toolset.check(call("t", arguments)).arguments
    assert filled == {"a": {"x": 0}, "b": {"y": 2}, "c": [{"z": 9}, {"z": 3}], "d": {"keep": True}}
    assert filled["a"] is arguments["a"] and filled["d"] is arguments["d"] and filled["c"][0] is arguments["c"][0]
    assert filled["b"] is not arguments["b"] and arguments["b"] == {} and arguments["c"][1] == {}
    full = {"a": {"x": 0}, "b": {"y": 0}, "c": [{"z": 0}]}
    assert toolset.check(call("t", full)).arguments is full


def test_mutable_defaults_are_not_shared():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "default": ["a"]},
                                               "opts": {"type": "object", "default": {"deep": {"n": 1}}}}}
    toolset = Toolset({"t": schema})
    first = toolset.check(call("t", {})).arguments
    first["tags"].append("b")
    first["opts"]["deep"]["n"] = 2
    second = toolset.check(call("t", {})).arguments
    assert second == {"tags": ["a"], "opts": {"deep": {"n": 1}}}
    assert schema["properties"]["tags"]["default"] == ["a"]


def test_defaults_in_items_prefix_items_refs_and_all_of():
    toolset = Toolset({"t": {
        "type": "object",
        "$defs": {"Stop": {"type": "object", "properties": {"name": {"type": "string"},
                                                            "minutes": {"type": "integer", "default": 5}}},
                  "Tree": {"type": "object", "properties": {"label": {"default": "?"},
                                                            "kids": {"type": "array",
                                                                     "items": {"$ref": "#/$defs/Tree"}}}}},
        "properties": {
            "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
            "pair": {"type": "array", "prefixItems": [{"type": "object", "properties": {"p": {"default": 0}}},
                                                      {"type": "string"}]},
            "mixed": {"allOf": [{"type": "object", "properties": {"m": {"default": "all"}}}]},
            "either": {"anyOf": [{"type": "object", "properties": {"e": {"default": "no"}}}, {"type": "null"}]},
            "tree": {"$ref": "#/$defs/Tree"},
        }}})
    verdict = toolset.check(call("t", {"stops": [{"name": "A"}, {"name": "B", "minutes": 1}], "pair": [{}, "x"],
                                       "mixed": {}, "either": {}, "tree": {"kids": [{"kids": [{}]}]}}))
    assert verdict.ok
    assert verdict.arguments == {
        "stops": [{"name": "A", "minutes": 5}, {"name": "B", "minutes": 1}], "pair": [{"p": 0}, "x"],
        "mixed": {"m": "all"}, "either": {},  # not inside anyOf/oneOf branches
        "tree": {"label": "?", "kids": [{"label": "?", "kids": [{"label": "?"}]}]}}


@pytest.mark.parametrize("root", ["A", "B"])
def test_defaults_of_a_schema_recursive_through_all_of_fill_every_level(root):
    # Found by a hostile probe: B = allOf [A] + y, A = x + child: B. Planning A met B, which took a
    # copy of A while A was still being planned (no child yet): below the second level nothing was filled.
    schema = {"$ref": f"#/$defs/{root}", "$defs": {
        "A": {"type": "object", "properties": {"x": {"type": "integer", "default": 1}, "child": {"$ref": "#/$defs/B"}}},
        "B": {"allOf": [{"$ref": "#/$defs/A"}], "properties": {"y": {"type": "integer", "default": 2}}}}}
    deep = {}
    for _ in range(6):
        deep = {"child": deep}
    filled = Toolset({"f": schema}).check(call("f", deep)).arguments
    level, depth = filled, 0
    while "child" in level:
        assert level["x"] == 1 and (depth > 0 or root == "B") == ("y" in level), (depth, level)
        level, depth = level["child"], depth + 1
    assert depth == 6 and level == {"x": 1, "y": 2}


def test_an_inserted_object_default_gets_its_own_nested_defaults():
    toolset = Toolset({"t": {"type": "object", "properties": {
        "opts": {"type": "object", "default": {"a": 1}, "properties": {"b": {"default": 2}}}}}})
    assert toolset.check(call("t", {})).arguments == {"opts": {"a": 1, "b": 2}}


# Found by a hostile review: the planner resolved references and `items` otherwise than the
# validator, and check() said ok while handing over filled arguments the tool's schema refuses.
RESOLVED_AS_THE_VALIDATOR_DOES = {
    "an $anchor": ({
        "type": "object", "properties": {"a": {"type": "integer", "default": 1}, "child": {"$ref": "#leaf"}},
        "$defs": {"leaf": {"$anchor": "leaf", "type": "object", "properties": {"b": {"type": "integer", "default": 2}},
                           "additionalProperties": False}},
    }, {"child": {}}, {"child": {"b": 2}, "a": 1}),  # before: the root's defaults, into child
    "a $ref inside a resource with its own $id": ({
        "type": "object", "properties": {"child": {"$ref": "#/$defs/leaf"}},
        "$defs": {"x": {"properties": {"p": {"const": "root", "default": "root"}}},
                  "leaf": {"$id": "https://example.com/leaf.json", "type": "object", "$ref": "#/$defs/x",
                           "$defs": {"x": {"properties": {"p": {"const": "leaf", "default": "leaf"}}}}}},
    }, {"child": {}}, {"child": {"p": "leaf"}}),  # before: the root's x
    "items after prefixItems (2020-12)": ({
        "type": "object", "properties": {"pair": {
            "type": "array", "prefixItems": [{"type": "object", "properties": {"a": {"default": 1}},
                                              "additionalProperties": False}],
            "items": {"type": "object", "properties": {"b": {"default": 2}}}}},
    }, {"pair": [{}, {}]}, {"pair": [{"a": 1}, {"b": 2}]}),  # before: b into the first item too
    "keywords beside a $ref (draft-07: ignored)": ({
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "definitions": {"A": {"type": "object", "properties": {"y": {"type": "integer", "default": 3}},
                              "additionalProperties": False}},
        "properties": {"o": {"$ref": "#/definitions/A", "properties": {"x": {"default": 1}}}},
    }, {"o": {}}, {"o": {"y": 3}}),  # before: x filled as well
    "positional items (2019-09)": ({
        "$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "object", "properties": {"a": {"default": 1}}}],
                                "prefixItems": [{"type": "object", "properties": {"z": {"default": 9}}}]}},
    }, {"pair": [{}, {}]}, {"pair": [{"a": 1}, {}]}),  # prefixItems is no keyword of 2019-09
    "a %-escaped pointer": ({
        "type": "object", "properties": {"c": {"$ref": "#/$defs/a%20b"}},
        "$defs": {"a b": {"type": "object", "properties": {"k": {"default": "v"}}}},
    }, {"c": {}}, {"c": {"k": "v"}}),  # before: never filled
    "an $anchor given twice (names no single place)": ({
        "type": "object", "properties": {"c": {"$ref": "#twice"}},
        "$defs": {"one": {"$anchor": "twice", "properties": {"k": {"default": 1}}},
                  "two": {"$anchor": "twice", "properties": {"k": {"default": 2}}}},
    }, {"c": {}}, {"c": {}}),
}


@pytest.mark.parametrize("name", list(RESOLVED_AS_THE_VALIDATOR_DOES))
def test_defaults_follow_references_and_items_as_the_validator_does(name):
    jsonschema_rs = pytest.importorskip("jsonschema_rs")
    schema, arguments, filled = RESOLVED_AS_THE_VALIDATOR_DOES[name]
    try:
        valid = jsonschema_rs.validator_for(schema).is_valid
    except Exception:  # (a schema this jsonschema-rs refuses, the twice-given anchor say): Toolset refuses it too
        with pytest.raises(ValueError):
            Toolset({"f": schema})
        return
    verdict = Toolset({"f": schema}).check(call("f", arguments))
    assert verdict.ok and verdict.arguments == filled
    assert valid(verdict.arguments)


@pytest.mark.parametrize("schema, arguments", [
    ({"type": "object", "properties": {"a": {"default": 1}, "b": {}}, "maxProperties": 1}, {"b": 2}),
    ({"type": "object", "properties": {"a": {"default": 1}, "c": {}}, "dependentRequired": {"a": ["c"]}}, {}),
    ({"type": "object", "properties": {"u": {"enum": ["c", "f"], "default": "k"}}}, {}),
    ({"type": "object", "properties": {"a": {"default": 1}}, "not": {"required": ["a"]}}, {}),
], ids=["maxProperties", "dependentRequired", "default-outside-its-enum", "not"])
def test_a_default_that_breaks_the_schema_is_not_filled_and_the_call_runs_as_received(schema, arguments):
    # A default is an annotation: one the schema's other rules refuse (a schema's own mistake, or
    # a rule that counts properties) would hand the tool arguments it refuses, with ok=True.
    verdict = Toolset({"f": schema}).check(call("f", arguments))
    assert verdict.ok and verdict.arguments is arguments


def test_invalid_calls_get_no_defaults(weather):
    verdict = weather.check(call("get_weather", {"city": 1}))
    assert verdict.arguments == {"city": 1}


# ---------------------------------------------------------------- every wire format, through both twins

TOOLS_BY_FORMAT = {
    "openai-responses": [{"type": "function", "name": n, "parameters": s} for n, s in
                         (("get_weather", WEATHER), ("get_stock", STOCK), ("get_time", TIME))],
    "anthropic": [{"name": n, "input_schema": s} for n, s in
                  (("get_weather", WEATHER), ("get_stock", STOCK), ("get_time", TIME))],
    "gemini": [{"functionDeclarations": [{"name": n, "parametersJsonSchema": s} for n, s in
                                         (("get_weather", WEATHER), ("get_stock", STOCK), ("get_time", TIME))]}],
    "bedrock": {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": s}}} for n, s in
                          (("get_weather", WEATHER), ("get_stock", STOCK), ("get_time", TIME))]},
    "cohere": [{"type": "function", "function": {"name": n, "parameters": s}} for n, s in
               (("get_weather", WEATHER), ("get_stock", STOCK), ("get_time", TIME))],
    "ollama": {"get_weather": WEATHER, "get_stock": STOCK, "get_time": TIME},
}
STREAMED = (Call("call_w1", "get_weather", '{"city": "Paris", "units": "kelvin"}'),
            Call("call_s2", "get_stock", '{"symbol": "AAPL", "note": "café ☕ 東京 😀"}'),
            Call("call_t3", "get_time", '{"tz": "Europe/Paris", "n": [1, 2.5, true, null]}'),
            Call("call_x4", "get_wether", '{"city": "Oslo"}'))


@pytest.mark.parametrize("variant", ["openai-responses", "anthropic", "gemini", "bedrock-eventstream",
                                     "bedrock-sse", "cohere", "ollama"])
def test_calls_of_every_format(impl, variant):
    fmt = format_of(variant)
    result = impl.reassemble(build(variant, STREAMED), format=fmt)
    toolset = Toolset(TOOLS_BY_FORMAT[fmt])
    verdicts = toolset.check_all(result)
    assert [(v.call.name, v.ok) for v in verdicts] == [("get_weather", False), ("get_stock", True),
                                                      ("get_time", True), ("get_wether", False)]
    assert kinds(verdicts[0]) == [("$.units", "enum")]
    assert 'Did you mean "get_weather"?' in verdicts[3].retry_message


def test_both_twins_get_the_same_verdicts(both, weather):
    body = openai_body(("c1", "get_weather", '{"city": "Paris", "address": {"street": "x", "city": "y"}}'),
                       ("c2", "get_weather", '{"city": "Paris", "units": "k", "extra": []}'),
                       ("c3", "get_weather", '{"city": "Par'), ("c4", "nope", "{}"))
    seen = []
    for twin in both:
        verdicts = weather.check_all(twin.reassemble(body))
        seen.append([(v.ok, v.arguments, v.problems, v.retry_message) for v in verdicts])
    assert seen[0] == seen[1]


def test_public_names():
    assert {"Toolset", "Verdict", "Problem"} <= set(callstitch.__all__)
    assert callstitch.Toolset is Toolset
