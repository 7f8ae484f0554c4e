"""Toolset under hostile input: deep and recursive schemas, arguments 1,000 deep, odd values.

`Toolset(tools)` either builds or raises a ValueError that says where; `check(call)` always
returns a Verdict (never raises), whatever the schema and the arguments hold. Calls come from
each twin's reassembly where the arguments are text a model could send, and are built directly
where they hold what only a program could (integers beyond 64 bits, lone surrogates).
"""

from __future__ import annotations

import copy
import json

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from _streams import DONE, chunk, finish, tool_delta

from callstitch import Toolset, ToolCall, Verdict
from callstitch._validate.defaults import FILL_DEPTH, PLAN_DEPTH
from callstitch._validate.retry import MAX_CHARS
from callstitch._validate.shapes import SCHEMA_DEPTH

# A recursive schema with a default at every level: a tree of nodes.
NODE = {"$defs": {"node": {"type": "object", "properties": {
    "label": {"type": "string", "default": "?"}, "child": {"$ref": "#/$defs/node"}}}},
    "$ref": "#/$defs/node"}


def stream(name: str, text: str) -> bytes:
    """An OpenAI chat stream of one call to name with this argument text, cut in pieces of 97."""
    events = [chunk([tool_delta(0, id="call_1", name=name, arguments="")])]
    events += [chunk([tool_delta(0, arguments=text[i:i + 97])]) for i in range(0, len(text), 97)]
    return b"".join(events) + chunk([finish("tool_calls")]) + DONE


def reassembled(impl, name: str, text: str) -> ToolCall:
    (call,) = impl.reassemble(stream(name, text)).tool_calls
    return call


def chain(depth: int, leaf: str = "{}") -> str:
    """Argument text of nodes nested depth deep: {"child": {"child": ... }}."""
    return '{"child":' * depth + leaf + "}" * depth


def nested_lists(depth: int) -> str:
    return '{"a":' + "[" * depth + "]" * depth + "}"


def assert_refused(verdict: Verdict, kind: str = "not checked") -> None:
    assert isinstance(verdict, Verdict) and not verdict.ok
    assert [p.kind for p in verdict.problems] == [kind]
    assert isinstance(verdict.retry_message, str) and len(verdict.retry_message) <= MAX_CHARS


# -- check() always returns a Verdict -------------------------------------------------------------

