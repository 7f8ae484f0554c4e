"""The rule every limit keeps: a call is kept whole or marked cut, never altered; a text is cut, never holed.

Used by the limit tests, the property tests and the fuzz target (fuzz/fuzz_accumulator.py).
"""

from __future__ import annotations

from typing import Any


def is_cut(call: Any) -> bool:
    """Tell whether a limit cut the call: it reads as truncated, with no arguments."""
    return (call.arguments is None and call.error is not None and call.error.kind == "truncated"
            and "Limits." in call.error.detail)


def cut_or_whole(limited: Any, unlimited: Any) -> list[str]:
    """Return what breaks the rule in limited, the same stream's Result under limits (empty when none).

    Each call of limited must be the call of unlimited at the same (choice, index), either
    identical or cut (same id and name, its raw text a prefix of the unlimited one's, when that
    was not rewritten by a quirk). Each text, reasoning and refusal must be a prefix of the
    unlimited one. Calls dropped whole (Limits.calls, Limits.choices) are simply absent.
    """
    problems = []
    whole = {(c.choice, c.index): c for c in unlimited.tool_calls}
    for call in limited.tool_calls:
        ref = whole.get((call.choice, call.index))
        if ref is None:
            problems.append(f"{call!r} is not in the unlimited result")
        elif is_cut(call):
            if (call.id, call.name) != (ref.id, ref.name):
                problems.append(f"cut {call!r} is not {ref!r}")
            elif not ref.quirks and not ref.raw_arguments.startswith(call.raw_arguments):
                problems.append(f"cut {call!r} kept {call.raw_arguments!r}, not a prefix of {ref.raw_arguments!r}")
        elif call != ref or call.arguments != ref.arguments or type(call.arguments) is not type(ref.arguments):
            problems.append(f"{call!r} was altered: unlimited it is {ref!r}")
    choices = {c.index: c for c in unlimited.choices}
    for choice in limited.choices:
        ref = choices.get(choice.index)
        for field in ("text", "reasoning", "refusal"):
            kept, sent = getattr(choice, field), None if ref is None else getattr(ref, field)
            if kept is not None and not (sent or "").startswith(kept):
                problems.append(f"choice {choice.index} {field} {kept!r} is not a prefix of {sent!r}")
    return problems
