"""Coverage-guided fuzzing of Toolset (atheris): any schema, any arguments, a Verdict every time.

Each input is split into nesting depths, a schema (JSON text) and arguments (JSON text). The
schema is offered as a tool, plain and wrapped in a recursive $ref with a default; Toolset(...)
may refuse it, with a ValueError only. The arguments, nested as deep as the input asks, are
checked as a call built directly and as the call each twin reassembles from the text: check()
must return a Verdict and never raise, arguments it filled with defaults must satisfy the schema,
and both twins' calls must get the same verdict. Run it
(see fuzz/README.md):

    python fuzz/fuzz_toolset.py fuzz/corpus-toolset -max_total_time=600
"""

import json
import sys

import atheris

with atheris.instrument_imports(include=["callstitch"]):
    from callstitch import Toolset, ToolCall, Verdict
    from callstitch import _accumulator_c, _accumulator_py
    from callstitch._validate.retry import MAX_CHARS

# A recursive tree of nodes with a default at each level, the shape a fill follows deepest.
NODE = {"$defs": {"node": {"type": "object", "properties": {"label": {"type": "string", "default": "?"},
                                                             "child": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node"}


def parse(text):
    """Return the JSON value of text (the standard library's reading: big integers, lone surrogates), or None."""
    try:
        return json.loads(text, parse_constant=lambda name: None)
    except (ValueError, RecursionError):
        return None


def nest(value, depth, key):
    for _ in range(depth):
        value = {key: value}
    return value


def toolsets(schema, name):
    """Yield a Toolset for each way of offering the schema under name that Toolset accepts (and as a custom tool)."""
    for tools in ({name: schema}, [{"type": "function", "function": {"name": name, "parameters": schema}}],
                  [{"functionDeclarations": [{"name": name, "parameters": schema}]}],
                  {name: {"allOf": [NODE, schema]} if isinstance(schema, dict) else NODE},
                  [{"type": "custom", "custom": {"name": name}}]):
        try:
            yield Toolset(tools)
        except ValueError:
            continue  # refused with a message: allowed


def verdict_of(toolset, call):
    verdict = toolset.check(call)
    if not isinstance(verdict, Verdict):
        raise AssertionError(f"check() returned {type(verdict).__name__}")
    if verdict.ok != (not verdict.problems) or (verdict.retry_message is None) != verdict.ok:
        raise AssertionError(f"an inconsistent verdict: {verdict!r}")
    if verdict.retry_message is not None and len(verdict.retry_message) > MAX_CHARS:
        raise AssertionError(f"a retry message of {len(verdict.retry_message)} characters")
    if verdict.ok and verdict.arguments is not call.arguments and call.name in toolset:
        # defaults filled: what the tool gets must satisfy its own schema
        validator = _validator(toolset.schema(call.name))
        if validator is not None and not _valid(validator, verdict.arguments):
            raise AssertionError(f"ok, with filled arguments the schema refuses: {verdict.arguments!r}")
    repr(verdict)
    return verdict.ok, [(p.path, p.kind, p.message) for p in verdict.problems], verdict.retry_message


def _validator(schema):
    import jsonschema_rs
    try:
        return jsonschema_rs.validator_for(schema) if schema is not None else None
    except Exception:  # noqa: BLE001 - a schema Toolset took through its no-validator path
        return None


def _valid(validator, value):
    try:
        return validator.is_valid(value)
    except Exception:  # noqa: BLE001 - too deep for the validator: not this check's concern
        return True


def reassembled(implementation, text, name):
    body = ("data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}]}}]})
            + "\n\ndata: [DONE]\n\n").encode("utf-8", "surrogatepass")
    acc = implementation.Accumulator(format="openai-chat")
    acc.feed(body)
    calls = acc.finalize().tool_calls
    return calls[0] if calls else None


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    schema_depth = fdp.ConsumeIntInRange(0, 300)
    arguments_depth = fdp.ConsumeIntInRange(0, 1500)
    key = ["child", "a", "label"][fdp.ConsumeIntInRange(0, 2)]
    name = "f" * fdp.ConsumeIntInRange(1, 1200)  # long names too: every message about a call quotes it
    schema = nest(parse(fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 4096))), schema_depth, "properties")
    text = fdp.ConsumeUnicode(fdp.remaining_bytes())
    arguments = nest(parse(text), arguments_depth, key)
    direct = ToolCall("call_1", name, 0, 0, arguments, text)
    custom = ToolCall("call_2", name, 0, 1, text, text, kind="custom")
    deep_text = '{"%s":' % key * arguments_depth + text + "}" * arguments_depth
    calls = [reassembled(_accumulator_c, deep_text, name), reassembled(_accumulator_py, deep_text, name)]
    for toolset in toolsets(schema, name):
        verdict_of(toolset, direct)
        verdict_of(toolset, custom)
        if calls[0] is None or calls[1] is None:
            if calls[0] is not calls[1]:
                raise AssertionError(f"one twin made a call of the text, the other none: {calls!r}")
            continue
        c, py = verdict_of(toolset, calls[0]), verdict_of(toolset, calls[1])
        if c != py:
            raise AssertionError(f"the twins' calls got different verdicts:\nc:  {c!r}\npy: {py!r}")


def main():
    sys.setrecursionlimit(1000)  # the default: what a gateway runs with
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