def test_every_refusal_of_a_long_named_tool_keeps_its_retry_message_short(impl):
    # Before: the custom-tool refusals ("wrong kind", no input) wrote the names whole: 2,163 characters.
    custom, function = "c" * 1000, "f" * 1000
    tools = Toolset([{"type": "custom", "custom": {"name": custom}},
                     {"type": "function", "function": {"name": function, "parameters": {
                         "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}])
    calls = [  # (kind, name, what it sends): each refused
        ("function", custom, '{}'), ("function", function, '{"a": "x"}'), ("custom", function, "x"),
        ("custom", "n" * 1000, "x")]
    events = []
    for index, (kind, name, sent) in enumerate(calls):
        body = {"name": name, "arguments": sent} if kind == "function" else {"name": name, "input": sent}
        events.append(chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": f"call_{index}", "type": kind, kind: body}]}}]))
    verdicts = tools.check_all(impl.reassemble(b"".join(events) + chunk([finish("tool_calls")]) + DONE))
    assert {p.kind for v in verdicts for p in v.problems} == {"type", "unknown tool", "wrong kind"}
    for verdict in verdicts:
        assert_refused(verdict, verdict.problems[0].kind)


def test_a_recursive_schema_with_a_default_is_filled_at_every_level(impl):
    tools = Toolset({"tree": NODE})
    verdict = tools.check(reassembled(impl, "tree", chain(100)))
    assert verdict.ok
    node, depth = verdict.arguments, 0
    while "child" in node:
        assert node["label"] == "?"
        node, depth = node["child"], depth + 1
    assert depth == 100 and node == {"label": "?"}


def test_a_1000_deep_call_against_a_recursive_schema_with_a_default_gets_a_verdict(impl):
    # Before: RecursionError from the fill, out of check().
    call = reassembled(impl, "tree", chain(1000))
    assert call.error is None
    verdict = Toolset({"tree": NODE}).check(call)
    assert_refused(verdict)
    assert verdict.problems[0].message == (f"the arguments are nested deeper than {FILL_DEPTH} levels where the "
                                           "schema has defaults, too deep to fill them")
    assert verdict.arguments is call.arguments
    assert verdict.retry_message.startswith('Error: the call to "tree" was not run: the arguments are nested deeper')


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"const": 1}}},
    {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
    {"type": "object", "properties": {"a": {"type": "string"}}},
], ids=["const", "enum", "type"])
def test_arguments_1000_deep_that_the_validator_gives_up_on_get_a_verdict(impl, schema):
    # Before: jsonschema-rs's ValueError("Recursion limit reached") out of is_valid().
    verdict = Toolset({"f": schema}).check(reassembled(impl, "f", nested_lists(999)))
    assert_refused(verdict)
    assert verdict.problems[0].message.startswith("the arguments are nested 1000 levels deep and could not be "
                                                  "checked (")


def test_a_verdict_on_deep_arguments_has_a_repr(impl):
    verdict = Toolset({"f": None}).check(reassembled(impl, "f", nested_lists(999)))
    assert verdict.ok and repr(verdict).startswith("Verdict(ok=True, name='f', arguments={'a': [[[")


def test_values_the_validator_cannot_read_get_a_verdict():
    tools = Toolset({"f": {"type": "object", "properties": {"a": {"type": "string"}}}})
    for arguments in ({"a": b"bytes"}, {1: "int key"}, {"a": object()}):
        assert_refused(tools.check(ToolCall("c", "f", 0, 0, arguments, "{}")))


def test_integers_beyond_64_bits_and_lone_surrogates_are_described():
    tools = Toolset({"f": {"type": "object", "properties": {"n": {"type": "string"}, "s": {"type": "integer"}}}})
    verdict = tools.check(ToolCall("c", "f", 0, 0, {"n": 2**70, "s": "x"}, "{}"))
    assert not verdict.ok and {p.kind for p in verdict.problems} == {"type"}
    assert "1180591620717411303424" in " ".join(p.message for p in verdict.problems)
    # jsonschema-rs cannot describe a lone surrogate (it raises UnicodeEncodeError): still a verdict.
    assert_refused(tools.check(ToolCall("c", "f", 0, 0, {"n": 1, "s": "a\ud800"}, "{}")))
    unknown = tools.check(ToolCall("c", "f\udc00x", 0, 0, {}, "{}"))
    assert_refused(unknown, "unknown tool")
    assert 'there is no tool named "f\\udc00x"' in unknown.problems[0].message
    assert '"f\\udc00x"' in unknown.retry_message


def test_a_name_that_is_not_a_string_is_an_unknown_tool():
    assert_refused(Toolset({"f": None}).check(ToolCall("c", ["not", "hashable"], 0, 0, {}, "{}")), "unknown tool")


# -- Toolset(tools): a clear ValueError ------------------------------------------------------------

def _deep(depth: int, make, value: object = None):
    value = {} if value is None else value
    for _ in range(depth):
        value = make(value)
    return value


def _ref_chain(n: int) -> dict:
    defs = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(n)}
    defs[f"a{n}"] = {"type": "object", "properties": {"x": {"default": 1}}}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


def _allof_chain(n: int) -> dict:
    defs = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}], "properties": {f"p{i}": {"default": i}}}
            for i in range(n)}
    defs[f"a{n}"] = {"type": "object"}
    return {"$defs": defs, "$ref": "#/$defs/a0"}


HOSTILE_TOOLS = {
    # each was a RecursionError out of Toolset(...)
    "gemini-openapi-5000-deep": ([{"functionDeclarations": [{"name": "f", "parameters": _deep(
        5000, lambda s: {"type": "OBJECT", "properties": {"a": s}})}]}],
        f"tools[0].functionDeclarations[0]: tool 'f': the parameters schema is nested deeper than {SCHEMA_DEPTH}"),
    "ref-chain-600": ({"f": _ref_chain(600)}, f"tools['f']: tool 'f': the parameters schema nests deeper than "
                                              f"{PLAN_DEPTH} levels"),
    "allof-chain-2000": ({"f": _allof_chain(2000)}, f"tools['f']: tool 'f': the parameters schema nests deeper "
                                                   f"than {PLAN_DEPTH} levels"),
    "name-a-5000-deep-list": ([{"type": "function", "name": _deep(5000, lambda v: [v]), "parameters": {}}],
                              "tools[0]: a function tool needs a non-empty string name, got [[[[...]]]]"),
    "name-a-5001-digit-int": ([{"type": "function", "function": {"name": 10**5000}}],
                              "tools[0]: a function tool needs a non-empty string name, got a int"),
    "key-a-deep-tuple": ([{_deep(2000, lambda v: (v,), ()): 1}], "tools[0]: not a tool definition callstitch can read"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_TOOLS))
def test_a_hostile_tool_list_raises_a_clear_value_error(name):
    tools, message = HOSTILE_TOOLS[name]
    with pytest.raises(ValueError) as info:
        Toolset(tools)
    assert str(info.value).startswith(message), str(info.value)


