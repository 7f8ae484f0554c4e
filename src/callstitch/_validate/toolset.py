"""Check reassembled calls against the tools that were offered: allowlist, JSON Schema, defaults, retry text."""

from __future__ import annotations

import importlib
import reprlib
from typing import Any, Iterable

from .defaults import DefaultsPlan, TooDeep, fill_defaults, plan_defaults
from .problems import Problem, bad_arguments, not_checked, schema_problems, unknown_tool
from .._results import Result, ToolCall
from .retry import _quote, custom_retry_message, retry_message
from .shapes import ToolDef, read_tools

__all__ = ["Toolset", "Verdict", "Problem"]

_EXTRA = "pip install 'callstitch[validate]'"
# Schemas that accept any JSON object: checking them needs no validator (and no jsonschema-rs).
_ANNOTATIONS = {"type", "properties", "required", "description", "title", "$schema"}
# The meta-schemas a schema may name and still need no validator (jsonschema-rs takes each, with
# http or https, with or without the closing "#"); any other $schema goes to jsonschema-rs to judge.
_DRAFTS = {f"{scheme}://json-schema.org/{path}{end}" for scheme in ("http", "https") for end in ("", "#")
           for path in ("schema", "draft-04/schema", "draft-06/schema", "draft-07/schema",
                        "draft/2019-09/schema", "draft/2020-12/schema")}


class Verdict:
    """What Toolset.check() found for one call.

    ``ok`` — the call may run. ``arguments`` — when ok, the call's arguments with the schema's
    defaults filled in (a new object only where something was filled; the call's own arguments are
    never changed); when not ok, the call's arguments as received (None when they did not parse).
    ``problems`` — a tuple of Problem, empty when ok; past PROBLEMS_KEPT (100) problems the rest are
    not kept, and one last problem of kind "limit" says so. ``retry_message`` — None when ok, else
    text to send back to the model as the tool result. ``call`` — the ToolCall checked.
    """

    __slots__ = ("ok", "call", "arguments", "problems", "retry_message")

    def __init__(self, call: ToolCall, ok: bool, arguments: Any, problems: tuple[Problem, ...],
                 retry_message: str | None) -> None:
        self.call = call
        self.ok = ok
        self.arguments = arguments
        self.problems = problems
        self.retry_message = retry_message

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        if self.ok:
            return f"Verdict(ok=True, name={self.call.name!r}, arguments={_repr(self.arguments)})"
        return f"Verdict(ok=False, name={self.call.name!r}, problems={[str(p) for p in self.problems]!r})"


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except (RecursionError, ValueError):  # nested past the stack, a 5,000-digit integer: abridged
        return reprlib.repr(value) if not isinstance(value, int) else "<an integer too long to show>"


class _Tool:
    """One offered tool, ready to check calls: its compiled validator and where its defaults are."""

    __slots__ = ("name", "schema", "strict", "validator", "defaults", "custom")

    def __init__(self, name: str, schema: dict | None, strict: bool, validator: Any,
                 defaults: DefaultsPlan | None, custom: bool = False) -> None:
        self.name = name
        self.schema = schema
        self.strict = strict
        self.validator = validator
        self.defaults = defaults
        self.custom = custom  # an OpenAI custom tool: its calls carry free-form text, not JSON arguments


def _check_custom(call: ToolCall, tool: _Tool) -> Verdict:
    """Return the verdict on a call where a custom (free-form) tool or call is involved.

    A custom tool takes a custom call whose input is text; a custom call to a function tool, or a
    function call to a custom tool, is a problem.
    """
    if not tool.custom:
        problem = Problem("$", "wrong kind", f"{_quote(tool.name)} is a function tool: it takes its arguments as "
                                             f"one JSON object, not free-form text input")
        advice = "as a function call with JSON arguments"
    elif call.kind != "custom":
        problem = Problem("$", "wrong kind", f"{_quote(tool.name)} is a custom tool: it takes free-form text input, "
                                             f"not function arguments")
        advice = "as a custom tool call with text input"
    elif type(call.arguments) is str:
        return Verdict(call, True, call.arguments, (), None)
    elif call.error is not None:  # cut by a limit
        problem = Problem("$", call.error.kind, f"the input is incomplete (cut off after {call.error.offset} bytes)")
        advice = "with the complete input"
    else:
        problem = Problem("$", "missing", "the call has no input text")
        advice = "with its input"
    return Verdict(call, False, call.arguments, (problem,), custom_retry_message(call.name, problem, advice))


def _accepts_any_object(schema: dict | None) -> bool:
    """Tell whether a schema takes every JSON object and is one jsonschema-rs would take too: no validator needed."""
    if schema is None:
        return True
    return (schema.keys() <= _ANNOTATIONS and schema.get("type", "object") == "object"
            and schema.get("properties", {}) == {} and schema.get("required", []) == []
            and type(schema.get("title", "")) is str and type(schema.get("description", "")) is str
            and ("$schema" not in schema or type(schema["$schema"]) is str and schema["$schema"] in _DRAFTS))


def _jsonschema_rs(tool: ToolDef) -> Any:
    try:
        return importlib.import_module("jsonschema_rs")
    except ImportError as exc:
        raise ImportError(
            f"callstitch.Toolset: tool {tool.name!r} ({tool.where}) has a parameters schema, and checking "
            f"calls against it needs jsonschema-rs: {_EXTRA}") from exc


def _refuse(uri: str) -> Any:
    # A request's tool list must never make the gateway fetch a remote $ref.
    raise ValueError(f"remote $ref {uri!r} is not fetched")


