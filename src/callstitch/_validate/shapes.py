"""Read the tool definitions of a request, in any provider's shape, into (name, JSON Schema) pairs."""

from __future__ import annotations

import reprlib
from typing import Any, Iterable, NamedTuple

__all__ = ["ToolDef", "read_tools", "openapi_to_json_schema", "SCHEMA_DEPTH"]

# Gemini's schemas are converted one Python frame per level: deeper than this is refused with a
# ValueError (jsonschema-rs, which checks the result, takes ~128 levels of properties anyway).
SCHEMA_DEPTH = 200
# A value shown in an error message: bounded in depth and length, whatever a hostile tool list holds.
_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxstring, _repr.maxother = 3, 80, 80  # a 64-character tool name whole


def _show(value: Any) -> str:
    try:
        return _repr.repr(value)
    except Exception:  # noqa: BLE001 - a 5,000-digit integer, an object whose repr fails
        return f"a {type(value).__name__}"


class ToolDef(NamedTuple):
    """One tool: its name, its parameters as JSON Schema (None when it has none), where it came from.

    shape "custom" is an OpenAI custom (free-form) tool: its calls carry text input, never JSON.
    """

    name: str
    schema: dict | None
    strict: bool
    where: str          # e.g. "tools[2]" or "tools[0].functionDeclarations[1]", for error messages
    shape: str          # "openai-chat", "openai-responses", "anthropic", "gemini", "bedrock", "mapping", "builtin",
    #                     "custom"


# Gemini's `parameters` is OpenAPI 3.0's Schema object: uppercase type names, `nullable`.
_OPENAPI_TYPES = {"STRING": "string", "NUMBER": "number", "INTEGER": "integer", "BOOLEAN": "boolean",
                  "ARRAY": "array", "OBJECT": "object", "NULL": "null"}
# Keys whose value is one subschema, a list of subschemas, or a mapping of name to subschema.
_ONE = ("items", "additionalProperties", "not")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
_BY_NAME = ("properties", "patternProperties", "$defs", "definitions")
# Counts Google's REST API writes as int64, that is as JSON strings ("2").
_INT64 = ("maxItems", "minItems", "maxLength", "minLength", "maxProperties", "minProperties")


def openapi_to_json_schema(schema: Any, _depth: int = 0) -> Any:
    """Return Gemini's OpenAPI-style schema as JSON Schema: lowercase types, `nullable` as a "null" type.

    Also its references (ref and defs, "#/defs/…") as $ref and $defs, and its int64 counts sent as
    strings ("maxItems": "2") as numbers.

    The input is left untouched; keys JSON Schema does not know (propertyOrdering, example) are
    kept, since validators ignore unknown keywords. Raise ValueError for a schema nested deeper
    than SCHEMA_DEPTH levels.
    """
    if not isinstance(schema, dict):
        return schema
    if _depth >= SCHEMA_DEPTH:
        raise ValueError(f"the parameters schema is nested deeper than {SCHEMA_DEPTH} levels")
    out = dict(schema)
    # References: google-genai's Schema spells them ref and defs ("#/defs/Pet"), the REST API $ref and $defs.
    if isinstance(out.get("ref"), str) and "$ref" not in out:
        ref = out.pop("ref")
        out["$ref"] = "#/$defs/" + ref[len("#/defs/"):] if ref.startswith("#/defs/") else ref
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#/defs/"):
        out["$ref"] = "#/$defs/" + out["$ref"][len("#/defs/"):]
    if isinstance(out.get("defs"), dict) and "$defs" not in out:
        out["$defs"] = out.pop("defs")
    for key in _INT64:
        if isinstance(out.get(key), str) and out[key].isascii() and out[key].isdigit():
            out[key] = int(out[key])
    kind = out.get("type")
    if isinstance(kind, str):
        if kind.upper() == "TYPE_UNSPECIFIED":
            del out["type"]
        else:
            out["type"] = _OPENAPI_TYPES.get(kind.upper(), kind)
    elif isinstance(kind, list):
        out["type"] = [_OPENAPI_TYPES.get(k.upper(), k) if isinstance(k, str) else k for k in kind]
    if out.pop("nullable", False) is True:
        kind = out.get("type")
        if isinstance(kind, str) and kind != "null":
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    deeper = _depth + 1
    for key in _ONE:
        if isinstance(out.get(key), dict):
            out[key] = openapi_to_json_schema(out[key], deeper)
    for key in _MANY:
        if isinstance(out.get(key), list):
            out[key] = [openapi_to_json_schema(s, deeper) for s in out[key]]
    for key in _BY_NAME:
        if isinstance(out.get(key), dict):
            out[key] = {k: openapi_to_json_schema(s, deeper) for k, s in out[key].items()}
    return out


def _plain(obj: Any) -> Any:
    # SDK objects (openai, anthropic, google-genai types) are pydantic models: read them as dicts.
    dump = getattr(obj, "model_dump", None)
    if callable(dump) and not isinstance(obj, dict):
        try:
            return dump(exclude_none=True, by_alias=True)
        except TypeError:
            return dump()
    return obj


def _schema(value: Any, where: str) -> dict | None:
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool):
        # A boolean schema is valid JSON Schema: true allows anything, false nothing.
        return {} if value else {"not": {}}
    if not isinstance(value, dict):
        raise ValueError(f"{where}: the parameters schema must be a JSON object, got {type(value).__name__}")
    return value