def test_chains_within_the_limits_still_fill():
    verdict = Toolset({"f": _ref_chain(150)}).check(ToolCall("c", "f", 0, 0, {}, "{}"))
    assert verdict.ok and verdict.arguments == {"x": 1}
    verdict = Toolset({"f": _allof_chain(90)}).check(ToolCall("c", "f", 0, 0, {}, "{}"))  # two levels a link
    assert verdict.ok and verdict.arguments == {f"p{i}": i for i in range(90)}


# -- the fuzz: generated schemas and arguments --------------------------------------------------------

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ODD_TEXT = st.sampled_from(["", "a\ud800b", "\udc00", "\U0001f600", "東京", "x" * 300, "\x00", "$ref", "#"])
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
           | st.text(max_size=8) | ODD_TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=6) | ODD_TEXT, inner, max_size=4), max_leaves=12)
DEEP = st.builds(lambda depth, key: _deep(depth, (lambda v: [v]) if key is None else (lambda v: {key: v})),
                 st.integers(1, 1500), st.none() | st.sampled_from(["child", "a", "items"]))
VALUES = JSON | DEEP
# Defaults, enums, consts: mostly values a validator takes (it refuses nesting past ~255 levels).
SCHEMA_VALUES = st.one_of(JSON, JSON, JSON, JSON, st.builds(lambda d: _deep(d, lambda v: [v]), st.integers(1, 300)))

REFS = st.sampled_from(["#", "#/$defs/node", "#/$defs/missing", "#/properties/child", "#/$defs/node/properties",
                        "https://example.com/remote.json", "#/$defs/~0odd~1", "#leaf", "#/$defs/a%20b",
                        "#/$defs/res", "#/$defs/res/$defs/node"])
TYPES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null", "OBJECT", "nope"])
PATTERNS = st.sampled_from(["^a+$", "(a+)+$", "[", "\\d{3}", ""])


def _leaf_schemas():
    return (st.just({}) | st.booleans() | st.builds(lambda t: {"type": t}, TYPES)
            | st.builds(lambda v: {"enum": v}, st.lists(SCHEMA_VALUES, min_size=1, max_size=3))
            | st.builds(lambda v: {"const": v}, SCHEMA_VALUES)
            | st.builds(lambda r: {"$ref": r}, REFS) | st.builds(lambda p: {"pattern": p}, PATTERNS)
            | st.builds(lambda n: {"minimum": n}, st.integers(-(2**70), 2**70)))


def _with_default(schema, default):
    if isinstance(schema, dict) and default is not _NO_DEFAULT:
        return {**schema, "default": default}
    return schema


_NO_DEFAULT = object()
DEFAULTS = st.just(_NO_DEFAULT) | SCHEMA_VALUES
NAMES = st.sampled_from(["a", "child", "label", "items", "x"])
KEYS = st.one_of(NAMES, NAMES, NAMES, NAMES, st.sampled_from(["", "東京", "x" * 300, "$ref", "#", "\x00", "a\ud800b"]))


def _extend(inner):
    props = st.dictionaries(KEYS, inner, max_size=3)
    return (st.builds(lambda p, r, d: _with_default({"type": "object", "properties": p, "required": r}, d),
                      props, st.lists(NAMES, max_size=2, unique=True), DEFAULTS)
            | st.builds(lambda i, d: _with_default({"type": "array", "items": i}, d), inner, DEFAULTS)
            | st.builds(lambda items: {"prefixItems": items}, st.lists(inner, min_size=1, max_size=3))
            | st.builds(lambda items: {"items": items}, st.lists(inner, min_size=1, max_size=3))
            | st.builds(lambda items, rest: {"prefixItems": items, "items": rest}, st.lists(inner, min_size=1, max_size=2),
                        inner)
            | st.builds(lambda s, n: {**s, "maxProperties": n} if isinstance(s, dict) else s, inner, st.integers(0, 2))
            | st.builds(lambda s, key: {**s, "dependentRequired": {key: ["x"]}} if isinstance(s, dict) else s, inner,
                        NAMES)
            | st.builds(lambda key, branches: {key: branches}, st.sampled_from(["allOf", "anyOf", "oneOf"]),
                        st.lists(inner, min_size=1, max_size=3))
            | st.builds(lambda s: {"not": s}, inner)
            | st.builds(lambda s, extra: {**s, "additionalProperties": extra} if isinstance(s, dict) else s,
                        inner, st.booleans()))


SCHEMAS = st.recursive(_leaf_schemas(), _extend, max_leaves=10)
def _anchored(schema):
    return {**schema, "$anchor": "leaf"} if isinstance(schema, dict) else schema


