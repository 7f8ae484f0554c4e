"""Gemini streamGenerateContent (and Vertex AI): function calls whole, or built from partialArgs.

Gemini sends each functionCall part complete, arguments as an object. Vertex AI can stream the
arguments instead: a part ``{name, willContinue: true}`` opens a call, parts with ``partialArgs``
(a JSON path and a typed value each; a string continued over several parts when
``willContinue`` is set) build it, and a bare ``functionCall: {}`` closes it. A stream may end
without that close; the call is then taken as built.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from ._state import error_text

_PATH_TOKEN = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_VALUE_KEYS = ("stringValue", "numberValue", "boolValue", "nullValue", "structValue", "listValue")
_CUT = "\x00callstitch-cut\x00"


def claims(event: str | None, obj: Any) -> bool:
    """Tell whether an event is a Gemini response chunk."""
    return type(obj) is dict and ("candidates" in obj or "promptFeedback" in obj or "usageMetadata" in obj)


def handle(acc: Any, state: Any, event: str | None, obj: Any, offset: int | None) -> None:
    """Apply one Gemini response chunk."""
    if type(obj) is not dict:
        state.error("unexpected shape", "a chunk must be a JSON object", offset, obj)
        return
    if obj.get("error") is not None:
        state.error("in-band error", error_text(obj["error"]), offset, obj)
        return
    candidates = obj.get("candidates")
    for position, candidate in enumerate(candidates if type(candidates) is list else ()):
        if type(candidate) is not dict:
            state.error("unexpected shape", "a candidate is not an object", offset, candidate)
            continue
        choice = candidate.get("index", position)
        choice = choice if type(choice) is int else position
        content = candidate.get("content")
        parts = content.get("parts") if type(content) is dict else None
        for part in parts if type(parts) is list else ():
            if type(part) is not dict:
                continue
            call = part.get("functionCall")
            if type(call) is dict:
                _call(acc, state, choice, call, offset)
            elif type(part.get("text")) is str and part["text"]:
                acc._text(choice, 1 if part.get("thought") is True else 0, part["text"])
        reason = candidate.get("finishReason")
        if type(reason) is str:
            _close_open(acc, state, choice)
            state.finish(choice, reason)
            acc._complete(choice, None)
    if obj.get("usageMetadata") is not None:
        state.usage = obj["usageMetadata"]


def _call(acc: Any, state: Any, choice: int, call: dict, offset: int | None) -> None:
    open_calls = state.notes.setdefault("open", {})
    building = open_calls.get(choice)
    name, call_id = call.get("name"), call.get("id")
    partial = call.get("partialArgs")
    if type(name) is str and name:
        _close_open(acc, state, choice)
        if call.get("willContinue") is True and "args" not in call:
            open_calls[choice] = _Builder(name, call_id if type(call_id) is str else None)
            return
        args = call.get("args")
        _emit(acc, state, choice, call_id, name, orjson.dumps(args) if args is not None else None)
        return
    if building is None:
        if partial is not None or call.get("args") is not None:
            state.error("unexpected shape", "functionCall arguments with no call open", offset, call)
        return  # a stray close, or a bare {"willContinue": true}
    if type(partial) is list:
        for entry in partial:
            if not building.apply(entry):
                state.error("unexpected shape", f"unusable partialArgs entry {entry!r}", offset, call)
    elif not call:
        _close_open(acc, state, choice)  # the bare functionCall: {} closes the call


def _emit(acc: Any, state: Any, choice: int, call_id: Any, name: str, data: bytes | None) -> None:
    # Every Gemini call is its own: give it a key of its own within the choice.
    key = state.key(("call", choice, len(state.keys)))
    acc._fragment(choice, key, call_id if type(call_id) is str else None, name, data)
    acc._complete(choice, key)  # it arrived whole, or its stream just closed


def _close_open(acc: Any, state: Any, choice: int) -> None:
    building = state.notes.get("open", {}).pop(choice, None)
    if building is not None:
        _emit(acc, state, choice, building.id, building.name, building.text())


def close(acc: Any, state: Any) -> None:
    """Take calls the stream never closed as they were built."""
    for choice in list(state.notes.get("open", ())):
        _close_open(acc, state, choice)


class _Builder:
    """The arguments of one streamed call, assembled from (JSON path, value) entries."""

    def __init__(self, name: str, call_id: str | None) -> None:
        self.name = name
        self.id = call_id
        self.root: dict = {}
        self.open_path: tuple | None = None  # the string still being continued

    def apply(self, entry: Any) -> bool:
        """Apply one partialArgs entry; False when it cannot be used."""
        if type(entry) is not dict or type(entry.get("jsonPath")) is not str:
            return False
        path = _parse_path(entry["jsonPath"])
        if path is None:
            return False
        for key in _VALUE_KEYS:
            if key in entry:
                value = entry[key]
                break
        else:
            return entry.get("willContinue") is True  # a bare continuation marker
        if key == "nullValue":
            value = None
        continuing = key == "stringValue" and path == self.open_path
        self.open_path = path if key == "stringValue" and entry.get("willContinue") is True else None
        if continuing:
            value = _get(self.root, path) + value
        return _set(self.root, path, value)

    def text(self) -> bytes:
        """Return the arguments as JSON; cut inside the string when it was still being continued."""
        if self.open_path is None:
            return orjson.dumps(self.root)
        _set(self.root, self.open_path, _get(self.root, self.open_path) + _CUT)
        data = orjson.dumps(self.root)
        # The stream ended inside a string value: keep what came, and let it read as truncated.
        return data[:data.index(b"\\u0000callstitch-cut\\u0000")]


def _parse_path(path: str) -> tuple | None:
    if not path.startswith("$"):
        return None
    keys: list = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        name, number, single, double = match.groups()
        keys.append(int(number) if number is not None else name if name is not None else (single or double or ""))
        pos = match.end()
    return tuple(keys) if keys else None


def _get(root: Any, path: tuple) -> Any:
    try:
        for key in path:
            root = root[key]
    except (KeyError, IndexError, TypeError):
        return ""
    return root if type(root) is str else ""


def _set(root: Any, path: tuple, value: Any) -> bool:
    node = root
    for key, following in zip(path, path[1:] + (None,)):
        if following is None:
            break
        child = _child(node, key, [] if type(following) is int else {})
        if child is None:
            return False
        node = child
    last = path[-1]
    if type(last) is int:
        if type(node) is not list:
            return False
        while len(node) <= last:
            node.append(None)
        node[last] = value
    else:
        if type(node) is not dict:
            return False
        node[last] = value
    return True


def _child(node: Any, key: Any, empty: Any) -> Any:
    if type(key) is int:
        if type(node) is not list:
            return None
        while len(node) <= key:
            node.append(None)
        if node[key] is None:
            node[key] = empty
        return node[key]
    if type(node) is not dict:
        return None
    if node.get(key) is None:
        node[key] = empty
    return node[key]
