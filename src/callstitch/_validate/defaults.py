"""Fill in a schema's `default` values: planned once per tool, applied copy-on-write per call."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import unquote

__all__ = ["DefaultsPlan", "plan_defaults", "fill_defaults", "TooDeep", "FILL_DEPTH", "PLAN_DEPTH"]

_IMMUTABLE = (str, int, float, bool, type(None))
# A recursive schema's plan follows arguments as deep as they go, one Python frame a level: past
# this depth the fill stops (the call is not run; Toolset says why) rather than the stack.
FILL_DEPTH = 256
# How deep the planner follows a schema ($ref chains, allOf, properties, items): deeper, the
# Toolset refuses the tool with a ValueError. jsonschema-rs itself takes ~128 levels of properties.
PLAN_DEPTH = 200


class TooDeep(ValueError):
    """A schema, or arguments along a schema's defaults, nested deeper than callstitch follows."""
# Keywords that make a schema more than a bare reference.
_STRUCTURAL = {"properties", "items", "prefixItems", "allOf"}


class DefaultsPlan:
    """Where a schema has defaults: properties to fill and to descend into (objects), items (arrays)."""

    __slots__ = ("defaults", "children", "items", "prefix", "also")

    def __init__(self) -> None:
        self.defaults: list[tuple[str, Any, bool]] = []        # (key, value, needs a copy)
        self.children: list[tuple[str, DefaultsPlan]] = []     # properties whose values hold defaults deeper
        self.items: list[tuple[int, DefaultsPlan]] = []        # (first index, plan) of the items from there on (`items`)
        self.prefix: list[tuple[int, DefaultsPlan]] = []       # positional items (`prefixItems`)
        # The plans that apply at this level too ($ref, allOf): linked, not copied, as one may still
        # be being planned (a recursive schema); a copy lent only what it had so far, and deeper
        # levels went unfilled. Filling follows the links (_with_linked).
        self.also: list[DefaultsPlan] = []

    def empty(self) -> bool:
        return not (self.defaults or self.children or self.items or self.prefix or self.also)


