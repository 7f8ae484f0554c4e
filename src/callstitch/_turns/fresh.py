"""A copy of a JSON value for a caller to own: the turn modules give every response and message as one.

What the turn records hold is JSON as parsed (dicts, lists, strings, numbers, booleans, None) and
bytes (Bedrock's redactedContent): only the dicts and the lists can change, so only they are copied.
copy.deepcopy would do the same at three to five times the cost, keeping a memo of every object.
"""

from __future__ import annotations

from typing import Any


def fresh(value: Any) -> Any:
    """Return value with every dict and list in it copied (the rest is immutable, and shared)."""
    # A shallow copy in C, then only the containers in it replaced: most values are scalars.
    if type(value) is dict:
        out = value.copy()
        for key, inner in out.items():
            if type(inner) is dict or type(inner) is list:
                out[key] = fresh(inner)  # a value replaced, no key added: the iteration stays valid
        return out
    if type(value) is list:
        out_list = value.copy()
        for i, inner in enumerate(out_list):
            if type(inner) is dict or type(inner) is list:
                out_list[i] = fresh(inner)
        return out_list
    return value
