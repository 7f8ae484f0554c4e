"""Write the message that goes back to the model as the tool result when a call cannot run."""

from __future__ import annotations

from typing import Sequence

from .problems import Problem, _quote as _quote_name

__all__ = ["retry_message", "custom_retry_message", "MAX_CHARS", "MAX_PROBLEMS"]

# The model reads this in its context: enough to fix the call, short enough not to crowd it out.
MAX_CHARS = 600
MAX_PROBLEMS = 4
_LINE_CHARS = 180


def _quote(name: str | None) -> str:
    return _quote_name(name) if name is not None else "(no name)"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def expected_shape(schema: dict | None) -> str | None:
    """Return the top-level properties of a tool's schema as "a (required), b, c", or None."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    required = schema.get("required")
    if not isinstance(required, list):
        required = []
    names = [f"{name} (required)" if name in required else name for name in schema["properties"]]
    if not names:
        return None
    shown = ", ".join(names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


def retry_message(name: str | None, problems: Sequence[Problem], schema: dict | None = None) -> str:
    """Return a short text telling the model what was wrong with its call and what is expected.

    At most MAX_PROBLEMS problems are listed (then "and N more", "and over N more" when the last
    problem, of kind "limit", says more were not kept), and the whole stays under MAX_CHARS characters.
    """
    first = problems[0]
    if first.kind == "unknown tool":
        text = f"Error: the tool call was not run: {first.message}. Call one of the available tools instead."
        return _clip(text, MAX_CHARS)
    if first.path == "$" and first.kind in ("missing", "truncated", "malformed", "trailing data", "not an object",
                                            "not checked"):
        text = f"Error: the call to {_quote(name)} was not run: {first.message}."
        shape = expected_shape(schema)
        text += (f" Call it again with the complete arguments as one JSON object with the properties {shape}."
                 if shape else " Call it again with the complete arguments as one JSON object.")
        return _clip(text, MAX_CHARS)
    head = f"Error: the call to {_quote(name)} was not run: its arguments do not match the tool's parameters."
    tail = f"Correct the arguments and call {_quote(name)} again."
    # The problems were cut (the "limit" one is last): how many more is not known, only that there are.
    cut = len(problems) > 1 and problems[-1].kind == "limit"
    if cut:
        problems = problems[:-1]
    over = "over " if cut else ""
    lines = [head]
    used = len(head) + 1 + len(tail)
    shown = 0
    for problem in problems[:MAX_PROBLEMS]:
        line = "- " + _clip(str(problem), _LINE_CHARS)
        more = len(problems) - shown - 1
        # Keep room for the "and N more" line, should this problem be the last one that fits.
        reserve = len(f"\n- and {over}{more} more problems") if more or cut else 0
        if used + 1 + len(line) + reserve > MAX_CHARS and shown:
            break
        lines.append(line)
        used += 1 + len(line)
        shown += 1
    rest = len(problems) - shown
    if rest or cut:
        lines.append(f"- and {over}{rest} more problem{'s' if rest != 1 or cut else ''}")
    lines.append(tail)
    return _clip("\n".join(lines), MAX_CHARS)


def custom_retry_message(name: str | None, problem: Problem, advice: str) -> str:
    """Return the text for a call where a custom tool is involved: its one problem, and how to call it again."""
    return _clip(f"Error: the call to {_quote(name)} was not run: {problem.message}. Call it again {advice}.", MAX_CHARS)
