"""The rule every limit keeps: a call is kept whole or marked cut, never altered; a text is cut, never holed.

Used by the limit tests, the property tests and the fuzz target (fuzz/fuzz_accumulator.py).
"""

from __future__ import annotations

import re
from typing import Any


# What a call's error says when an event that could not be read in full cut it, or came before it
# (_limits.cut_detail): the same rule as a limit's, and the same stream has the same such events.
_UNREADABLE = "could not be read in full"


def is_cut(call: Any) -> bool:
    """Tell whether a limit (or an unreadable event) cut the call: it reads as truncated, with no arguments."""
    return (call.arguments is None and call.error is not None and call.error.kind == "truncated"
            and ("Limits." in call.error.detail or _UNREADABLE in call.error.detail))


def is_late(call: Any) -> bool:
    """Tell whether a cut call was first seen after a dropped (or unreadable) event, which may have held its start."""
    return is_cut(call) and ("first seen after an event went past Limits.event_bytes" in call.error.detail
                             or f"first seen after an event {_UNREADABLE}" in call.error.detail)


def cut_or_whole(limited: Any, unlimited: Any, events_dropped: bool = False) -> list[str]:
    """Return what breaks the rule in limited, the same stream's Result under limits (empty when none).

    Each call of limited must be the call of unlimited at the same (choice, index), either
    identical or cut (same id and name, its raw text a prefix of the unlimited one's, when that
    was not rewritten by a quirk). Each text, reasoning and refusal must be a prefix of the
    unlimited one. Calls dropped whole (Limits.calls, Limits.choices) are simply absent; no other
    call may be. (Not compared: the calls of a choice where a cut call's text, sent whole, is no
    JSON object; see _unknowable.)

    events_dropped: Limits.event_bytes may have dropped events. A call whose every piece was in
    them is absent, so the others' positions shift: the calls of each choice are matched in order
    instead, as a subsequence of the unlimited ones (same id, name and kind). A call that started
    without its name after a drop (its start was dropped) must be cut, keeping nothing; one first
    seen after a drop that is cut, or whose arguments do not parse, reads as cut and says it came
    late (is_late): what it keeps is a run of the unlimited call's raw text, not its start, and
    it may come before calls that started earlier (their order is not checked).
    """
    if events_dropped:
        return _in_order(limited, unlimited) + _texts_kept(limited, unlimited)
    problems = []
    whole = {(c.choice, c.index): c for c in unlimited.tool_calls}
    unknowable = _unknowable(limited, unlimited)
    for call in limited.tool_calls:
        if call.choice in unknowable:
            continue
        ref = whole.get((call.choice, call.index))
        if ref is None:
            problems.append(f"{call!r} is not in the unlimited result")
        elif is_cut(call):
            if not _same_names(call, ref):
                problems.append(f"cut {call!r} is not {ref!r}")
            elif not ref.quirks and not ref.raw_arguments.startswith(call.raw_arguments):
                problems.append(f"cut {call!r} kept {call.raw_arguments!r}, not a prefix of {ref.raw_arguments!r}")
        elif call != ref or call.arguments != ref.arguments or type(call.arguments) is not type(ref.arguments):
            problems.append(f"{call!r} was altered: unlimited it is {ref!r}")
    kept = {(c.choice, c.index) for c in limited.tool_calls}
    capped = _capped(limited)
    if not capped:  # then no call may be missing (a cut one once took the next one with it)
        problems += [f"{ref!r} is missing, with no limit on calls or choices reached"
                     for key, ref in whole.items() if key not in kept and key[0] not in unknowable]
    elif capped == {"calls"}:
        problems += _calls_cap_kept_the_first(limited, whole, kept, unknowable)
    return problems + _texts_kept(limited, unlimited)


_CALLS_LIMIT = re.compile(r"Limits\.calls \((\d+)\) exceeded")


def _calls_cap_kept_the_first(limited: Any, whole: dict, kept: set, unknowable: set) -> list[str]:
    """Return what breaks Limits.calls' rule: the first calls to start are kept, as many as it allows, no other.

    A choice's calls are numbered in the order they started, so each choice keeps a run from its
    first call, and the choices' runs add up to the limit.
    """
    problems = []
    for choice in {key[0] for key in whole} - unknowable:
        refs = sorted(key[1] for key in whole if key[0] == choice)
        held = [index in {k[1] for k in kept if k[0] == choice} for index in refs]
        if any(later and not earlier for earlier, later in zip(held, held[1:])):
            problems.append(f"choice {choice} lost a call that started before one it kept: {held}")
    if not unknowable:
        limit = int(next(_CALLS_LIMIT.search(str(e)).group(1) for e in limited.errors  # type: ignore[union-attr]
                         if _CALLS_LIMIT.search(str(e))))
        if len(kept) != limit:
            problems.append(f"Limits.calls ({limit}) reached, yet {len(kept)} calls kept")
    return problems


