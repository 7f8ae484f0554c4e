"""Toolset stays bounded by what it is given: the defaults plan of a diamond of $refs, the problems of a bad call."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from callstitch import Problem, Toolset, ToolCall
from callstitch._validate.defaults import DefaultsPlan, plan_defaults
from callstitch._validate.problems import PROBLEMS_KEPT
from callstitch._validate.retry import MAX_CHARS

# Where the chain ends: a default one object down, reached through properties, items or prefixItems.
# The chain is the value of the arguments' "a".
LEAVES = {
    "properties": {"type": "object", "properties": {"x": {"type": "object", "properties": {
        "y": {"type": "integer", "default": 1}}}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "object", "properties": {
        "y": {"type": "integer", "default": 1}}}}}},
    "prefixItems": {"type": "array", "prefixItems": [{"type": "object", "properties": {
        "y": {"type": "integer", "default": 1}}}]},
}
ARGUMENTS = {"properties": ({"x": {}}, {"x": {"y": 1}}), "items": ([{"x": {}}], [{"x": {"y": 1}}]),
             "prefixItems": ([{}], [{"y": 1}])}


def diamond(k: int, leaf: str) -> dict:
    """$defs A0…Ak, each an allOf of two $refs to the next: 2**k paths from A0 down to the leaf."""
    defs = {f"A{i}": {"allOf": [{"$ref": f"#/$defs/A{i + 1}"}, {"$ref": f"#/$defs/A{i + 1}"}]} for i in range(k)}
    defs[f"A{k}"] = LEAVES[leaf]
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/A0"}}, "$defs": defs}


def plan_size(plan: DefaultsPlan | None, seen: set[int] | None = None) -> int:
    """Count the entries of a plan and of every plan it leads to, each plan once (a recursive one meets itself)."""
    seen = set() if seen is None else seen
    if plan is None or id(plan) in seen:
        return 0
    seen.add(id(plan))
    size = len(plan.defaults) + len(plan.children) + len(plan.prefix) + len(plan.items) + len(plan.also)
    for child in [*(c for _, c in plan.children), *(c for _, c in plan.prefix), *(c for _, c in plan.items), *plan.also]:
        size += plan_size(child, seen)
    return size


def call(name: str, arguments: object) -> ToolCall:
    return ToolCall("call_1", name, 0, 0, arguments, json.dumps(arguments))


# ---------------------------------------------------------------- a diamond of $refs


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_a_diamond_of_refs_plans_linearly_and_fills_like_its_leaf(leaf):
    # Doubled at each level, the plan had 2**k entries: 65,537 at k=16.
    small, large = plan_size(plan_defaults(diamond(8, leaf))), plan_size(plan_defaults(diamond(16, leaf)))
    assert 0 < large <= 2 * small
    given, filled = ARGUMENTS[leaf]
    for schema in ({"type": "object", "properties": {"a": LEAVES[leaf]}}, diamond(3, leaf)):
        # checked small: the validator itself walks all 2**k paths
        verdict = Toolset({"f": schema}).check(call("f", {"a": given}))
        assert verdict.ok and verdict.arguments == {"a": filled}


def test_building_a_toolset_for_a_deep_diamond_takes_little_memory():
    # 2,014 bytes of schema (k=26) took 1 GB; k=22 took 70 MB, doubling with every level.
    tools = {"f": diamond(22, "properties")}
    tracemalloc.start()
    try:
        Toolset(tools)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000


# ---------------------------------------------------------------- many problems


ITEMS = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
KEYS = {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": False}
NOT_KEPT = Problem("$", "limit", f"there are more than {PROBLEMS_KEPT} problems; only the first {PROBLEMS_KEPT} "
                                 "were kept")


@pytest.mark.parametrize("shape", ["one error an item", "one error, a problem a key"])
def test_problems_past_the_cap_are_not_kept_and_the_verdict_says_so(shape):
    schema, arguments, first = ((ITEMS, {"a": [""] * 20_000}, "$.a[0]") if shape == "one error an item"
                                else (KEYS, {f"k{i}": 0 for i in range(20_000)}, "$.k0"))
    verdict = Toolset({"f": schema}).check(call("f", arguments))
    assert not verdict.ok and verdict.arguments is arguments
    assert len(verdict.problems) == PROBLEMS_KEPT + 1
    assert verdict.problems[0].path == first and verdict.problems[-1] == NOT_KEPT
    assert all(p.kind != "limit" for p in verdict.problems[:-1])
    message = verdict.retry_message
    assert len(message) <= MAX_CHARS and message.endswith('Correct the arguments and call "f" again.')
    listed = [line for line in message.splitlines() if line.startswith("- $")]
    assert 1 <= len(listed) <= 4 and f"- and over {PROBLEMS_KEPT - len(listed)} more problems" in message
    assert "limit" not in message and "were kept" not in message


def test_problems_up_to_the_cap_are_all_kept():
    toolset = Toolset({"f": ITEMS})
    for n in (PROBLEMS_KEPT - 1, PROBLEMS_KEPT, PROBLEMS_KEPT + 1, 5 * PROBLEMS_KEPT):
        verdict = toolset.check(call("f", {"a": [""] * n}))
        paths = [p.path for p in verdict.problems]
        assert paths[:PROBLEMS_KEPT] == [f"$.a[{i}]" for i in range(min(n, PROBLEMS_KEPT))]
        assert (verdict.problems[-1] == NOT_KEPT) is (n > PROBLEMS_KEPT)
        assert len(paths) == min(n, PROBLEMS_KEPT) + (n > PROBLEMS_KEPT)
        more = min(n, PROBLEMS_KEPT) - 4
        assert f"- and {'over ' if n > PROBLEMS_KEPT else ''}{more} more problems" in verdict.retry_message


def test_a_chain_of_all_of_over_two_refs_to_one_schema_fills_in_linear_steps(monkeypatch):
    # Found by a review of 97f12e0: linked plans followed a child they share once per link, so
    # N_k = allOf[$ref A_k, $ref B_k], both leading to N_k+1 through x, took 2**levels fills.
    from callstitch._validate import defaults
    depth = 16
    defs = {f"N{depth}": {"type": "object", "properties": {"leaf": {"default": True}}}}
    for k in range(depth):
        deeper = {"$ref": f"#/$defs/N{k + 1}"}
        defs[f"N{k}"] = {"type": "object", "allOf": [{"$ref": f"#/$defs/A{k}"}, {"$ref": f"#/$defs/B{k}"}]}
        defs[f"A{k}"] = {"properties": {"x": deeper}}
        defs[f"B{k}"] = {"properties": {"x": deeper, "d": {"default": k}}}
    plan = plan_defaults({"$ref": "#/$defs/N0", "$defs": defs})
    value: dict = {}
    for _ in range(depth):
        value = {"x": value}
    calls = []
    fill = defaults.fill_defaults
    monkeypatch.setattr(defaults, "fill_defaults", lambda *a: calls.append(1) or fill(*a))
    filled = defaults.fill_defaults(value, plan)
    assert len(calls) <= 2 * depth + 2  # one a level (2**16 before)
    level = filled
    for k in range(depth):
        assert level["d"] == k
        level = level["x"]
    assert level == {"leaf": True}


@pytest.mark.parametrize("through", ["allOf", "$ref"])
def test_a_default_from_all_of_or_a_reference_comes_before_the_schemas_own(through):
    # As before 97f12e0, whichever way the other schema is reached (the review found a $ref's lost).
    other = {"properties": {"k": {"default": 1}}}
    schema = {"type": "object", "properties": {"k": {"default": 2}}}
    if through == "allOf":
        schema["allOf"] = [other]
    else:
        schema.update({"$ref": "#/$defs/O", "$defs": {"O": other}})
    assert Toolset({"f": schema}).check(call("f", {})).arguments == {"k": 1}
