"""Describe what is wrong with a call in plain language, each problem at a JSON path like $.address.city."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterable, Sequence

import orjson

from .._records import Unwritable, nesting, to_json

__all__ = ["Problem", "json_path", "unknown_tool", "bad_arguments", "schema_problems", "not_checked",
           "PROBLEMS_KEPT"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_VALUE_CHARS = 40
_LIST_ITEMS = 8


class Problem:
    """One thing wrong with a call.

    ``path`` is a JSON path into the arguments ("$" for the arguments as a whole, "$.address.city",
    "$.items[0].sku"); ``kind`` is "unknown tool", an argument error's kind ("missing",
    "truncated", "malformed", "trailing data", "not an object"), the JSON Schema keyword that
    failed ("required", "type", "enum", "additionalProperties", "minimum", …), or "limit" for the
    last problem of a call that had more than PROBLEMS_KEPT (it says so); ``message`` says what is
    wrong and what is expected, in words a model can act on.
    """

    __slots__ = ("path", "kind", "message")

    def __init__(self, path: str, kind: str, message: str) -> None:
        self.path = path
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def __repr__(self) -> str:
        return f"Problem(path={self.path!r}, kind={self.kind!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Problem)
                and (self.path, self.kind, self.message) == (other.path, other.kind, other.message))

    __hash__ = None  # type: ignore[assignment]


def json_path(parts: Iterable[Any]) -> str:
    """Return parts (keys and indexes) as a JSON path: $.address.city, $.items[0], $["odd key"]."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append("." + part)
        else:
            out.append("[" + _quote(part) + "]")
    return "".join(out)


def _quote(name: str) -> str:
    try:
        return orjson.dumps(name).decode()
    except TypeError:  # a lone surrogate, which only the standard library writes (as its escape)
        return json.dumps(name)


def show(value: Any) -> str:
    """Return value as short JSON text for a message (its JSON type when it is too deep to write)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits, a lone surrogate, nested deeper than orjson goes
        try:
            text = to_json(value).decode()
        except Unwritable:
            return f"{json_type(value)} nested too deep to show"
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 1] + "…"


def _names(names: Sequence[Any], limit: int = _LIST_ITEMS, chars: int = 200) -> str:
    """Return names quoted and comma-separated: at most limit of them, in about chars characters."""
    shown: list[str] = []
    used = 0
    for n in names[:limit]:
        text = _quote(n) if isinstance(n, str) else show(n)
        if shown and used + len(text) + 2 > chars:
            break
        shown.append(text)
        used += len(text) + 2
    rest = len(names) - len(shown)
    return ", ".join(shown) + (f" (and {rest} more)" if rest else "")


_A_TYPE = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
           "object": "an object", "array": "an array", "null": "null"}


def json_type(value: Any) -> str:
    """Return the JSON type of a parsed value, with its article: "a string", "an array"…"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _types(types: Iterable[str]) -> str:
    # "null" last: "expected a string or null" reads better than "null or a string".
    ordered = sorted(types, key=lambda t: t == "null")
    words = [_A_TYPE.get(t, t) for t in ordered]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def unknown_tool(name: str | None, known: Sequence[str]) -> Problem:
    """Return the problem of a call to a tool that was not offered, naming the closest that was."""
    parts = ["the call names no tool" if name is None else f"there is no tool named {_quote(name)}"]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6) if name else []
    if close:
        parts.append(f"Did you mean {_quote(close[0])}?")
    parts.append(f"The available tools are {_names(list(known), 30, 400)}" if known else "No tools were offered")
    return Problem("$", "unknown tool", parts[0] + ". " + " ".join(parts[1:]))


_ARGUMENT_WORDS = {
    "truncated": "the arguments are incomplete JSON (cut off after {offset} bytes)",
    "malformed": "the arguments are not valid JSON (at byte {offset}: {detail})",
    "trailing data": "the arguments have extra text after the JSON object (from byte {offset})",
    "not an object": "the arguments must be a JSON object, not {got}",
}