OBJECTS = st.builds(
    lambda props, node, required, extra, default, spaced, leaf, inner, draft: _with_default(
        {"type": "object", "properties": props, "required": required,
         # a pointer with an escaped space, an $anchor, a resource of its own whose "#/$defs/node" is its own
         "$defs": {"node": node, "a b": spaced, "leaf": _anchored(leaf),
                   "res": {"$id": "https://example.com/res.json", "$defs": {"node": inner}, "$ref": "#/$defs/node"}},
         **({} if extra is None else {"additionalProperties": extra}), **({"$schema": draft} if draft else {})},
        default),
    st.dictionaries(KEYS, SCHEMAS, max_size=4), SCHEMAS, st.lists(NAMES, max_size=2, unique=True),
    st.none() | st.booleans(),
    DEFAULTS, SCHEMAS, SCHEMAS, SCHEMAS,
    st.sampled_from([None, None, "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema"]))
DEEP_SCHEMAS = st.builds(lambda d: _deep(d, lambda s: {"type": "object", "properties": {"a": s}}),
                         st.integers(50, 400))
# Mostly object schemas, as tools have; then any schema, the recursive tree, and very deep ones.
ROOTS = st.one_of(OBJECTS, OBJECTS, OBJECTS, OBJECTS, OBJECTS, SCHEMAS, st.just(NODE), st.just(NODE), DEEP_SCHEMAS)
CHAINS = st.builds(lambda d, leaf: _deep(d, lambda v: {"child": v, "label": leaf}), st.integers(1, 1200), VALUES)
# Mostly objects, as calls carry; then chains for the recursive schemas, and any value.
ARGUMENTS = st.one_of(*[st.dictionaries(KEYS, VALUES, max_size=5)] * 3, CHAINS, VALUES)


def _shape(shape: str, schema):
    if shape == "mapping":
        return {"f": schema}
    if shape == "openai-chat":
        return [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    if shape == "gemini":
        return [{"functionDeclarations": [{"name": "f", "parameters": schema}]}]
    return [{"name": "f", "input_schema": schema}]


def _build(tools):
    try:
        return Toolset(tools)
    except ValueError as exc:  # refused, with a message: allowed; anything else fails the test
        assert str(exc).startswith("tools"), str(exc)  # it says where
        event("tools refused")
        return None


def _check_verdict(toolset: Toolset, call: ToolCall) -> None:
    before = _snapshot(call.arguments)
    verdict = toolset.check(call)
    assert isinstance(verdict, Verdict) and verdict.call is call
    event("ok" if verdict.ok else "refused: " + ", ".join(sorted({p.kind for p in verdict.problems})))
    if verdict.ok:
        assert verdict.problems == () and verdict.retry_message is None
        schema = toolset.schema(call.name) if call.name in toolset else None
        if verdict.arguments is not call.arguments and schema is not None:
            # Defaults filled: the arguments handed over still satisfy the tool's own schema.
            import jsonschema_rs
            assert jsonschema_rs.validator_for(schema).is_valid(verdict.arguments), verdict.arguments
    else:
        assert verdict.problems and all(p.kind and p.message for p in verdict.problems)
        assert isinstance(verdict.retry_message, str) and len(verdict.retry_message) <= MAX_CHARS
        assert verdict.arguments is call.arguments
    assert _snapshot(call.arguments) == before  # the call's own arguments are never changed


def _snapshot(value):
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # too deep, a big int, a lone surrogate: a copy compares as well
        try:
            return copy.deepcopy(value)
        except RecursionError:
            return repr(type(value))


@SETTINGS
@given(schema=ROOTS, shape=st.sampled_from(["mapping", "openai-chat", "gemini", "anthropic"]),
       arguments=ARGUMENTS, name=st.sampled_from(["f", "f", "f", "g", None, "f\ud800"]))
def test_fuzz_check_always_returns_a_verdict(schema, shape, arguments, name):
    toolset = _build(_shape(shape, schema))
    if toolset is None:
        return
    raw = json.dumps(arguments, default=str) if not isinstance(arguments, (dict, list)) else "{}"
    _check_verdict(toolset, ToolCall("call_1", name, 0, 0, arguments, raw))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(schema=ROOTS, arguments=ARGUMENTS)
def test_fuzz_check_reassembled_calls(impl, schema, arguments):
    toolset = _build({"f": schema})
    if toolset is None:
        return
    try:
        text = orjson.dumps(arguments).decode()
    except TypeError:  # not sendable as a model's text (too deep for orjson, a big int, a surrogate)
        return
    _check_verdict(toolset, reassembled(impl, "f", text))