def _name(value: Any, where: str, what: str = "a function tool") -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {what} needs a non-empty string name, got {_show(value)}")
    return value


def _custom(tool: dict, where: str) -> ToolDef:
    """Read an OpenAI custom tool: chat's {"type": "custom", "custom": {name, …}}, or Responses' {"type", "name", …}."""
    spec = _plain(tool["custom"]) if "custom" in tool else tool
    at = f"{where}.custom" if "custom" in tool else where
    if not isinstance(spec, dict):
        raise ValueError(f"{at}: must be an object, got {type(spec).__name__}")
    return ToolDef(_name(spec.get("name"), at, "a custom tool"), None, False, at, "custom")


def _gemini(tool: dict, where: str) -> Iterable[ToolDef]:
    decls = tool.get("functionDeclarations", tool.get("function_declarations"))
    if not isinstance(decls, list):
        raise ValueError(f"{where}: functionDeclarations must be a list, got {type(decls).__name__}")
    for i, decl in enumerate(decls):
        decl = _plain(decl)
        at = f"{where}.functionDeclarations[{i}]"
        if not isinstance(decl, dict):
            raise ValueError(f"{at}: a function declaration must be an object, got {type(decl).__name__}")
        name = _name(decl.get("name"), at)
        raw = decl.get("parametersJsonSchema", decl.get("parameters_json_schema"))
        if raw is not None:
            yield ToolDef(name, _schema(raw, at), False, at, "gemini")
        else:
            try:
                converted = openapi_to_json_schema(_plain(decl.get("parameters")))
            except ValueError as exc:
                raise ValueError(f"{at}: tool {name!r}: {exc}") from None
            yield ToolDef(name, _schema(converted, at), False, at, "gemini")


def _one(tool: Any, where: str) -> Iterable[ToolDef]:
    tool = _plain(tool)
    if not isinstance(tool, dict):
        raise ValueError(f"{where}: a tool definition must be an object, got {type(tool).__name__}")
    kind = tool.get("type")
    function = tool.get("function")
    if isinstance(function, dict) and kind in (None, "function"):
        yield ToolDef(_name(function.get("name"), where), _schema(function.get("parameters"), where),
                      function.get("strict") is True, where, "openai-chat")
    elif "input_schema" in tool:
        yield ToolDef(_name(tool.get("name"), where), _schema(tool["input_schema"], where), tool.get("strict") is True,
                      where, "anthropic")
    elif kind == "function":
        yield ToolDef(_name(tool.get("name"), where), _schema(tool.get("parameters"), where),
                      tool.get("strict") is True, where, "openai-responses")
    elif "functionDeclarations" in tool or "function_declarations" in tool:
        yield from _gemini(tool, where)
    elif "toolSpec" in tool:
        spec = _plain(tool["toolSpec"])
        at = f"{where}.toolSpec"
        if not isinstance(spec, dict):
            raise ValueError(f"{at}: must be an object, got {type(spec).__name__}")
        schema = spec.get("inputSchema")
        if isinstance(schema, dict) and "json" in schema:
            schema = schema["json"]
        yield ToolDef(_name(spec.get("name"), at), _schema(schema, at), spec.get("strict") is True, at, "bedrock")
    elif kind == "custom":
        yield _custom(tool, where)
    elif isinstance(kind, str) and isinstance(tool.get("name"), str) and tool.get("name"):
        # A provider's built-in tool the client runs under a name (Anthropic's bash_20250124,
        # text_editor_…, computer_…): its calls arrive as ordinary calls, with the provider's own schema.
        yield ToolDef(tool["name"], None, False, where, "builtin")
    elif kind is not None or tool.keys() & {"googleSearch", "google_search", "codeExecution", "code_execution",
                                            "googleSearchRetrieval", "urlContext", "retrieval", "cachePoint",
                                            "systemTool"}:
        return  # a server-side tool (web search, code execution, …) or a cache marker: never a client call
    else:
        keys = ", ".join(_show(key) if not isinstance(key, str) else key[:80] for key in list(tool)[:20])
        raise ValueError(f"{where}: not a tool definition callstitch can read (keys: {keys})")


def read_tools(tools: Any) -> list[ToolDef]:
    """Return the function tools in tools, in order.

    tools is a request's ``tools`` list in any provider's shape, a Bedrock ``toolConfig`` (or any
    object with a ``tools`` list), or a plain ``{name: schema}`` mapping.
    """
    tools = _plain(tools)
    if isinstance(tools, dict):
        if isinstance(tools.get("tools"), list):
            return read_tools(tools["tools"])
        if "functionDeclarations" in tools or "function_declarations" in tools:
            return list(_gemini(tools, "tools"))
        defs = []
        for name, schema in tools.items():
            at = f"tools[{_show(name)}]"
            defs.append(ToolDef(_name(name, at), _schema(schema, at), False, at, "mapping"))
        return defs
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable):
        raise ValueError(f"tools must be a list of tool definitions or a {{name: schema}} mapping, "
                         f"got {type(tools).__name__}")
    return [d for i, tool in enumerate(tools) for d in _one(tool, f"tools[{i}]")]