def bad_arguments(call: Any) -> Problem:
    """Return the problem of a call whose arguments are missing, did not parse, or are not an object."""
    error = call.error
    if error is not None and error.kind in _ARGUMENT_WORDS:
        got = json_type(call.arguments) if call.arguments is not None else "another kind of value"
        if error.kind == "not an object" and call.arguments is None:
            got = _guess_type(call.raw_arguments)
        return Problem("$", error.kind, _ARGUMENT_WORDS[error.kind].format(
            offset=error.offset, detail=getattr(error, "detail", ""), got=got))
    if error is not None:
        return Problem("$", "malformed", f"the arguments could not be read: {error}")
    if call.arguments is None:
        return Problem("$", "missing", "the call has no arguments; a JSON object is expected")
    return Problem("$", "not an object", f"the arguments must be a JSON object, not {json_type(call.arguments)}")


def _guess_type(raw: str) -> str:
    first = raw.lstrip()[:1]
    return {"[": "an array", '"': "a string", "t": "a boolean", "f": "a boolean", "n": "null"}.get(
        first, "a number" if first[:1] in "-0123456789" and first else "another kind of value")


def not_checked(arguments: Any, reason: str) -> Problem:
    """Return the problem of arguments that could not be checked (the validator or the defaults gave up)."""
    depth = nesting(arguments, _DEEP_SHOWN)
    if depth > _DEEP_SHOWN:
        return Problem("$", "not checked", f"the arguments are nested more than {_DEEP_SHOWN} levels deep and "
                                           f"could not be checked ({reason})")
    if depth > _DEEP:
        return Problem("$", "not checked", f"the arguments are nested {depth} levels deep and could not be "
                                           f"checked ({reason})")
    return Problem("$", "not checked", f"the arguments could not be checked ({reason})")


# Past this nesting, "too deep" is the likely reason a check failed, and worth saying; how deep is
# counted up to _DEEP_SHOWN (the count walks the arguments).
_DEEP = 64
_DEEP_SHOWN = 100_000


# ---------------------------------------------------------------- schema errors


