"""A copy of a JSON value for a caller to own: the turn modules give every response and message as one.

What the turn records hold is JSON as parsed (dicts, lists, strings, numbers, booleans, None) and
bytes (Bedrock's redactedContent): only the dicts and the lists can change, so only they are copied.
copy.deepcopy would do the same at three to five times the cost, keeping a memo of every object.
"""

from __future__ import annotations

from typing import Any


def fresh(value: Any, grown: type | None = None) -> Any:
    """Return value with every dict and list in it copied (the rest is immutable, and shared).

    grown: a type whose instances stand for a value still being built (openai_chat's Growing): each
    is replaced by a copy of its value(). Iterative, not recursive: a value may be nested as deep as
    orjson reads (1,024 levels), past what Python's stack allows a recursion.
    """
    kind = type(value)
    if grown is not None and kind is grown:
        return fresh(value.value())
    if kind is not dict and kind is not list:
        return value  # most values are scalars
    top = value.copy()  # a shallow copy in C, then only the containers in it replaced
    stack = [top]
    while stack:
        node = stack.pop()
        for key, inner in node.items() if type(node) is dict else enumerate(node):
            kind = type(inner)
            if kind is dict or kind is list:
                inner = node[key] = inner.copy()  # a value replaced, no key added: the iteration stays valid
                stack.append(inner)
            elif grown is not None and kind is grown:
                node[key] = fresh(inner.value())
    return top