def _reason(exc: BaseException) -> str:
    """Return the first line of an exception's message (its type's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _compile(jsonschema_rs: Any, tool: ToolDef) -> Any:
    # The draft comes from the schema's $schema, Draft 2020-12 when it has none.
    try:
        return jsonschema_rs.validator_for(tool.schema, retriever=_refuse)
    except Exception as exc:
        raise ValueError(f"{tool.where}: tool {tool.name!r} has parameters that are not a usable JSON Schema: "
                         f"{_reason(exc)}") from None


def _plan(tool: ToolDef) -> DefaultsPlan | None:
    try:
        return plan_defaults(tool.schema)
    except TooDeep as exc:
        raise ValueError(f"{tool.where}: tool {tool.name!r}: {exc}") from None
    except RecursionError:  # the caller's own stack was already deep: the same answer, in other words
        raise ValueError(f"{tool.where}: tool {tool.name!r}: the parameters schema nests too deep to plan "
                         "its defaults") from None


class Toolset:
    """The tools a request offered, ready to check the calls a model makes.

    tools is the request's ``tools`` in any provider's shape (OpenAI chat or Responses,
    Anthropic, Gemini, Bedrock ``toolConfig``), or a plain ``{name: schema}`` mapping. OpenAI custom
    (free-form) tools are allowed by name, their calls' input checked to be text. Server-side
    tools (web search, code execution, …) are ignored; a name given twice raises ValueError.
    Validators are compiled here, once, and reused by every check.
    """

    __slots__ = ("_tools", "_names")

    def __init__(self, tools: Any) -> None:
        try:
            defs = read_tools(tools)
        except RecursionError:  # SDK objects nested past the stack: a tool list no request holds
            raise ValueError("tools: nested too deep to read as tool definitions") from None
        seen: dict[str, ToolDef] = {}
        for tool in defs:
            if tool.name in seen:
                raise ValueError(f"duplicate tool name {tool.name!r}: defined at {seen[tool.name].where} "
                                 f"and again at {tool.where}")
            seen[tool.name] = tool
        self._tools: dict[str, _Tool] = {}
        for tool in defs:
            validator = None
            if not _accepts_any_object(tool.schema):
                validator = _compile(_jsonschema_rs(tool), tool)
            self._tools[tool.name] = _Tool(tool.name, tool.schema, tool.strict, validator, _plan(tool),
                                           tool.shape == "custom")
        self._names = tuple(self._tools)

    @property
    def names(self) -> tuple[str, ...]:
        """Return the names of the tools (function and custom), in the order they were given."""
        return self._names

    def schema(self, name: str) -> dict | None:
        """Return the named tool's parameters as JSON Schema (Gemini's normalised), or None when it has none."""
        return self._tools[name].schema

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"Toolset({list(self._names)!r})"

    def check(self, call: ToolCall) -> Verdict:
        """Return the verdict on one call: may it run, with what arguments, and if not, why.

        Never raises on what a call holds: arguments the validator cannot go through (nested
        past its recursion limit, values JSON has no type for) give a "not checked" problem.
        """
        try:
            tool = self._tools.get(call.name)  # type: ignore[arg-type]
        except TypeError:  # a name that is not even hashable: no tool has it
            tool = None
        arguments = call.arguments
        if tool is not None and isinstance(arguments, dict) and not tool.custom:
            validator = tool.validator
            # The fast path: a valid call costs a lookup, one is_valid() and, only for tools that
            # have defaults, the copy-on-write fill.
            try:
                if validator is None or validator.is_valid(arguments):
                    if tool.defaults is not None:
                        filled = fill_defaults(arguments, tool.defaults)
                        # A default may break the schema's other rules (maxProperties,
                        # dependentRequired, not, a default outside its own enum): the call, valid
                        # as received, then runs as received, never with arguments the tool refuses.
                        if filled is not arguments and (validator is None or validator.is_valid(filled)):
                            arguments = filled
                    return Verdict(call, True, arguments, (), None)
            except TooDeep as exc:  # valid, but the defaults go deeper than the fill follows
                return self._verdict(call, tool, [Problem("$", "not checked", str(exc))])
            except Exception as exc:  # noqa: BLE001 - a verdict, whatever the arguments hold
                return self._verdict(call, tool, [not_checked(call.arguments, _reason(exc))])
        if tool is not None and (tool.custom or call.kind == "custom"):
            return _check_custom(call, tool)
        return self._explain(call, tool)

    def check_all(self, calls: Result | Iterable[ToolCall]) -> list[Verdict]:
        """Return the verdicts on every call of a Result (or any iterable of calls), in call order."""
        items = calls.tool_calls if isinstance(calls, Result) else calls
        check = self.check
        return [check(call) for call in items]

    def _explain(self, call: ToolCall, tool: _Tool | None) -> Verdict:
        # The slow path, for calls that cannot run: say everything that is wrong.
        if tool is None:
            problems = [unknown_tool(call.name if isinstance(call.name, str) else None, self._names)]
        elif not isinstance(call.arguments, dict):
            problems = [bad_arguments(call)]
        else:
            try:
                problems = schema_problems(tool.validator.iter_errors(call.arguments), tool.schema or {})
            except Exception as exc:  # noqa: BLE001 - the validator gave up part way (nested too deep)
                problems = [not_checked(call.arguments, _reason(exc))]
            if not problems:  # is_valid and iter_errors disagreeing would be a validator bug; never run it
                problems = [Problem("$", "invalid", "the arguments do not match the tool's parameters")]
        return self._verdict(call, tool, problems)

    def _verdict(self, call: ToolCall, tool: _Tool | None, problems: list[Problem]) -> Verdict:
        """Return the verdict that the call may not run, for these problems."""
        return Verdict(call, False, call.arguments, tuple(problems),
                       retry_message(call.name, problems, tool.schema if tool is not None else None))