def _unknowable(limited: Any, unlimited: Any) -> set:
    """Return the choices where a call cut at a size limit sent arguments that are no JSON object, whole.

    Where such a text ends cannot be told from the bytes the cut dropped (they are read for their
    structure only, not kept: _json_end.CutText), so a next call with a new id under its index may
    be joined to it or not, unlike the unlimited result; its calls are not compared.
    """
    odd = {(c.choice, c.id) for c in unlimited.tool_calls
           if c.error is not None and c.error.kind in ("malformed", "not an object")}
    return {c.choice for c in limited.tool_calls if is_cut(c) and (c.choice, c.id) in odd}


def _capped(result: Any) -> set:
    """Return which of Limits.calls and Limits.choices ("calls", "choices") dropped calls whole from result."""
    return {name for e in result.errors if e.kind == "limit"
            for name in ("calls", "choices") if f"Limits.{name} " in str(e)}


def _texts_kept(limited: Any, unlimited: Any) -> list[str]:
    """Return what breaks the rule for texts: each one kept must be a prefix of the unlimited one."""
    problems = []
    choices = {c.index: c for c in unlimited.choices}
    for choice in limited.choices:
        ref = choices.get(choice.index)
        for field in ("text", "reasoning", "refusal"):
            kept, sent = getattr(choice, field), None if ref is None else getattr(ref, field)
            if kept is not None and not (sent or "").startswith(kept):
                problems.append(f"choice {choice.index} {field} {kept!r} is not a prefix of {sent!r}")
    return problems


def _in_order(limited: Any, unlimited: Any) -> list[str]:
    """Return the calls of limited that are not, in order per choice, the unlimited ones whole or cut."""
    problems = []
    for number in {c.choice for c in limited.tool_calls}:
        refs = [c for c in unlimited.tool_calls if c.choice == number]
        at = 0
        for call in (c for c in limited.tool_calls if c.choice == number):
            if is_cut(call) and call.raw_arguments == "":
                continue  # cut keeping nothing (its start may have been dropped): nothing to be altered
            if is_late(call):
                # Its start may have been dropped, so it may come before calls that started earlier.
                if not any(_same_or_cut(call, ref) for ref in refs):
                    problems.append(f"{call!r} is neither whole nor cut among the unlimited calls")
                continue
            while at < len(refs) and not _same_or_cut(call, refs[at]):
                at += 1
            if at == len(refs):
                problems.append(f"{call!r} is neither whole nor cut, in order, among the unlimited calls")
            at += 1
    return problems


def _same_names(call: Any, ref: Any) -> bool:
    """Tell whether a cut call has ref's id and name: either may be missing when Limits.stream_bytes cut it.

    An id or name is counted against that limit when it comes: one that does not fit is not kept.
    """
    if "Limits.stream_bytes" in call.error.detail:
        return call.id in (None, ref.id) and call.name in (None, ref.name)
    return (call.id, call.name) == (ref.id, ref.name)


def _same_or_cut(call: Any, ref: Any) -> bool:
    """Tell whether call is ref whole (its position aside) or ref cut, its raw text a prefix of ref's.

    A cut call may lack the id or name ref has: they came in a piece of a dropped event (a call
    may start without them and get them later). It never has another one.
    """
    if is_cut(call):
        if call.kind != ref.kind or (call.id is not None and call.id != ref.id) or (
                call.name is not None and call.name != ref.name):
            return False
        if ref.quirks:
            return True
        if is_late(call):
            # A late call keeps a run of ref's text; when ref itself was cut by an unreadable
            # event, the text after that event is known to neither: nothing more can be said.
            ref_cut_unread = is_cut(ref) and _UNREADABLE in ref.error.detail
            return ref_cut_unread or call.raw_arguments in ref.raw_arguments
        return ref.raw_arguments.startswith(call.raw_arguments)
    if (call.id, call.name, call.kind) != (ref.id, ref.name, ref.kind):
        return False
    # Its quirks may be fewer: the pieces that showed one (a resent id, say) may have been dropped.
    return (call.raw_arguments == ref.raw_arguments and call.arguments == ref.arguments
            and type(call.arguments) is type(ref.arguments) and _error(call) == _error(ref)
            and set(call.quirks) <= set(ref.quirks))


def _error(call: Any) -> Any:
    return None if call.error is None else (call.error.kind, str(call.error))
