"""Time Toolset.check() on typical tool calls: calls per second on one core, validators compiled once.

usage: python benchmarks/validate.py [--calls N] [--rounds R]

Prints the machine, Python and library versions, then one row per case: a valid call (the fast
path), a valid call whose missing defaults are filled (top level and nested), a call to a tool
without a schema, and an invalid call (the slow path, which collects every problem and writes
the retry message). The target is >= 200,000 calls/s for the valid typical call.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from importlib import metadata

import orjson

import callstitch

TARGET = 200_000

# A typical tool: 8 properties, one nested object, an enum, an array, a couple of defaults.
CREATE_ORDER = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "pattern": "^cus_[A-Za-z0-9]+$"},
        "sku": {"type": "string", "minLength": 3},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
        "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
        "gift": {"type": "boolean", "default": False},
        "notes": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        "shipping": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "city": {"type": "string"},
                "postcode": {"type": "string"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2, "default": "GB"},
            },
            "required": ["street", "city", "postcode"],
            "additionalProperties": False,
        },
    },
    "required": ["customer_id", "sku", "quantity", "shipping"],
    "additionalProperties": False,
}

TOOLS = [
    {"type": "function", "function": {"name": "create_order", "parameters": CREATE_ORDER}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "units": {"enum": ["c", "f"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "list_orders"}},
]

FULL = {"customer_id": "cus_8f3k2", "sku": "TSHIRT-RED-M", "quantity": 2, "priority": "high", "gift": True,
        "notes": "leave at the door", "tags": ["summer", "sale"],
        "shipping": {"street": "1 Royal Mile", "city": "Edinburgh", "postcode": "EH1 1AA", "country": "GB"}}
WITH_DEFAULTS = {"customer_id": "cus_8f3k2", "sku": "TSHIRT-RED-M", "quantity": 2, "notes": None,
                 "tags": ["summer"], "shipping": {"street": "1 Royal Mile", "city": "Edinburgh", "postcode": "EH1 1AA"}}
INVALID = {"customer_id": "8f3k2", "sku": "TSHIRT-RED-M", "quantity": "2", "priority": "urgent",
           "shipping": {"street": "1 Royal Mile", "postcode": "EH1 1AA", "county": "Lothian"}}


def machine() -> str:
    """Return the CPU model, cores, OS and Python in one line."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()} ({platform.python_implementation()})")


def versions() -> str:
    """Return the versions of callstitch and the libraries it checks with."""
    out = []
    for dist in ("callstitch", "jsonschema-rs", "orjson"):
        try:
            out.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist} (not installed)")
    return ", ".join(out) + f"; callstitch.IMPLEMENTATION={callstitch.IMPLEMENTATION}"


def make_call(name: str, arguments: dict | None, i: int) -> callstitch.ToolCall:
    """Return a finished call, as reassembly would: arguments parsed from their raw text."""
    raw = orjson.dumps(arguments).decode()
    return callstitch.ToolCall(f"call_{i}", name, 0, 0, orjson.loads(raw), raw)


def rate(toolset: callstitch.Toolset, calls: list, rounds: int) -> float:
    """Return calls checked per second: the best of rounds passes over calls."""
    check = toolset.check
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for call in calls:
            check(call)
        best = min(best, time.perf_counter() - start)
    return len(calls) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per timing pass")
    parser.add_argument("--rounds", type=int, default=5, help="timing passes per case (best is kept)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says

    start = time.perf_counter()
    toolset = callstitch.Toolset(TOOLS)
    built = time.perf_counter() - start
    cases = [
        ("valid typical call (fast path)", "create_order", FULL),
        ("valid, 3 defaults filled (1 nested)", "create_order", WITH_DEFAULTS),
        ("tool without a schema", "list_orders", {}),
        ("invalid: 5 problems + retry message", "create_order", INVALID),
    ]
    for _, name, arguments in cases:  # check the checker before timing it
        verdict = toolset.check(make_call(name, arguments, 0))
        assert verdict.ok == (arguments is not INVALID), verdict
    filled = toolset.check(make_call("create_order", WITH_DEFAULTS, 0)).arguments
    assert filled["priority"] == "normal" and filled["shipping"]["country"] == "GB", filled

    print(f"machine:  {machine()}")
    print(f"versions: {versions()}")
    print(f"Toolset of {len(toolset)} tools built (validators compiled) in {built * 1e3:.2f} ms")
    print()
    print(f"{'case':<40} {'calls/s':>12} {'µs/call':>9}")
    results = {}
    for label, name, arguments in cases:
        n = args.calls if arguments is not INVALID else max(1, args.calls // 20)
        calls = [make_call(name, arguments, i) for i in range(n)]
        per_second = rate(toolset, calls, args.rounds)
        results[label] = per_second
        print(f"{label:<40} {per_second:>12,.0f} {1e6 / per_second:>9.2f}")
    typical = results[cases[0][0]]
    print()
    print(f"typical valid call: {typical:,.0f} calls/s on one core "
          f"({'meets' if typical >= TARGET else 'MISSES'} the {TARGET:,} target)")


if __name__ == "__main__":
    main()