class _Planner:
    """Walk one tool's schema; follow local $ref and allOf, whose defaults always apply.

    References are resolved as the validator resolves them, or not followed: a JSON pointer or
    an $anchor within the schema resource the $ref is in (the root, or a subschema with an $id of
    its own); a remote one, or one that names no single place, plans no defaults. The draft
    ($schema; 2020-12 without one) says what `items` covers and whether keywords beside a $ref count.
    """

    def __init__(self, root: dict) -> None:
        self.root = root
        draft = root.get("$schema")
        draft = draft if isinstance(draft, str) else ""
        # Drafts 4-7: a $ref stands alone (the keywords beside it are ignored), and positional
        # items are an `items` array; 2019-09 has positional items so too; 2020-12 has
        # prefixItems, and `items` covers the items after them.
        self.ref_alone = any(f"draft-0{n}" in draft for n in (3, 4, 6, 7))
        self.prefix_items = not (self.ref_alone or "2019-09" in draft)
        self.by_ref: dict[tuple[int, str], DefaultsPlan | None] = {}
        self.resources: list[dict] = [root]  # the schema resource a $ref met now is resolved in
        self.anchors: dict[int, dict[str, list[dict]]] = {}  # each resource's $anchors, found once
        self.depth = 0  # schemas being merged, one inside the other

    def resolve(self, ref: str) -> Any:
        """Return the schema a $ref names in the current resource, or None (remote, unknown, ambiguous)."""
        if not ref.startswith("#"):
            return None
        resource = self.resources[-1]
        fragment = unquote(ref[1:])
        if fragment and not fragment.startswith("/"):  # an $anchor
            found = self._anchors(resource).get(fragment, ())
            return found[0] if len(found) == 1 else None
        node: Any = resource
        for part in fragment.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def _anchors(self, resource: dict) -> dict[str, list[dict]]:
        """Return the $anchors of a resource, by name: its subschemas', not those of a resource inside it."""
        known = self.anchors.get(id(resource))
        if known is not None:
            return known
        known = self.anchors[id(resource)] = {}
        stack: list[Any] = [resource]
        while stack:  # (a loop, not recursion: a schema may nest deeper than the stack)
            node = stack.pop()
            if isinstance(node, dict):
                if node is not resource and self._resource_id(node):
                    continue  # its anchors are its own
                anchor = node.get("$anchor")
                if self.ref_alone and isinstance(node.get("$id"), str) and node["$id"].startswith("#"):
                    anchor = node["$id"][1:]  # drafts 6-7 spell an anchor as an $id fragment
                if isinstance(anchor, str):
                    known.setdefault(anchor, []).append(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
        return known

    def _resource_id(self, schema: dict) -> bool:
        """Tell whether a subschema starts a schema resource of its own (an $id that is not a bare fragment)."""
        found = schema.get("$id")
        return isinstance(found, str) and not found.startswith("#")

    def _enter(self, schema: dict) -> bool:
        """Make a subschema with its own $id the resource its $refs resolve in; return whether it is one."""
        own = schema is not self.root and self._resource_id(schema)
        if own:
            self.resources.append(schema)
        return own

    def plan(self, schema: Any) -> DefaultsPlan | None:
        if not isinstance(schema, dict):
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str) and (self.ref_alone or not schema.keys() & _STRUCTURAL):
            own = self._enter(schema)
            try:
                return self.plan_ref(ref)
            finally:
                if own:
                    self.resources.pop()
        plan = DefaultsPlan()
        self.merge(plan, schema)
        return None if plan.empty() else plan

    def plan_ref(self, ref: str) -> DefaultsPlan | None:
        key = (id(self.resources[-1]), ref)  # the same text in another resource names another schema
        if key in self.by_ref:
            # Seen before, or a recursive schema meeting itself: share the one plan (cycles are fine,
            # the data it is applied to is finite).
            return self.by_ref[key]
        plan = self.by_ref[key] = DefaultsPlan()
        self.merge(plan, self.resolve(ref))
        if plan.empty():
            self.by_ref[key] = None
            return None
        return plan

    def merge(self, plan: DefaultsPlan, schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        if self.depth >= PLAN_DEPTH:
            raise TooDeep(f"the parameters schema nests deeper than {PLAN_DEPTH} levels ($ref, allOf, properties, "
                          "items), too deep to plan its defaults")
        self.depth += 1  # counted here, not in a wrapper: a frame less for every level of the schema
        own = self._enter(schema)
        try:
            ref = schema.get("$ref")
            if isinstance(ref, str):
                sub = self.plan_ref(ref)
                if sub is not None and sub is not plan and all(sub is not other for other in plan.also):
                    plan.also.append(sub)
                if self.ref_alone:
                    return  # drafts 4-7: the keywords beside a $ref are ignored
            for branch in schema.get("allOf", ()) if isinstance(schema.get("allOf"), list) else ():
                self.merge(plan, branch)
            props = schema.get("properties")
            if isinstance(props, dict):
                seen = {key for key, _, _ in plan.defaults}
                for key, sub in props.items():
                    if not isinstance(sub, dict):
                        continue
                    if "default" in sub and key not in seen:
                        value = sub["default"]
                        plan.defaults.append((key, value, not isinstance(value, _IMMUTABLE)))
                    child = self.plan(sub)
                    if child is not None:
                        plan.children.append((key, child))
            items = schema.get("items")
            prefix = schema.get("prefixItems") if self.prefix_items else items
            if isinstance(items, dict):
                child = self.plan(items)
                if child is not None:  # (2020-12: the items after the prefixItems, when there are some)
                    plan.items.append((len(prefix) if isinstance(prefix, list) else 0, child))
            if isinstance(prefix, list):
                for i, sub in enumerate(prefix):  # a loop, not a generator: one frame less a level
                    child = self.plan(sub)
                    if child is not None:
                        plan.prefix.append((i, child))
        finally:
            self.depth -= 1
            if own:
                self.resources.pop()


def _with_linked(plan: DefaultsPlan) -> list[DefaultsPlan] | tuple[DefaultsPlan]:
    """Return plan and every plan it links through also, at any remove, each once, in the order they apply.

    A linked plan comes before the plan linking it (a referenced schema's default for a key
    before the schema's own, as when plans were copied in), and links in the order they were met.
    """
    if not plan.also:
        return (plan,)
    out: list[DefaultsPlan] = []
    seen = {id(plan)}
    stack: list[tuple[DefaultsPlan, int]] = [(plan, 0)]
    while stack:  # depth first, each plan after the plans it links
        each, i = stack.pop()
        if i < len(each.also):
            stack.append((each, i + 1))
            other = each.also[i]
            if id(other) not in seen:
                seen.add(id(other))
                stack.append((other, 0))
        else:
            out.append(each)
    return out


def plan_defaults(schema: dict | None) -> DefaultsPlan | None:
    """Return where schema has defaults (None when nowhere): properties, nested objects, array items."""
    if not isinstance(schema, dict):
        return None
    return _Planner(schema).plan(schema)


def fill_defaults(value: Any, plan: DefaultsPlan, _depth: int = 0) -> Any:
    """Return value with plan's defaults filled in; value itself when nothing is missing.

    Only the dicts and lists on the way to a filled default are copied; value is never changed.
    Raise TooDeep when a recursive schema's defaults lead deeper than FILL_DEPTH levels.
    """
    if _depth >= FILL_DEPTH and (type(value) is dict or type(value) is list):
        raise TooDeep(f"the arguments are nested deeper than {FILL_DEPTH} levels where the schema has defaults, "
                      "too deep to fill them")
    plans = _with_linked(plan)  # (the first default for a key wins)
    # A child plan two linked plans share is followed once (as when plans were copied in): twice
    # at every level of allOf over two $refs to one schema, the fill took 2**levels steps.
    followed: set | None = set() if len(plans) > 1 else None
    if type(value) is dict:
        out = None
        for each in plans:
            for key, default, mutable in each.defaults:
                if key not in (value if out is None else out):
                    if out is None:
                        out = dict(value)
                    out[key] = copy.deepcopy(default) if mutable else default
            for key, child in each.children:
                if followed is not None:
                    if (key, id(child)) in followed:
                        continue
                    followed.add((key, id(child)))
                current = value.get(key) if out is None else out.get(key)
                if current is None:
                    continue
                filled = fill_defaults(current, child, _depth + 1)
                if filled is not current:
                    if out is None:
                        out = dict(value)
                    out[key] = filled
        return value if out is None else out
    if type(value) is list:
        out_list = None
        for each in plans:
            for start, child in each.items:
                if followed is not None:
                    if (start, id(child)) in followed:
                        continue
                    followed.add((start, id(child)))
                for i in range(start, len(value)):
                    out_list = _fill_item(value, out_list, i, child, _depth)
            for i, child in each.prefix:
                if followed is not None:
                    if (i, id(child)) in followed:
                        continue
                    followed.add((i, id(child)))
                if i < len(value):
                    out_list = _fill_item(value, out_list, i, child, _depth)
        return value if out_list is None else out_list
    return value


def _fill_item(value: list, out_list: list | None, i: int, child: DefaultsPlan, depth: int) -> list | None:
    """Fill item i of a list with child's defaults; return the list's copy (made at the first change) or None."""
    item = value[i] if out_list is None else out_list[i]
    filled = fill_defaults(item, child, depth + 1)
    if filled is not item:
        if out_list is None:
            out_list = list(value)
        out_list[i] = filled
    return out_list