def _at(schema: Any, schema_path: Sequence[Any]) -> Any:
    """Return the schema node that holds the failing keyword (None when the path leaves the document)."""
    node = schema
    for part in schema_path[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node if isinstance(node, dict) else None


def _kind_name(kind: Any) -> str:
    # jsonschema-rs names its error kinds after the keyword: Type, Required, AdditionalProperties…
    # (before 0.50: ValidationErrorKind_Type, …)
    name = type(kind).__name__.removeprefix("ValidationErrorKind_")
    return {"Constant": "const", "OneOfNotValid": "oneOf", "OneOfMultipleValid": "oneOf",
            "FalseSchema": "false schema", "Referencing": "$ref", "FromUtf8": "contentEncoding",
            "BacktrackLimitExceeded": "pattern", "RegexEngineFailure": "pattern"}.get(
        name, name[:1].lower() + name[1:])


def _branch_types(kind: Any, path: list) -> list[str] | None:
    # anyOf/oneOf over plain types (e.g. Optional[int] → [integer, null]): name the types.
    types: list[str] = []
    for branch in getattr(kind, "context", None) or ():
        found = [e for e in branch if list(e.instance_path) == path and _kind_name(e.kind) == "type"]
        if not found:
            return None
        types.extend(t for t in found[0].kind.types if t not in types)
    return types or None


# Problems kept for one call; past them the errors are not described, and one last problem of kind
# "limit" says there were more. Arguments of a few MB can hold a million wrong items: described one by
# one they took half a minute and 200 MB, for a retry message that lists four; 100 show any pattern.
# (jsonschema-rs's iter_errors still makes every error, in Rust, before it hands over the first.)
PROBLEMS_KEPT = 100


def schema_problems(errors: Iterable[Any], schema: dict) -> list[Problem]:
    """Return plain-language problems for jsonschema-rs validation errors: PROBLEMS_KEPT at most, then "limit"."""
    problems: list[Problem] = []
    for error in errors:
        if len(problems) > PROBLEMS_KEPT:  # one more than kept is enough to know there are more
            break
        kind = error.kind
        name = _kind_name(kind)
        parts = list(error.instance_path)
        path = json_path(parts)
        value = error.instance
        node = _at(schema, list(error.schema_path))
        try:
            problems.extend(_describe(name, kind, parts, path, value, node, error))
        except Exception:  # an error kind shaped unlike the ones we know: the validator's own words
            problems.append(Problem(path, name, str(error.message)))
    if len(problems) > PROBLEMS_KEPT:
        del problems[PROBLEMS_KEPT:]
        problems.append(Problem("$", "limit", f"there are more than {PROBLEMS_KEPT} problems; only the first "
                                              f"{PROBLEMS_KEPT} were kept"))
    return problems


def _describe(name: str, kind: Any, parts: list, path: str, value: Any, node: Any, error: Any) -> list[Problem]:
    if name == "required":
        prop = kind.property
        prop_name = prop if isinstance(prop, str) else show(prop)
        required = node.get("required") if node else None
        also = (f" (required here: {_names(required)})" if isinstance(required, list) and len(required) > 1 else "")
        return [Problem(json_path([*parts, prop_name]), "required", f"required property missing{also}")]
    if name == "type":
        return [Problem(path, "type", f"expected {_types(kind.types)}, got {json_type(value)} ({show(value)})")]
    if name == "enum":
        return [Problem(path, "enum", f"{show(value)} is not allowed; expected one of {_names(list(kind.options))}")]
    if name in ("additionalProperties", "unevaluatedProperties"):
        props = node.get("properties") if node else None
        allowed = (f"; allowed properties: {_names(list(props))}" if isinstance(props, dict) and props
                   else "; no other properties are allowed")
        # One problem a property: a million of them are cut here, where the error is only one.
        return [Problem(json_path([*parts, p]), name, f"unexpected property{allowed}")
                for p in kind.unexpected[:PROBLEMS_KEPT + 1]]
    if name == "const":
        return [Problem(path, "const", f"must be exactly {show(kind.expected_value)}, got {show(value)}")]
    if name in ("anyOf", "oneOf"):
        types = _branch_types(kind, parts)
        if type(kind).__name__.endswith("OneOfMultipleValid"):
            return [Problem(path, name, f"{show(value)} matches more than one of the allowed forms; "
                                        "it must match exactly one")]
        if types:
            return [Problem(path, name, f"expected {_types(types)}, got {json_type(value)} ({show(value)})")]
        return [Problem(path, name, f"{show(value)} does not match any of the allowed forms")]
    limit = getattr(kind, "limit", None)
    words = {
        "minimum": lambda: f"must be at least {show(limit)}, got {show(value)}",
        "maximum": lambda: f"must be at most {show(limit)}, got {show(value)}",
        "exclusiveMinimum": lambda: f"must be greater than {show(limit)}, got {show(value)}",
        "exclusiveMaximum": lambda: f"must be less than {show(limit)}, got {show(value)}",
        "multipleOf": lambda: f"must be a multiple of {show(kind.multiple_of)}, got {show(value)}",
        "minLength": lambda: f"must be at least {limit} characters long, got {len(value)}",
        "maxLength": lambda: f"must be at most {limit} characters long, got {len(value)}",
        "pattern": lambda: f"{show(value)} does not match the pattern {show(kind.pattern)}",
        "format": lambda: f"{show(value)} is not a valid {kind.format}",
        "minItems": lambda: f"must have at least {limit} items, got {len(value)}",
        "maxItems": lambda: f"must have at most {limit} items, got {len(value)}",
        "uniqueItems": lambda: "items must be unique; some are repeated",
        "minProperties": lambda: f"must have at least {limit} properties, got {len(value)}",
        "maxProperties": lambda: f"must have at most {limit} properties, got {len(value)}",
        "contains": lambda: "none of the items is of the kind this array must contain",
        "not": lambda: f"{show(value)} is a value this field must not have",
        "false schema": lambda: "no value is allowed here" if not parts else "this property is not allowed",
        "propertyNames": lambda: f"property name not allowed: {kind.error.message}",
        "additionalItems": lambda: f"must have at most {limit} items",
        "unevaluatedItems": lambda: "has more items than are allowed",
    }
    describe = words.get(name)
    return [Problem(path, name, describe() if describe else str(error.message))]
